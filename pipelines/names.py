"""The names by which the concerns of the code location refer to one another.

Each folder of `pipelines/defs` builds its own objects; none imports another's. Where one needs
another's assets (the nightly schedule runs the CDR and snapshot groups, the CDR job leaves out
the freshness check, the report waits for the `agg_*` keys) it selects them by these names,
resolved by Dagster once the folders are merged.
"""

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


# The selections of one account's CDR and snapshot runs are `pipelines.scope.AccountScope`'s
# `cdr_run_selection` and `snapshot_run_selection`: the same names, per account.
