"""Ctrl-C (SIGINT) or a pod's SIGTERM while `cdrhouse ingest` fetches a day: the command stops
there, publishes nothing of that day, asks the API nothing more and records the run as
ended (tests/pipelines/test_views_in_runs.py: the views then show what landed before it).

Before, Dagster turned the signal into an interrupt of the step, which the step's RetryPolicy
retried 30 s later ("respect retry policy when interrupts occur"): the day was fetched again,
every later day too, and the command ended with 0 as if nothing had been asked."""

from __future__ import annotations

import os
import signal
import time
from datetime import timedelta
from pathlib import Path

import dagster as dg
import pytest

from connectors.sandbox import FaultConfig
from pipelines.cli_runs import run_ingest
from pipelines.resources import ContactCenterResource
from tests.support.cli import clean_env, finish, start_cdrhouse
from tests.support.clock import SessionClock
from tests.support.served import ServedSandbox, sandbox_defs

CDRS_PATH = "/api/v4/reporting/cdrs"
# Each answer takes this long: the day's fetch is under way for seconds.
LATENCY_MS = 1500.0
STOP_LIMIT_S = 15.0


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_a_signal_during_a_days_fetch_stops_the_ingest_there(
    clean_faults: ServedSandbox, clock: SessionClock, tmp_path: Path, sig: signal.Signals
) -> None:
    served = clean_faults
    days = [clock.days_ago(6), clock.days_ago(5), clock.days_ago(4)]
    argv = ["ingest", "--start", days[0].isoformat(), "--end", str(days[-1] + timedelta(1))]
    argv.append("--no-snapshots")  # (slow at this latency; test_views_in_runs has them)
    home = tmp_path / "home"
    home.mkdir()
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    data_dir = tmp_path / "data"
    env = clean_env(**served.env(data_dir), DAGSTER_HOME=str(home))
    asked = served.sandbox.counters.get(CDRS_PATH, 0)
    served.sandbox.faults = FaultConfig(latency_ms=LATENCY_MS)
    proc = start_cdrhouse(argv, env)
    try:
        deadline = time.monotonic() + 120
        while served.sandbox.counters.get(CDRS_PATH, 0) == asked:  # the first day's fetch
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "no CDR was ever asked for"
            time.sleep(0.02)
        proc.send_signal(sig)
        signalled = served.sandbox.counters.get(CDRS_PATH, 0)
        run = finish(proc, time.monotonic(), STOP_LIMIT_S, since=f"{sig.name}")
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()

    assert run.code == 130, str(run)
    assert run.stderr.strip().splitlines()[-1] == "cdrhouse: interrupted", str(run)
    assert "Traceback" not in run.stdout + run.stderr
    # Asked for nothing more, the requests in flight aside: sub-windows go in parallel, up to
    # the resource's concurrency, and a busy server counts some of them only after the signal
    # (`+ 4` failed once in 8 runs on two busy cores, with 7 more). A fetch that went on would
    # ask for ~8 more every 1.5 s until STOP_LIMIT_S.
    in_flight = ContactCenterResource().concurrency
    assert served.sandbox.counters.get(CDRS_PATH, 0) <= signalled + in_flight
    # Nothing of any day published.
    assert not list((data_dir / "lake").glob("*/date=*/*.parquet"))
    # The run is recorded as ended (not left STARTED for the next command to close).
    with dg.DagsterInstance.from_config(str(home)) as instance:
        statuses = {r.tags.get("dagster/partition"): r.status for r in instance.get_runs()}
    assert statuses == {days[0].isoformat(): dg.DagsterRunStatus.FAILURE}


def test_run_ingest_leaves_the_callers_signal_handlers_as_they_were(
    clock: SessionClock, tmp_path: Path
) -> None:
    """Called in a process of its own (not `cdrhouse`), `run_ingest` puts SIGINT and SIGTERM
    back: Dagster maps SIGTERM to SIGINT's handler when a run ends, which was the run loop's
    own, setting an event nobody read: SIGTERM did nothing in that process afterwards."""
    day = clock.days_ago(3)
    defs = sandbox_defs(tmp_path, day, 20)
    previous = signal.signal(signal.SIGTERM, signal.SIG_DFL)
    try:
        before = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
        with dg.DagsterInstance.ephemeral() as instance:
            report = run_ingest(
                defs, [day.isoformat()], instance=instance, data_dir=tmp_path, snapshots=False
            )
        assert report.success
        assert {s: signal.getsignal(s) for s in before} == before
    finally:
        signal.signal(signal.SIGTERM, previous)
