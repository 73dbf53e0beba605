"""Partition-aware freshness: the newest due day must land, whatever older days did since.

Real runs of the `cdr_daily` job against the in-process sandbox (small days) in an ephemeral
instance; the check runs as its own job (`cdr_freshness`) with a fixed clock: the run config's
`as_of`, which the hourly schedule sets to its tick.
"""

from __future__ import annotations

from datetime import UTC, date, datetime, time, timedelta
from pathlib import Path
from typing import Any, NamedTuple

import dagster as dg
import pytest

from pipelines.defs.freshness.checks import FRESHNESS_JOB, due_day
from pipelines.names import FRESHNESS_CHECK
from tests.support.clock import SessionClock
from tests.support.served import sandbox_defs


class Days(NamedTuple):
    """The days of these tests, from the session's clock."""

    today: date
    yesterday: date
    older: date
    first_day: date
    after_deadline: datetime


@pytest.fixture
def days(clock: SessionClock) -> Days:
    return Days(
        today=clock.today,
        yesterday=clock.days_ago(1),
        older=clock.days_ago(4),
        first_day=clock.days_ago(6),
        after_deadline=clock.at(clock.today, 4),
    )


def _defs(data_dir: Path, first_day: date, base_url: str | None = "sandbox") -> dg.Definitions:
    return sandbox_defs(data_dir, first_day, 200, base_url=base_url)


def _materialize(defs: dg.Definitions, instance: dg.DagsterInstance, day: date) -> bool:
    result = defs.resolve_job_def("cdr_daily").execute_in_process(
        instance=instance, partition_key=day.isoformat(), raise_on_error=False
    )
    return result.success


def _check(
    defs: dg.Definitions, instance: dg.DagsterInstance, as_of: datetime
) -> tuple[bool, str, dict[str, Any]]:
    job = defs.resolve_job_def(FRESHNESS_JOB)
    (op_name,) = [node.name for node in job.nodes]
    result = job.execute_in_process(
        instance=instance,
        run_config={"ops": {op_name: {"config": {"as_of": as_of.isoformat()}}}},
    )
    (evaluation,) = result.get_asset_check_evaluations()
    assert evaluation.check_name == FRESHNESS_CHECK
    metadata = {k: v.value for k, v in evaluation.metadata.items()}
    return evaluation.passed, evaluation.description or "", metadata


@pytest.fixture
def instance() -> Any:
    with dg.DagsterInstance.ephemeral() as inst:
        yield inst


def test_due_day_is_yesterday_only_after_the_nightly_deadline(days: Days) -> None:
    today, yesterday, after_deadline = days.today, days.yesterday, days.after_deadline
    assert due_day(after_deadline) == yesterday
    assert due_day(datetime.combine(today, time(3, 0), tzinfo=UTC)) == yesterday
    # Before 03:00 UTC yesterday is not due yet: the day before it is.
    assert due_day(datetime.combine(today, time(2, 59), tzinfo=UTC)) == yesterday - timedelta(1)


def test_backfilled_older_day_does_not_hide_a_missing_yesterday(
    tmp_path: Path, instance: dg.DagsterInstance, days: Days
) -> None:
    today, yesterday, older, after_deadline = (
        days.today,
        days.yesterday,
        days.older,
        days.after_deadline,
    )
    defs = _defs(tmp_path, days.first_day)
    passed, why, meta = _check(defs, instance, after_deadline)
    assert not passed
    assert meta["status"] == "missing"

    # An older day is backfilled: the asset was just materialized, so a per-asset freshness
    # policy sees it fresh. The partition-aware check still fails, naming yesterday.
    assert _materialize(defs, instance, older)
    passed, why, meta = _check(defs, instance, after_deadline)
    assert not passed, why
    assert meta["due_partition"] == yesterday.isoformat()
    assert meta["status"] == "missing"
    assert meta["newest_materialized_partition"] == older.isoformat()
    assert f"{yesterday} has not been materialized" in why
    assert f"the newest day that landed is {older}" in why

    # Yesterday's run fails (no API configured): still failing, now saying it failed.
    assert not _materialize(_defs(tmp_path, days.first_day, base_url=None), instance, yesterday)
    passed, why, meta = _check(defs, instance, after_deadline)
    assert not passed
    assert meta["status"] == "failed"
    assert f"the latest run of {yesterday} failed" in why

    # Yesterday lands: the check passes as of the same clock.
    assert _materialize(defs, instance, yesterday)
    passed, why, meta = _check(defs, instance, after_deadline)
    assert passed, why
    assert meta["status"] == "materialized"
    assert meta["newest_materialized_partition"] == yesterday.isoformat()

    # A day later (the clock moves past the next deadline) today's partition is due and missing.
    passed, _, meta = _check(defs, instance, after_deadline + timedelta(days=1))
    assert not passed
    assert meta["due_partition"] == today.isoformat()


def test_the_schedule_evaluates_the_check_as_of_its_tick(tmp_path: Path, days: Days) -> None:
    defs = _defs(tmp_path, days.first_day)
    schedule = defs.get_repository_def().get_schedule_def("cdr_freshness_hourly")
    tick = datetime.combine(days.today, time(3, 5), tzinfo=UTC)
    with dg.DagsterInstance.ephemeral() as instance:
        context = dg.build_schedule_context(instance=instance, scheduled_execution_time=tick)
        requests = schedule.evaluate_tick(context).run_requests or []
    (request,) = requests
    (config,) = request.run_config["ops"].values()
    assert config == {"config": {"as_of": tick.isoformat()}}
