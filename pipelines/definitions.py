"""The Dagster code location of cdrhouse: merges the defs folder with the resources and executor.

The definitions live in `pipelines/defs`, one folder per concern (cdrs, snapshots, aggregates,
report, freshness, automation), each with a builder taking explicit settings. This module only
merges them:

- `defs` (`@dg.definitions`), which `dg dev`, `dagster dev`, `dg check defs` and the code server
  load from `-m pipelines.definitions`: the defs folder autoloaded by Dagster (each folder reads
  its settings from the environment then), plus the resources and the executor. Nothing is read
  from the environment when a module is imported: only when Dagster loads the definitions.
- `build_defs()`, with explicit settings (tests and the CLI call it): the same builders, merged.

The environment variables (read here, in `pipelines.location` and by the CLI):

- `CDRHOUSE_ACCOUNTS_FILE`: the accounts (contact centers), each with its own key variable
  (`pipelines.accounts`); every concern is built once per account (`pipelines.scope`), each
  account with its own `ContactCenterResource` (resource key `contact_center__<id>`, its key
  an `EnvVar` of the account's `api_key_env`). An account whose key variable is unset still
  loads: only its API steps fail, naming the account and the variable.
- Without the file, `CC_API_BASE_URL`, `CC_API_KEY`: the one account `default`, whose names
  are those of the time before accounts. The cluster and key, passed as `EnvVar`s (here and by the
  CLI) so the key never appears in run config or in a job snapshot. `CC_API_BASE_URL=sandbox`
  selects the bundled sandbox, in-process (no key needed). Unset, the location still loads (the
  UI can be browsed) but every step that would call the API fails at once, without retries,
  saying what to set: a code location whose secret failed to mount must not ingest fake data.
- `CDRHOUSE_PHONE_NUMBERS` (`token` or `raw`), `CDRHOUSE_SMS_BODIES` (`drop`, `keep`), and the
  tokens' key `CDRHOUSE_PII_KEY` (or an account's `pii_key_env`): on each account's
  `ContactCenterResource`, the key as an `EnvVar` like the API key. Unset (or `token` without
  its key), the location loads but every API step fails naming both variables
  (`pipelines.privacy_settings`). `build_defs` with resources built directly lands `raw`.
- `CDRHOUSE_DATA_DIR` (default `./data`), `CDRHOUSE_LAKE_URI` (default `file://<data>/lake`).
- `CDRHOUSE_START_DATE` (first daily partition), `CDRHOUSE_LOOKBACK_DAYS` (nightly lookback).
- `CDRHOUSE_SANDBOX_CDRS_PER_DAY`: dataset size of the in-process sandbox (with `sandbox` only).
- `CDRHOUSE_OWNERS`: owners of every asset in the catalog, comma separated `team:<name>` or
  emails (default `team:cdrhouse`).
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import date
from pathlib import Path
from typing import Any

import dagster as dg

import pipelines.defs
from pipelines.accounts import ACCOUNTS_FILE_VAR, Account, accounts_from_env
from pipelines.catalog import DEFAULT_OWNERS
from pipelines.defs.aggregates.definitions import build_aggregates
from pipelines.defs.automation.definitions import build_automation
from pipelines.defs.cdrs.definitions import build_cdrs
from pipelines.defs.freshness.definitions import build_freshness
from pipelines.defs.report.definitions import build_report
from pipelines.defs.snapshots.definitions import build_snapshots
from pipelines.location import (
    Builder,
    Location,
    build_quietly,
    dagster_previews_accepted,
    location_accounts,
    location_from_env,
)
from pipelines.names import CDR_JOB, SNAPSHOT_JOB
from pipelines.partitions import DEFAULT_START_DATE
from pipelines.privacy_settings import PII_KEY_VAR
from pipelines.resources import ContactCenterResource, WarehouseResource
from pipelines.scope import AccountScope, unconfigured_default
from pipelines.settings import DEFAULT_LOOKBACK_DAYS, settings_from_env
from pipelines.steps import api_retry_policy

__all__ = [
    "CDR_JOB",
    "SNAPSHOT_JOB",
    "account_resources",
    "api_environ",
    "build_defs",
    "defs",
    "defs_from_env",
    "resources_from_env",
    "start_date_from_env",
]

BASE_URL_VAR = "CC_API_BASE_URL"
API_KEY_VAR = "CC_API_KEY"
# Every folder of pipelines/defs, as `build_defs` merges them (a test holds it to the folder).
CONCERNS: tuple[Builder, ...] = (
    build_cdrs,
    build_snapshots,
    build_aggregates,
    build_report,
    build_freshness,
    build_automation,
)


def build_defs(
    *,
    contact_center: ContactCenterResource | None = None,
    warehouse: WarehouseResource,
    start_date: date = DEFAULT_START_DATE,
    lookback_days: int = DEFAULT_LOOKBACK_DAYS,
    retry_policy: dg.RetryPolicy | None = None,
    owners: Sequence[str] = DEFAULT_OWNERS,
    accounts: Sequence[Account] = (),
    api_resources: Mapping[str, ContactCenterResource] | None = None,
) -> dg.Definitions:
    """The whole code location for the given resources and partition start.

    `accounts` (default: the one account `default`), each with its API resource in
    `api_resources` by account id; `contact_center` is the first (`default`) account's."""
    location = Location(
        lake_uri=warehouse.resolved_lake_uri,
        start_date=start_date,
        lookback_days=lookback_days,
        retry_policy=retry_policy or api_retry_policy(),
        owners=tuple(owners),
        accounts=tuple(accounts) or (unconfigured_default(),),
    )
    apis = dict(api_resources or {})
    if contact_center is not None:
        apis.setdefault(location.accounts[0].id, contact_center)
    return dg.Definitions.merge(
        *(build_quietly(build, location) for build in CONCERNS),
        _bound(location.accounts, apis, warehouse),
    )


