"""Start a real `dagster dev` (webserver + daemon) on loopback for UI and GraphQL tests.

The process runs against the in-process sandbox (`CC_API_BASE_URL=sandbox`), with a temporary
`DAGSTER_HOME` holding the repository's `dagster.yaml` and a
temporary data dir, so the test exercises the same instance configuration users get from
`make dev`.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import date, timedelta
from pathlib import Path
from typing import Any

import httpx

from tests.support.paths import LOCAL_INSTANCE_YAML, REPO_ROOT
from tests.support.ports import free_port
from tests.support.privacy import with_raw_numbers
from tests.support.processes import stop_process

ARTIFACTS_DIR = REPO_ROOT / ".artifacts"
# Deadlines, not waits (each wait ends when the state is reached): a loaded 2-core machine
# can take minutes to start `dagster dev` or to run a backfill.
STARTUP_TIMEOUT_S = 300.0
BACKFILL_TIMEOUT_S = 900.0
# The daemons' backfill tick (tests/support/daemon_tick/sitecustomize.py): a backfill waits
# for two ticks at least, 60 s at Dagster's own 30.
DAEMON_TICK_DIR = REPO_ROOT / "tests" / "support" / "daemon_tick"
DAEMON_TICK_S = 3.0
# `dagster dev` forwards SIGTERM to its webserver and daemon, which take a few seconds to stop.
STOP_GRACE_S = 15.0
# Variables that would point the code location at a real cluster or a stray instance.
_SCRUBBED_ENV = ("CC_API_BASE_URL", "CC_API_KEY", "DAGSTER_HOME", "CDRHOUSE_DATA_DIR")

# Few, small daily partitions (knobs read by pipelines/definitions.py): the UI test backfills
# the three oldest days, the GraphQL test the newest, so the two never touch the same partition.
DAYS = 6


def small_env(start: date) -> dict[str, str]:
    """The shared `dagster dev`'s knobs: the bundled sandbox, small days from `start`."""
    return {
        "CC_API_BASE_URL": "sandbox",  # what `make dev` sets; unset would be no source at all
        "CDRHOUSE_START_DATE": start.isoformat(),
        "CDRHOUSE_SANDBOX_CDRS_PER_DAY": "300",
    }


BACKFILL_DONE = frozenset({"COMPLETED", "COMPLETED_SUCCESS"})
BACKFILL_FAILED = frozenset({"FAILED", "COMPLETED_FAILED", "CANCELED"})

# What the UI's partitions dialog (and an automation script) sends to start a backfill.
LAUNCH_BACKFILL = """
mutation Launch($params: LaunchBackfillParams!) {
  launchPartitionBackfill(backfillParams: $params) {
    __typename
    ... on LaunchBackfillSuccess { backfillId }
    ... on PythonError { message stack }
    ... on PartitionKeysNotFoundError { message }
    ... on InvalidSubsetError { message }
    ... on UnauthorizedError { message }
  }
}
"""

BACKFILL_STATUS_QUERY = """
query BackfillStatus($id: String!) {
  partitionBackfillOrError(backfillId: $id) {
    __typename
    ... on PartitionBackfill { id status numPartitions }
    ... on PythonError { message }
    ... on BackfillNotFoundError { message }
  }
}
"""


PARTITION_KEYS_QUERY = """
query PartitionKeys($key: AssetKeyInput!) {
  assetNodeOrError(assetKey: $key) { ... on AssetNode { partitionKeys } }
}
"""

ASSET_STATUS_QUERY = """
query Partitions($key: AssetKeyInput!) {
  assetNodeOrError(assetKey: $key) {
    ... on AssetNode {
      assetPartitionStatuses {
        ... on TimePartitionStatuses { ranges { status startKey endKey } }
      }
      assetChecksOrError {
        ... on AssetChecks {
          checks { name executionForLatestMaterialization { status } }
        }
      }
    }
  }
}
"""


@dataclass(frozen=True)
class AssetStatus:
    """What the instance knows of one asset: materialized partitions, latest check results."""

    materialized: frozenset[str]
    checks: dict[str, str | None]


def _days(start_key: str, end_key: str) -> list[str]:
    start, end = date.fromisoformat(start_key), date.fromisoformat(end_key)
    return [(start + timedelta(days=i)).isoformat() for i in range((end - start).days + 1)]


