"""Accounts in production (issue 25): a UI backfill of one account's days, launched over
GraphQL against a real `dagster dev` whose instance is on PostgreSQL and whose lake is on S3
(moto), with two accounts served by two sandboxes on two ports with two seeds.

The backfill's runs are that account's only: every run materializes that account's keys, its
days land exact in its own sub-lake, and the other account's API is never called."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import date, timedelta
from decimal import Decimal

import dagster as dg
import polars as pl
import pytest
from dagster._core.storage.dagster_run import RunsFilter

from connectors.sandbox import Sandbox, SandboxConfig
from connectors.sandbox.config import DEFAULT_API_KEY
from pipelines.partitions import partition_window
from tests.deploy._services import DEPLOY_YAML, MotoS3, Postgres, deploy_env
from tests.pipelines._dagster_dev import LAUNCH_BACKFILL, DagsterDev, run_dagster_dev
from tests.support.cli import run_cdrhouse
from tests.support.clock import SessionClock
from tests.support.served import ServedSandbox, serve_sandbox

# A deadline only (each wait ends when its state is reached): a loaded 2-core machine.
pytestmark = pytest.mark.timeout(1800)

CDRS_PATH = "/api/v4/reporting/cdrs"
SEEDS = {"emea": 41, "apac": 42}
DAYS = 5
CDRS_PER_DAY = 150
BACKFILL_TIMEOUT_S = 900.0
INGEST_LIMIT_S = 900.0
GROUP_ASSETS = "{ assetNodes { assetKey { path } groupName } }"


@dataclass
class Deployment:
    dev: DagsterDev
    env: dict[str, str]
    served: dict[str, ServedSandbox]
    bucket: str
    days: tuple[date, ...]


@pytest.fixture(scope="module")
def deployment(
    tmp_path_factory: pytest.TempPathFactory, postgres: Postgres, s3: MotoS3, clock: SessionClock
) -> Iterator[Deployment]:
    workdir = tmp_path_factory.mktemp("accounts_dev")
    days = tuple(clock.days_ago(DAYS - i) for i in range(DAYS))
    bucket = s3.create_bucket("cdrhouse-accounts")
    with (
        serve_sandbox(_config(SEEDS["emea"], days), clock) as emea,
        serve_sandbox(_config(SEEDS["apac"], days), clock) as apac,
    ):
        served = {"emea": emea, "apac": apac}
        accounts = workdir / "accounts.yaml"
        lines = ["accounts:"]
        for account, sandbox in served.items():
            lines += [
                f"  - id: {account}",
                f"    base_url: {sandbox.base_url}",
                f"    api_key_env: CC_KEY_{account.upper()}",
            ]
        accounts.write_text("\n".join(lines) + "\n")
        env = deploy_env(
            workdir,
            api_base_url=emea.base_url,
            api_key=DEFAULT_API_KEY,
            start_date=days[0],
            postgres_env=postgres.env(postgres.create_database()),
            aws_env=s3.env(),
            lake_uri=f"s3://{bucket}/lake",
        )
        # The accounts file is the only source: the one-account variables must be unset.
        for name in ("CC_API_BASE_URL", "CC_API_KEY"):
            env.pop(name, None)
        env["CDRHOUSE_ACCOUNTS_FILE"] = str(accounts)
        env.update({f"CC_KEY_{a.upper()}": DEFAULT_API_KEY for a in served})
        with run_dagster_dev(workdir, instance_yaml=DEPLOY_YAML, base_env=env) as dev:
            yield Deployment(dev, env, served, bucket, days)


def _config(seed: int, days: tuple[date, ...]) -> SandboxConfig:
    return SandboxConfig(seed=seed, cdrs_per_day=CDRS_PER_DAY, start_date=days[0], days=len(days))


def _runs(env: dict[str, str], backfill_id: str) -> list[dg.DagsterRun]:
    with pytest.MonkeyPatch.context() as mp:
        for key, value in env.items():
            if key.startswith(("DAGSTER_PG_", "AWS_")):
                mp.setenv(key, value)
        with dg.DagsterInstance.from_config(env["DAGSTER_HOME"]) as instance:
            return list(instance.get_runs(RunsFilter(tags={"dagster/backfill": backfill_id})))


def _landed(s3: MotoS3, bucket: str, account: str, day: date) -> dict[str, Decimal]:
    key = f"lake/account_id={account}/cdrs/date={day}/part-0.parquet"
    assert key in set(s3.keys(bucket, "lake/")), f"no {key}"
    body = s3.client().get_object(Bucket=bucket, Key=key)["Body"].read()
    frame = pl.read_parquet(io.BytesIO(body), columns=["id", "cost"])
    return dict(zip(frame["id"].to_list(), frame["cost"].to_list(), strict=True))


def test_a_ui_backfill_of_one_account_runs_that_account_only_on_postgres(
    deployment: Deployment, s3: MotoS3
) -> None:
    dev, days = deployment.dev, list(deployment.days[:3])
    nodes = dev.graphql(GROUP_ASSETS)["assetNodes"]
    emea_cdrs = [n["assetKey"] for n in nodes if n["groupName"] == "cdrs__emea"]
    assert {tuple(k["path"]) for k in emea_cdrs} >= {("emea", "raw_cdrs"), ("emea", "cdrs")}
    # Both accounts are in the location: the selection is what keeps apac out.
    assert any(n["groupName"] == "cdrs__apac" for n in nodes)
    asked = {a: s.sandbox.counters.get(CDRS_PATH, 0) for a, s in deployment.served.items()}

    result = dev.graphql(
        LAUNCH_BACKFILL,
        {
            "params": {
                "assetSelection": [{"path": k["path"]} for k in emea_cdrs],
                "partitionNames": [d.isoformat() for d in days],
                "fromFailure": False,
                "tags": [{"key": "dagster/from_ui", "value": "true"}],
            }
        },
    )["launchPartitionBackfill"]
    assert result["__typename"] == "LaunchBackfillSuccess", result
    status = dev.wait_for_backfill(result["backfillId"], timeout_s=BACKFILL_TIMEOUT_S)

    assert status in {"COMPLETED", "COMPLETED_SUCCESS"}, dev.log_tail()
    runs = _runs(deployment.env, result["backfillId"])
    assert {r.status for r in runs} == {dg.DagsterRunStatus.SUCCESS}
    for run in runs:
        keys = run.asset_selection or set()
        assert keys, run.run_id
        assert {k.path[0] for k in keys} == {"emea"}, (run.run_id, keys)
    # The other account's API was never asked for a CDR, and its sub-lake holds nothing.
    apac = deployment.served["apac"].sandbox
    assert apac.counters.get(CDRS_PATH, 0) == asked["apac"]
    assert not [k for k in s3.keys(deployment.bucket, "lake/") if "account_id=apac" in k]
    emea = deployment.served["emea"].sandbox
    assert emea.counters.get(CDRS_PATH, 0) > asked["emea"]
    for day in days:
        assert _landed(s3, deployment.bucket, "emea", day) == _truth(emea, day), day

    # The same deployment's CLI (a pod running `cdrhouse ingest`, the instance on PostgreSQL,
    # the lake on S3): both accounts' other days, read back as an analyst reads them.
    later = list(deployment.days[3:])
    argv = ["ingest", "--start", later[0].isoformat(), "--end", str(later[-1] + timedelta(1))]
    ingest = run_cdrhouse(argv, deployment.env, INGEST_LIMIT_S)
    assert ingest.code == 0, str(ingest)
    for account in deployment.served:
        uri = f"s3://{deployment.bucket}/lake/account_id={account}"
        assert any(uri in line and f"account {account}" in line for line in ingest.lines), str(
            ingest
        )
    query = (
        "SELECT account_id, CAST(date AS VARCHAR) AS day, id, CAST(cost AS VARCHAR) AS cost "
        f"FROM cdrs WHERE date >= DATE '{later[0]}'"
    )
    answer = run_cdrhouse(["sql", "--format", "json", query], deployment.env, 300)
    assert answer.code == 0, str(answer)
    got: dict[tuple[str, str], dict[str, Decimal]] = {}
    for row in json.loads(answer.stdout):
        by_id = got.setdefault((row["account_id"], row["day"]), {})
        assert row["id"] not in by_id, row  # no id twice in an account's day
        by_id[row["id"]] = Decimal(row["cost"])
    expected = {
        (account, day.isoformat()): _truth(served.sandbox, day)
        for account, served in deployment.served.items()
        for day in later
    }
    assert got.keys() == expected.keys()
    for key, truth in expected.items():
        assert got[key] == truth, f"cdrhouse sql: {key}"


def _truth(sandbox: Sandbox, day: date) -> dict[str, Decimal]:
    start, end = partition_window(day.isoformat())
    truth = {i: Decimal(c) for i, c in sandbox.truth_cdrs(start, end).items()}
    assert truth, f"no CDR on {day}"
    return truth
