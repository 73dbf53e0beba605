"""The nightly schedule: yesterday, a lookback of N earlier days, and fresh snapshots.

At 01:00 UTC the previous day is complete. CDRs can still arrive late or be revised (cost is
settled after the call), so the previous `lookback_days` partitions are re-materialized too;
re-materializing replaces a partition whole, so this is idempotent. Each partition is its own
run (a failure of one day does not hide the others), plus one run for the snapshots.
"""

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import dagster as dg
from dagster._core.definitions.assets.graph.base_asset_graph import BaseAssetGraph

from pipelines.names import CDR_GROUP, NIGHTLY_CRON, SNAPSHOT_GROUP
from pipelines.scope import DEFAULT_SCOPE, AccountScope
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
    scopes: Sequence[AccountScope] = (DEFAULT_SCOPE,),
) -> dg.ScheduleDefinition:
    """The 01:00 UTC schedule over every account's CDR partitions and snapshot assets.

    Per account (`scopes`), its runs select what the account's `cdr_daily` and `snapshots`
    jobs select (`pipelines.scope`), resolved at each tick against the code location's asset
    graph: this folder imports no other folder's objects. Each run is one account's, tagged
    with it (`cdrhouse/account`), in the account's pool: one account failing fails only its
    own runs. The freshness check has its own hourly job and stays out of the day runs."""
    groups = [scope.named(g) for scope in scopes for g in (CDR_GROUP, SNAPSHOT_GROUP)]

    @dg.schedule(
        name="nightly",
        cron_schedule=NIGHTLY_CRON,
        execution_timezone="UTC",
        target=dg.AssetSelection.groups(*groups),
        default_status=dg.DefaultScheduleStatus.RUNNING,
        description=f"Yesterday's CDRs plus a {lookback_days}-day lookback, and the snapshots.",
    )
    def nightly(context: dg.ScheduleEvaluationContext) -> list[dg.RunRequest]:
        scheduled = context.scheduled_execution_time or datetime.now(UTC)
        keys = nightly_partition_keys(scheduled, lookback_days, partitions_def)
        graph = context.repository_def.asset_graph
        requests: list[dg.RunRequest] = []
        for scope in scopes:
            requests += _account_requests(scope, graph, scheduled, keys)
        return requests

    return nightly


def _account_requests(
    scope: AccountScope, graph: BaseAssetGraph[Any], scheduled: datetime, keys: Sequence[str]
) -> list[dg.RunRequest]:
    """One account's runs of a tick: each day, then the snapshots. The default account's run
    keys are those of the time before accounts (a retried tick launches no duplicate)."""
    tick = scheduled.astimezone(UTC).date().isoformat()
    run_key = tick if scope.is_default else f"{tick}:{scope.account_id}"
    cdr_assets = sorted(scope.cdr_run_selection().resolve(graph))
    cdr_checks = sorted(scope.cdr_run_selection().resolve_checks(graph))
    snapshot_assets = sorted(scope.snapshot_run_selection().resolve(graph))
    requests = [
        dg.RunRequest(
            run_key=f"{run_key}:cdrs:{key}",
            partition_key=key,
            asset_selection=cdr_assets,
            asset_check_keys=cdr_checks,
            tags={**scope.tags, "cdrhouse/lookback": str(key != keys[-1]).lower()},
        )
        for key in keys
    ]
    requests.append(
        dg.RunRequest(
            run_key=f"{run_key}:snapshots", asset_selection=snapshot_assets, tags=scope.tags
        )
    )
    return requests
