"""The 2026 layout: one autoloaded folder per concern, nothing read from the environment at import.

The import check runs in a fresh interpreter: in this process the modules are long imported.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import dagster as dg
import pytest

import pipelines.defs
from pipelines.definitions import CONCERNS, defs, defs_from_env

CONCERN_FOLDERS = {"cdrs", "snapshots", "aggregates", "report", "freshness", "automation"}

_IMPORT_THEN_LOAD = """
import importlib, json, pkgutil

import pipelines.definitions
import pipelines.defs
from pipelines.settings import SettingsError

imported = ["pipelines.definitions"]
for module in pkgutil.walk_packages(pipelines.defs.__path__, "pipelines.defs."):
    importlib.import_module(module.name)
    imported.append(module.name)

loaders = {"pipelines.definitions": pipelines.definitions.defs}
for name in imported:
    if name.endswith(".definitions") and name != "pipelines.definitions":
        loaders[name] = importlib.import_module(name).defs
errors = {}
for name, load in loaders.items():
    try:
        load()
        errors[name] = None
    except SettingsError as exc:
        errors[name] = str(exc)
print(json.dumps({"imported": imported, "errors": errors}))
"""


def test_imports_read_no_environment_and_loading_does(tmp_path: Path) -> None:
    # A start date no load can accept: only reading the environment can trip on it.
    env = {**os.environ, "CDRHOUSE_START_DATE": "not-a-date", "CDRHOUSE_DATA_DIR": str(tmp_path)}
    proc = subprocess.run(
        [sys.executable, "-c", _IMPORT_THEN_LOAD],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    found = json.loads(proc.stdout.strip().splitlines()[-1])
    imported = set(found["imported"])
    for concern in CONCERN_FOLDERS:
        assert f"pipelines.defs.{concern}.definitions" in imported, concern
    # Every entry point, the root's and each folder's, fails when loaded, naming the variable.
    errors = found["errors"]
    assert set(errors) == {"pipelines.definitions"} | {
        f"pipelines.defs.{c}.definitions" for c in CONCERN_FOLDERS
    }
    for name, error in errors.items():
        assert error is not None, f"{name} loaded with CDRHOUSE_START_DATE=not-a-date"
        assert error.startswith("CDRHOUSE_START_DATE='not-a-date'"), (name, error)


def test_the_defs_folder_holds_exactly_the_concerns() -> None:
    folder = Path(pipelines.defs.__file__).parent
    found = {p.name for p in folder.iterdir() if p.is_dir() and p.name != "__pycache__"}
    assert found == CONCERN_FOLDERS
    assert {p.name for p in folder.iterdir() if p.is_file()} == {"__init__.py"}
    # build_defs merges one builder per folder.
    assert {b.__module__ for b in CONCERNS} == {
        f"pipelines.defs.{c}.definitions" for c in CONCERN_FOLDERS
    }


def _inventory(defs_: dg.Definitions) -> dict[str, list[str]]:
    repo = defs_.get_repository_def()
    graph = repo.asset_graph
    return {
        "assets": sorted(k.to_user_string() for k in graph.get_all_asset_keys()),
        "checks": sorted(str(k) for k in graph.asset_check_keys),
        "jobs": sorted(j.name for j in repo.get_all_jobs()),
        "schedules": sorted(s.name for s in repo.schedule_defs),
        "sensors": sorted(s.name for s in repo.sensor_defs),
        "resources": sorted(repo.get_top_level_resources()),
        "cdr_daily_checks": sorted(
            str(k) for k in repo.get_job("cdr_daily").asset_layer.asset_graph.asset_check_keys
        ),
    }


def test_autoloaded_folder_and_build_defs_are_the_same_location(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CDRHOUSE_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("CDRHOUSE_START_DATE", "2026-11-01")
    loaded = defs()
    built = defs_from_env(os.environ)
    assert _inventory(loaded) == _inventory(built)
    # The environment was read at load: the first partition is the one just set.
    partitions = loaded.resolve_job_def("cdr_daily").partitions_def
    assert partitions is not None
    assert partitions.get_partition_keys()[0] == "2026-11-01"
    # A second load reads the environment again.
    monkeypatch.setenv("CDRHOUSE_START_DATE", "2026-11-10")
    again = defs().resolve_job_def("cdr_daily").partitions_def
    assert again is not None
    assert again.get_partition_keys()[0] == "2026-11-10"
