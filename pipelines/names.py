"""The names by which the concerns of the code location refer to one another.

Each folder of `pipelines/defs` builds its own objects; none imports another's. Where one needs
another's assets (the nightly schedule runs the CDR and snapshot groups, the CDR job leaves out
the freshness check, the report waits for the `agg_*` keys) it selects them by these names,
resolved by Dagster once the folders are merged.
"""

import dagster as dg

CDR_GROUP = "cdrs"
SNAPSHOT_GROUP = "snapshots"
REPORT_GROUP = "reports"
REPORT_ASSET = "contact_center_report"
CDR_JOB = "cdr_daily"
SNAPSHOT_JOB = "snapshots"
API_POOL = "contact_center_api"
NIGHTLY_CRON = "0 1 * * *"

FRESHNESS_ASSET = "cdrs"
FRESHNESS_CHECK = "newest_due_day_landed"
FRESHNESS_CHECK_KEY = dg.AssetCheckKey(dg.AssetKey(FRESHNESS_ASSET), FRESHNESS_CHECK)


def cdr_run_selection() -> dg.AssetSelection:
    """What one day's CDR run materializes: the `cdrs` group (the day's tables and aggregates)
    with their checks, except the freshness check, which judges the newest due day, not the day
    a run writes: it has its own hourly job."""
    return dg.AssetSelection.groups(CDR_GROUP) - dg.AssetSelection.checks(FRESHNESS_CHECK_KEY)


def snapshot_run_selection() -> dg.AssetSelection:
    return dg.AssetSelection.groups(SNAPSHOT_GROUP)
