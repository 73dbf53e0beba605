"""cdrhouse "in production": Dagster on PostgreSQL (pipelines/deploy/dagster.yaml), lake on S3.

Every process gets only what a production pod gets (`deploy_env`): the API's URL and key, the
DAGSTER_PG_* variables, the standard AWS_* variables and `CDRHOUSE_LAKE_URI=s3://bucket/lake`.
Three ways to run the pipeline, each reconciled exactly with the API:

- `cdrhouse ingest` as a subprocess (its own database and bucket);
- a multi-run backfill launched over GraphQL the way the UI launches one, and
- the nightly schedule's tick, evaluated and launched by the daemon,
  both against one real `dagster dev` (webserver + daemon) on its own database and bucket.
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from pathlib import Path

import dagster as dg
import duckdb
import polars as pl
import pytest
from dagster._core.storage.dagster_run import RunsFilter
from dagster._core.storage.tags import PARENT_RUN_ID_TAG, WILL_RETRY_TAG
from dagster_postgres import PostgresRunStorage

from models.tables import CDR_TABLES, SNAPSHOT_TABLES
from pipelines.names import CDR_GROUP, NIGHTLY_CRON
from tests.deploy._services import DEPLOY_YAML, MotoS3, Postgres
from tests.deploy.conftest import ServedApi
from tests.pipelines._dagster_dev import LAUNCH_BACKFILL, DagsterDev, run_dagster_dev
from warehouse.duck import build_warehouse, connect
from warehouse.viewsql import view_name

# Deadlines that only catch a hang: each wait ends when its state is reached. Beside a second
# full suite on 2 cores (load 8-52) the backfill took over 7 min, and a run worker could take
# minutes to start (run monitoring then fails it and `run_retries` relaunches it).
pytestmark = pytest.mark.timeout(1800)

LAKE_PREFIX = "lake"
RUN_TIMEOUT_S = 900.0
TERMINAL = frozenset(
    {dg.DagsterRunStatus.SUCCESS, dg.DagsterRunStatus.FAILURE, dg.DagsterRunStatus.CANCELED}
)


@contextlib.contextmanager
def _environ(
    env: Mapping[str, str], prefixes: Sequence[str] = ("DAGSTER_PG_", "AWS_")
) -> Iterator[None]:
    """This process's environment with the pod's database and object-store variables, for the
    readers that resolve them from `os.environ` (Dagster's `env:` config, s3fs)."""
    with pytest.MonkeyPatch.context() as mp:
        for key, value in env.items():
            if key.startswith(tuple(prefixes)):
                mp.setenv(key, value)
        yield


@contextlib.contextmanager
def _instance(env: Mapping[str, str]) -> Iterator[dg.DagsterInstance]:
    """The pod's Dagster instance, loaded from its DAGSTER_HOME (the deploy dagster.yaml)."""
    with _environ(env), dg.DagsterInstance.from_config(env["DAGSTER_HOME"]) as instance:
        assert isinstance(instance.run_storage, PostgresRunStorage)
        yield instance


@contextlib.contextmanager
def _analyst(env: Mapping[str, str]) -> Iterator[duckdb.DuckDBPyConnection]:
    """DuckDB views over the pod's lake, built on another machine's fresh disk (as an analyst
    or a new pod would): what it reads is what the lake holds, not the pod's local files."""
    with tempfile.TemporaryDirectory(prefix="cdrhouse-analyst-") as tmp, _environ(env):
        build_warehouse(Path(tmp), env["CDRHOUSE_LAKE_URI"])
        with connect(Path(tmp)) as con:
            yield con


def _warehouse_cdrs(env: Mapping[str, str]) -> dict[str, dict[str, Decimal]]:
    """day -> CDR id -> cost, from the warehouse's `cdrs` view over the lake."""
    with _analyst(env) as con:
        rows = con.execute("select date::varchar, id, cost from cdrs").fetchall()
    by_day: dict[str, dict[str, Decimal]] = {}
    for day, cdr_id, cost in rows:
        assert isinstance(cost, Decimal), f"cost of {cdr_id} is {type(cost).__name__}"
        assert cdr_id not in by_day.setdefault(day, {}), f"{cdr_id} twice in {day}"
        by_day[day][cdr_id] = cost
    return by_day


def _all_tables(env: Mapping[str, str]) -> dict[str, pl.DataFrame]:
    """Every warehouse view, sorted; `snapshot_at` (when a snapshot was read) dropped."""
    frames = {}
    with _analyst(env) as con:
        for spec in (*CDR_TABLES, *SNAPSHOT_TABLES):
            name = view_name(spec)
            arrow = con.sql(f'select * from "{name}"').to_arrow_table()
            frame = pl.DataFrame(pl.from_arrow(arrow))
            frame = frame.drop([c for c in ("snapshot_at",) if c in frame.columns])
            keys = [c for c, t in frame.schema.items() if not isinstance(t, pl.List | pl.Struct)]
            frames[name] = frame.sort(keys, nulls_last=True) if frame.height else frame
    return frames


def _assert_reconciles(api: ServedApi, env: Mapping[str, str], days: Sequence[date]) -> None:
    """Per day: distinct ids == the API's `metadata.total`, and every cost equal, by id."""
    warehouse = _warehouse_cdrs(env)
    for day in days:
        truth = api.truth(day)
        got = warehouse.get(day.isoformat(), {})
        assert truth.total > 0
        assert len(got) == truth.total, f"{day}: {len(got)} CDRs, API total {truth.total}"
        assert got.keys() == truth.costs.keys(), f"{day}: different CDR ids"
        wrong = {i: (got[i], truth.costs[i]) for i in got if got[i] != truth.costs[i]}
        assert not wrong, f"{day}: costs differ (warehouse, API): {dict(list(wrong.items())[:5])}"


def _assert_lake_on_s3(
    s3: MotoS3, bucket: str, env: Mapping[str, str], days: Sequence[date]
) -> None:
    keys = set(s3.keys(bucket, f"{LAKE_PREFIX}/"))
    for day in days:
        assert f"{LAKE_PREFIX}/raw_cdrs/date={day}/part-0.parquet" in keys, sorted(keys)[:20]
        assert f"{LAKE_PREFIX}/cdrs/date={day}/part-0.parquet" in keys
    # Nothing of the lake on the pod's disk: only the DuckDB file of views.
    assert not (Path(env["CDRHOUSE_DATA_DIR"]) / "lake").exists()


def _pod_env(
    workdir: Path,
    api: ServedApi,
    postgres: Postgres,
    s3: MotoS3,
    bucket: str,
    extra: Mapping[str, str] | None = None,
) -> dict[str, str]:
    database = postgres.create_database()
    return api.env(
        workdir,
        postgres.env(database),
        aws_env=s3.env(),
        lake_uri=f"s3://{bucket}/{LAKE_PREFIX}",
        extra=dict(extra or {}),
    )


# ------------------------------------------------------------------ the CLI


def _cli(env: Mapping[str, str], cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(
        [sys.executable, "-m", "pipelines.cli", *args],
        env=dict(env),
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT_S,
        check=False,
    )
    assert result.returncode == 0, (
        f"{args}: exit {result.returncode}\n{result.stdout}\n{result.stderr}"
    )
    return result


MAX_SESSIONS_PER_INGEST = 150


def _sessions(postgres: Postgres, dbname: str) -> int:
    """Connections made to `dbname` so far (PostgreSQL counts one when a session ends)."""
    [(count,)] = postgres.query(
        dbname, f"SELECT sessions FROM pg_stat_database WHERE datname = '{dbname}'"
    )
    assert isinstance(count, int)
    return count


def test_cli_ingest_records_runs_in_postgres_and_reconciles_exactly(
    tmp_path: Path,
    postgres: Postgres,
    s3: MotoS3,
    new_bucket: str,
    served_sandbox: ServedApi,
    ui_backfill: UiBackfill,  # not used here: started first so its runs overlap this test's
) -> None:
    # Own database, bucket and data dir: the `dagster dev` deployment busy meanwhile (its own
    # database and bucket) shares nothing with this pod but the PostgreSQL server and S3.
    env = _pod_env(tmp_path, served_sandbox, postgres, s3, new_bucket)
    days = list(served_sandbox.days[:2])
    argv = [
        "ingest",
        "--start",
        days[0].isoformat(),
        "--end",
        (days[-1] + timedelta(1)).isoformat(),
    ]

    sessions = _sessions(postgres, env["DAGSTER_PG_DB"])
    out = _cli(env, tmp_path, *argv).stdout
    assert served_sandbox.base_url in out  # it used the API it was pointed at
    # The command pools its connections (preflight.hold_connections): 837 without, ~60 with.
    opened = _sessions(postgres, env["DAGSTER_PG_DB"]) - sessions
    assert opened <= MAX_SESSIONS_PER_INGEST, opened

    with _instance(env) as instance:
        runs = instance.get_runs()
        assert len(runs) == 3, [(r.job_name, r.status) for r in runs]
        assert {r.status for r in runs} == {dg.DagsterRunStatus.SUCCESS}
        assert sorted(str(r.tags.get("dagster/partition")) for r in runs) == sorted(
            [*(d.isoformat() for d in days), "None"]
        )
        materialized = instance.get_materialized_partitions(dg.AssetKey("raw_cdrs"))
        assert materialized == {d.isoformat() for d in days}
    # In PostgreSQL itself, not in a sqlite file under DAGSTER_HOME.
    [(stored,)] = postgres.query(env["DAGSTER_PG_DB"], "select count(*) from runs")
    assert stored == 3
    assert not list(Path(env["DAGSTER_HOME"]).rglob("*.db"))

    _assert_lake_on_s3(s3, new_bucket, env, days)
    _assert_reconciles(served_sandbox, env, days)

    first = _all_tables(env)
    _cli(env, tmp_path, *argv)
    second = _all_tables(env)
    for name, frame in first.items():
        assert frame.equals(second[name]), f"{name} changed on a re-run"
    assert first["cdrs"].height == sum(served_sandbox.truth(d).total for d in days)
    with _instance(env) as instance:
        assert len(instance.get_runs()) == 6


# ------------------------------------------------------------------ dagster dev


@dataclass(frozen=True)
class ProdDev:
    """A `dagster dev` on the production instance file, with its pod environment."""

    dev: DagsterDev
    env: dict[str, str]
    bucket: str
    missed_tick: datetime

    def runs(
        self, run_ids: Sequence[str] | None = None, tags: Mapping[str, str] | None = None
    ) -> list[dg.DagsterRun]:
        with _instance(self.env) as instance:
            return list(instance.get_runs(RunsFilter(run_ids=run_ids, tags=tags)))

    def failures(self, tags: Mapping[str, str] | None = None) -> str:
        """Every run's status and its failure events: what a timed-out wait shows."""
        kinds = {dg.DagsterEventType.STEP_FAILURE, dg.DagsterEventType.RUN_FAILURE}
        lines = []
        with _instance(self.env) as instance:
            for run in instance.get_runs(RunsFilter(tags=tags)):
                lines.append(f"run {run.run_id} {run.status.value} {dict(run.tags)}")
                for entry in instance.all_logs(run.run_id, of_type=kinds):
                    error = entry.dagster_event.event_specific_data if entry.dagster_event else None
                    lines.append(f"  {entry.dagster_event_type}: {entry.message} {error}"[:3000])
        return "\n".join(lines)

    def settled(self, runs: Sequence[dg.DagsterRun]) -> list[dg.DagsterRun] | None:
        """Each run, or the relaunch that replaced it; None while one is still going.

        A run whose worker crashed or never started in time (run monitoring) is failed and
        relaunched once by `run_retries` (`dagster/will_retry`, then a run whose
        `dagster/parent_run_id` is it): what the deployment promises is the relaunch's result.
        """
        final = []
        for run in runs:
            while run.status in TERMINAL and run.tags.get(WILL_RETRY_TAG) == "true":
                children = self.runs(tags={PARENT_RUN_ID_TAG: run.run_id})
                if not children:
                    return None  # the daemon has yet to launch it
                (run,) = children
            if run.status not in TERMINAL:
                return None
            final.append(run)
        return final

    def wait_for_runs(
        self, run_ids: Sequence[str], timeout_s: float = RUN_TIMEOUT_S
    ) -> list[dg.DagsterRun]:
        """The runs' final results (after a `run_retries` relaunch, if any)."""
        deadline = time.monotonic() + timeout_s
        while True:
            runs = self.runs(run_ids=run_ids)
            final = self.settled(runs) if len(runs) == len(run_ids) else None
            if final is not None:
                return final
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"runs not done after {timeout_s:.0f}s: {[(r.run_id, r.status) for r in runs]}"
                    f"\n{self.failures()}\n{self.dev.log_tail()}"
                )
            time.sleep(2.0)


def _last_tick_time(now: datetime) -> datetime:
    """The latest 01:00 UTC at or before `now`: the nightly tick that most recently fell due."""
    assert NIGHTLY_CRON == "0 1 * * *"
    tick = now.astimezone(UTC).replace(hour=1, minute=0, second=0, microsecond=0)
    return tick if tick <= now else tick - timedelta(days=1)


def _schedule_running_since(env: Mapping[str, str], since: datetime) -> None:
    """Record in PostgreSQL that `nightly` has been running since `since`, as a deployment
    whose daemon was down (a restart, a node drain) when the tick fell due leaves it.

    On start, the daemon of `dagster dev` then runs the missed tick at once: the production
    path (scheduler daemon -> code server -> run queue -> run launcher), not a simulation of
    it. The daemon matches stored states by selector (location, repository, schedule name);
    the code location's own origin (a socket path) changes on every start anyway.
    """
    from dagster._core.remote_origin import (
        GrpcServerCodeLocationOrigin,
        RemoteInstigatorOrigin,
        RemoteRepositoryOrigin,
    )
    from dagster._core.scheduler.instigation import (
        InstigatorState,
        InstigatorStatus,
        InstigatorType,
        ScheduleInstigatorData,
    )

    location = GrpcServerCodeLocationOrigin(
        host="localhost", socket="/gone/previous-deployment.sock", location_name=LOCATION
    )
    origin = RemoteInstigatorOrigin(RemoteRepositoryOrigin(location, "__repository__"), "nightly")
    state = InstigatorState(
        origin,
        InstigatorType.SCHEDULE,
        # What the daemon itself stores for a schedule whose default_status is RUNNING.
        InstigatorStatus.DECLARED_IN_CODE,
        ScheduleInstigatorData(NIGHTLY_CRON, since.timestamp()),
    )
    with _instance(env) as instance:
        instance.add_instigator_state(state)


# `dagster dev -m pipelines.definitions` names its code location after the module.
LOCATION = "pipelines.definitions"


@pytest.fixture(scope="module")
def prod_dev(
    tmp_path_factory: pytest.TempPathFactory,
    postgres: Postgres,
    s3: MotoS3,
    served_sandbox: ServedApi,
) -> Iterator[ProdDev]:
    """One `dagster dev` for the backfill and the schedule test (startup costs ~15-50 s).

    Its daemon runs the nightly tick it missed as soon as it starts (`_schedule_running_since`),
    so the tick's runs overlap the backfill's instead of adding their time to it.
    """
    workdir = tmp_path_factory.mktemp("prod_dev")
    bucket = s3.create_bucket("cdrhouse-dagster-dev")
    # A tick is yesterday only (plus the snapshots), so it stays off the backfill's days.
    env = _pod_env(workdir, served_sandbox, postgres, s3, bucket, {"CDRHOUSE_LOOKBACK_DAYS": "0"})
    # From the sandbox's clock, so the tick's day is one the sandbox serves even when the
    # session crossed midnight UTC before this fixture ran.
    missed_tick = _last_tick_time(served_sandbox.now)
    _schedule_running_since(env, missed_tick - timedelta(minutes=1))
    with run_dagster_dev(workdir, instance_yaml=DEPLOY_YAML, base_env=env) as dev:
        assert dev.home == Path(env["DAGSTER_HOME"])
        yield ProdDev(dev=dev, env=env, bucket=bucket, missed_tick=missed_tick)


CDR_ASSETS = """
{ assetNodes { assetKey { path } groupName } }
"""


def _partition(run: dg.DagsterRun) -> str | None:
    """A run's one partition: `dagster/partition`, or a one-day range (backfill runs)."""
    if "dagster/partition" in run.tags:
        return run.tags["dagster/partition"]
    start = run.tags.get("dagster/asset_partition_range_start")
    assert start == run.tags.get("dagster/asset_partition_range_end"), run.tags
    return start


def _in_postgres(postgres: Postgres, env: Mapping[str, str], run_ids: Sequence[str]) -> int:
    """How many of the runs PostgreSQL itself holds, finished successfully."""
    ids = ", ".join(f"'{run_id}'" for run_id in run_ids)
    [(count,)] = postgres.query(
        env["DAGSTER_PG_DB"],
        f"select count(*) from runs where run_id in ({ids}) and status = 'SUCCESS'",
    )
    assert isinstance(count, int)
    return count


@dataclass(frozen=True)
class UiBackfill:
    backfill_id: str
    days: list[date]


@pytest.fixture(scope="module")
def ui_backfill(prod_dev: ProdDev, served_sandbox: ServedApi) -> UiBackfill:
    """The backfill a UI user launches on the fresh deployment: the CDR assets of the three
    oldest days, sent as the UI's partitions dialog sends it (`launchPartitionBackfill`).

    Launched once per module, before the CLI test (which requests it), so the backfill's ticks
    and runs overlap that test on 2 cores instead of following it."""
    dev = prod_dev.dev
    days = list(served_sandbox.days[:3])  # the nightly tick takes yesterday
    nodes = dev.graphql(CDR_ASSETS)["assetNodes"]
    selection = [{"path": n["assetKey"]["path"]} for n in nodes if n["groupName"] == CDR_GROUP]
    assert {"raw_cdrs", "cdrs", "cdr_calls", "cdr_quarantine"} <= {s["path"][-1] for s in selection}
    result = dev.graphql(
        LAUNCH_BACKFILL,
        {
            "params": {
                "assetSelection": selection,
                "partitionNames": [d.isoformat() for d in days],
                "fromFailure": False,
                "tags": [{"key": "dagster/from_ui", "value": "true"}],
            }
        },
    )["launchPartitionBackfill"]
    assert result["__typename"] == "LaunchBackfillSuccess", result
    return UiBackfill(backfill_id=result["backfillId"], days=days)


def test_ui_backfill_runs_one_run_per_partition_on_postgres(
    prod_dev: ProdDev,
    ui_backfill: UiBackfill,
    postgres: Postgres,
    s3: MotoS3,
    served_sandbox: ServedApi,
) -> None:
    dev, days = prod_dev.dev, ui_backfill.days

    tags = {"dagster/backfill": ui_backfill.backfill_id}
    try:
        status = dev.wait_for_backfill(ui_backfill.backfill_id, timeout_s=RUN_TIMEOUT_S)
    except AssertionError as timed_out:
        raise AssertionError(f"{timed_out}\n{prod_dev.failures(tags)}") from None

    assert status in {"COMPLETED", "COMPLETED_SUCCESS"}, f"{prod_dev.failures(tags)}"
    launched = prod_dev.runs(tags=tags)
    runs = prod_dev.settled([r for r in launched if PARENT_RUN_ID_TAG not in r.tags])
    assert runs is not None, prod_dev.failures(tags)
    # Multi-run: one run per partition, each a single day.
    assert sorted(str(_partition(r)) for r in runs) == [d.isoformat() for d in days]
    assert {r.status for r in runs} == {dg.DagsterRunStatus.SUCCESS}
    assert _in_postgres(postgres, prod_dev.env, [r.run_id for r in runs]) == 3
    _assert_lake_on_s3(s3, prod_dev.bucket, prod_dev.env, days)
    _assert_reconciles(served_sandbox, prod_dev.env, days)


SCHEDULE_TICKS = """
query Ticks($selector: ScheduleSelector!) {
  scheduleOrError(scheduleSelector: $selector) {
    __typename
    ... on Schedule {
      scheduleState {
        status selectorId
        ticks(limit: 5) { status timestamp runIds error { message } }
      }
    }
  }
}
"""


def test_nightly_schedule_tick_runs_on_postgres(
    prod_dev: ProdDev, postgres: Postgres, served_sandbox: ServedApi
) -> None:
    dev = prod_dev.dev
    selector = {
        "repositoryLocationName": LOCATION,
        "repositoryName": "__repository__",
        "scheduleName": "nightly",
    }
    deadline = time.monotonic() + 300.0  # the daemon's first tick, on a loaded machine
    while True:
        node = dev.graphql(SCHEDULE_TICKS, {"selector": selector})["scheduleOrError"]
        assert node["__typename"] == "Schedule", node
        ticks = node["scheduleState"]["ticks"]
        if ticks and ticks[0]["status"] != "STARTED":
            break
        assert time.monotonic() < deadline, f"no tick evaluated: {ticks}\n{dev.log_tail()}"
        time.sleep(1.0)
    # The tick that fell due while no daemon ran, evaluated by the daemon.
    assert node["scheduleState"]["status"] == "RUNNING"
    [tick] = [t for t in ticks if t["timestamp"] == prod_dev.missed_tick.timestamp()]
    assert tick["status"] == "SUCCESS", tick
    run_ids = tick["runIds"]

    runs = prod_dev.wait_for_runs(run_ids)

    assert {r.status for r in runs} == {dg.DagsterRunStatus.SUCCESS}, prod_dev.failures()
    assert {r.tags.get("dagster/schedule_name") for r in runs} == {"nightly"}
    day = (prod_dev.missed_tick - timedelta(days=1)).date()
    assert day not in served_sandbox.days[:3]  # disjoint from the backfill's days
    # CDRHOUSE_LOOKBACK_DAYS=0: the previous day, and one run for the snapshots.
    assert sorted(str(_partition(r)) for r in runs) == sorted([day.isoformat(), "None"])
    assert _in_postgres(postgres, prod_dev.env, [r.run_id for r in runs]) == 2
    # The tick itself is in PostgreSQL's schedule storage too.
    stored_ticks = postgres.query(
        prod_dev.env["DAGSTER_PG_DB"],
        "select status, timestamp from job_ticks where selector_id = "
        f"'{node['scheduleState']['selectorId']}'",
    )
    # (Dagster stores naive UTC timestamps.)
    missed = prod_dev.missed_tick.replace(tzinfo=None)
    assert [status for status, at in stored_ticks if at == missed] == ["SUCCESS"], stored_ticks
    _assert_reconciles(served_sandbox, prod_dev.env, [day])
    with _analyst(prod_dev.env) as con:
        for spec in SNAPSHOT_TABLES:
            row = con.execute(f'select count(*) from "{view_name(spec)}"').fetchone()
            assert row is not None
            assert row[0] > 0, f"snapshot table {view_name(spec)} is empty after the tick"