@dg.definitions
def defs() -> dg.Definitions:
    """The code location as Dagster loads it: the defs folder, autoloaded, and the resources,
    all from the environment as it is now (at load time, not import time)."""
    start = start_date_from_env(os.environ)
    contact_center, warehouse = resources_from_env(os.environ, start)
    accounts = location_accounts(os.environ)
    apis = account_resources(accounts, os.environ, start, contact_center)
    return dg.Definitions.merge(load_defs_folder(), _bound(accounts, apis, warehouse))


def load_defs_folder() -> dg.Definitions:
    """Every folder of `pipelines/defs`, autoloaded by Dagster's component tree.

    `dg.load_from_defs_folder` would find the folder through pyproject.toml's `[tool.dg]`,
    which a `pip install .` does not ship; the tree is built from the module instead."""
    project_root = Path(pipelines.defs.__file__).parent.parent.parent
    tree = dg.ComponentTree.from_module(defs_module=pipelines.defs, project_root=project_root)
    with dagster_previews_accepted():
        return tree.build_defs()


def _bound(
    accounts: Sequence[Account],
    apis: Mapping[str, ContactCenterResource],
    warehouse: WarehouseResource,
) -> dg.Definitions:
    """Each account's API under its scope's resource key, the warehouse, the executor."""
    missing = [a.id for a in accounts if a.id not in apis]
    if missing:
        raise ValueError(f"no ContactCenterResource for account(s) {', '.join(missing)}")
    resources: dict[str, Any] = {AccountScope.of(a).resource_key: apis[a.id] for a in accounts}
    return dg.Definitions(resources={**resources, "warehouse": warehouse}, executor=step_executor())


def step_executor() -> dg.ExecutorDefinition:
    """Every step of a run in the run's own process, one after the other.

    A CDR run is two dependent steps (the day, then its aggregates) and a snapshot run fetches
    small directories: no run has steps that could use a second core, so a process per step
    (the multiprocess executor) only added its start, the job's reconstruction and an event
    round trip per step: 1-6 s each, most of a small run's wall time on 2 cores. A crashed
    run worker is noticed by run monitoring and retried once (dagster.yaml: run_retries).
    `cdrhouse ingest` runs the same jobs in process (`execute_in_process`) as well."""
    return dg.in_process_executor


def _setting(name: str, env: Mapping[str, str]) -> dg.EnvVar | None:
    # An EnvVar of an unset variable fails at resource init, which would fail even runs that
    # call no API; None lets the resource fail only the API steps, with what to set.
    return dg.EnvVar(name) if env.get(name) else None


