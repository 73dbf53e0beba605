"""Accounts in Dagster: each account's assets, checks, jobs, groups, pool and API resource are
its own (`pipelines.scope`), the nightly tick requests every account's runs, and without an
accounts file the code location is exactly the one-account location it was."""

from __future__ import annotations

from datetime import UTC, date, datetime
from pathlib import Path

import dagster as dg
import pytest

from pipelines.definitions import build_defs, defs_from_env
from pipelines.resources import ContactCenterResource, WarehouseResource
from pipelines.scope import ACCOUNT_TAG
from tests.support.keys import AGG_ASSETS, CDR_ASSETS

ACCOUNTS = ("emea", "apac", "amer")
FIRST_DAY = date(2026, 10, 1)
TICK = datetime(2026, 11, 21, 1, 0, tzinfo=UTC)


def _accounts_file(tmp_path: Path) -> Path:
    path = tmp_path / "accounts.yaml"
    path.write_text(
        "accounts:\n"
        "  - id: emea\n"
        "    base_url: sandbox\n"
        "    timezone: Europe/Berlin\n"
        "  - id: apac\n"
        "    base_url: https://apac1.cc.example.com\n"
        "    api_key_env: CC_KEY_APAC\n"
        "    timezone: Australia/Sydney\n"
        "  - id: amer\n"
        "    base_url: https://amer1.cc.example.com\n"
        "    api_key_env: CC_KEY_AMER\n"
    )
    return path


def _env(tmp_path: Path) -> dict[str, str]:
    # CC_KEY_AMER is unset on purpose: the location must load all the same.
    return {
        "CDRHOUSE_ACCOUNTS_FILE": str(_accounts_file(tmp_path)),
        "CDRHOUSE_DATA_DIR": str(tmp_path / "data"),
        "CDRHOUSE_START_DATE": FIRST_DAY.isoformat(),
        "CC_KEY_APAC": "apac-key-value",
    }


def _one_account_defs(tmp_path: Path) -> dg.Definitions:
    return build_defs(
        contact_center=ContactCenterResource(base_url="sandbox"),
        warehouse=WarehouseResource(data_dir=str(tmp_path / "data")),
        start_date=FIRST_DAY,
    )


def _names(defs: dg.Definitions) -> dict[str, set[str]]:
    repo = defs.get_repository_def()
    graph = repo.asset_graph
    keys = list(graph.get_all_asset_keys())
    return {
        "assets": {k.to_user_string() for k in keys},
        "checks": {str(k) for k in graph.asset_check_keys},
        "groups": {graph.get(k).group_name or "" for k in keys},
        "jobs": {j.name for j in repo.get_all_jobs() if not j.name.startswith("__")},
        "schedules": {s.name for s in repo.schedule_defs},
        "sensors": {s.name for s in repo.sensor_defs},
        "resources": set(defs.resources or {}),
        "pools": {p for ad in repo.assets_defs_by_key.values() for p in ad.node_def.pools},
        "ops": {ad.node_def.name for ad in repo.assets_defs_by_key.values()},
    }


