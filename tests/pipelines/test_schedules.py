"""The nightly schedule, evaluated through Dagster's own `build_schedule_context`."""

from datetime import UTC, date, datetime

import dagster as dg
import pytest

from pipelines.definitions import build_defs
from pipelines.resources import ContactCenterResource, WarehouseResource
from tests.support.keys import AGG_ASSETS, CDR_ASSETS


def _defs(tmp_path, lookback_days: int = 3, start: date = date(2026, 10, 1)) -> dg.Definitions:
    return build_defs(
        contact_center=ContactCenterResource(base_url="sandbox"),
        warehouse=WarehouseResource(data_dir=str(tmp_path)),
        start_date=start,
        lookback_days=lookback_days,
    )


def _evaluate(defs: dg.Definitions, when: datetime) -> list[dg.RunRequest]:
    repo = defs.get_repository_def()
    schedule = repo.get_schedule_def("nightly")
    context = dg.build_schedule_context(scheduled_execution_time=when, repository_def=repo)
    result = schedule.evaluate_tick(context)
    assert result.run_requests is not None
    return list(result.run_requests)


def test_nightly_runs_yesterday_plus_lookback_and_snapshots(tmp_path) -> None:
    requests = _evaluate(_defs(tmp_path), datetime(2026, 11, 21, 1, 0, tzinfo=UTC))
    cdr_runs = [r for r in requests if r.partition_key is not None]
    assert [r.partition_key for r in cdr_runs] == [
        "2026-11-17",
        "2026-11-18",
        "2026-11-19",
        "2026-11-20",
    ]
    # Every CDR run selects raw + normalized assets and the day's aggregates only; one extra run
    # takes the snapshots.
    for run in cdr_runs:
        assert {k.to_user_string() for k in run.asset_selection or []} == CDR_ASSETS | AGG_ASSETS
    snapshot_runs = [r for r in requests if r.partition_key is None]
    assert len(snapshot_runs) == 1
    snap_keys = {k.to_user_string() for k in snapshot_runs[0].asset_selection or []}
    assert {"users", "balance_snapshots", "queue_members", "numbers"} <= snap_keys
    assert "raw_cdrs" not in snap_keys
    # Run keys are unique per tick, so a retried tick does not launch duplicates.
    assert len({r.run_key for r in requests}) == len(requests)
    assert [r.tags.get("cdrhouse/lookback") for r in cdr_runs] == ["true"] * 3 + ["false"]


@pytest.mark.parametrize(
    ("lookback", "expected_first"), [(0, "2026-11-20"), (1, "2026-11-19"), (5, "2026-11-15")]
)
def test_lookback_is_configurable(tmp_path, lookback: int, expected_first: str) -> None:
    requests = _evaluate(_defs(tmp_path, lookback), datetime(2026, 11, 21, 1, 0, tzinfo=UTC))
    keys = [r.partition_key for r in requests if r.partition_key]
    assert keys[0] == expected_first
    assert keys[-1] == "2026-11-20"
    assert len(keys) == lookback + 1


def test_lookback_never_reaches_before_the_first_partition(tmp_path) -> None:
    defs = _defs(tmp_path, lookback_days=3, start=date(2026, 11, 19))
    requests = _evaluate(defs, datetime(2026, 11, 21, 1, 0, tzinfo=UTC))
    assert [r.partition_key for r in requests if r.partition_key] == ["2026-11-19", "2026-11-20"]


def test_month_boundary(tmp_path) -> None:
    requests = _evaluate(_defs(tmp_path, 1), datetime(2026, 11, 1, 1, 0, tzinfo=UTC))
    assert [r.partition_key for r in requests if r.partition_key] == ["2026-10-30", "2026-10-31"]
