"""Partition-aware freshness: did the newest UTC day that is due land, whatever else ran since?

Dagster's `FreshnessPolicy` is evaluated per asset (dagster discussion #34023): backfilling
an old day materializes `cdrs` and makes it look fresh while yesterday is missing. This check
looks at one partition instead, the newest one past its deadline: the nightly run starts at
01:00 UTC, and day D is due by D+1 03:00 UTC (the same deadline as `nightly_freshness`). It
fails when that partition is missing, its latest run failed, or it is still running after the
deadline, and says which, with the newest partition that did land.

The check runs as its own small job (`cdr_freshness`) every hour at :05, evaluated as of the
tick's time, so a late recovery turns it green at the next tick. The clock is the run config's
`as_of` (the schedule passes its tick; a manual run defaults to now), which also lets tests fix
it.
"""

from datetime import UTC, date, datetime, time, timedelta
from typing import TYPE_CHECKING

import dagster as dg
from pydantic import Field

from models.timestamps import parse_ts
from pipelines.names import FRESHNESS_ASSET, FRESHNESS_CHECK
from pipelines.resources import utc_now
from pipelines.scope import DEFAULT_SCOPE, AccountScope

if TYPE_CHECKING:
    from dagster._core.definitions.unresolved_asset_job_definition import (
        UnresolvedAssetJobDefinition,
    )

# No `from __future__ import annotations` here: Dagster reads the check's config class from
# its annotation at definition time.

FRESHNESS_JOB = "cdr_freshness"
FRESHNESS_CRON = "5 * * * *"
DEADLINE = time(3, 0)  # UTC, the day after: matches nightly_freshness() in pipelines/steps.py


class FreshnessConfig(dg.Config):
    as_of: str | None = Field(
        default=None,
        description="Evaluate as of this UTC time (ISO 8601); default: now. The schedule "
        "passes its tick's time.",
    )


def due_day(now: datetime) -> date:
    """The newest day whose deadline (D+1 at 03:00 UTC) has passed at `now`."""
    shifted = now.astimezone(UTC) - timedelta(hours=DEADLINE.hour, minutes=DEADLINE.minute)
    return shifted.date() - timedelta(days=1)


def deadline_of(day: date) -> datetime:
    return datetime.combine(day + timedelta(days=1), DEADLINE, tzinfo=UTC)


def evaluate(
    instance: dg.DagsterInstance,
    asset_key: dg.AssetKey,
    partitions_def: dg.PartitionsDefinition[str],
    now: datetime,
) -> dg.AssetCheckResult:
    """The check's verdict on the newest due partition of `asset_key`, as of `now`."""
    due = due_day(now)
    deadline = deadline_of(due)
    day = due.isoformat()
    statuses = instance.get_status_by_partition(asset_key, [day], partitions_def) or {}
    status = statuses.get(day)
    landed = sorted(instance.get_materialized_partitions(asset_key))
    newest = landed[-1] if landed else "none"
    state = status.value.lower() if status is not None else "missing"
    why = {
        "materialized": f"{day} landed",
        "failed": f"the latest run of {day} failed",
        "in_progress": f"{day} is still running past its deadline",
        "missing": f"{day} has not been materialized",
    }[state]
    passed = state == "materialized"
    if not passed:
        why += f" (deadline {deadline:%Y-%m-%d %H:%M} UTC)"
        if newest != "none" and newest != day:
            why += f"; the newest day that landed is {newest}"
    return dg.AssetCheckResult(
        passed=passed,
        severity=dg.AssetCheckSeverity.ERROR,
        description=why,
        metadata={
            "due_partition": day,
            "status": state,
            "deadline": deadline.isoformat(),
            "as_of": now.astimezone(UTC).isoformat(timespec="seconds"),
            "newest_materialized_partition": newest,
            "materialized_partitions": len(landed),
        },
    )


def _as_of(config: FreshnessConfig) -> datetime:
    return parse_ts(config.as_of) if config.as_of else utc_now()


def build_freshness_check(
    partitions_def: dg.PartitionsDefinition[str],
    scope: AccountScope = DEFAULT_SCOPE,
) -> dg.AssetChecksDefinition:
    """The check on the account's `cdrs` (each account's days land on their own)."""
    key = scope.key(FRESHNESS_ASSET)

    @dg.asset_check(
        asset=key,
        name=FRESHNESS_CHECK,
        description=(
            "The newest UTC day past its deadline (D+1 03:00 UTC) landed in cdrs: fails when it "
            "is missing, failed or still running, whatever older days were backfilled since."
        ),
    )
    def newest_due_day_landed(
        context: dg.AssetCheckExecutionContext, config: FreshnessConfig
    ) -> dg.AssetCheckResult:
        return evaluate(context.instance, key, partitions_def, _as_of(config))

    return newest_due_day_landed


def build_freshness_job_and_schedule(
    check: dg.AssetChecksDefinition,
    scope: AccountScope = DEFAULT_SCOPE,
) -> tuple["UnresolvedAssetJobDefinition", dg.ScheduleDefinition]:
    """The check alone as a job, and its hourly schedule evaluated as of each tick (one pair
    per account: `cdr_freshness`, `cdr_freshness__<id>`)."""
    job = dg.define_asset_job(
        scope.named(FRESHNESS_JOB),
        tags=scope.tags,
        selection=dg.AssetSelection.checks(check),
        description="Did the newest due CDR day land? (partition-aware freshness)",
    )
    op_name = check.node_def.name

    @dg.schedule(
        name=scope.named("cdr_freshness_hourly"),
        cron_schedule=FRESHNESS_CRON,
        execution_timezone="UTC",
        job=job,
        default_status=dg.DefaultScheduleStatus.RUNNING,
        description="Every hour at :05: the newest due CDR day landed (as of the tick).",
    )
    def freshness_schedule(context: dg.ScheduleEvaluationContext) -> dg.RunRequest:
        tick = context.scheduled_execution_time or datetime.now(UTC)
        as_of = tick.astimezone(UTC).isoformat(timespec="seconds")
        return dg.RunRequest(
            run_key=f"freshness:{as_of}",
            run_config={"ops": {op_name: {"config": {"as_of": as_of}}}},
        )

    return job, freshness_schedule