def resources_from_env(
    env: Mapping[str, str], start_date: date, *, views_in_runs: bool = True
) -> tuple[ContactCenterResource, WarehouseResource]:
    """The resources as configured by `env` (see the module docstring); `views_in_runs=False`
    for a caller that refreshes the views itself after the runs (`cdrhouse ingest`).

    The API settings are `EnvVar`s, resolved from `os.environ` where a run starts (the CLI
    puts its mapping's values there: `api_environ`): a plain key would be saved as a config
    default in every run's job snapshot, in the run storage the UI serves.
    """
    settings = settings_from_env(env)
    contact_center = ContactCenterResource(
        base_url=_setting(BASE_URL_VAR, env),
        api_key=_setting(API_KEY_VAR, env),
        sandbox_start_date=start_date.isoformat(),
        sandbox_cdrs_per_day=settings.sandbox_cdrs_per_day,
        # None when unset: every API step then fails saying what to choose.
        phone_numbers=settings.phone_numbers,
        pii_key=_setting(PII_KEY_VAR, env),
        sms_bodies=settings.sms_bodies,
    )
    # The accounts file's zones, for the KPI views' business days (none without a file: the
    # default account's day is CDRHOUSE_TIMEZONE's).
    zones = (
        {a.id: a.timezone for a in accounts_from_env(env, require_keys=False)}
        if env.get(ACCOUNTS_FILE_VAR, "").strip()
        else {}
    )
    warehouse = WarehouseResource.with_kpi(
        settings.data_dir,
        settings.lake_uri,
        settings.kpi(),
        settings.currency,
        zones,
        views_in_runs=views_in_runs,
        max_day_shrink=settings.max_day_shrink,
    )
    return contact_center, warehouse


def account_resources(
    accounts: Sequence[Account],
    env: Mapping[str, str],
    start_date: date,
    default: ContactCenterResource,
) -> dict[str, ContactCenterResource]:
    """Each account's API resource, by account id. Without an accounts file, the one account
    is `default`, as `resources_from_env` built it; an account of the file has its base URL
    as given and its key as `EnvVar(api_key_env)` (None when that variable is unset: the
    location loads, the account's API steps fail naming the account and the variable). A
    `sandbox` account gets the in-process emulator, seeded from its id. Each account keeps
    `default`'s choice of how callers' numbers land, keyed by `EnvVar(pii_key_env)`."""
    from pipelines.accounts import ACCOUNTS_FILE_VAR

    if not env.get(ACCOUNTS_FILE_VAR, "").strip():
        return {a.id: default for a in accounts}
    return {
        a.id: ContactCenterResource(
            base_url=a.base_url,
            api_key=_setting(a.api_key_env, env) if a.api_key_env else None,
            account_id=a.id,
            api_key_env=a.api_key_env,
            sandbox_seed=AccountScope.of(a).sandbox_seed(),
            sandbox_start_date=start_date.isoformat(),
            sandbox_cdrs_per_day=default.sandbox_cdrs_per_day,
            phone_numbers=default.phone_numbers,
            pii_key=_setting(a.pii_key_env, env),
            pii_key_env=a.pii_key_env,
            sms_bodies=default.sms_bodies,
        )
        for a in accounts
    }


@contextmanager
def api_environ(env: Mapping[str, str], key_vars: Sequence[str] = ()) -> Iterator[None]:
    """`os.environ` holds `env`'s API variables (and not the others) meanwhile, so the
    resources' `EnvVar`s resolve to what the caller passed; restored afterwards. `key_vars`:
    the accounts' key variables (`api_key_env`, `pii_key_env`), besides CC_API_BASE_URL,
    CC_API_KEY and CDRHOUSE_PII_KEY."""
    names = tuple(dict.fromkeys((BASE_URL_VAR, API_KEY_VAR, PII_KEY_VAR, *key_vars)))
    wanted = {name: env.get(name) for name in names}
    saved = {name: os.environ.get(name) for name in names}
    try:
        _set_environ(wanted)
        yield
    finally:
        _set_environ(saved)


def _set_environ(values: Mapping[str, str | None]) -> None:
    for name, value in values.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


def start_date_from_env(env: Mapping[str, str]) -> date:
    return settings_from_env(env).start_date


def defs_from_env(env: Mapping[str, str]) -> dg.Definitions:
    """The code location `env` configures, through `build_defs` (the CLI's and tests' path)."""
    location = location_from_env(env)
    contact_center, warehouse = resources_from_env(env, location.start_date)
    return build_defs(
        warehouse=warehouse,
        start_date=location.start_date,
        lookback_days=location.lookback_days,
        owners=location.owners,
        accounts=location.accounts,
        api_resources=account_resources(
            location.accounts, env, location.start_date, contact_center
        ),
    )
