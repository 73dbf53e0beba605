"""`cdrhouse demo` leaves `contact_center_report` materialized in the instance at DAGSTER_HOME.

The demo runs as a user runs it (`python -m pipelines.cli demo`, small sandbox days); then the
instance is read through Dagster's GraphQL API, the one the UI reads, with the code location
loaded in its own process as the webserver loads it. The report's latest materialization must
be there, from a successful run, naming the one report file: the file the demo points at, and
the one `cdrhouse report` writes when no `--out` is given.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from pipelines.defs.report.assets import REPORT_FILE, REPORTS_DIR
from pipelines.names import REPORT_ASSET
from tests.support.paths import LOCAL_INSTANCE_YAML, REPO_ROOT

DAYS = 2
# The asset's newest materialization and the run that made it, as the asset page asks for them.
LATEST = """
query Latest($key: AssetKeyInput!) {
  assetNodeOrError(assetKey: $key) {
    __typename
    ... on AssetNode {
      assetMaterializations(limit: 1) {
        runId
        metadataEntries { label ... on PathMetadataEntry { path } ... on UrlMetadataEntry { url } }
      }
    }
  }
}
"""
RUN = """
query Run($id: ID!) { runOrError(runId: $id) { __typename ... on Run { status } } }
"""
# In a fresh interpreter with the demo's environment: the code location in a code server
# process (as `dagster-webserver` loads it), queried through the GraphQL schema the UI uses.
GRAPHQL = """
import json, sys
import dagster as dg
from dagster_graphql.test.utils import define_out_of_process_context, execute_dagster_graphql

queries = json.loads(sys.argv[1])
with dg.DagsterInstance.get() as instance:
    with define_out_of_process_context(sys.argv[2], "defs", instance) as context:
        latest = execute_dagster_graphql(context, queries["latest"], queries["variables"]).data
        node = latest["assetNodeOrError"]
        mats = node.get("assetMaterializations") or []
        run = None
        if mats:
            run = execute_dagster_graphql(context, queries["run"], {"id": mats[0]["runId"]}).data
with open(sys.argv[3], "w") as out:  # not stdout: the code server logs there
    json.dump({"latest": latest, "run": run}, out)
"""


def _env(tmp_path: Path) -> dict[str, str]:
    drop = ("CC_API_BASE_URL", "CC_API_KEY", "CDRHOUSE_LAKE_URI", "CDRHOUSE_START_DATE")
    env = {k: v for k, v in os.environ.items() if k not in drop}
    home = tmp_path / "dagster_home"
    home.mkdir()
    (home / "dagster.yaml").write_text(LOCAL_INSTANCE_YAML.read_text())  # `make demo`
    return env | {
        "PYTHONPATH": str(REPO_ROOT),
        "DAGSTER_HOME": str(home),
        "CDRHOUSE_DATA_DIR": str(tmp_path / "data"),
        "CDRHOUSE_SANDBOX_CDRS_PER_DAY": "100",
    }


def _cdrhouse(env: dict[str, str], cwd: Path, *argv: str) -> list[str]:
    done = subprocess.run(
        [sys.executable, "-m", "pipelines.cli", *argv],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout.rstrip().splitlines()


def _latest_report(env: dict[str, str], cwd: Path) -> dict[str, Any]:
    queries = {"latest": LATEST, "run": RUN, "variables": {"key": {"path": [REPORT_ASSET]}}}
    # The UI's code location, as `make dev` serves it: the sandbox, the demo's data dir.
    ui_env = env | {"CC_API_BASE_URL": "sandbox"}
    answer_file = cwd / "graphql.json"
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            GRAPHQL,
            json.dumps(queries),
            str(REPO_ROOT / "pipelines/definitions.py"),
            str(answer_file),
        ],
        env=ui_env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    answer: dict[str, Any] = json.loads(answer_file.read_text())
    return answer


def test_demo_leaves_the_report_materialized_with_the_one_report_path(tmp_path: Path) -> None:
    env = _env(tmp_path)
    data_dir = tmp_path / "data"
    the_path = data_dir.resolve() / REPORTS_DIR / REPORT_FILE
    lines = _cdrhouse(env, tmp_path, "demo", "--days", str(DAYS))

    answer = _latest_report(env, tmp_path)
    node = answer["latest"]["assetNodeOrError"]
    assert node["__typename"] == "AssetNode", node
    materializations = node["assetMaterializations"]
    assert materializations, f"{REPORT_ASSET} never materialized: {answer}"
    (latest,) = materializations
    assert answer["run"]["runOrError"]["status"] == "SUCCESS", answer["run"]
    assert lines[-1].endswith(f": {the_path}"), lines[-1]
    assert 'data-chart="volume"' in the_path.read_text()
    entries = {e["label"]: e.get("path") or e.get("url") for e in latest["metadataEntries"]}
    assert entries["path"] == str(the_path)
    assert entries["report"] == the_path.as_uri()

    # `cdrhouse report` without --out writes that same file (here from another directory).
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    before = the_path.stat().st_mtime_ns
    (line,) = _cdrhouse(env, elsewhere, "report", "--days", str(DAYS))
    assert line.endswith(f"-> {the_path}"), line
    assert the_path.stat().st_mtime_ns > before
    assert list(elsewhere.iterdir()) == []
