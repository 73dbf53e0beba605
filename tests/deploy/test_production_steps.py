"""The README's production steps, run as written, reach a successful run seen by the webserver.

The commands come from README.md itself: every fenced block of "Running in production" marked
`<!-- production-step: NAME -->`, which must be, in this order, the PostgreSQL role and database,
the bucket, `dagster instance migrate`, the environment, and the code server, webserver and
daemon (started with the shipped pipelines/deploy/workspace.yaml). So the doc and this test
cannot drift apart. Against the suite's real services (PostgreSQL, moto's S3 server, the API
served over HTTP), only what is site-specific changes, and only through what the README names:

- step 1 runs as the cluster's superuser through the libpq variables the README names (`PG*`);
- step 4's variables are taken as written, except those naming this machine's servers and
  directories (`SITE_SPECIFIC`, each of which the block must export), plus the AWS credentials
  and endpoint of the standard chain;
- the processes listen on loopback and a free port instead of `0.0.0.0` and port 3000.

Then a one-day backfill is launched over GraphQL, as the UI launches one; the daemon queues its
run, the code server runs it, and the webserver reports it successful with its blocking row
count check passed, and the day's objects are in the README's bucket.
"""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from pipelines.checks import RAW_CDRS, ROW_COUNT_CHECK
from tests.deploy._services import MotoS3, Postgres
from tests.deploy.conftest import ServedApi
from tests.pipelines._dagster_dev import (
    DAEMON_TICK_DIR,
    DAEMON_TICK_S,
    LAUNCH_BACKFILL,
    DagsterDev,
)
from tests.support.paths import REPO_ROOT
from tests.support.ports import free_port
from tests.support.processes import stop_process

pytestmark = pytest.mark.timeout(900)
README = REPO_ROOT / "README.md"
STEPS = (
    "postgres",
    "bucket",
    "migrate",
    "environment",
    "code-server",
    "code-server-ready",
    "webserver",
    "daemon",
)
# Step 4's variables that name this machine's servers and directories: the test's values win.
SITE_SPECIFIC = (
    "DAGSTER_HOME",
    "DAGSTER_PG_HOST",
    "DAGSTER_PG_PORT",
    "CDRHOUSE_CODE_SERVER_HOST",
    "CDRHOUSE_CODE_SERVER_PORT",
    "CC_API_BASE_URL",
    "CC_API_KEY",
    "CDRHOUSE_DATA_DIR",
)
STARTUP_TIMEOUT_S = 300.0
RUN_TIMEOUT_S = 420.0
STEP_TIMEOUT_S = 180.0
_SCRUBBED = ("CC_API_", "CDRHOUSE_", "DAGSTER_", "AWS_", "PG")

RUNS_QUERY = """
query Runs($backfill: String!) {
  runsOrError(filter: {tags: [{key: "dagster/backfill", value: $backfill}]}) {
    ... on Runs {
      results { runId status assetMaterializations { partition assetKey { path } } }
    }
  }
}
"""
LOCATIONS_QUERY = """
{ workspaceOrError { ... on Workspace { locationEntries {
  name loadStatus locationOrLoadError { __typename }
} } } }
"""
DAEMONS_QUERY = (
    "{ instance { daemonHealth { allDaemonStatuses { daemonType healthy required } } } }"
)


def readme_steps(text: str) -> dict[str, str]:
    """The marked blocks of the production section, by name, in the README's order."""
    section = text.split("\n## Running in production\n", 1)[1].split("\n## ", 1)[0]
    found = re.findall(
        r"<!-- production-step: ([a-z-]+) -->\n```bash\n(.*?)\n```", section, flags=re.DOTALL
    )
    names = [name for name, _ in found]
    assert names == list(STEPS), f"README production steps: {names}, expected {list(STEPS)}"
    return dict(found)


def exported(block: str) -> dict[str, str]:
    """`export NAME=value ...` lines (comments allowed) as written; values are not expanded."""
    values: dict[str, str] = {}
    for line in block.splitlines():
        tokens = shlex.split(line, comments=True)
        if not tokens:
            continue
        assert tokens[0] == "export", f"not an export line: {line}"
        for token in tokens[1:]:
            name, sep, value = token.partition("=")
            assert sep, token
            assert re.fullmatch(r"[A-Z][A-Z0-9_]*", name), token
            values[name] = value
    return values


def test_the_readme_lists_the_production_steps_in_order() -> None:
    steps = readme_steps(README.read_text())
    env = exported(steps["environment"])
    assert set(SITE_SPECIFIC) <= set(env), sorted(set(SITE_SPECIFIC) - set(env))
    # The role, password and database of step 1 are the ones step 4 gives Dagster.
    assert f"CREATE ROLE {env['DAGSTER_PG_USERNAME']} LOGIN" in steps["postgres"]
    assert f"PASSWORD '{env['DAGSTER_PG_PASSWORD']}'" in steps["postgres"]
    assert f"CREATE DATABASE {env['DAGSTER_PG_DB']} OWNER" in steps["postgres"]
    # The bucket of step 2 is the lake's; the processes read the shipped files.
    bucket = env["CDRHOUSE_LAKE_URI"].removeprefix("s3://").split("/")[0]
    assert f'"{bucket}"' in steps["bucket"]
    assert "pipelines/deploy/dagster.yaml" in steps["migrate"]
    for name in ("webserver", "daemon"):
        assert "-w pipelines/deploy/workspace.yaml" in steps[name]