def test_each_account_has_its_own_assets_groups_pool_jobs_and_resource(tmp_path) -> None:
    defs = defs_from_env(_env(tmp_path))
    names = _names(defs)
    base = _names(_one_account_defs(tmp_path))
    tables = base["assets"] - {"contact_center_report"}
    assert names["assets"] == {"contact_center_report"} | {
        f"{a}/{t}" for a in ACCOUNTS for t in tables
    }
    assert names["groups"] == {"reports"} | {
        f"{g}__{a}" for a in ACCOUNTS for g in ("cdrs", "snapshots")
    }
    assert names["pools"] == {f"contact_center_api__{a}" for a in ACCOUNTS}
    assert names["jobs"] == {
        f"{j}__{a}" for a in ACCOUNTS for j in ("cdr_daily", "snapshots", "cdr_freshness")
    }
    assert names["schedules"] == {"nightly"} | {f"cdr_freshness_hourly__{a}" for a in ACCOUNTS}
    assert names["resources"] == {"warehouse"} | {f"contact_center__{a}" for a in ACCOUNTS}
    assert names["ops"] == {"contact_center_report"} | {
        f"{a}__{op}" for a in ACCOUNTS for op in base["ops"] - {"contact_center_report"}
    }
    assert len(names["checks"]) == 3 * len(base["checks"])

    repo = defs.get_repository_def()
    graph = repo.asset_graph
    for account in ACCOUNTS:
        # An account's API steps are in its pool, and its job selects only its own assets.
        raw = repo.assets_defs_by_key[dg.AssetKey([account, "raw_cdrs"])]
        assert raw.node_def.pools == {f"contact_center_api__{account}"}
        assert f"contact_center__{account}" in raw.required_resource_keys
        job = repo.get_job(f"cdr_daily__{account}")
        selected = {k.to_user_string() for k in job.asset_layer.selected_asset_keys}
        assert selected == {f"{account}/{t}" for t in CDR_ASSETS | AGG_ASSETS}
        day = graph.get(dg.AssetKey([account, "cdrs"]))
        assert day.group_name == f"cdrs__{account}"
        meta = day.metadata
        assert str(meta["dagster/uri"]).endswith(f"/lake/account_id={account}/cdrs")
    # One report over every account's aggregates and balance.
    report = graph.get(dg.AssetKey("contact_center_report"))
    assert {k.path[0] for k in report.parent_keys} == set(ACCOUNTS)
    assert len(report.parent_keys) == 3 * (len(AGG_ASSETS) + 1)


def test_each_account_has_its_key_by_reference_and_its_own_sandbox(tmp_path) -> None:
    resources = defs_from_env(_env(tmp_path)).resources or {}
    emea, apac, amer = (resources[f"contact_center__{a}"] for a in ACCOUNTS)
    assert isinstance(apac.api_key, dg.EnvVar)  # never the value: job snapshots keep config
    assert apac.api_key.env_var_name == "CC_KEY_APAC"
    assert apac.base_url == "https://apac1.cc.example.com"
    assert amer.api_key is None  # unset: only amer's API steps fail
    assert emea.uses_sandbox
    assert emea.sandbox_seed != ContactCenterResource().sandbox_seed
    two = tmp_path / "two.yaml"
    two.write_text(
        "accounts:\n  - id: one\n    base_url: sandbox\n  - id: two\n    base_url: sandbox\n"
    )
    env = {**_env(tmp_path), "CDRHOUSE_ACCOUNTS_FILE": str(two)}
    pair = defs_from_env(env).resources or {}
    one_api, two_api = pair["contact_center__one"], pair["contact_center__two"]
    assert one_api.sandbox_seed != two_api.sandbox_seed
    assert one_api.source_id != two_api.source_id  # so each sub-lake records its own source


def test_an_account_without_its_key_fails_alone_naming_account_and_variable(tmp_path) -> None:
    defs = defs_from_env(_env(tmp_path))
    job = defs.resolve_job_def("snapshots__amer")
    with dg.DagsterInstance.ephemeral() as instance:
        result = job.execute_in_process(instance=instance, raise_on_error=False)
    assert not result.success
    failures = [e for e in result.all_events if e.is_step_failure]
    assert failures
    for event in failures:
        message = event.step_failure_data.error.message  # type: ignore[union-attr]
        assert "account amer" in message, message
        assert "CC_KEY_AMER" in message, message
        assert "apac-key-value" not in message
    assert not (tmp_path / "data" / "lake").exists()  # nothing written, for no account


def _evaluate(defs: dg.Definitions, when: datetime) -> list[dg.RunRequest]:
    repo = defs.get_repository_def()
    context = dg.build_schedule_context(scheduled_execution_time=when, repository_def=repo)
    result = repo.get_schedule_def("nightly").evaluate_tick(context)
    assert result.run_requests is not None
    return list(result.run_requests)


