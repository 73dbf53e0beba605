"""Who refreshes `warehouse.duckdb`'s views: each landing step of a run (the UI's, the
schedule's), or, with `views_in_runs` off, the runs' caller once after them (`cdrhouse
ingest`, which on a new lake otherwise rebuilt the views in nearly every step)."""

from __future__ import annotations

import signal
import threading
import time
from datetime import date, timedelta
from pathlib import Path

import dagster as dg
import pytest

from connectors.sandbox import ALL_SCOPES, Sandbox, SandboxConfig
from pipelines.cli import main
from tests.support.cli import clean_env, start_cdrhouse
from tests.support.clock import SessionClock
from tests.support.lake import one_row, warehouse
from tests.support.privacy import with_raw_numbers
from tests.support.served import ServedSandbox, sandbox_defs

WAREHOUSE_FILE = "warehouse.duckdb"


def _land_day(data_dir: Path, day: date, *, views_in_runs: bool) -> None:
    defs = sandbox_defs(data_dir, day, 50, views_in_runs=views_in_runs)
    with dg.DagsterInstance.ephemeral() as instance:
        result = defs.resolve_job_def("cdr_daily").execute_in_process(
            instance=instance, partition_key=day.isoformat()
        )
    assert result.success


@pytest.mark.parametrize("views_in_runs", [True, False])
def test_a_run_refreshes_the_views_unless_told_its_caller_will(
    tmp_path: Path, clock: SessionClock, views_in_runs: bool
) -> None:
    day = clock.days_ago(3)
    _land_day(tmp_path, day, views_in_runs=views_in_runs)

    assert list((tmp_path / "lake" / "cdrs").glob("date=*/*.parquet"))  # the day landed
    if views_in_runs:
        with warehouse(tmp_path) as con:
            (rows,) = one_row(con, f"select count(*) from cdrs where date = DATE '{day}'")
        assert rows > 0
    else:
        assert not (tmp_path / WAREHOUSE_FILE).exists()


def test_cli_ingest_leaves_views_over_every_table_it_landed(
    clean_faults: ServedSandbox, clock: SessionClock, tmp_path: Path
) -> None:
    # Its runs leave the views to it: the one refresh after them must see every table that
    # got its first partition in any of them (snapshots, CDR tables, aggregates).
    days = [clock.days_ago(3), clock.days_ago(2)]
    argv = ["ingest", "--start", days[0].isoformat(), "--end", str(days[-1] + timedelta(1))]
    views = tmp_path / WAREHOUSE_FILE
    first_seen: list[float] = []
    done = threading.Event()

    def watch() -> None:  # when the views file first exists
        while not first_seen:
            stop = done.is_set()
            if views.exists():
                first_seen.append(time.time())
            elif stop:
                return
            time.sleep(0.005)

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        assert main(argv, env=clean_faults.env(tmp_path)) == 0
    finally:
        done.set()
        watcher.join()
    # Built once, after every run: not before the last day's files were written.
    last_landed = max(p.stat().st_mtime for p in (tmp_path / "lake").rglob("date=*/*.parquet"))
    assert first_seen, "no views after the command"
    assert first_seen[0] >= last_landed, (first_seen, last_landed)
    with warehouse(tmp_path) as con:
        (cdrs,) = one_row(con, "select count(*) from cdrs")
        (volume,) = one_row(con, "select sum(cdrs) from agg_daily_volume")
        (users,) = one_row(con, "select count(*) from users")
    assert cdrs == sum(clean_faults.api_total(d) for d in days) > 0
    assert volume == cdrs
    assert users > 0


def test_a_failed_day_leaves_views_over_what_landed_before_it(
    clock: SessionClock, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # A key that reads the directory and the balance but not CDRs: the snapshots land, the
    # day's run fails (403, no retry), exit 1. The snapshots are in the views all the same.
    day = clock.days_ago(2)
    config = SandboxConfig(
        seed=7,
        cdrs_per_day=50,
        start_date=day - timedelta(3),
        days=4,
        api_keys={"no-cdrs": ALL_SCOPES - {"reporting.cdrs.read"}},
    )
    argv = ["ingest", "--start", day.isoformat(), "--end", str(day + timedelta(1))]
    with Sandbox(config).serve() as handle:
        env = with_raw_numbers(
            {
                "CC_API_BASE_URL": handle.base_url,
                "CC_API_KEY": "no-cdrs",
                "CDRHOUSE_DATA_DIR": str(tmp_path),
            }
        )
        assert main(argv, env=env) == 1
        assert "reporting.cdrs.read" in capsys.readouterr().out
        assert not list((tmp_path / "lake" / "cdrs").glob("date=*/*.parquet"))
        with warehouse(tmp_path) as con:
            (users,) = one_row(con, "select count(*) from users")
            (balances,) = one_row(con, "select count(*) from balance_snapshots")
        assert users > 0
        assert balances == 1


def test_ctrl_c_leaves_views_over_the_days_that_landed_before_it(
    clean_faults: ServedSandbox, clock: SessionClock, tmp_path: Path
) -> None:
    # The runs leave the views to the command: Ctrl-C after the first day must not leave
    # that day (and the snapshots) out of them. Before, there were no views at all.
    days = [clock.days_ago(6), clock.days_ago(1)]
    argv = ["ingest", "--start", days[0].isoformat(), "--end", days[-1].isoformat()]
    proc = start_cdrhouse(argv, clean_env(**clean_faults.env(tmp_path)))
    assert proc.stdout is not None
    for line in proc.stdout:
        if line.startswith(f"ok   {days[0].isoformat()}"):
            proc.send_signal(signal.SIGINT)
            break
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, out + err
    assert "interrupted" in err
    with warehouse(tmp_path) as con:
        (first,) = one_row(con, f"select count(*) from cdrs where date = DATE '{days[0]}'")
        (users,) = one_row(con, "select count(*) from users")
    assert first == clean_faults.api_total(days[0]) > 0
    assert users > 0