@dataclass(frozen=True)
class DagsterDev:
    """A running `dagster dev`: where it answers and where its files are."""

    url: str
    home: Path
    data_dir: Path
    log_path: Path

    def graphql(self, query: str, variables: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """POST a GraphQL document, as an automation user would, and return `data`."""
        response = httpx.post(
            f"{self.url}/graphql",
            json={"query": query, "variables": dict(variables or {})},
            timeout=60.0,
        )
        response.raise_for_status()
        body: dict[str, Any] = response.json()
        assert not body.get("errors"), body["errors"]
        data: dict[str, Any] = body["data"]
        return data

    def backfill_status(self, backfill_id: str) -> str:
        result = self.graphql(BACKFILL_STATUS_QUERY, {"id": backfill_id})
        node = result["partitionBackfillOrError"]
        assert node["__typename"] == "PartitionBackfill", node
        status: str = node["status"]
        return status

    def wait_for_backfill(self, backfill_id: str, timeout_s: float = BACKFILL_TIMEOUT_S) -> str:
        """Poll until the backfill leaves REQUESTED; fail with the server log on timeout."""
        deadline = time.monotonic() + timeout_s
        status = "UNKNOWN"
        while time.monotonic() < deadline:
            status = self.backfill_status(backfill_id)
            if status in BACKFILL_DONE or status in BACKFILL_FAILED:
                return status
            time.sleep(2.0)
        raise AssertionError(
            f"backfill {backfill_id} still {status} after {timeout_s:.0f}s\n{self.log_tail()}"
        )

    def asset_status(self, key: str) -> AssetStatus:
        node = self.graphql(ASSET_STATUS_QUERY, {"key": {"path": [key]}})["assetNodeOrError"]
        ranges = node["assetPartitionStatuses"]["ranges"]
        materialized = frozenset(
            day
            for r in ranges
            if r["status"] == "MATERIALIZED"
            for day in _days(r["startKey"], r["endKey"])
        )
        checks = {
            c["name"]: (c["executionForLatestMaterialization"] or {}).get("status")
            for c in node["assetChecksOrError"]["checks"]
        }
        return AssetStatus(materialized, checks)

    def partition_keys(self, key: str) -> tuple[str, ...]:
        """The asset's partitions as the running instance sees them (its clock ends them)."""
        node = self.graphql(PARTITION_KEYS_QUERY, {"key": {"path": [key]}})["assetNodeOrError"]
        return tuple(node["partitionKeys"])

    def log_tail(self, lines: int = 60) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return "(no dagster dev log)"
        return "\n".join(text.splitlines()[-lines:])


def _environment(
    home: Path,
    data_dir: Path,
    extra: Mapping[str, str],
    base_env: Mapping[str, str] | None = None,
) -> dict[str, str]:
    if base_env is not None:
        env = dict(base_env)
    else:
        env = {k: v for k, v in os.environ.items() if k not in _SCRUBBED_ENV}
    env.update(
        DAGSTER_HOME=str(home),
        CDRHOUSE_DATA_DIR=str(data_dir),
        # Run subprocesses import the code location from the repo, whatever the cwd; the
        # daemon gets a 3 s backfill tick instead of Dagster's fixed 30 s (DAEMON_TICK_DIR).
        PYTHONPATH=os.pathsep.join(
            filter(None, [str(REPO_ROOT), str(DAEMON_TICK_DIR), env.get("PYTHONPATH")])
        ),
        CDRHOUSE_TEST_DAEMON_TICK_S=str(DAEMON_TICK_S),
        # Dagster's 60 s for a call to the code server: a run launch timed out at load ~40 (two
        # suites and a benchmark on 2 cores) and the run failed without a step failing.
        DAGSTER_GRPC_TIMEOUT_SECONDS="240",
    )
    env.update(extra)
    return with_raw_numbers(env)


def _wait_until_serving(proc: subprocess.Popen[bytes], dev: DagsterDev) -> None:
    deadline = time.monotonic() + STARTUP_TIMEOUT_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"dagster dev exited with {proc.returncode}\n{dev.log_tail()}")
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(f"{dev.url}/server_info", timeout=10.0).status_code == 200:
                return
        time.sleep(0.5)
    raise RuntimeError(f"dagster dev did not answer in {STARTUP_TIMEOUT_S:.0f}s\n{dev.log_tail()}")


def _wait_until_loaded(dev: DagsterDev) -> None:
    """The webserver answers before the code location has loaded; wait for the location too."""
    query = "{ workspaceOrError { ... on Workspace { locationEntries { loadStatus } } } }"
    deadline = time.monotonic() + STARTUP_TIMEOUT_S
    while time.monotonic() < deadline:
        entries = dev.graphql(query)["workspaceOrError"].get("locationEntries") or []
        if entries and all(e["loadStatus"] == "LOADED" for e in entries):
            return
        time.sleep(0.5)
    raise RuntimeError(f"code location did not load\n{dev.log_tail()}")


def _stop(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM the whole process group (run workers may outlive the parent), then SIGKILL."""
    stop_process(proc, group=True, grace_s=STOP_GRACE_S)


@contextlib.contextmanager
def run_dagster_dev(
    workdir: Path,
    *,
    module: str = "pipelines.definitions",
    instance_yaml: Path = LOCAL_INSTANCE_YAML,
    extra_env: Mapping[str, str] | None = None,
    base_env: Mapping[str, str] | None = None,
) -> Iterator[DagsterDev]:
    """Run `dagster dev -m MODULE` on a free loopback port until the block exits.

    The process gets `base_env` (default: ours minus `_SCRUBBED_ENV`), then `DAGSTER_HOME`
    (`workdir/dagster_home`, holding a copy of `instance_yaml`), `CDRHOUSE_DATA_DIR`
    (`workdir/data`) and `PYTHONPATH`, then `extra_env`.
    """
    home = workdir / "dagster_home"
    data_dir = workdir / "data"
    home.mkdir(parents=True, exist_ok=True)
    data_dir.mkdir(parents=True, exist_ok=True)
    (home / "dagster.yaml").write_text(instance_yaml.read_text())
    # The UI's "Join the Dagster community" modal, marked seen (the file Dagster itself writes):
    # it opened at a moment of its own, once over the partitions dialog, whose portal then
    # took its "Skip" click (a browser test timed out at 120 s).
    (home / ".nux").mkdir(exist_ok=True)
    (home / ".nux" / "nux.yaml").write_text("seen: 1\n")
    port = free_port()
    dev = DagsterDev(
        url=f"http://127.0.0.1:{port}",
        home=home,
        data_dir=data_dir,
        log_path=workdir / "dagster_dev.log",
    )
    cmd = [sys.executable, "-m", "dagster", "dev", "-m", module, "-h", "127.0.0.1", "-p", str(port)]
    with dev.log_path.open("wb") as log:
        proc = subprocess.Popen(
            cmd,
            cwd=workdir,
            env=_environment(home, data_dir, extra_env or {}, base_env),
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group, so teardown reaches every child
        )
    try:
        _wait_until_serving(proc, dev)
        _wait_until_loaded(dev)
        yield dev
    finally:
        _stop(proc)
