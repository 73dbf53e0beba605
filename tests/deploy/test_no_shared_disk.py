"""Runs that share no disk: what run pods on Kubernetes are.

Each "pod" is a separate `cdrhouse ingest` process for one partition, started at the same time
as the others, with its own empty working directory, temp dir, data dir and DAGSTER_HOME. The
pods share only the PostgreSQL instance and the S3 server. A fresh process on yet another empty
disk then builds the warehouse from the lake and must find every day exactly as the API has it,
and polars, which knows nothing of cdrhouse, reads every table with the spec's types.
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from datetime import date, timedelta
from decimal import Decimal
from pathlib import Path

import duckdb
import polars as pl
import pytest

from models.tables import ALL_TABLES
from tests.deploy._services import MotoS3, Postgres
from tests.deploy.conftest import ServedApi
from tests.support.processes import stop_process
from warehouse.duck import connect
from warehouse.lake import Lake
from warehouse.viewsql import aggregate_names

# Past the suite's 300 s: three pods and a fresh analyst on moto S3 took longer than that at
# load ~40 (two suites and a benchmark on 2 cores). A deadline, not a wait.
pytestmark = pytest.mark.timeout(600)

POD_TIMEOUT_S = 300


def _start(env: dict[str, str], cwd: Path, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "pipelines.cli", *args],
        env=env,
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


@dataclass(frozen=True)
class PodsLake:
    """What the pods left: the lake's URI, the days they ingested, the shared database."""

    uri: str
    days: tuple[date, ...]
    database: str


@pytest.fixture(scope="module")
def pods_lake(
    postgres: Postgres,
    s3: MotoS3,
    served_sandbox: ServedApi,
    tmp_path_factory: pytest.TempPathFactory,
) -> PodsLake:
    """Three pods, one partition each, started together; they share PostgreSQL and S3 only."""
    tmp_path = tmp_path_factory.mktemp("pods")
    database = postgres.create_database()
    lake_uri = f"s3://{s3.create_bucket('cdrhouse-pods')}/lake"
    days = served_sandbox.days[-4:-1]
    pods = []
    try:
        schema_ready = False
        for i, day in enumerate(days):
            workdir = tmp_path / f"pod-{i}"
            (workdir / "tmp").mkdir(parents=True)
            env = served_sandbox.env(
                workdir,
                postgres.env(database),
                aws_env=s3.env(),
                lake_uri=lake_uri,
                extra={"TMPDIR": str(workdir / "tmp")},
            )
            if not schema_ready:
                # As in a deployment, the instance's schema exists before any run pod starts (the
                # webserver/daemon or `dagster instance migrate` creates it); pods that all found
                # an empty database would race to create the same tables.
                subprocess.run(
                    [sys.executable, "-m", "dagster", "instance", "migrate"],
                    env=env,
                    cwd=workdir,
                    check=True,
                    capture_output=True,
                    timeout=POD_TIMEOUT_S,
                )
                schema_ready = True
            args = ["ingest", "--start", day.isoformat(), "--end", str(day + timedelta(days=1))]
            if i:
                args.append("--no-snapshots")  # one pod takes the snapshots, as one run would
            pods.append((workdir, _start(env, workdir, *args)))

        outs = [proc.communicate(timeout=POD_TIMEOUT_S)[0] for _, proc in pods]
    finally:
        for _, proc in pods:
            stop_process(proc)  # a no-op for the ones that ended
    for (workdir, proc), out in zip(pods, outs, strict=True):
        if proc.returncode != 0:
            events = postgres.query(
                database,
                "select dagster_event_type, left(event, 3000) from event_logs "
                "where dagster_event_type like '%FAILURE%' or dagster_event_type like '%ENGINE%'",
            )
            raise AssertionError(f"{workdir.name}: exit {proc.returncode}\n{out}\n{events}")
        # Nothing of the lake was left on the pod's own disk.
        assert not (workdir / "data" / "lake").exists()
        assert list((workdir / "tmp" / "cdrhouse-spool").glob("*")) == []
    return PodsLake(lake_uri, days, database)


@pytest.fixture
def analyst_env(
    s3: MotoS3, served_sandbox: ServedApi, pods_lake: PodsLake, tmp_path: Path
) -> dict[str, str]:
    """A fresh machine: an empty disk, only the lake URI and the standard AWS variables."""
    env = served_sandbox.env(tmp_path, {}, aws_env=s3.env(), lake_uri=pods_lake.uri)
    for name in ("CC_API_BASE_URL", "CC_API_KEY", "DAGSTER_HOME"):
        env.pop(name)
    return env


