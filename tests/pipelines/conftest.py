"""Fixtures of the pipeline tests: a real sandbox on a loopback port, small and seeded."""

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import dagster as dg
import duckdb
import httpx
import polars as pl
import pytest

from connectors.sandbox import FaultConfig, Sandbox, SandboxConfig
from connectors.sandbox.config import DEFAULT_API_KEY
from pipelines.assets import api_retry_policy
from pipelines.definitions import build_defs
from pipelines.partitions import partition_window
from pipelines.resources import ContactCenterResource, WarehouseResource

SEED = 11
CDRS_PER_DAY = 400
TODAY = datetime.now(UTC).date()
FIRST_DAY = TODAY - timedelta(days=10)


@dataclass
class ServedSandbox:
    sandbox: Sandbox
    base_url: str

    def env(self, data_dir: Path) -> dict[str, str]:
        """The environment a user sets to point cdrhouse at this API."""
        return {
            "CC_API_BASE_URL": self.base_url,
            "CC_API_KEY": DEFAULT_API_KEY,
            "CDRHOUSE_DATA_DIR": str(data_dir),
            "CDRHOUSE_START_DATE": FIRST_DAY.isoformat(),
        }

    def api_total(self, day: date) -> int:
        """`metadata.total` of the CDR list for the day, asked over HTTP like any client."""
        start, end = partition_window(day.isoformat())
        response = httpx.get(
            f"{self.base_url}/api/v4/reporting/cdrs",
            params={
                "started_at[gte]": start.isoformat().replace("+00:00", "Z"),
                "started_at[lt]": end.isoformat().replace("+00:00", "Z"),
                "limit": 1,
            },
            headers={"Authorization": f"Bearer {DEFAULT_API_KEY}"},
            timeout=30,
        )
        response.raise_for_status()
        total: int = response.json()["metadata"]["total"]
        return total

    def defs(self, data_dir: Path, *, max_retries: int = 0) -> dg.Definitions:
        """The code location against this sandbox, failing fast (tests must not wait)."""
        return build_defs(
            contact_center=ContactCenterResource(
                base_url=self.base_url,
                api_key=DEFAULT_API_KEY,
                max_attempts=2,
                max_retry_s=2.0,
            ),
            warehouse=WarehouseResource(data_dir=str(data_dir)),
            start_date=FIRST_DAY,
            retry_policy=api_retry_policy(max_retries=max_retries, delay_s=0.1),
        )


@pytest.fixture(scope="module")
def served() -> Iterator[ServedSandbox]:
    config = SandboxConfig(seed=SEED, cdrs_per_day=CDRS_PER_DAY, start_date=FIRST_DAY, days=11)
    sandbox = Sandbox(config)
    with sandbox.serve() as handle:
        yield ServedSandbox(sandbox, handle.base_url)


@pytest.fixture
def clean_faults(served: ServedSandbox) -> Iterator[ServedSandbox]:
    served.sandbox.faults = FaultConfig()
    yield served
    served.sandbox.faults = FaultConfig()


def read_table(data_dir: Path, table: str, drop: tuple[str, ...] = ()) -> pl.DataFrame:
    """A whole warehouse view, in a stable order, through a fresh read-only connection."""
    with duckdb.connect(str(data_dir / "warehouse.duckdb"), read_only=True) as con:
        frame = pl.DataFrame(pl.from_arrow(con.sql(f'select * from "{table}"').to_arrow_table()))
    frame = frame.drop([c for c in drop if c in frame.columns])
    keys = [c for c, t in frame.schema.items() if not isinstance(t, pl.List | pl.Struct)]
    return frame.sort(keys, nulls_last=True) if frame.height else frame


def evaluate_failure_sensor(
    instance: dg.DagsterInstance, run_id: str, defs: dg.Definitions, data_dir: Path
) -> None:
    """Evaluate the run-failure sensor on one failed run, as the daemon would."""
    from pipelines.sensors import failure_summary_sensor

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
    failure_summary_sensor(context)
