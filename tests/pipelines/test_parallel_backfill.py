"""3 partitions backfilled by 3 parallel processes while an analyst holds DuckDB open.

The warehouse file only holds views over the lake and is replaced by rename, so neither side
takes a lock the other needs: the runs succeed, the analyst's open connection keeps answering
(and sees the new partitions through its views' globs), and the result is exact.
"""

import os
import subprocess
import sys
import textwrap
from datetime import timedelta
from pathlib import Path

import duckdb

from pipelines.cli import main
from tests.pipelines.conftest import TODAY, ServedSandbox

REPO_ROOT = Path(__file__).resolve().parents[2]
SEED_DAY = TODAY - timedelta(days=9)
DAYS = [TODAY - timedelta(days=n) for n in (8, 7, 6)]

# The analyst: opens the file read-write (the worst case), answers a query per input line.
ANALYST = textwrap.dedent(
    """
    import sys, duckdb
    con = duckdb.connect(sys.argv[1])
    print(con.execute("select count(*) from cdrs").fetchone()[0], flush=True)
    for _ in sys.stdin:
        print(con.execute("select count(*) from cdrs").fetchone()[0], flush=True)
    """
)


def test_parallel_backfill_with_an_open_analyst_connection(
    clean_faults: ServedSandbox, tmp_path
) -> None:
    served = clean_faults
    env = served.env(tmp_path)
    seed_argv = ["ingest", "--start", SEED_DAY.isoformat(), "--end", DAYS[0].isoformat()]
    assert main([*seed_argv, "--no-snapshots"], env=env) == 0
    seeded = served.api_total(SEED_DAY)

    analyst = subprocess.Popen(
        [sys.executable, "-c", ANALYST, str(tmp_path / "warehouse.duckdb")],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert analyst.stdout is not None
        assert analyst.stdin is not None
        assert int(analyst.stdout.readline()) == seeded

        child_env = {**os.environ, **env, "PYTHONPATH": str(REPO_ROOT)}
        child_env.pop("DAGSTER_HOME", None)
        runs = [
            subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "pipelines.cli",
                    "ingest",
                    "--no-snapshots",
                    "--start",
                    day.isoformat(),
                    "--end",
                    (day + timedelta(days=1)).isoformat(),
                ],
                env=child_env,
                cwd=tmp_path,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
            )
            for day in DAYS
        ]
        outputs = [run.communicate(timeout=240)[0] for run in runs]
        for run, output in zip(runs, outputs, strict=True):
            assert run.returncode == 0, output

        # The analyst's connection, open all along, still answers and sees all 4 days.
        analyst.stdin.write("again\n")
        analyst.stdin.flush()
        expected = seeded + sum(served.api_total(day) for day in DAYS)
        assert int(analyst.stdout.readline()) == expected
    finally:
        # Closing its stdin ends the analyst's loop; then release our pipe ends too.
        analyst.communicate(timeout=30)
    with duckdb.connect(str(tmp_path / "warehouse.duckdb"), read_only=True) as con:
        rows = dict(
            con.execute("select date::varchar, count(distinct id) from cdrs group by 1").fetchall()
        )
        row = con.execute("select count(*) - count(distinct id) from cdrs").fetchone()
    assert row is not None
    (dupes,) = row
    assert dupes == 0
    for day in [SEED_DAY, *DAYS]:
        assert rows[day.isoformat()] == served.api_total(day)
    # No temp file left by any of the writers.
    assert list((tmp_path / "lake").glob("_tmp/*")) == []
