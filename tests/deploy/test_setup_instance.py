"""Instance-storage setup errors: a real PostgreSQL that is stopped, before and during a run.

`cdrhouse ingest` with `DAGSTER_HOME` on the production `dagster.yaml` (PostgreSQL): when the
database cannot be reached, or stops answering mid-run, the command exits 2 within 10 s with
one line, writes `data/failures/<...>.json`, and leaves no run NOT_STARTED or STARTED for good
(a run it could not close is marked FAILED by the next `cdrhouse ingest`). The cluster is this
module's own: the session's `postgres` serves other modules and must never be stopped.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import psycopg2
import pytest

from connectors.sandbox import FaultConfig, SandboxConfig
from connectors.sandbox.config import DEFAULT_API_KEY
from tests.deploy._services import (
    INSTALL_HINT,
    Postgres,
    _pg_run,
    deploy_env,
    postgres_bin_dir,
    start_postgres,
)
from tests.support.cli import (
    SETUP_ERROR_LIMIT_S,
    assert_one_line_setup_error,
    finish,
    run_cdrhouse,
    start_cdrhouse,
    tree,
)
from tests.support.clock import SessionClock
from tests.support.processes import stop_process
from tests.support.served import ServedSandbox, serve_sandbox

pytestmark = pytest.mark.timeout(300)

CDRS_PATH = "/api/v4/reporting/cdrs"
OPEN = ("NOT_STARTED", "STARTING", "STARTED")


class StoppablePostgres:
    """This module's own cluster, stopped and started again by the tests."""

    def __init__(self, pg: Postgres) -> None:
        self.pg = pg

    def stop(self) -> None:
        args = ["pg_ctl", "-D", str(self.pg.data_dir), "-m", "fast", "-w", "stop"]
        _pg_run(self.pg.bin_dir, self.pg.run_as, args)

    def start(self) -> None:
        opts = f"-k {self.pg.root} -h 127.0.0.1 -p {self.pg.port} -c fsync=off"
        log = str(self.pg.root / "postgres.log")
        args = ["pg_ctl", "-D", str(self.pg.data_dir), "-o", opts, "-l", log, "-w", "start"]
        _pg_run(self.pg.bin_dir, self.pg.run_as, args)

    def runs(self, db: str) -> list[tuple[str, str]]:
        """(run_id, status) of every run the instance recorded; [] before its tables exist."""
        try:
            rows = self.pg.query(db, "select run_id, status from runs order by id")
        except psycopg2.errors.UndefinedTable:
            return []
        return [(str(r), str(s)) for r, s in rows]


@pytest.fixture(scope="module")
def own_postgres() -> Iterator[StoppablePostgres]:
    bin_dir = postgres_bin_dir()
    if bin_dir is None:
        message = f"no PostgreSQL binaries (initdb) found: {INSTALL_HINT}"
        if os.environ.get("CDRHOUSE_REQUIRE_SERVICES"):
            pytest.fail(message)
        pytest.skip(message)
    with start_postgres(bin_dir) as pg:
        yield StoppablePostgres(pg)


@pytest.fixture
def running(own_postgres: StoppablePostgres) -> Iterator[StoppablePostgres]:
    """The cluster, up at the start and at the end of the test whatever it did meanwhile."""
    if not _accepts(own_postgres.pg):
        own_postgres.start()
    yield own_postgres
    if not _accepts(own_postgres.pg):
        own_postgres.start()


def _accepts(pg: Postgres) -> bool:
    try:
        pg.connect().close()
    except psycopg2.OperationalError:
        return False
    return True


@pytest.fixture(scope="module")
def slow_api(clock: SessionClock) -> Iterator[ServedSandbox]:
    """A small served sandbox whose CDR pages take a while: a day's run lasts a few seconds."""
    first = clock.days_ago(4)
    config = SandboxConfig(seed=31, cdrs_per_day=60, start_date=first, days=5)
    with serve_sandbox(config, clock) as served:
        served.sandbox.faults = FaultConfig(latency_ms=700, paths=(CDRS_PATH,))
        yield served


def _failure_files(data_dir: Path) -> list[dict[str, object]]:
    folder = data_dir / "failures"
    return [json.loads(p.read_text()) for p in sorted(folder.glob("*.json"))]


