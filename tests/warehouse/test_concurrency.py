"""The warehouse rebuild and `cdrhouse sql` stay safe while others hold the file or write."""

from __future__ import annotations

import argparse
import datetime as dt
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from warehouse import cli
from warehouse.duck import WAREHOUSE_FILE, build_warehouse, connect
from warehouse.lake import partition_key
from warehouse.report.build import write_report

from .conftest import START, build_small, replacing, write_day

HOLDER = r"""
import sys, duckdb
con = duckdb.connect(sys.argv[1], read_only=sys.argv[2] == "ro")
print(con.execute("SELECT count(*) FROM cdrs").fetchall()[0][0], flush=True)
sys.stdin.readline()  # hold the connection open until the parent has rebuilt
print(con.execute("SELECT count(*) FROM cdrs").fetchall()[0][0], flush=True)
"""


@pytest.fixture
def fresh(tmp_path: Path):
    return build_small(tmp_path)


@pytest.mark.parametrize("mode", ["ro", "rw"])
def test_rebuild_while_another_process_holds_the_file(fresh, mode: str) -> None:
    path = fresh.data_dir / WAREHOUSE_FILE
    with subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(path), mode],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    ) as proc:
        assert proc.stdout is not None
        assert proc.stdin is not None
        before = int(proc.stdout.readline())
        assert before == fresh.tables["cdrs"].height
        # New data lands and the warehouse is rebuilt while the other process holds the file.
        write_day(fresh.lake, fresh.dataset, START + dt.timedelta(days=2))  # rewrite: same ids
        build_warehouse(fresh.data_dir)
        proc.stdin.write("go\n")
        proc.stdin.flush()
        assert int(proc.stdout.readline()) == before
        assert proc.wait(timeout=60) == 0, proc.stderr.read() if proc.stderr else ""
    # A new connection sees the rebuilt file, including a view added since.
    with connect(fresh.data_dir) as con:
        assert con.execute("SELECT count(*) FROM rpt_sms_delivery").fetchall()[0][0] > 0


def sql_args(query: str, **kw: object) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    cli.add_arguments(parser)
    argv = [query]
    for k, v in kw.items():
        argv += [f"--{k.replace('_', '-')}", str(v)]
    return parser.parse_args(argv)


def test_sql_runs_while_a_pipeline_writes_and_rebuilds(fresh, capsys) -> None:
    stop = threading.Event()
    started = threading.Event()
    errors: list[BaseException] = []
    # (start, end) of each write + rebuild of the pipeline and of each `cdrhouse sql` run.
    spans: list[tuple[float, float]] = []
    reads: list[tuple[float, float]] = []

    def pipeline() -> None:
        try:
            i = 0
            while not stop.is_set() or len(spans) < 2:
                begun = time.monotonic()
                started.set()
                write_day(fresh.lake, fresh.dataset, START + dt.timedelta(days=i % 3))
                build_warehouse(fresh.data_dir)
                spans.append((begun, time.monotonic()))
                i += 1
        except BaseException as exc:  # surfaced below
            errors.append(exc)

    writer = threading.Thread(target=pipeline)
    writer.start()

    def rebuilt_during_reads() -> int:
        """Rebuilds that ended after the first read began and before the last read ended."""
        if not reads:
            return 0
        return sum(reads[0][0] < end < reads[-1][1] for _, end in list(spans))

    codes: list[int] = []
    try:
        # Reads start once the first write has, never before the writer is under way, and go
        # on until the pipeline has rebuilt the warehouse twice under them.
        assert started.wait(timeout=60)
        deadline = time.monotonic() + 120
        while len(codes) < 15 or rebuilt_during_reads() < 2:
            assert time.monotonic() < deadline, "the pipeline did not rebuild while reads ran"
            begun = time.monotonic()
            codes.append(
                cli.run(sql_args("SELECT sum(cdrs) AS n FROM rpt_daily_volume"), fresh.data_dir)
            )
            reads.append((begun, time.monotonic()))
    finally:
        stop.set()
        writer.join(timeout=120)
    assert not errors
    rebuilds = len(spans)
    assert rebuilds >= 2
    assert len(codes) >= 15
    assert codes == [0] * len(codes)
    # Every read ran while the pipeline was at work: after its first write began and before its
    # last rebuild ended; and two rebuilds or more finished between the first and the last read.
    assert all(spans[0][0] <= start and end <= spans[-1][1] for start, end in reads)
    assert rebuilt_during_reads() >= 2
    out = capsys.readouterr().out
    # Every answer is the full, consistent count: partitions are swapped whole.
    totals = {line.strip() for line in out.splitlines() if line.strip().isdigit()}
    assert totals == {str(fresh.tables["cdrs"].height)}


def test_queries_read_partitions_that_a_run_replaces_meanwhile(fresh) -> None:
    """DuckDB opens a file again for each scan: a partition replaced between two opens gave
    one version's footer and the other's pages ("TProtocolException: Invalid data", "invalid
    TType"), which `cdrhouse sql` showed as they are. Read again, the new file is whole: the
    query runs again (`lake_moved`), as for a file gone between the glob and the read."""
    query = "SELECT count(*) AS n, count(DISTINCT id) AS ids, sum(cost) AS cost FROM cdrs"
    expected = cli.run_query(fresh.data_dir, query)
    assert expected is not None
    answers = 0
    with replacing(fresh.lake, partition_key("date", START), ["cdrs"], 0.02) as replaced:
        deadline = time.monotonic() + 3.0
        while time.monotonic() < deadline or answers < 30:
            got = cli.run_query(fresh.data_dir, query)
            assert got is not None
            assert got.equals(expected)
            answers += 1
    assert replaced.times > 30


def test_a_report_reads_aggregates_that_a_run_replaces_meanwhile(fresh, tmp_path) -> None:
    """The report's queries read the `agg_*` partitions each run replaces: met under a
    replace, each query runs again, as `cdrhouse sql`'s does. A report is ~20 queries: when
    the whole report was what ran again, three reports in a row could each meet a replace
    (once in CI, with one every 150 ms) and fail with "TProtocolException: Invalid data".
    A replace every 100 ms is still far more than a run does (once per partition)."""
    end = START + dt.timedelta(days=3)
    out = tmp_path / "report.html"
    expected = write_report(fresh.data_dir, START, end, out).headline
    key = partition_key("date", START)
    reports = 0
    with replacing(fresh.lake, key, ["agg_daily_volume"], 0.1) as replaced:
        deadline = time.monotonic() + 3.0
        while time.monotonic() < deadline or reports < 5:
            assert write_report(fresh.data_dir, START, end, out).headline == expected
            reports += 1
    assert replaced.times > 20