def _sql(env: dict[str, str], fmt: str, query: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "pipelines.cli", "sql", "--format", fmt, query],
        env=env,
        cwd=env["CDRHOUSE_DATA_DIR"].rsplit("/", 1)[0],
        capture_output=True,
        text=True,
        timeout=POD_TIMEOUT_S,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_pods_share_one_instance_and_a_fresh_process_finds_every_day_exact(
    postgres: Postgres,
    served_sandbox: ServedApi,
    pods_lake: PodsLake,
    analyst_env: dict[str, str],
) -> None:
    # Every pod recorded its runs in the one shared instance: 3 CDR days + 1 snapshot run.
    statuses = postgres.query(pods_lake.database, "select status, count(*) from runs group by 1")
    assert dict(statuses) == {"SUCCESS": 4}, statuses  # type: ignore[arg-type]

    # `cdrhouse sql` in a fresh process builds the views over the lake and answers from it.
    query = "select date::varchar as day, id, cost::varchar as cost from cdrs"
    got: dict[str, dict[str, Decimal]] = {}
    for row in json.loads(_sql(analyst_env, "json", query)):
        assert row["id"] not in got.setdefault(row["day"], {}), f"{row['id']} twice"
        got[row["day"]][row["id"]] = Decimal(row["cost"])
    assert sorted(got) == [d.isoformat() for d in pods_lake.days]
    for day in pods_lake.days:
        truth = served_sandbox.truth(day)
        assert len(got[day.isoformat()]) == truth.total
        assert got[day.isoformat()] == truth.costs, day

    # Its warehouse.duckdb holds views over s3:// paths, not copies of the data...
    data_dir = Path(analyst_env["CDRHOUSE_DATA_DIR"])
    with duckdb.connect(str(data_dir / "warehouse.duckdb"), read_only=True) as con:
        row = con.execute("select sql from duckdb_views() where view_name = 'cdrs'").fetchone()
    assert row is not None
    (sql,) = row
    assert f"{pods_lake.uri}/cdrs/" in sql
    # ...and provenance: every partition came from the one API host (read in this process,
    # through the fsspec filesystem `connect` registers).
    host = served_sandbox.base_url.split("://")[1]
    with pytest.MonkeyPatch.context() as mp:
        for name, value in analyst_env.items():
            if name.startswith("AWS_"):
                mp.setenv(name, value)
        with connect(data_dir) as con:
            sources = con.execute("select distinct source from lake_partitions").fetchall()
            tables = con.execute(
                "select count(distinct table_name) from lake_partitions"
            ).fetchall()
    assert sources == [(host,)]
    assert tables[0][0] >= 20


def test_polars_reads_every_table_from_s3_with_the_expected_schema(
    s3: MotoS3,
    served_sandbox: ServedApi,
    pods_lake: PodsLake,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name, value in s3.env().items():
        monkeypatch.setenv(name, value)
    lake = Lake(pods_lake.uri)
    checked = []
    for spec in ALL_TABLES:
        if not lake.partitions(spec.name):
            continue  # e.g. the quarantine of clean days
        # Polars' own (Rust) object-store reader, from the standard AWS variables: an engine
        # that knows nothing of cdrhouse reads the hive layout with the spec's types.
        frame = pl.scan_parquet(
            f"{pods_lake.uri}/{spec.name}/*/part-0.parquet",
            hive_partitioning=True,
            hive_schema={spec.partition_key: pl.Date()} if spec.partition_key else None,
        ).collect()
        assert frame.schema == spec.polars_schema(), spec.name
        assert frame.height > 0 or spec.name == "cdr_quarantine", spec.name
        checked.append(spec.name)
    assert {spec.name for spec in ALL_TABLES if spec.name != "cdr_quarantine"} <= set(checked)
    cdrs = pl.scan_parquet(f"{pods_lake.uri}/cdrs/*/part-0.parquet").collect()
    assert cdrs["id"].n_unique() == sum(served_sandbox.truth(d).total for d in pods_lake.days)
    for agg in aggregate_names():
        agg_frame = pl.scan_parquet(
            f"{pods_lake.uri}/{agg}/*/part-0.parquet", hive_partitioning=True
        )
        assert agg_frame.collect()["date"].n_unique() == len(pods_lake.days), agg
