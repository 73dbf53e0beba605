"""The nightly schedule: yesterday, a lookback of N earlier days, and fresh snapshots.

At 01:00 UTC the previous day is complete. CDRs can still arrive late or be revised (cost is
settled after the call), so the previous `lookback_days` partitions are re-materialized too;
re-materializing replaces a partition whole, so this is idempotent. Each partition is its own
run (a failure of one day does not hide the others), plus one run for the snapshots.
"""

from datetime import UTC, datetime, timedelta

import dagster as dg

from pipelines.names import (
    CDR_GROUP,
    NIGHTLY_CRON,
    SNAPSHOT_GROUP,
    cdr_run_selection,
    snapshot_run_selection,
)
from pipelines.settings import DEFAULT_LOOKBACK_DAYS


def nightly_partition_keys(
    scheduled: datetime, lookback_days: int, partitions_def: dg.PartitionsDefinition[str]
) -> list[str]:
    """Yesterday and the `lookback_days` days before it (oldest first), if they exist."""
    yesterday = scheduled.astimezone(UTC).date() - timedelta(days=1)
    wanted = [(yesterday - timedelta(days=i)).isoformat() for i in range(lookback_days, -1, -1)]
    existing = set(partitions_def.get_partition_keys(current_time=scheduled))
    return [key for key in wanted if key in existing]


def build_nightly_schedule(
    partitions_def: dg.PartitionsDefinition[str],
    lookback_days: int = DEFAULT_LOOKBACK_DAYS,
) -> dg.ScheduleDefinition:
    """The 01:00 UTC schedule over the CDR partitions and the snapshot assets.

    Its runs select what the `cdr_daily` and `snapshots` jobs select (`pipelines.names`),
    resolved at each tick against the code location's asset graph: this folder imports no other
    folder's objects. The freshness check has its own hourly job and stays out of the day runs."""

    @dg.schedule(
        name="nightly",
        cron_schedule=NIGHTLY_CRON,
        execution_timezone="UTC",
        target=dg.AssetSelection.groups(CDR_GROUP, SNAPSHOT_GROUP),
        default_status=dg.DefaultScheduleStatus.RUNNING,
        description=f"Yesterday's CDRs plus a {lookback_days}-day lookback, and the snapshots.",
    )
    def nightly(context: dg.ScheduleEvaluationContext) -> list[dg.RunRequest]:
        scheduled = context.scheduled_execution_time or datetime.now(UTC)
        tick = scheduled.astimezone(UTC).date().isoformat()
        graph = context.repository_def.asset_graph
        cdr_assets = sorted(cdr_run_selection().resolve(graph))
        cdr_checks = sorted(cdr_run_selection().resolve_checks(graph))
        snapshot_assets = sorted(snapshot_run_selection().resolve(graph))
        requests = [
            dg.RunRequest(
                run_key=f"{tick}:cdrs:{key}",
                partition_key=key,
                asset_selection=cdr_assets,
                asset_check_keys=cdr_checks,
                tags={"cdrhouse/lookback": str(key != keys[-1]).lower()},
            )
            for keys in [nightly_partition_keys(scheduled, lookback_days, partitions_def)]
            for key in keys
        ]
        requests.append(dg.RunRequest(run_key=f"{tick}:snapshots", asset_selection=snapshot_assets))
        return requests

    return nightly
