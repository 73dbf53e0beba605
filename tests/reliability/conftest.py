"""Shared rig of the reliability suite: one served sandbox, the real pipeline, ground truth.

Every fault case runs the real Dagster job (`cdr_daily`, the one the UI, the schedule and
`cdrhouse ingest` run) against a sandbox on a loopback port with one fault knob on, then
compares the warehouse with `Sandbox.truth_cdrs` for the window: the same ids, no duplicate,
every cost at its latest revision. Pages are small (10 CDRs) so every day takes ~50 requests.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import date
from decimal import Decimal
from pathlib import Path
from typing import Any

import dagster as dg
import pytest

from connectors.sandbox import Sandbox, SandboxConfig
from connectors.sandbox.config import ALL_SCOPES, DEFAULT_API_KEY
from pipelines.definitions import CDR_JOB
from pipelines.partitions import partition_window
from tests.support.clock import SessionClock
from tests.support.lake import warehouse_rows
from tests.support.paths import REPO_ROOT
from tests.support.privacy import with_raw_numbers
from tests.support.processes import stop_process
from tests.support.served import ServedSandbox, serve_sandbox

SEED = 23
CDRS_PER_DAY = 300
PAGE_SIZE = 10
# Partitions and sandbox data start this many days before the session's today.
HISTORY_DAYS = 12
CDRS_PATH = "/api/v4/reporting/cdrs"

# A key that must never show up anywhere (it lacks the balance scope, so the snapshot run fails).
SECRET_KEY = "sk-RELIABILITY-7c1e9a52d4b8f036"
NO_CDR_SCOPE_KEY = "rel-key-without-cdr-scope"
KEYS = {
    DEFAULT_API_KEY: ALL_SCOPES,
    SECRET_KEY: ALL_SCOPES - {"billing.balance.read"},
    NO_CDR_SCOPE_KEY: ALL_SCOPES - {"reporting.cdrs.read"},
}


@dataclass
class Ledger:
    """Figures for the suite's summary line (printed at the end of the session)."""

    faults: set[str] = field(default_factory=set)
    bad_inputs: set[str] = field(default_factory=set)
    compared: int = 0
    lost: int = 0
    duplicated: int = 0
    stale: int = 0
    key_hits: int = 0
    key_places: int = 0


LEDGER = Ledger()
LEDGER_KEY = "cdrhouse_reliability_ledger"


def summary_line(ledger: Ledger) -> str:
    return (
        f"reliability: {len(ledger.faults)} faults, {len(ledger.bad_inputs)} bad inputs; "
        f"{ledger.compared} CDRs compared with the sandbox truth: lost {ledger.lost}, "
        f"duplicated {ledger.duplicated}, stale cost {ledger.stale}; "
        f"API key found {ledger.key_hits} times in {ledger.key_places} places searched"
    )


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if LEDGER.faults or LEDGER.bad_inputs:
        terminalreporter.write_line(summary_line(LEDGER))


def pytest_sessionfinish(session: pytest.Session) -> None:
    # Under pytest-xdist a worker's summary is not shown: hand the figures to the controller
    # (tests/conftest.py merges and prints them).
    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is not None and (LEDGER.faults or LEDGER.bad_inputs):
        workeroutput[LEDGER_KEY] = {
            **{k: v for k, v in vars(LEDGER).items() if not isinstance(v, set)},
            "faults": sorted(LEDGER.faults),
            "bad_inputs": sorted(LEDGER.bad_inputs),
        }


@pytest.fixture(scope="session")
def served_session(clock: SessionClock) -> Iterator[ServedSandbox]:
    config = SandboxConfig(
        seed=SEED,
        cdrs_per_day=CDRS_PER_DAY,
        start_date=clock.days_ago(HISTORY_DAYS),
        days=HISTORY_DAYS + 1,
        api_keys=KEYS,
    )
    # Small pages (~50 requests a day) and patient retries: the faults are the test.
    with serve_sandbox(
        config, clock, page_size=PAGE_SIZE, concurrency=4, max_attempts=12, max_retry_s=60.0
    ) as served:
        yield served


