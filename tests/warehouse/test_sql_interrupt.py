"""Ctrl-C during a long `cdrhouse sql` query (warehouse.interrupt): the command stops within
seconds, says so in one line, exits 130, and leaves nothing written, in every format; and
during a rebuild of the views, which leaves the warehouse file as it was.

Before, the aligned table ran the query to its end (minutes), the file formats and the views'
build ended with a `RuntimeError: Query interrupted` traceback."""

from __future__ import annotations

import datetime as dt
import os
import shutil
import signal
import time
from pathlib import Path

import pytest

from tests.support.cli import clean_env, finish, start_cdrhouse

from .conftest import START, SmallWarehouse

# Hours of work for DuckDB: only an interrupt ends it within the test.
ENDLESS = "SELECT count(*) FROM range(1000000000000) t(i) WHERE i * 7 % 13 = 5"
# The command's start-up costs ~0.4 s of CPU; past this, the query is running (on every core).
QUERY_CPU_S = 1.5
STOP_LIMIT_S = 10.0
BEFORE = b"yesterday's export\n"
VIEW_DAYS = 300


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@pytest.mark.parametrize(
    ("argv", "sig"),
    [
        (["--format", "table"], signal.SIGINT),
        (["--format", "csv"], signal.SIGINT),
        (["--format", "json", "--output", "out.json"], signal.SIGINT),
        (["--format", "parquet", "--output", "out.parquet"], signal.SIGINT),
        (["--format", "table"], signal.SIGTERM),  # a pod stopped: as Ctrl-C
    ],
    ids=["table", "csv-stdout", "json-file", "parquet-file", "table-sigterm"],
)
def test_ctrl_c_stops_a_long_query_at_once_and_writes_nothing(
    small: SmallWarehouse, tmp_path: Path, argv: list[str], sig: signal.Signals
) -> None:
    temp = tmp_path / "tmp"
    temp.mkdir()
    output = tmp_path / argv[-1] if "--output" in argv else None
    if output is not None:
        output.write_bytes(BEFORE)
        argv = [*argv[:-1], str(output)]
    env = clean_env(CDRHOUSE_DATA_DIR=str(small.data_dir), TMPDIR=str(temp))
    proc = start_cdrhouse(["sql", *argv, ENDLESS], env)
    try:
        deadline = time.monotonic() + 60
        while _cpu_seconds(proc.pid) < QUERY_CPU_S:
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the query never started"
            time.sleep(0.05)
        proc.send_signal(sig)
        run = finish(proc, time.monotonic(), STOP_LIMIT_S, since=sig.name)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()

    assert run.code == 130, str(run)
    assert run.stderr == "cdrhouse: interrupted\n", str(run)
    assert run.stdout == ""
    assert list(temp.iterdir()) == []  # standard output's temp file is gone
    if output is not None:
        assert output.read_bytes() == BEFORE
        assert sorted(p.name for p in tmp_path.iterdir()) == sorted([output.name, "tmp"])


def test_ctrl_c_during_a_views_rebuild_leaves_the_warehouse_as_it_was(
    small: SmallWarehouse, tmp_path: Path
) -> None:
    data_dir = tmp_path / "data"
    shutil.copytree(small.data_dir, data_dir)
    # A year of days (copies of the first): the build takes ~2 s, DuckDB's statements long
    # enough for the signal to meet one.
    for table in (data_dir / "lake").iterdir():
        first = table / f"date={START}"
        for n in range(1, VIEW_DAYS):
            if first.is_dir():
                shutil.copytree(first, table / f"date={START - dt.timedelta(n)}")
    before = (data_dir / "warehouse.duckdb").read_bytes()
    proc = start_cdrhouse(["lake", "views"], clean_env(CDRHOUSE_DATA_DIR=str(data_dir)))
    try:
        deadline = time.monotonic() + 60
        # The build's own file: DuckDB is creating the views.
        while not list(data_dir.glob(".warehouse.duckdb.*.tmp")):
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the build never started"
            time.sleep(0.002)
        time.sleep(0.3)
        assert proc.poll() is None, proc.communicate()
        proc.send_signal(signal.SIGINT)
        run = finish(proc, time.monotonic(), STOP_LIMIT_S, since="Ctrl-C")
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()

    assert run.code == 130, str(run)
    # (The copy's views were built over the original's lake: it says it rebuilds them first.)
    assert run.stderr.splitlines()[-1] == "cdrhouse: interrupted", str(run)
    assert "Traceback" not in run.stderr
    assert (data_dir / "warehouse.duckdb").read_bytes() == before
    assert sorted(p.name for p in data_dir.iterdir()) == ["lake", "warehouse.duckdb"]