def test_nightly_tick_requests_every_accounts_days_and_snapshots_tagged(tmp_path) -> None:
    requests = _evaluate(defs_from_env(_env(tmp_path)), TICK)
    days = ["2026-11-17", "2026-11-18", "2026-11-19", "2026-11-20"]
    assert len({r.run_key for r in requests}) == len(requests)
    for account in ACCOUNTS:
        mine = [r for r in requests if r.tags.get(ACCOUNT_TAG) == account]
        cdr_runs = [r for r in mine if r.partition_key is not None]
        assert [r.partition_key for r in cdr_runs] == days
        for run in cdr_runs:
            keys = {k.to_user_string() for k in run.asset_selection or []}
            assert keys == {f"{account}/{t}" for t in CDR_ASSETS | AGG_ASSETS}
            checks = run.asset_check_keys or []
            assert checks
            assert {c.asset_key.path[0] for c in checks} == {account}
            assert "newest_due_day_landed" not in {c.name for c in checks}
        (snapshot_run,) = [r for r in mine if r.partition_key is None]
        snap = {k.to_user_string() for k in snapshot_run.asset_selection or []}
        assert f"{account}/users" in snap
        assert all(k.startswith(f"{account}/") for k in snap)
    assert len(requests) == 3 * (len(days) + 1)


# The names of the one-account code location before accounts existed (9b5fee4), which a
# location without an accounts file keeps: runs, schedules and UI links stay valid.
ONE_ACCOUNT_JOBS = {"cdr_daily", "snapshots", "cdr_freshness"}
ONE_ACCOUNT_SCHEDULES = {"nightly", "cdr_freshness_hourly"}
ONE_ACCOUNT_GROUPS = {"cdrs", "snapshots", "reports"}


def test_without_an_accounts_file_every_name_is_todays(tmp_path) -> None:
    names = _names(_one_account_defs(tmp_path))
    assert names["jobs"] == ONE_ACCOUNT_JOBS
    assert names["schedules"] == ONE_ACCOUNT_SCHEDULES
    assert names["groups"] == ONE_ACCOUNT_GROUPS
    assert names["pools"] == {"contact_center_api"}
    assert names["resources"] == {"contact_center", "warehouse"}
    assert all("/" not in key for key in names["assets"])
    assert "raw_cdrs" in names["ops"]
    assert "reporting_aggregates" in names["ops"]
    requests = _evaluate(_one_account_defs(tmp_path), TICK)
    assert {r.run_key for r in requests} >= {"2026-11-21:cdrs:2026-11-20", "2026-11-21:snapshots"}


@pytest.mark.parametrize("variables", [{"CC_API_BASE_URL": "sandbox"}, {}], ids=["sandbox", "none"])
def test_from_the_environment_without_a_file_is_the_default_account(
    tmp_path, variables: dict[str, str]
) -> None:
    env = {"CDRHOUSE_DATA_DIR": str(tmp_path), **variables}
    names = _names(defs_from_env(env))
    assert names["jobs"] == ONE_ACCOUNT_JOBS
    assert names["resources"] == {"contact_center", "warehouse"}


def test_the_autoloaded_location_reads_the_accounts_file_at_load(
    tmp_path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pipelines.definitions import defs

    for name in ("CC_API_BASE_URL", "CC_API_KEY", "CC_KEY_AMER"):
        monkeypatch.delenv(name, raising=False)
    for name, value in _env(tmp_path).items():
        monkeypatch.setenv(name, value)
    loaded = defs()  # what `dg dev` and the code server load: the defs folder, autoloaded
    assert _names(loaded) == _names(defs_from_env(_env(tmp_path)))
    assert "cdr_daily__apac" in _names(loaded)["jobs"]
    apac = (loaded.resources or {})["contact_center__apac"]
    assert isinstance(apac.api_key, dg.EnvVar)