@dataclass
class Deployment:
    """The three processes of step 5, and how to reach the webserver."""

    web: DagsterDev
    logs: dict[str, Path]
    env: dict[str, str]

    def log_tails(self, lines: int = 40) -> str:
        parts = []
        for name, path in self.logs.items():
            text = path.read_text(errors="replace") if path.exists() else ""
            parts.append(f"--- {name}\n" + "\n".join(text.splitlines()[-lines:]))
        return "\n".join(parts)


def _run_step(
    name: str,
    block: str,
    env: Mapping[str, str],
    workdir: Path,
    timeout_s: float = STEP_TIMEOUT_S,
) -> None:
    done = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", block],
        cwd=REPO_ROOT,
        env=dict(env),
        capture_output=True,
        text=True,
        timeout=timeout_s,
        check=False,
    )
    (workdir / f"{name}.log").write_text(done.stdout + done.stderr)
    assert done.returncode == 0, f"step {name} failed ({done.returncode}):\n{block}\n{done.stderr}"


def _start(block: str, env: Mapping[str, str], log: Path) -> subprocess.Popen[bytes]:
    with log.open("wb") as out:
        return subprocess.Popen(
            ["bash", "-euo", "pipefail", "-c", f"exec {block}"],
            cwd=REPO_ROOT,
            env=dict(env),
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own group: the runs it spawns stop with it
        )


def _stop(proc: subprocess.Popen[bytes]) -> None:
    stop_process(proc, group=True, grace_s=20)


def _wait_for(
    what: str,
    ready: Callable[[], bool],
    procs: Mapping[str, subprocess.Popen[bytes]],
    d: Deployment,
) -> None:
    deadline = time.monotonic() + STARTUP_TIMEOUT_S
    while time.monotonic() < deadline:
        for name, proc in procs.items():
            if proc.poll() is not None:
                raise AssertionError(f"{name} exited with {proc.returncode}\n{d.log_tails()}")
        with contextlib.suppress(httpx.HTTPError):
            if ready():
                return
        time.sleep(1.0)
    raise AssertionError(f"{what} not reached in {STARTUP_TIMEOUT_S:.0f}s\n{d.log_tails()}")


