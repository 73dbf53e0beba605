"""`cdrhouse` as a user runs it: its own process, its exit status, its output, its wall time.

For setup errors, which must fail within 10 s: a run still going at the limit is killed and the
test fails with that, instead of waiting minutes for retries to run out.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.paths import REPO_ROOT
from tests.support.privacy import with_raw_numbers

# A setup error must end `cdrhouse ingest` within this (a behavioural bound, not a benchmark).
SETUP_ERROR_LIMIT_S = 10.0
# Inherited variables that would point the command at another cluster, instance, lake or account.
SCRUBBED_PREFIXES = ("CC_API_", "CDRHOUSE_", "DAGSTER_", "AWS_", "PG")


@dataclass(frozen=True)
class CliRun:
    code: int
    stdout: str
    stderr: str
    seconds: float

    @property
    def lines(self) -> list[str]:
        """Every non-blank line the command printed, stdout then stderr."""
        return [line for line in (self.stdout + self.stderr).splitlines() if line.strip()]

    def __str__(self) -> str:
        return f"exit {self.code} after {self.seconds:.1f} s\n{self.stdout}{self.stderr}"


def clean_env(**values: str) -> dict[str, str]:
    """This process's environment without anything cdrhouse, Dagster, AWS or PostgreSQL, but
    `CDRHOUSE_PHONE_NUMBERS=raw` (tests.support.privacy), then `values`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(SCRUBBED_PREFIXES)}
    return with_raw_numbers(env | values)


def start_cdrhouse(argv: Sequence[str], env: Mapping[str, str]) -> subprocess.Popen[str]:
    """`python -m pipelines.cli <argv>` in its own process group (killed whole on a timeout)."""
    return subprocess.Popen(
        [sys.executable, "-m", "pipelines.cli", *argv],
        env=dict(env),
        cwd=REPO_ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


def finish(
    proc: subprocess.Popen[str],
    started: float,
    limit_s: float = SETUP_ERROR_LIMIT_S,
    since: str = "it started",
) -> CliRun:
    """Wait for `proc` until `started + limit_s` (`since` says what `started` is); kill it and
    fail the test if it is still going."""
    try:
        out, err = proc.communicate(timeout=max(0.0, started + limit_s - time.monotonic()))
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        tail = "\n".join((out + err).strip().splitlines()[-6:])
        pytest.fail(
            f"`cdrhouse {' '.join(map(str, proc.args[3:]))}` was still running {limit_s:.0f} s "  # type: ignore[index]
            f"after {since} (a setup error must fail within {limit_s:.0f} s); killed it. "
            f"Its last lines:\n{tail}"
        )
    return CliRun(proc.returncode, out, err, time.monotonic() - started)


def run_cdrhouse(
    argv: Sequence[str], env: Mapping[str, str], limit_s: float = SETUP_ERROR_LIMIT_S
) -> CliRun:
    started = time.monotonic()
    return finish(start_cdrhouse(argv, env), started, limit_s)


def assert_one_line_setup_error(run: CliRun, *needles: str) -> str:
    """Exit 2 within the limit, exactly one line (on stderr), no traceback; returns the line."""
    assert "Traceback" not in run.stdout + run.stderr, str(run)
    assert run.code == 2, str(run)
    assert len(run.lines) == 1, str(run)
    assert run.seconds < SETUP_ERROR_LIMIT_S, str(run)
    line = run.lines[0]
    assert line.startswith("cdrhouse: error: "), str(run)
    for needle in needles:
        assert needle in line, f"{needle!r} not in: {line}"
    return line


def tree(path: Path) -> list[str]:
    """Every file and directory under `path` (relative, sorted); [] when it does not exist."""
    if not path.exists():
        return []
    return sorted(str(p.relative_to(path)) for p in path.rglob("*"))
