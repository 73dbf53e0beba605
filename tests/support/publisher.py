"""A second process publishing into a lake (`warehouse.lake.Lake.publishing`), driven over
its stdin: the other run of a day, for the tests of what two runs publishing at once leave."""

from __future__ import annotations

import contextlib
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from tests.support.processes import stop_process
from warehouse.stores import TMP_DIR

# A process that publishes a users family into the lake whenever it reads a line: `<n>` (the
# reading's number) or `hold` (it enters `Lake.publishing` and stays until the next line).
_PUBLISHER = """
import datetime as dt, signal, sys
# Ctrl-C raises, even where the test's own process was started with SIGINT ignored; set before
# polars and Arrow load, as a command's handler is.
signal.signal(signal.SIGINT, signal.default_int_handler)
from warehouse.lake import Lake
from warehouse.snapshots import users_frames

lake, key, who = Lake(sys.argv[1]), sys.argv[2], sys.argv[3]
at = dt.datetime(2026, 11, 20, 1, tzinfo=dt.UTC)
print("ready", flush=True)
for line in sys.stdin:
    word = line.strip()
    if word == "hold":
        with lake.publishing(key):
            print("held", flush=True)
            sys.stdin.readline()
    else:
        n = int(word)
        users = [{"id": f"{who}-{n}-{i}", "teams": [{"id": n, "name": who}],
                  "queues": [{"id": n, "name": who}], "skills": [{"id": n, "name": who}]}
                 for i in range(200)]
        lake.write_together(key, users_frames(users, [], at), source="test")
    print("done", flush=True)
"""


def publisher(root: Path, key: str, who: str) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [sys.executable, "-c", _PUBLISHER, str(root), key, who],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "ready"
    return proc


def say(proc: subprocess.Popen[str], word: str) -> None:
    assert proc.stdin is not None
    proc.stdin.write(f"{word}\n")
    proc.stdin.flush()


def stop(*procs: subprocess.Popen[str]) -> None:
    """Killed at once (a holder holds SIGTERM while it publishes), then reaped and closed."""
    for proc in procs:
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        stop_process(proc)


def wait_until_spooled(
    root: Path, key: str, alive: Callable[[], bool], files: int = 1, timeout_s: float = 120
) -> None:
    """Until a writer into the lake at `root` has `files` temp files of `key` (its written
    files, before they are published); `alive` (the writer's thread or process) must hold all
    along: a writer that ended without waiting fails here at once."""
    deadline = time.monotonic() + timeout_s
    while len(list((root / TMP_DIR).glob(f"*.{key}.*"))) < files:
        assert alive(), "the writer ended before its files were written and held"
        assert time.monotonic() < deadline
        time.sleep(0.02)


def heard(proc: subprocess.Popen[str]) -> str:
    assert proc.stdout is not None
    return proc.stdout.readline().strip()
