"""The whole code location loads, and its asset keys, jobs and checks are pinned."""

from datetime import date

import dagster as dg
import pytest

from pipelines.definitions import build_defs, defs, defs_from_env, resources_from_env
from pipelines.resources import ContactCenterResource, WarehouseResource
from tests.support.keys import AGG_ASSETS, CDR_ASSETS, REPORT_ASSETS, SNAPSHOT_ASSETS


def test_definitions_load_and_pin_asset_keys() -> None:
    loaded = defs()  # the code location as Dagster loads it (the defs folder, autoloaded)
    assert isinstance(loaded, dg.Definitions)
    repo = loaded.get_repository_def()
    keys = {k.to_user_string() for k in repo.asset_graph.get_all_asset_keys()}
    assert keys == CDR_ASSETS | AGG_ASSETS | SNAPSHOT_ASSETS | REPORT_ASSETS
    jobs = {j.name for j in repo.get_all_jobs()}
    assert {"cdr_daily", "snapshots", "cdr_freshness"} <= jobs
    assert repo.get_schedule_def("nightly").cron_schedule == "0 1 * * *"
    assert repo.get_schedule_def("cdr_freshness_hourly").cron_schedule == "5 * * * *"
    assert repo.get_sensor_def("failure_summary_sensor")
    assert repo.get_sensor_def("contact_center_report_after_nightly")
    checks = {(k.asset_key.to_user_string(), k.name) for k in repo.asset_graph.asset_check_keys}
    assert ("raw_cdrs", "row_count_matches_api_total") in checks
    assert ("raw_cdrs", "cdrs_day_not_shrunk") in checks
    assert ("cdrs", "cdrs_users_known") in checks
    assert ("balance_snapshots", "balance_is_decimal") in checks
    assert ("agg_daily_volume", "agg_daily_volume_matches_cdrs") in checks
    assert ("cdrs", "newest_due_day_landed") in checks
    assert ("agg_call_intervals", "call_values_mapped") in checks
    assert len(checks) == 20
    # The freshness check runs in its own hourly job, never inside a day's run.
    day_checks = repo.get_job("cdr_daily").asset_layer.asset_graph.asset_check_keys
    assert ("cdrs", "newest_due_day_landed") not in {
        (k.asset_key.to_user_string(), k.name) for k in day_checks
    }
    # + cdrs_raw_rows_add_up, cdrs_day_not_shrunk, and call_values_mapped on the day's
    # agg_call_intervals
    assert len(day_checks) == 11
    # The checks proving a day whole are blocking; an odd record in quarantine is not.
    blocking = {
        (k.asset_key.to_user_string(), k.name)
        for k in day_checks
        if repo.asset_graph.get_check_spec(k).blocking
    }
    assert blocking == {
        ("raw_cdrs", "row_count_matches_api_total"),
        ("cdrs", "cdrs_ids_unique"),
        ("cdrs", "cdrs_started_at_in_window"),
        ("cdrs", "cdrs_raw_rows_add_up"),
        ("raw_cdrs", "cdrs_day_not_shrunk"),
    }
    # The aggregates are partitioned like the CDR days and downstream of the typed tables.
    agg = repo.asset_graph.get(dg.AssetKey("agg_daily_volume"))
    assert agg.partitions_def == repo.asset_graph.get(dg.AssetKey("cdrs")).partitions_def
    assert dg.AssetKey("cdrs") in agg.parent_keys
    # The report waits for the newest day of every aggregate and for the balance snapshot.
    report = repo.asset_graph.get(dg.AssetKey("contact_center_report"))
    assert report.parent_keys == {dg.AssetKey(k) for k in AGG_ASSETS | {"balance_snapshots"}}
    assert report.partitions_def is None
    assert report.automation_condition is not None


def test_api_assets_share_one_pool_and_have_policies() -> None:
    repo = defs().get_repository_def()
    graph = repo.asset_graph
    # The typed CDR tables are written by the step that fetches the day (one pass, issue 13).
    api_assets = CDR_ASSETS | SNAPSHOT_ASSETS
    for name in CDR_ASSETS | SNAPSHOT_ASSETS:
        node = graph.get(dg.AssetKey(name))
        assets_def = node.assets_def
        pools = {op.pool for op in assets_def.node_def.iterate_op_defs()}
        assert pools == ({"contact_center_api"} if name in api_assets else {None}), name
        assert node.freshness_policy is not None, name
        policy = assets_def.op.retry_policy
        assert policy is not None, name
        assert policy.backoff == dg.Backoff.EXPONENTIAL, name
        assert policy.jitter == dg.Jitter.PLUS_MINUS
    raw = graph.get(dg.AssetKey("raw_cdrs")).assets_def
    assert raw.backfill_policy == dg.BackfillPolicy.multi_run(1)


def test_unset_env_is_no_source_and_set_env_uses_envvar(monkeypatch) -> None:
    contact_center, warehouse = resources_from_env({}, date(2026, 10, 1))
    # Unset is not the sandbox: it is no source at all (the API steps fail, see test_source).
    assert not contact_center.uses_sandbox
    assert contact_center.base_url is None
    assert contact_center.api_key is None
    assert warehouse.data_dir == "data"
    assert warehouse.resolved_lake_uri.startswith("file://")
    assert warehouse.resolved_lake_uri.endswith("/data/lake")

    # Set: the values come in as EnvVar (the key never sits in run config) and resolve at init.
    monkeypatch.setenv("CC_API_BASE_URL", "https://acme.example.com")
    monkeypatch.setenv("CC_API_KEY", "k-123")
    import os

    unresolved, _ = resources_from_env(os.environ, date(2026, 10, 1))
    assert isinstance(unresolved.api_key, dg.EnvVar)
    resource = unresolved.process_config_and_initialize()
    assert isinstance(resource, ContactCenterResource)
    assert resource.base_url == "https://acme.example.com"
    assert resource.api_key == "k-123"
    assert not resource.uses_sandbox
    assert "k-123" not in repr(resource)
    # `cdrhouse ingest` checks the settings read the same way, without Dagster's initialization.
    read = unresolved.read_env()
    for name in ContactCenterResource.model_fields:
        assert getattr(read, name) == getattr(resource, name), name
    assert not isinstance(read.api_key, dg.EnvVar)
    assert defs_from_env(os.environ).get_repository_def()

    monkeypatch.setenv("CC_API_BASE_URL", "Sandbox")
    monkeypatch.delenv("CC_API_KEY")
    sandboxed = resources_from_env(os.environ, date(2026, 10, 1))[0].process_config_and_initialize()
    assert isinstance(sandboxed, ContactCenterResource)
    assert sandboxed.uses_sandbox


def test_reading_an_unset_key_variable_is_a_one_line_failure_naming_it(monkeypatch) -> None:
    monkeypatch.delenv("CC_KEY_GONE", raising=False)
    unread = ContactCenterResource(
        base_url="https://acme.example.com", api_key=dg.EnvVar("CC_KEY_GONE")
    )
    with pytest.raises(dg.Failure) as failure:
        unread.read_env()
    assert failure.value.description == "the variable CC_KEY_GONE is not set"


def test_start_date_moves_the_first_partition(tmp_path) -> None:
    built = build_defs(
        contact_center=ContactCenterResource(base_url="sandbox"),
        warehouse=WarehouseResource(data_dir=str(tmp_path)),
        start_date=date(2026, 11, 1),
    )
    job = built.resolve_job_def("cdr_daily")
    assert job.partitions_def is not None
    keys = job.partitions_def.get_partition_keys()
    assert keys[0] == "2026-11-01"
