"""A second process publishing into a lake (`warehouse.lake.Lake.publishing`), driven over
its stdin: the other run of a day, for the tests of what two runs publishing at once leave."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

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
    for proc in procs:
        proc.kill()
        proc.wait()
        for pipe in (proc.stdin, proc.stdout):
            if pipe is not None:
                pipe.close()


def heard(proc: subprocess.Popen[str]) -> str:
    assert proc.stdout is not None
    return proc.stdout.readline().strip()