@pytest.mark.parametrize("mistake", ["stopped", "wrong-password"])
def test_unreachable_instance_storage_fails_before_any_run(
    running: StoppablePostgres, clock: SessionClock, tmp_path: Path, mistake: str
) -> None:
    db = running.pg.create_database("setup")
    pg_env = running.pg.env(db)
    if mistake == "wrong-password":
        pg_env["DAGSTER_PG_PASSWORD"] = "not-the-password"
    env = deploy_env(
        tmp_path,
        api_base_url="sandbox",
        api_key="",
        start_date=clock.days_ago(3),
        postgres_env=pg_env,
        extra={"CDRHOUSE_SANDBOX_CDRS_PER_DAY": "20"},
    )
    day = clock.days_ago(2)
    argv = ["ingest", "--start", day.isoformat(), "--end", str(day + timedelta(1))]
    if mistake == "stopped":
        running.stop()
    run = run_cdrhouse(argv, env)
    needles = ("PostgreSQL", "DAGSTER_PG_")
    line = assert_one_line_setup_error(run, *needles)
    assert "not-the-password" not in line
    data_dir = tmp_path / "data"
    (failure,) = _failure_files(data_dir)
    assert failure["run_id"] is None  # refused before any run was created
    assert "PostgreSQL" in str(failure["failed_steps"])
    # Nothing but the failure file: no lake, no warehouse.duckdb.
    assert [p for p in tree(data_dir) if not p.startswith("failures")] == []
    if mistake == "stopped":
        running.start()
    assert running.runs(db) == []  # no run was created, so none can be left open


def test_postgres_stopped_mid_run_fails_fast_and_leaves_no_open_run(
    running: StoppablePostgres, slow_api: ServedSandbox, clock: SessionClock, tmp_path: Path
) -> None:
    db = running.pg.create_database("midrun")
    env = deploy_env(
        tmp_path,
        api_base_url=slow_api.base_url,
        api_key=DEFAULT_API_KEY,
        start_date=slow_api.first_day,
        postgres_env=running.pg.env(db),
    )
    days = [clock.days_ago(3), clock.days_ago(2)]
    argv = ["ingest", "--start", str(days[0]), "--end", str(days[-1] + timedelta(1))]
    argv.append("--no-snapshots")
    asked = slow_api.sandbox.counters.get(CDRS_PATH, 0)
    proc = start_cdrhouse(argv, env)
    try:
        # Stop PostgreSQL inside the first day's step: once its run asks for a CDR page (counted
        # on arrival, answered 0.7 s later; only a run's step asks for CDRs). A deadline.
        deadline = time.monotonic() + 240
        while slow_api.sandbox.counters.get(CDRS_PATH, 0) == asked:
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "no run asked for CDRs within 240 s"
            time.sleep(0.01)
        running.stop()
        stopped = time.monotonic()
        run = finish(proc, stopped, since="PostgreSQL was stopped")
    finally:
        stop_process(proc, group=True)  # a no-op once `finish` reaped it

    assert "Traceback" not in run.stdout + run.stderr, str(run)
    assert run.code == 2, str(run)
    (line,) = run.stderr.splitlines()
    assert line.startswith("cdrhouse: error: "), line
    assert "PostgreSQL" in line
    assert run.seconds < SETUP_ERROR_LIMIT_S
    (failure,) = _failure_files(tmp_path / "data")
    run_id = str(failure["run_id"])
    assert f"details: {tmp_path / 'data' / 'failures' / run_id}.json" in line
    assert failure["partition"] == str(days[0])

    running.start()
    open_runs = [r for r in running.runs(db) if r[1] in OPEN]
    assert [r for r, _ in open_runs] == [run_id]  # what a stopped database cannot be told

    # The next ingest closes it, then does its work (one day, the API at full speed).
    slow_api.sandbox.faults = FaultConfig()
    argv = ["ingest", "--start", str(days[0]), "--end", str(days[0] + timedelta(1))]
    again = run_cdrhouse([*argv, "--no-snapshots"], env, limit_s=240)
    assert again.code == 0, str(again)
    statuses = dict(running.runs(db))
    assert statuses[run_id] == "FAILURE"
    assert not [r for r, s in statuses.items() if s in OPEN], statuses
