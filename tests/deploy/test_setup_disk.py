"""A full disk is a setup error: one line, exit 2 within 10 s, never retried as a network error.

On a real small filesystem (a tmpfs of 1 MiB mounted for the test; mounting needs root, which
CI has): full before the run (the preflight's write probe meets ENOSPC), and filling up during
the run (the day's partition writes meet it). The Dagster path is held too: a step whose write
meets ENOSPC fails at once, whatever its RetryPolicy, so a scheduled run does not wait out
30 + 60 + 120 s of retries either.
"""

from __future__ import annotations

import time
from datetime import timedelta
from pathlib import Path

import dagster as dg
import duckdb
import pytest

from pipelines.definitions import CDR_JOB, build_defs
from pipelines.resources import ContactCenterResource, WarehouseResource
from tests.support.cli import (
    SETUP_ERROR_LIMIT_S,
    assert_one_line_setup_error,
    clean_env,
    finish,
    run_cdrhouse,
    start_cdrhouse,
    tree,
)
from tests.support.clock import SessionClock
from tests.support.disk import FILLER, small_filesystem


def _env(data_dir: Path, cdrs_per_day: int) -> dict[str, str]:
    return clean_env(
        CC_API_BASE_URL="sandbox",
        CDRHOUSE_DATA_DIR=str(data_dir),
        CDRHOUSE_SANDBOX_CDRS_PER_DAY=str(cdrs_per_day),
    )


def _argv(clock: SessionClock) -> list[str]:
    day = clock.days_ago(2)
    return ["ingest", "--start", str(day), "--end", str(day + timedelta(1)), "--no-snapshots"]


def test_full_disk_fails_before_any_run(clock: SessionClock) -> None:
    with small_filesystem(free_bytes=0) as fs:
        run = run_cdrhouse(_argv(clock), _env(fs / "data", 50))
        assert_one_line_setup_error(run, "No space left on device", str(fs))
        assert tree(fs) == [FILLER]  # no data dir, no lake, no probe file


def test_disk_filling_up_during_the_run_is_not_retried(clock: SessionClock) -> None:
    """The disk fills during the run: 10 s from the start of the runs (the header line) to
    the exit, since the fault comes only then (the old code retried for 280-350 s)."""
    # Room for the preflight's probe, not for the day's partitions.
    with small_filesystem(free_bytes=48 * 1024) as fs:
        data_dir = fs / "data"
        proc = start_cdrhouse(_argv(clock), _env(data_dir, 600))
        assert proc.stdout is not None
        header = proc.stdout.readline()  # printed once every check passed, before the runs
        assert header.startswith("cdrhouse ingest: 1 day(s)"), header + proc.communicate()[1]
        run = finish(proc, time.monotonic(), since="its runs started")
        text = run.stdout + run.stderr
        assert "Traceback" not in text, str(run)
        assert run.code == 2, str(run)
        assert "retried" not in text, str(run)
        (line,) = run.stderr.splitlines()
        assert line.startswith("cdrhouse: error: "), str(run)
        assert "No space left on device" in line
        assert run.seconds < SETUP_ERROR_LIMIT_S, str(run)
        published = [p for p in tree(data_dir / "lake") if p.endswith(".parquet")]
        assert [p for p in published if not p.startswith("_tmp")] == []
        assert [p for p in published if p.startswith("_tmp")] == []  # aborted writers cleaned up
        assert not (data_dir / "warehouse.duckdb").exists()


def test_a_step_meeting_a_full_disk_is_not_retried_by_its_retry_policy(
    clock: SessionClock,
) -> None:
    day = clock.days_ago(2)
    with small_filesystem(free_bytes=48 * 1024) as fs:
        defs = build_defs(
            contact_center=ContactCenterResource(
                base_url="sandbox",
                sandbox_cdrs_per_day=600,
                sandbox_start_date=str(day - timedelta(1)),
            ),
            warehouse=WarehouseResource(data_dir=str(fs / "data")),
            start_date=day - timedelta(1),
            retry_policy=dg.RetryPolicy(max_retries=2, delay=0.1),
        )
        with dg.DagsterInstance.ephemeral() as instance:
            result = defs.resolve_job_def(CDR_JOB).execute_in_process(
                instance=instance, partition_key=str(day), raise_on_error=False
            )
        assert not result.success
        retried = [
            e.step_key
            for e in result.all_events
            if e.event_type == dg.DagsterEventType.STEP_UP_FOR_RETRY
        ]
        assert retried == [], f"retried as if transient: {retried}"
        (failure,) = [e for e in result.all_events if e.is_step_failure]
        user = failure.step_failure_data.user_failure_data
        assert user is not None, failure.step_failure_data.error
        assert "No space left on device" in str(user.description)
        assert user.metadata["fatal"].value is True


def test_duckdb_meeting_a_full_disk_is_a_setup_error() -> None:
    """DuckDB says "No space left on device" in text only (no errno): still a setup error, so
    a view refresh on a full disk is not retried either."""
    from warehouse.stores import setup_problem  # here: the module's other tests run on old code

    with small_filesystem(free_bytes=0) as fs:
        with pytest.raises(duckdb.Error) as info:  # noqa: PT012 - the write is what fails
            con = duckdb.connect(str(fs / "warehouse.duckdb"))
            con.execute("create table t as select range as r from range(100000)")
            con.execute("checkpoint")
        problem = setup_problem(info.value, str(fs))
        assert problem is not None, info.value
        assert problem.startswith(f"No space left on device on the disk holding {fs}")
