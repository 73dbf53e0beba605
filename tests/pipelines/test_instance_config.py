"""The repository's dagster.yaml is a valid Dagster 1.13 instance config, with our settings."""

import shutil
from pathlib import Path

import dagster as dg
import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def instance(tmp_path, monkeypatch) -> dg.DagsterInstance:
    home = tmp_path / "dagster_home"
    home.mkdir()
    shutil.copy(REPO_ROOT / "dagster.yaml", home / "dagster.yaml")
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
