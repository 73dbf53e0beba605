"""Fixtures of the pipeline tests: a real sandbox on a loopback port, small and seeded."""

from collections.abc import Iterator
from pathlib import Path

import dagster as dg
import pytest

from connectors.sandbox import SandboxConfig
from pipelines.resources import WarehouseResource
from tests.support.clock import SessionClock
from tests.support.served import ServedSandbox, serve_sandbox

SEED = 11
CDRS_PER_DAY = 400
# Partitions and sandbox data start this many days before the session's today.
HISTORY_DAYS = 10


@pytest.fixture(scope="module")
def served(clock: SessionClock) -> Iterator[ServedSandbox]:
    first_day = clock.days_ago(HISTORY_DAYS)
    config = SandboxConfig(
        seed=SEED, cdrs_per_day=CDRS_PER_DAY, start_date=first_day, days=HISTORY_DAYS + 1
    )
    # Fail fast: the pipeline tests must not wait on retries.
    with serve_sandbox(config, clock, max_attempts=2, max_retry_s=2.0) as served:
        yield served


@pytest.fixture
def clean_faults(served: ServedSandbox) -> Iterator[ServedSandbox]:
    served.reset()
    yield served
    served.reset()


def evaluate_failure_sensor(
    instance: dg.DagsterInstance, run_id: str, defs: dg.Definitions, data_dir: Path
) -> None:
    """Evaluate the run-failure sensor on one failed run, as the daemon would."""
    from pipelines.defs.automation.sensors import failure_summary_sensor

    run = instance.get_run_by_id(run_id)
    assert run is not None
    failure_event = next(
        record.event_log_entry.dagster_event
        for record in instance.get_records_for_run(run_id).records
        if record.event_log_entry.dagster_event is not None
        and record.event_log_entry.dagster_event.event_type == dg.DagsterEventType.RUN_FAILURE
    )
    context = dg.build_run_status_sensor_context(
        sensor_name="failure_summary_sensor",
        dagster_event=failure_event,
        dagster_instance=instance,
        dagster_run=run,
        resources={"warehouse": WarehouseResource(data_dir=str(data_dir))},
        repository_def=defs.get_repository_def(),
    ).for_run_failure()
    failure_summary_sensor()(context)