@pytest.fixture(scope="module")
def deployment(
    tmp_path_factory: pytest.TempPathFactory,
    postgres: Postgres,
    s3: MotoS3,
    served_sandbox: ServedApi,
) -> Iterator[Deployment]:
    workdir = tmp_path_factory.mktemp("production_steps")
    steps = readme_steps(README.read_text())
    web_port, code_port = free_port(), free_port()
    # Listen on loopback and a free port, not on every interface and port 3000.
    for name, token in (("code-server", "-h 0.0.0.0"), ("webserver", "-h 0.0.0.0 -p 3000")):
        assert token in steps[name], (name, token)
    commands = {
        "code-server": steps["code-server"].replace("-h 0.0.0.0", "-h 127.0.0.1"),
        "webserver": steps["webserver"].replace(
            "-h 0.0.0.0 -p 3000", f"-h 127.0.0.1 -p {web_port}"
        ),
        "daemon": steps["daemon"],
    }
    base = {k: v for k, v in os.environ.items() if not k.startswith(_SCRUBBED)}
    base.update(
        # `dagster`, `dagster-webserver`, `psql` and `python` as on a host with cdrhouse installed
        PATH=os.pathsep.join(
            [str(Path(sys.executable).parent), str(postgres.bin_dir), base.get("PATH", "")]
        ),
        # The code under test is this checkout's (installed nowhere in the suite's venv); the
        # daemon ticks every 3 s, as in the other tests' deployments (DAEMON_TICK_DIR).
        PYTHONPATH=os.pathsep.join(
            filter(None, [str(REPO_ROOT), str(DAEMON_TICK_DIR), base.get("PYTHONPATH")])
        ),
        CDRHOUSE_TEST_DAEMON_TICK_S=str(DAEMON_TICK_S),
    )
    site = {
        "DAGSTER_HOME": str(workdir / "dagster_home"),
        "DAGSTER_PG_HOST": postgres.host,
        "DAGSTER_PG_PORT": str(postgres.port),
        "CDRHOUSE_CODE_SERVER_HOST": "127.0.0.1",
        "CDRHOUSE_CODE_SERVER_PORT": str(code_port),
        "CC_API_BASE_URL": served_sandbox.base_url,
        "CC_API_KEY": served_sandbox.api_key,
        "CDRHOUSE_DATA_DIR": str(workdir / "data"),
    }
    credentials = {k: v for k, v in s3.env().items() if k != "AWS_REGION"}
    env = {**base, **exported(steps["environment"]), **site, **credentials}

    # 1. As the cluster's superuser, through the libpq variables.
    admin = {
        "PGHOST": postgres.host,
        "PGPORT": str(postgres.port),
        "PGUSER": postgres.user,
        "PGPASSWORD": postgres.password,
    }
    _run_step("postgres", steps["postgres"], {**base, **admin}, workdir)
    # 2. Creating buckets takes the AWS variables of step 4.
    _run_step("bucket", steps["bucket"], env, workdir)
    # 3. The instance file and its schema.
    _run_step("migrate", steps["migrate"], env, workdir)

    logs = {name: workdir / f"{name}.out" for name in commands}
    ready_limit = STARTUP_TIMEOUT_S
    procs: dict[str, subprocess.Popen[bytes]] = {}
    web = DagsterDev(
        url=f"http://127.0.0.1:{web_port}",
        home=Path(env["DAGSTER_HOME"]),
        data_dir=Path(env["CDRHOUSE_DATA_DIR"]),
        log_path=logs["webserver"],
    )
    deployment = Deployment(web=web, logs=logs, env=env)
    try:
        procs["code-server"] = _start(commands["code-server"], env, logs["code-server"])
        # 5. Until the code server answers (the step's own loop; bounded here).
        _run_step("code-server-ready", steps["code-server-ready"], env, workdir, ready_limit)
        for name in ("webserver", "daemon"):
            procs[name] = _start(commands[name], env, logs[name])

        def serving() -> bool:
            return httpx.get(f"{web.url}/server_info", timeout=10.0).status_code == 200

        def loaded() -> bool:
            entries = web.graphql(LOCATIONS_QUERY)["workspaceOrError"].get("locationEntries")
            if [(e["name"], e["loadStatus"]) for e in entries or []] != [("cdrhouse", "LOADED")]:
                return False
            # LOADED is also said of a location that failed to load: the error is in the entry.
            error = entries[0]["locationOrLoadError"]
            assert error["__typename"] == "RepositoryLocation", f"{error}\n{deployment.log_tails()}"
            return True

        def daemons_up() -> bool:
            health = web.graphql(DAEMONS_QUERY)["instance"]["daemonHealth"]
            required = [s for s in health["allDaemonStatuses"] if s["required"]]
            return bool(required) and all(s["healthy"] for s in required)

        for what, ready in (("serving", serving), ("loaded", loaded), ("daemons", daemons_up)):
            _wait_for(what, ready, procs, deployment)
        yield deployment
    finally:
        for proc in reversed(list(procs.values())):
            _stop(proc)


def test_the_production_steps_reach_a_successful_run_in_the_webserver(
    deployment: Deployment, postgres: Postgres, s3: MotoS3, served_sandbox: ServedApi
) -> None:
    web, env = deployment.web, deployment.env
    # Step 1's role owns the instance's tables: the processes logged in as it.
    owners = postgres.query(
        env["DAGSTER_PG_DB"], "select distinct tableowner from pg_tables where tablename = 'runs'"
    )
    assert owners == [(env["DAGSTER_PG_USERNAME"],)], owners

    day = served_sandbox.days[-1].isoformat()
    launched = web.graphql(
        LAUNCH_BACKFILL,
        {
            "params": {
                "assetSelection": [{"path": [RAW_CDRS]}],
                "partitionNames": [day],
                "title": "production steps",
            }
        },
    )["launchPartitionBackfill"]
    assert launched["__typename"] == "LaunchBackfillSuccess", launched
    backfill = launched["backfillId"]
    status = web.wait_for_backfill(backfill, timeout_s=RUN_TIMEOUT_S)
    assert status in {"COMPLETED", "COMPLETED_SUCCESS"}, f"{status}\n{deployment.log_tails()}"

    # The webserver shows the run: one, successful, for the day.
    runs = web.graphql(RUNS_QUERY, {"backfill": backfill})["runsOrError"]["results"]
    assert [r["status"] for r in runs] == ["SUCCESS"], f"{runs}\n{deployment.log_tails()}"
    landed = {
        (tuple(m["assetKey"]["path"]), m["partition"]) for m in runs[0]["assetMaterializations"]
    }
    assert ((RAW_CDRS,), day) in landed, landed
    raw = web.asset_status(RAW_CDRS)
    assert day in raw.materialized
    assert raw.checks.get(ROW_COUNT_CHECK) == "SUCCEEDED", raw.checks

    # The day went to the README's bucket, under the lake's prefix.
    bucket, _, prefix = env["CDRHOUSE_LAKE_URI"].removeprefix("s3://").partition("/")
    keys = s3.keys(bucket, f"{prefix}/raw_cdrs/date={day}/")
    assert keys, s3.keys(bucket)
