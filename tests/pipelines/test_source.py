"""An explicit data source: the bundled sandbox only with `CC_API_BASE_URL=sandbox`.

With no source configured the code location still loads, but `cdrhouse ingest` refuses to start
and every API step fails at once (no step retry) with one line naming both variables; nothing
is written anywhere, not even the data dir. A production path never imports the sandbox.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import subprocess
import sys
from datetime import date, timedelta
from pathlib import Path

import dagster as dg
import pytest

from pipelines.cli import main
from pipelines.definitions import CDR_JOB, SNAPSHOT_JOB, defs_from_env
from pipelines.resources import (
    MISSING_KEY_MESSAGE,
    NOT_CONFIGURED_MESSAGE,
    SOURCE_NOT_CONFIGURED,
    ContactCenterResource,
)
from tests.pipelines.conftest import evaluate_failure_sensor
from tests.support.paths import REPO_ROOT
from tests.support.runs import run_failing_at_once

# Nothing is ever fetched here: any complete past day will do, and a fixed one never moves.
DAY = date(2026, 11, 1)
ARGV = ["ingest", "--start", DAY.isoformat(), "--end", (DAY + timedelta(days=1)).isoformat()]
SOURCE_VARS = ("CC_API_BASE_URL", "CC_API_KEY")


def _entries(path: Path) -> list[str]:
    """Everything under `path`, directories included; [] when it does not exist."""
    return sorted(str(p.relative_to(path)) for p in path.rglob("*")) if path.exists() else []


def _clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in (*SOURCE_VARS, "DAGSTER_HOME")}
    return {**env, "PYTHONPATH": str(REPO_ROOT), **extra}


# --- cdrhouse ingest: refused before anything is built ---------------------------------------


@pytest.mark.parametrize("base_url", [None, ""], ids=["unset", "empty"])
def test_ingest_without_a_source_exits_2_and_writes_nothing(
    tmp_path, capsys, base_url: str | None
) -> None:
    data_dir = tmp_path / "data"
    env = {"CDRHOUSE_DATA_DIR": str(data_dir)}
    if base_url is not None:
        env["CC_API_BASE_URL"] = base_url
    assert main(ARGV, env=env) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == f"cdrhouse: error: {NOT_CONFIGURED_MESSAGE}\n"
    assert "CC_API_BASE_URL" in captured.err
    assert "CC_API_KEY" in captured.err
    assert not data_dir.exists()
    assert _entries(tmp_path) == []


def test_ingest_with_a_url_but_no_key_names_cc_api_key(tmp_path, capsys) -> None:
    data_dir = tmp_path / "data"
    env = {"CC_API_BASE_URL": "https://acme.cc.example.com", "CDRHOUSE_DATA_DIR": str(data_dir)}
    assert main(ARGV, env=env) == 2
    err = capsys.readouterr().err
    assert err == f"cdrhouse: error: {MISSING_KEY_MESSAGE}\n"
    assert "set CC_API_KEY" in err
    assert not data_dir.exists()


def test_ingest_with_an_invalid_url_is_refused_before_any_run(tmp_path, capsys) -> None:
    data_dir = tmp_path / "data"
    env = {
        "CC_API_BASE_URL": "acme.cc.example.com",  # no scheme
        "CC_API_KEY": "k-secret-1",
        "CDRHOUSE_DATA_DIR": str(data_dir),
    }
    assert main(ARGV, env=env) == 2
    err = capsys.readouterr().err
    assert err.startswith("cdrhouse: error: invalid Contact Center API settings")
    assert len(err.splitlines()) == 1
    assert "k-secret-1" not in err
    assert not data_dir.exists()


def test_ingest_refusal_as_a_user_meets_it(tmp_path) -> None:
    """The real `cdrhouse` process: exit status 2 and one stderr line."""
    data_dir = tmp_path / "data"
    proc = subprocess.run(
        [sys.executable, "-m", "pipelines.cli", *ARGV],
        env=_clean_env(CDRHOUSE_DATA_DIR=str(data_dir)),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.splitlines() == [f"cdrhouse: error: {NOT_CONFIGURED_MESSAGE}"]
    assert _entries(tmp_path) == []


# --- the code location with no source ---------------------------------------------------------


def test_code_location_without_a_source_validates(tmp_path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "dagster", "definitions", "validate", "-m", "pipelines.definitions"],
        env=_clean_env(CDRHOUSE_DATA_DIR=str(tmp_path / "data")),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Validation successful" in proc.stdout + proc.stderr
    assert not (tmp_path / "data").exists()


@pytest.mark.parametrize(
    ("job_name", "partition"), [(CDR_JOB, DAY.isoformat()), (SNAPSHOT_JOB, None)]
)
def test_jobs_without_a_source_fail_at_once_and_write_nothing(
    tmp_path, job_name: str, partition: str | None
) -> None:
    data_dir = tmp_path / "data"
    # What a Dagster code location whose secret failed to mount sees: no CC_API_* at all.
    defs = defs_from_env(
        {
            "CDRHOUSE_DATA_DIR": str(data_dir),
            "CDRHOUSE_START_DATE": (DAY - timedelta(days=3)).isoformat(),
        }
    )
    assert defs.get_repository_def().get_job(job_name)
    with dg.DagsterInstance.ephemeral() as instance:
        # The default step retry policy (3 retries, 30 s apart) stays on: it must not apply.
        result, failures = run_failing_at_once(defs, job_name, partition, instance)
        for user in failures:
            assert user.description == NOT_CONFIGURED_MESSAGE
            assert "\n" not in user.description
            assert "CC_API_BASE_URL" in user.description
            assert "CC_API_KEY" in user.description
            assert user.metadata["error_class"].value == SOURCE_NOT_CONFIGURED
        assert not result.get_asset_materialization_events()
        # The run-failure sensor only logs this error class: no failures/<run_id>.json.
        evaluate_failure_sensor(instance, result.run_id, defs, data_dir)
    assert _entries(data_dir) == []
    assert _entries(tmp_path) == []


# --- source_id ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("resource", "expected"),
    [
        (ContactCenterResource(base_url="sandbox"), "sandbox:7"),
        (ContactCenterResource(base_url="SANDBOX", sandbox_seed=42), "sandbox:42"),
        (
            ContactCenterResource(base_url="https://Acme.CC.Example.com/", api_key="k-1"),
            "acme.cc.example.com",
        ),
        (
            ContactCenterResource(base_url="http://127.0.0.1:54321", api_key="k-1"),
            "127.0.0.1:54321",
        ),
    ],
    ids=["sandbox", "sandbox-seed", "https", "http-loopback-port"],
)
def test_source_id(resource: ContactCenterResource, expected: str) -> None:
    assert resource.source_id == expected


@pytest.mark.parametrize(
    ("resource", "message"),
    [
        (ContactCenterResource(), NOT_CONFIGURED_MESSAGE),
        (ContactCenterResource(base_url=""), NOT_CONFIGURED_MESSAGE),
        (ContactCenterResource(base_url="https://acme.cc.example.com"), MISSING_KEY_MESSAGE),
    ],
    ids=["unset", "empty", "url-without-key"],
)
def test_source_id_settings_and_client_fail_when_not_configured(
    resource: ContactCenterResource, message: str
) -> None:
    async def open_client() -> None:
        async with resource.client(logging.getLogger("test")):
            raise AssertionError("a client must not open without a source")

    attempts = (lambda: resource.source_id, resource.settings, lambda: asyncio.run(open_client()))
    for attempt in attempts:
        with pytest.raises(dg.Failure) as info:
            attempt()
        assert info.value.description == message
        assert info.value.allow_retries is False
        assert info.value.metadata["error_class"].value == SOURCE_NOT_CONFIGURED


# --- no sandbox on the production path --------------------------------------------------------

_IMPORT_CHECK = """
import asyncio, json, logging, sys

