"""The tests' `dagster dev` runs its backfill daemon on a 3 s tick (tests/support/daemon_tick).

The hook must reach the module Dagster reads the tick from, in a fresh interpreter started as
the tests start `dagster dev`, and nothing without its variable.
"""

from __future__ import annotations

import os
import subprocess
import sys

from tests.pipelines._dagster_dev import DAEMON_TICK_DIR, DAEMON_TICK_S

READ_TICK = (
    "from dagster._daemon.backfill import execute_backfill_iteration_loop\n"
    "from dagster._daemon.controller import DEFAULT_DAEMON_INTERVAL_SECONDS\n"
    "print(DEFAULT_DAEMON_INTERVAL_SECONDS)\n"
)


def _tick(env: dict[str, str]) -> float:
    out = subprocess.run(
        [sys.executable, "-c", READ_TICK], env=env, capture_output=True, text=True, check=True
    )
    return float(out.stdout.strip())


def test_the_hook_shortens_only_the_daemon_tick_of_processes_that_ask() -> None:
    base = {k: v for k, v in os.environ.items() if k != "CDRHOUSE_TEST_DAEMON_TICK_S"}
    path = os.pathsep.join(filter(None, [str(DAEMON_TICK_DIR), base.get("PYTHONPATH")]))
    asked = {**base, "PYTHONPATH": path, "CDRHOUSE_TEST_DAEMON_TICK_S": str(DAEMON_TICK_S)}
    assert _tick(asked) == DAEMON_TICK_S
    # On the path without the variable, and the variable without the path: Dagster's own 30 s.
    assert _tick({**base, "PYTHONPATH": path}) == 30
    assert _tick({**base, "CDRHOUSE_TEST_DAEMON_TICK_S": "3"}) == 30
