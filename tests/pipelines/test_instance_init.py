"""Commands started at once on a new DAGSTER_HOME: Dagster creates the home's SQLite tables as
it opens the instance, and two `cdrhouse ingest` started together on a new home failed with
"table run_tags already exists" (1 in 10 pairs). `open_instance` holds a lock meanwhile."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from tests.support.cli import clean_env
from tests.support.paths import REPO_ROOT

OPENERS = 4
# Each process imports Dagster, then waits for the go file, so that all open at once.
OPEN = """
import sys, time
from pathlib import Path
from pipelines.preflight import open_instance
import dagster
go = Path(sys.argv[1])
Path(sys.argv[3] + ".ready").touch()
while not go.exists():
    time.sleep(0.005)
with open_instance({"DAGSTER_HOME": sys.argv[2]}, Path(sys.argv[3])) as instance:
    print("runs", len(instance.get_runs(limit=1)))
"""


def test_commands_opening_a_new_home_at_once_all_open_it(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    go = tmp_path / "go"
    env = clean_env(DAGSTER_HOME=str(home))
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", OPEN, str(go), str(home), str(tmp_path / f"data{i}")],
            cwd=REPO_ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(OPENERS)
    ]
    deadline = time.monotonic() + 120
    while len(list(tmp_path.glob("*.ready"))) < OPENERS:
        assert time.monotonic() < deadline, "the openers did not start"
        assert all(p.poll() is None for p in procs), [p.communicate() for p in procs]
        time.sleep(0.05)
    go.touch()
    results = [p.communicate(timeout=120) for p in procs]
    for proc, (out, err) in zip(procs, results, strict=True):
        assert proc.returncode == 0, err[-3000:]
        assert out.strip() == "runs 0"
    assert (home / "history" / "runs.db").exists()
    # The lock is in the temp dir: the home holds Dagster's files only.
    assert not [p for p in home.rglob("*") if "lock" in p.name], sorted(home.rglob("*"))
