"""A Dagster job run that must fail at once: every failed step says why, none is retried."""

from __future__ import annotations

import dagster as dg
from dagster._core.execution.plan.objects import UserFailureData


def run_failing_at_once(
    defs: dg.Definitions, job: str, partition: str | None, instance: dg.DagsterInstance
) -> tuple[dg.ExecuteInProcessResult, list[UserFailureData]]:
    """Run `job` in `instance`: it fails, each failed step raised a `dg.Failure` (returned, one
    per failed step) and no step was retried, whatever the retry policy."""
    result = defs.resolve_job_def(job).execute_in_process(
        partition_key=partition, instance=instance, raise_on_error=False
    )
    assert not result.success
    failures = [e for e in result.all_events if e.is_step_failure]
    assert failures
    users: list[UserFailureData] = []
    for event in failures:
        user = event.step_failure_data.user_failure_data
        assert user is not None, event.step_failure_data.error
        users.append(user)
    retry = dg.DagsterEventType.STEP_UP_FOR_RETRY
    retries = [e.step_key for e in result.all_events if e.event_type == retry]
    assert retries == []
    return result, users