def sandbox_modules():
    return sorted(m for m in sys.modules if m.startswith("connectors.sandbox"))

found = {}
import pipelines.definitions
pipelines.definitions.defs()  # loaded, as the code server loads it
found["import pipelines.definitions"] = sandbox_modules()
import pipelines.cli
found["import pipelines.cli"] = sandbox_modules()

from pipelines.resources import ContactCenterResource
resource = ContactCenterResource(base_url="https://acme.cc.example.com", api_key="k-1")
found["source_id"] = (resource.source_id, sandbox_modules())

async def open_client():
    async with resource.client(logging.getLogger("check")) as client:
        return type(client).__name__

found["client"] = (asyncio.run(open_client()), sandbox_modules())
# `cdrhouse ingest` through its parser (refused: no key) must not import it either.
found["cdrhouse ingest"] = (
    pipelines.cli.main(["ingest", "--start", "2026-11-01", "--end", "2026-11-02"],
                       env={"CC_API_BASE_URL": "https://acme.cc.example.com"}),
    sandbox_modules(),
)
# The control: selecting the sandbox does import it (so the check above can see it).
found["sandbox"] = (ContactCenterResource(base_url="sandbox").settings().base_url,
                    "connectors.sandbox" in sys.modules)
print(json.dumps(found))
"""


def test_production_path_never_imports_the_sandbox(tmp_path) -> None:
    proc = subprocess.run(
        [sys.executable, "-c", _IMPORT_CHECK],
        env=_clean_env(),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    found = json.loads(proc.stdout.strip().splitlines()[-1])
    assert found["import pipelines.definitions"] == []
    assert found["import pipelines.cli"] == []
    assert found["source_id"] == ["acme.cc.example.com", []]
    assert found["client"] == ["ContactCenterClient", []]
    assert found["cdrhouse ingest"] == [2, []]
    assert found["sandbox"] == ["http://127.0.0.1", True]
