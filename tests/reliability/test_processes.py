"""Process-level faults: SIGKILL mid-partition, overlapping backfills, a full disk.

Children are forked from a pre-imported process (`conftest.Forker`) and run `run_ingest`, the
`cdrhouse ingest` code path, so they can be killed at any instant or run side by side cheaply.
"""

from __future__ import annotations

import ast
import contextlib
import os
import random
import signal
import subprocess
import sys
import textwrap
import time

import pyarrow.parquet as pq
import pytest

from connectors.sandbox import FaultConfig
from pipelines.partitions import partition_window
from tests.reliability.conftest import CDRS_PATH, LEDGER, Forker, assert_exact, job, run_ok
from tests.support.lake import lake_files, tmp_files
from tests.support.processes import stop_process
from tests.support.served import ServedSandbox

KILL_SEEDS = range(10)


def _cdr_requests(served: ServedSandbox) -> int:
    """CDR list requests the sandbox has received (counted on arrival, before it answers)."""
    return served.sandbox.counters.get(CDRS_PATH, 0)


@pytest.mark.slow
def test_sigkill_at_a_random_point_then_rerun_is_exact(
    served: ServedSandbox, forker: Forker, tmp_path
) -> None:
    day = served.clock.days_ago(7)
    before = _cdr_requests(served)
    forker.start([job(served, tmp_path, [day])])
    (done,) = forker.wait()
    requests = _cdr_requests(served) - before
    assert done["status"] == 0, done
    assert done["result"]["success"], done
    assert_exact(tmp_path, served.sandbox, day, case="sigkill:baseline")
    assert requests >= 2

    # The kill lands at a random point of the child's *progress* (after its k-th CDR request,
    # k in 1..all), not after a random delay: how fast the machine is decides nothing, so
    # every child is killed mid-run. k = all kills it while it decodes, writes or publishes.
    killed = 0
    for seed in KILL_SEEDS:
        at = random.Random(seed).randint(1, requests)
        start = _cdr_requests(served)
        (pid,) = forker.start([job(served, tmp_path, [day])])
        deadline = time.monotonic() + 120.0
        while _cdr_requests(served) - start < at:
            assert time.monotonic() < deadline, f"child never made {at} CDR requests"
            time.sleep(0.002)
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        (child,) = forker.wait()
        killed += child["status"] == -signal.SIGKILL
        # Whatever the instant, every published partition file is whole and readable.
        for name in lake_files(tmp_path, marker=False):
            pq.read_metadata(tmp_path / "lake" / name)
        assert_exact(tmp_path, served.sandbox, day, case="sigkill:before-rerun")
        run_ok(served.defs(tmp_path), day)
        assert_exact(tmp_path, served.sandbox, day, case="sigkill:rerun")
    assert killed == len(KILL_SEEDS), f"only {killed} of {len(KILL_SEEDS)} children killed mid-run"


ANALYST = textwrap.dedent(
    """
    import sys, duckdb
    con = duckdb.connect(sys.argv[1])  # read-write: the worst case for a writer
    for _ in sys.stdin:
        print(con.execute("select count(*), count(distinct id) from cdrs").fetchone(), flush=True)
    """
)


def _counts(answer: str) -> tuple[int, int]:
    """The analyst's `(count(*), count(distinct id))` line."""
    rows, distinct = ast.literal_eval(answer)
    return int(rows), int(distinct)


def test_overlapping_backfills_with_an_analyst_connection_open(
    served: ServedSandbox, forker: Forker, tmp_path
) -> None:
    """Two backfills of the same days and one of another day, at once, under 5xx faults,
    while an analyst holds `warehouse.duckdb` open read-write and keeps querying it."""
    days = [served.clock.days_ago(3), served.clock.days_ago(2)]
    other_day = served.clock.days_ago(6)
    seed_day = served.clock.days_ago(10)
    run_ok(served.defs(tmp_path), seed_day)
    seeded = len(served.sandbox.truth_cdrs(*partition_window(seed_day.isoformat())))
    analyst = subprocess.Popen(
        [sys.executable, "-c", ANALYST, str(tmp_path / "warehouse.duckdb")],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    stdin, stdout = analyst.stdin, analyst.stdout
    assert stdin is not None
    assert stdout is not None

    def ask() -> str:
        stdin.write("?\n")
        stdin.flush()
        return stdout.readline().strip()

    try:
        before = ask()
        served.sandbox.faults = FaultConfig(error_5xx_rate=0.2, paths=(CDRS_PATH,))
        start = _cdr_requests(served)
        forker.start(
            [
                job(served, tmp_path, days),
                job(served, tmp_path, days),
                job(served, tmp_path, [other_day]),
            ]
        )
        # The "during" read starts once the writers are at work (they have asked for CDRs) ...
        deadline = time.monotonic() + 120.0
        while _cdr_requests(served) - start < 3:
            assert time.monotonic() < deadline, "the backfills never reached the API"
            time.sleep(0.01)
        during = ask()
        answered_at = _cdr_requests(served)
        children = forker.wait()
        after = ask()
    finally:
        stdin.close()  # the analyst exits at the end of its input
        with contextlib.suppress(subprocess.TimeoutExpired):
            analyst.wait(timeout=60)
        stop_process(analyst)  # closes stdout too
    # ... and ended before they did: they kept asking for CDRs after it had answered.
    assert _cdr_requests(served) > answered_at, "the read did not overlap the backfills"
    for child in children:
        assert child["status"] == 0, child
        # The whole output: a repr of `child` is cut before the line that says why.
        assert child["result"]["success"], child["result"].get("output") or child["result"]
    served.sandbox.faults = FaultConfig()
    total = 0
    for day in [seed_day, other_day, *days]:
        total += len(assert_exact(tmp_path, served.sandbox, day, case="overlapping-backfills"))
    LEDGER.faults.add("analyst-connection-open")
    assert before == f"({seeded}, {seeded})"
    assert during.startswith("(")
    # Mid-way the analyst sees whole partitions only: no duplicate, nothing of the seed lost.
    rows, distinct = _counts(during)
    assert rows == distinct
    assert seeded <= rows <= total
    assert after == f"({total}, {total})"
    assert tmp_files(tmp_path) == []


def test_full_disk_fails_cleanly_and_keeps_the_previous_partition(
    served: ServedSandbox, forker: Forker, tmp_path
) -> None:
    day = served.clock.days_ago(11)
    run_ok(served.defs(tmp_path), day)
    before = lake_files(tmp_path)
    raw = before[f"raw_cdrs/date={day.isoformat()}/part-0.parquet"]
    # Files may grow to half the day's raw partition: the rewrite of that partition hits
    # "disk full" (EFBIG under RLIMIT_FSIZE, the same failure path as ENOSPC) half-way.
    forker.start([job(served, tmp_path, [day], fsize=len(raw) // 2)])
    (child,) = forker.wait()
    assert child["status"] == 0, child
    result = child["result"]
    assert result["success"] is False
    failure = result["runs"][0]["failure"]
    assert "File too large" in failure, failure
    assert "Traceback" not in failure
    # The previous partition is whole, byte for byte, and no temp file is left behind.
    assert lake_files(tmp_path) == before
    assert tmp_files(tmp_path) == []
    assert_exact(tmp_path, served.sandbox, day, case="full-disk")
