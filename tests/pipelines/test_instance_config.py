"""The local dagster.yaml (the repository root's) is a valid Dagster 1.13
instance config, with our settings.

The production file, pipelines/deploy/dagster.yaml, must be the same instance plus PostgreSQL
storage (tests/deploy/ load it against a real PostgreSQL).
"""

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import dagster as dg
import pytest
import yaml
from dagster._config import process_config
from dagster._core.instance.config import dagster_instance_config
from dagster._core.storage.config import pg_config
from sqlalchemy.engine import make_url

from tests.support.paths import LOCAL_INSTANCE_YAML, REPO_ROOT

DEPLOY_YAML = REPO_ROOT / "pipelines" / "deploy" / "dagster.yaml"
PG_ENV = {
    "DAGSTER_PG_USERNAME": "cdrhouse",
    "DAGSTER_PG_PASSWORD": "s3cret",
    "DAGSTER_PG_HOST": "db.internal",
    "DAGSTER_PG_DB": "dagster",
    "DAGSTER_PG_PORT": "6543",
}


def _load(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load(path.read_text())
    return data


@pytest.fixture
def instance(tmp_path, monkeypatch) -> Iterator[dg.DagsterInstance]:
    home = tmp_path / "dagster_home"
    home.mkdir()
    shutil.copy(LOCAL_INSTANCE_YAML, home / "dagster.yaml")
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    with dg.DagsterInstance.get() as inst:
        yield inst


def test_dagster_yaml_loads_with_our_settings(instance: dg.DagsterInstance, tmp_path) -> None:
    # Storage stays under DAGSTER_HOME (sqlite), nothing else on the machine.
    assert str(instance.root_directory).startswith(str(tmp_path))
    assert type(instance.run_coordinator).__name__ == "QueuedRunCoordinator"
    assert instance.run_monitoring_enabled
    assert instance.run_retries_enabled
    assert instance.run_retries_max_retries == 1
    assert not instance.run_retries_retry_on_asset_or_op_failure
    assert not instance.telemetry_enabled

    concurrency = instance.get_concurrency_config()
    assert concurrency.pool_config.default_pool_limit == 2
    assert concurrency.pool_config.pool_granularity is not None
    assert concurrency.pool_config.pool_granularity.value == "op"
    queue = concurrency.run_queue_config
    assert queue is not None
    assert queue.max_concurrent_runs == 4
    assert {"key": "dagster/backfill", "limit": 3} in list(queue.tag_concurrency_limits)


def test_api_pool_limit_applies_to_the_contact_center_pool(instance: dg.DagsterInstance) -> None:
    # The pool has no explicit limit, so the instance's default_limit governs it.
    instance.event_log_storage.initialize_concurrency_limit_to_default("contact_center_api")
    info = instance.event_log_storage.get_concurrency_info("contact_center_api")
    assert info.slot_count == 2


def test_deploy_yaml_is_the_local_instance_plus_postgres_storage() -> None:
    local, deploy = _load(LOCAL_INSTANCE_YAML), _load(DEPLOY_YAML)
    # Local keeps Dagster's default sqlite storage under DAGSTER_HOME; production adds only
    # `storage`, and every other section is identical, so the two cannot drift apart.
    assert "storage" not in local
    assert set(deploy) == set(local) | {"storage"}
    for section in local:
        assert deploy[section] == local[section], section
    assert set(deploy["storage"]) == {"postgres"}


def test_deploy_yaml_takes_every_postgres_setting_from_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = _load(DEPLOY_YAML)["storage"]["postgres"]["postgres_db"]
    # No literal value (above all no password) in a checked-in file.
    assert db == {
        "username": {"env": "DAGSTER_PG_USERNAME"},
        "password": {"env": "DAGSTER_PG_PASSWORD"},
        "hostname": {"env": "DAGSTER_PG_HOST"},
        "db_name": {"env": "DAGSTER_PG_DB"},
        "port": {"env": "DAGSTER_PG_PORT"},
        "scheme": "postgresql+psycopg2",
    }
    # The scheme names a driver that is installed (a bare `postgresql` is psycopg 3 under
    # SQLAlchemy 2.1, which dagster-postgres does not install).
    make_url(f"{db['scheme']}://u@h/d").get_dialect().import_dbapi()
    for name, value in PG_ENV.items():
        monkeypatch.setenv(name, value)
    # The whole file passes Dagster's instance schema (what `dagster dev` checks first) ...
    shutil.copy(DEPLOY_YAML, tmp_path / "dagster.yaml")
    config, custom_class = dagster_instance_config(str(tmp_path))
    assert custom_class is None
    assert set(config) >= {"storage", "concurrency", "run_monitoring", "run_retries"}
    # ... and dagster-postgres resolves the variables, the port as an integer (IntSource).
    resolved = process_config(pg_config(), _load(DEPLOY_YAML)["storage"]["postgres"])
    assert resolved.success, resolved.errors
    assert resolved.value is not None
    assert resolved.value["postgres_db"] == {
        "username": "cdrhouse",
        "password": "s3cret",
        "hostname": "db.internal",
        "db_name": "dagster",
        "port": 6543,
        "params": {},
        "scheme": "postgresql+psycopg2",
    }
