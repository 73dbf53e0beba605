"""The Dagster code location of cdrhouse: combines assets, checks, schedules and resources.

`build_defs()` takes explicit settings (tests and the CLI call it); the module-level `defs`, which
`dagster dev` loads, reads them from the environment. This module and the CLI are the only places
that read environment variables:

- `CC_API_BASE_URL`, `CC_API_KEY`: the cluster and key, passed as `EnvVar`s (here and by the
  CLI) so the key never appears in run config or in a job snapshot. `CC_API_BASE_URL=sandbox`
  selects the bundled sandbox, in-process (no key needed). Unset, the location still loads (the
  UI can be browsed) but every step that would call the API fails at once, without retries,
  saying what to set: a code location whose secret failed to mount must not ingest fake data.
- `CDRHOUSE_DATA_DIR` (default `./data`), `CDRHOUSE_LAKE_URI` (default `file://<data>/lake`).
- `CDRHOUSE_START_DATE` (first daily partition), `CDRHOUSE_LOOKBACK_DAYS` (nightly lookback).
- `CDRHOUSE_SANDBOX_CDRS_PER_DAY`: dataset size of the in-process sandbox (with `sandbox` only).
- `CDRHOUSE_OWNERS`: owners of every asset in the catalog, comma separated `team:<name>` or
  emails (default `team:cdrhouse`).
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import date

import dagster as dg
from dagster._utils.warnings import BetaWarning, PreviewWarning

from pipelines.aggregates import build_aggregate_assets
from pipelines.assets import (
    CDR_GROUP,
    SNAPSHOT_GROUP,
    api_retry_policy,
    build_cdr_assets,
    build_snapshot_assets,
)
from pipelines.catalog import DEFAULT_OWNERS, parse_owners, with_catalog
from pipelines.checks import build_snapshot_checks
from pipelines.freshness import build_freshness_check, build_freshness_job_and_schedule
from pipelines.partitions import DEFAULT_START_DATE, daily_partitions
from pipelines.report import build_report_asset, build_report_sensor
from pipelines.resources import ContactCenterResource, WarehouseResource
from pipelines.schedules import DEFAULT_LOOKBACK_DAYS, build_nightly_schedule
from pipelines.sensors import failure_summary_sensor
from pipelines.settings import settings_from_env

CDR_JOB = "cdr_daily"
BASE_URL_VAR = "CC_API_BASE_URL"
API_KEY_VAR = "CC_API_KEY"
SNAPSHOT_JOB = "snapshots"


def build_defs(
    *,
    contact_center: ContactCenterResource,
    warehouse: WarehouseResource,
    start_date: date = DEFAULT_START_DATE,
    lookback_days: int = DEFAULT_LOOKBACK_DAYS,
    retry_policy: dg.RetryPolicy | None = None,
    owners: Sequence[str] = DEFAULT_OWNERS,
) -> dg.Definitions:
    """The whole code location for the given resources and partition start."""
    partitions_def = daily_partitions(start_date)
    retry = retry_policy or api_retry_policy()
    with warnings.catch_warnings():
        # Pools, backfill policies and partitioned checks are Dagster beta/preview APIs we
        # chose on purpose (README "Running the pipeline"); do not repeat that on every load.
        warnings.simplefilter("ignore", BetaWarning)
        warnings.simplefilter("ignore", PreviewWarning)
        cdr_assets = [
            *build_cdr_assets(partitions_def, retry),
            *build_aggregate_assets(partitions_def, retry, CDR_GROUP),
        ]
        snapshot_assets = build_snapshot_assets(retry)
        checks = build_snapshot_checks()
        freshness = build_freshness_check(partitions_def)
        report = build_report_asset([k.to_user_string() for k in aggregate_keys(cdr_assets)])
        report_sensor = build_report_sensor()
    lake_uri = warehouse.resolved_lake_uri
    cdr_assets = with_catalog(cdr_assets, lake_uri, owners)
    snapshot_assets = with_catalog(snapshot_assets, lake_uri, owners)
    (report,) = with_catalog([report], lake_uri, owners)
    freshness_job, freshness_schedule = build_freshness_job_and_schedule(freshness)
    cdr_keys = [key for a in cdr_assets for key in a.keys]
    snapshot_keys = [key for a in snapshot_assets for key in a.keys]
    # The freshness check judges the newest due day, not the day a run writes: its own job.
    cdr_selection = dg.AssetSelection.groups(CDR_GROUP) - dg.AssetSelection.checks(freshness)
    cdr_checks = [key for a in cdr_assets for key in a.check_keys]
    cdr_job = dg.define_asset_job(
        CDR_JOB,
        selection=cdr_selection,
        description="One UTC day of CDRs: fetch, normalize, check.",
    )
    snapshot_job = dg.define_asset_job(
        SNAPSHOT_JOB,
        selection=dg.AssetSelection.groups(SNAPSHOT_GROUP),
        description="Snapshots of users, routing, campaigns, numbers and the balance.",
    )
    return dg.Definitions(
        assets=[*cdr_assets, *snapshot_assets, report],
        asset_checks=[*checks, freshness],
        jobs=[cdr_job, snapshot_job, freshness_job],
        schedules=[
            build_nightly_schedule(
                partitions_def, cdr_keys, snapshot_keys, lookback_days, cdr_checks
            ),
            freshness_schedule,
        ],
        sensors=[failure_summary_sensor, report_sensor],
        resources={"contact_center": contact_center, "warehouse": warehouse},
        executor=step_executor(),
    )


def aggregate_keys(assets: Sequence[dg.AssetsDefinition]) -> list[dg.AssetKey]:
    """The `agg_*` keys among `assets` (the last step of a CDR run)."""
    return [k for a in assets for k in a.keys if k.to_user_string().startswith("agg_")]


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
    env: Mapping[str, str], start_date: date
) -> tuple[ContactCenterResource, WarehouseResource]:
    """The resources as configured by `env` (see the module docstring).

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
    )
    warehouse = WarehouseResource.with_kpi(
        settings.data_dir, settings.lake_uri, settings.kpi(), settings.currency
    )
    return contact_center, warehouse


@contextmanager
def api_environ(env: Mapping[str, str]) -> Iterator[None]:
    """`os.environ` holds `env`'s API variables (and not the others) meanwhile, so the
    resources' `EnvVar`s resolve to what the caller passed; restored afterwards."""
    names = (BASE_URL_VAR, API_KEY_VAR)
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
    settings = settings_from_env(env)
    contact_center, warehouse = resources_from_env(env, settings.start_date)
    return build_defs(
        contact_center=contact_center,
        warehouse=warehouse,
        start_date=settings.start_date,
        lookback_days=settings.lookback_days,
        owners=parse_owners(settings.owners),
    )


defs = defs_from_env(os.environ)