@pytest.fixture
def served(served_session: ServedSandbox) -> Iterator[ServedSandbox]:
    """The shared sandbox with no fault and the session's clock, restored after the test."""
    served_session.reset()
    yield served_session
    served_session.reset()


def materialize(defs: dg.Definitions, day: date) -> dg.ExecuteInProcessResult:
    """One partition of the CDR job, exactly as a backfill or the schedule runs it."""
    with dg.DagsterInstance.ephemeral() as instance:
        return defs.resolve_job_def(CDR_JOB).execute_in_process(
            partition_key=day.isoformat(), instance=instance, raise_on_error=False
        )


def assert_exact(data_dir: Path, sandbox: Sandbox, day: date, *, case: str) -> dict[str, str]:
    """The warehouse's day equals the sandbox truth now: ids, no duplicate, latest cost."""
    truth = sandbox.truth_cdrs(*partition_window(day.isoformat()))
    rows = warehouse_rows(data_dir, day)
    counts = Counter(i for i, _ in rows)
    duplicated = sum(n - 1 for n in counts.values())
    lost = len(set(truth) - set(counts))
    extra = set(counts) - set(truth)
    stale = sum(1 for i, c in rows if i in truth and Decimal(c) != Decimal(truth[i]))
    LEDGER.faults.add(case.partition(":")[0])
    LEDGER.compared += len(truth)
    LEDGER.lost += lost
    LEDGER.duplicated += duplicated
    LEDGER.stale += stale
    assert truth, "the window must not be empty"
    assert (lost, duplicated, len(extra), stale) == (0, 0, 0, 0), (
        f"{case}: lost={lost} duplicated={duplicated} unexpected={len(extra)} stale={stale}"
    )
    return truth


def run_ok(defs: dg.Definitions, day: date) -> dg.ExecuteInProcessResult:
    result = materialize(defs, day)
    # Warnings (e.g. CDR users missing from a users snapshot never taken here) do not count.
    failed = [
        c.check_name
        for c in result.get_asset_check_evaluations()
        if not c.passed and c.severity == dg.AssetCheckSeverity.ERROR
    ]
    assert result.success, [e.message for e in result.all_events if e.is_step_failure]
    assert failed == []
    return result


# --- a pre-imported worker process: forks real pipeline processes in milliseconds -------------


class Forker:
    """A Python process that imported the pipeline once and forks one child per job.

    Children are real processes running `run_ingest` (the CLI's code path), so a test can
    SIGKILL one at any moment, or run two at once, without paying Dagster's import each time.
    """

    def __init__(self) -> None:
        env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "PYTHONWARNINGS": "ignore"}
        env = with_raw_numbers(env)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.reliability._forker"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            cwd=REPO_ROOT,
            env=env,
        )
        assert self._read()["ready"]

    def _read(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError("the forker process died")
        message: dict[str, Any] = json.loads(line)
        return message

    def start(self, jobs: Sequence[dict[str, Any]]) -> list[int]:
        """Fork one child per job; returns their pids at once."""
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps({"jobs": list(jobs)}) + "\n")
        self.proc.stdin.flush()
        pids: list[int] = self._read()["pids"]
        return pids

    def wait(self) -> list[dict[str, Any]]:
        """Exit status (negative = killed by that signal) and result of every child."""
        children: list[dict[str, Any]] = self._read()["children"]
        return children

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()  # the forker exits at the end of its input
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=60)
        stop_process(self.proc)


@pytest.fixture(scope="session")
def forker() -> Iterator[Forker]:
    worker = Forker()
    yield worker
    worker.close()


def job(
    served: ServedSandbox, data_dir: Path, days: Sequence[date], **extra: Any
) -> dict[str, Any]:
    """A forker job: ingest `days` with the suite's resource settings (`served.defs()`'s)."""
    return {
        "base_url": served.base_url,
        "api_key": DEFAULT_API_KEY,
        "data_dir": str(data_dir),
        "start_date": served.first_day.isoformat(),
        "days": [d.isoformat() for d in days],
        "resource": dict(served.resource_defaults),
        **extra,
    }
