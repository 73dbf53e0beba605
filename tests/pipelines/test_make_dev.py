"""`make dev PORT=N`: the Dagster UI answers on port N, and nothing it prints is a warning.

The real Makefile target runs (`make dev PORT=N`), with three of its variables pointed away from
the repository: `BIN` at the venv running the suite, `STAMP` at a file newer than
pyproject.toml and requirements.lock (so `install` is up to date and installs nothing), and
`DAGSTER_HOME_DIR` at a temporary directory. Everything else is the target's own: the local
instance file, `pipelines.dev_home`, `dg dev` started in DAGSTER_HOME. The test waits until
the webserver answers, the code location has loaded and every daemon has sent a heartbeat
(the daemon's first-tick warnings come before that), then stops the process group and reads
everything it printed.
"""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.pipelines._dagster_dev import STARTUP_TIMEOUT_S, DagsterDev, _stop
from tests.support.clock import SessionClock
from tests.support.paths import REPO_ROOT
from tests.support.ports import free_port

pytestmark = pytest.mark.timeout(2 * STARTUP_TIMEOUT_S)
_SCRUBBED = ("CC_API_", "CDRHOUSE_", "DAGSTER_")
DAEMONS_QUERY = """
{ instance { daemonHealth { allDaemonStatuses { daemonType healthy required } } } }
"""
LOCATIONS_QUERY = """
{ workspaceOrError { ... on Workspace { locationEntries {
  name loadStatus locationOrLoadError { __typename }
} } } }
"""


def _wait(dev: DagsterDev, proc: subprocess.Popen[bytes], ready: str) -> None:
    """Poll until `ready` holds (a name below), or fail with the log."""
    deadline = time.monotonic() + STARTUP_TIMEOUT_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"make dev exited with {proc.returncode}\n{dev.log_tail()}")
        with contextlib.suppress(httpx.HTTPError):
            if _ready(dev, ready):
                return
        time.sleep(1.0)
    raise AssertionError(f"make dev: {ready} not reached\n{dev.log_tail()}")


def _ready(dev: DagsterDev, what: str) -> bool:
    if what == "serving":
        return httpx.get(f"{dev.url}/server_info", timeout=10.0).status_code == 200
    if what == "loaded":
        entries = dev.graphql(LOCATIONS_QUERY)["workspaceOrError"].get("locationEntries") or []
        if [(e["name"], e["loadStatus"]) for e in entries] != [("pipelines.definitions", "LOADED")]:
            return False
        # LOADED is also said of a location that failed to load: the error is in the entry.
        error = entries[0]["locationOrLoadError"]
        assert error["__typename"] == "RepositoryLocation", f"{error}\n{dev.log_tail()}"
        return True
    statuses = dev.graphql(DAEMONS_QUERY)["instance"]["daemonHealth"]["allDaemonStatuses"]
    required = [s for s in statuses if s["required"]]
    return bool(required) and all(s["healthy"] for s in required)


@pytest.fixture
def make_dev(tmp_path: Path, clock: SessionClock) -> Iterator[tuple[DagsterDev, int]]:
    port = free_port()
    stamp = tmp_path / "installed"
    stamp.touch()
    # Not a sub-make of `make test`: an inherited jobserver would make `make` warn about it.
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(_SCRUBBED) and k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL")
    }
    env.update(
        # Run subprocesses import the code location from the repo, whatever the cwd.
        PYTHONPATH=os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH")])),
        CDRHOUSE_DATA_DIR=str(tmp_path / "data"),
        CDRHOUSE_START_DATE=clock.days_ago(3).isoformat(),
        CDRHOUSE_SANDBOX_CDRS_PER_DAY="100",
    )
    dev = DagsterDev(
        url=f"http://127.0.0.1:{port}",
        home=tmp_path / "home",
        data_dir=tmp_path / "data",
        log_path=tmp_path / "make_dev.log",
    )
    argv = ["make", "--no-print-directory", "-C", str(REPO_ROOT), "dev", f"PORT={port}"]
    argv += [f"BIN={Path(sys.executable).parent}", f"STAMP={stamp}", f"DAGSTER_HOME_DIR={dev.home}"]
    with dev.log_path.open("wb") as log:
        proc = subprocess.Popen(
            argv,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group: teardown reaches every child
        )
    try:
        for ready in ("serving", "loaded", "daemons"):
            _wait(dev, proc, ready)
        yield dev, port
    finally:
        _stop(proc)


def test_make_dev_serves_on_the_given_port_without_warnings(
    make_dev: tuple[DagsterDev, int],
) -> None:
    dev, port = make_dev
    info = httpx.get(f"http://127.0.0.1:{port}/server_info", timeout=10.0).json()
    assert "dagster_webserver_version" in info, info
    # The instance is the local one, copied into DAGSTER_HOME_DIR, not a temporary one.
    assert (dev.home / "dagster.yaml").read_text() == (REPO_ROOT / "dagster.yaml").read_text()
    assert (dev.home / "history").is_dir() or (dev.home / "storage").is_dir()
    printed = dev.log_path.read_text(errors="replace")
    # The target's command, not another.
    assert "dg dev -m pipelines.definitions" in printed, printed
    warnings = [line for line in printed.splitlines() if re.search("warn", line, re.IGNORECASE)]
    assert warnings == [], "\n".join(warnings)
