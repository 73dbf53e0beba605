"""`cdrhouse sql` reads the lake and writes nothing, on a local and on an `s3://` lake.

Every attempt to write (COPY, ATTACH, EXPORT, DML, DDL), to read outside the lake, to load an
extension or to change a setting is refused with one line and exit code 1, and every byte of
the lake (every file, every object) is the same afterwards. Answers do not depend on the
analyst's time zone, and the README's analyst examples return what a plain read-only
connection returns.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import polars as pl
import pytest

from connectors.sandbox.generator import Dataset
from pipelines.cli import main
from tests.deploy._services import MotoS3, start_moto
from tests.support.paths import REPO_ROOT
from warehouse.duck import WAREHOUSE_FILE, build_warehouse
from warehouse.lake import MARKER_FILE, Lake

from .conftest import SmallWarehouse, write_day, write_snapshots

# The refusal every blocked query ends with: one line that says why.
REFUSED = "only reads the lake"
PARTITION = "cdrs/date=2026-11-01/part-0.parquet"


@dataclass
class LakeUnderTest:
    """A data dir whose warehouse reads `uri`, and how to fingerprint every byte of that lake."""

    name: str
    data_dir: Path
    uri: str  # as the views spell it: an absolute path or s3://bucket/prefix
    snapshot: Callable[[], dict[str, str]]
    env: dict[str, str]


def _local_snapshot(root: Path) -> Callable[[], dict[str, str]]:
    def snapshot() -> dict[str, str]:
        return {
            str(p.relative_to(root)): (
                "dir" if p.is_dir() else hashlib.sha256(p.read_bytes()).hexdigest()
            )
            for p in sorted(root.rglob("*"))
        }

    return snapshot


def _s3_snapshot(s3: MotoS3, bucket: str) -> Callable[[], dict[str, str]]:
    """Every object of the bucket (not only the lake prefix) with the hash of its body."""

    def snapshot() -> dict[str, str]:
        client = s3.client()
        out: dict[str, str] = {}
        for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket):
            for obj in page.get("Contents", []):
                body = client.get_object(Bucket=bucket, Key=obj["Key"])["Body"].read()
                out[obj["Key"]] = hashlib.sha256(body).hexdigest()
        return out

    return snapshot


@pytest.fixture(scope="module")
def local_lake(small: SmallWarehouse, tmp_path_factory: pytest.TempPathFactory) -> LakeUnderTest:
    """A copy of the small lake (attacks that got through must not spoil the shared one)."""
    data_dir = tmp_path_factory.mktemp("sql-local")
    shutil.copytree(small.lake.root, data_dir / "lake", ignore=shutil.ignore_patterns("_tmp"))
    build_warehouse(data_dir)
    root = (data_dir / "lake").resolve()
    return LakeUnderTest(
        "local", data_dir, str(root), _local_snapshot(root), {"CDRHOUSE_DATA_DIR": str(data_dir)}
    )


@pytest.fixture(scope="module")
def s3_lake(
    small: SmallWarehouse, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LakeUnderTest]:
    """The small lake's `cdrs` on moto's S3 server (the other views are empty: few objects to
    hash); the warehouse is built by `cdrhouse sql` itself."""
    with start_moto(tmp_path_factory.mktemp("moto")) as s3, pytest.MonkeyPatch.context() as mp:
        for name, value in s3.env().items():
            mp.setenv(name, value)
        bucket = s3.create_bucket("sql-lockdown")
        client = s3.client()
        for path in sorted((small.lake.root / "cdrs").rglob("*.parquet")):
            rel = path.relative_to(small.lake.root)
            client.put_object(Bucket=bucket, Key=f"lake/{rel}", Body=path.read_bytes())
        marker = json.dumps({"source": "sandbox:11"}).encode()
        client.put_object(Bucket=bucket, Key=f"lake/{MARKER_FILE}", Body=marker)
        uri = f"s3://{bucket}/lake"
        data_dir = tmp_path_factory.mktemp("sql-s3")
        env = {"CDRHOUSE_DATA_DIR": str(data_dir), "CDRHOUSE_LAKE_URI": uri}
        assert main(["sql", "SELECT 1"], env=env) == 0  # builds warehouse.duckdb over the lake
        yield LakeUnderTest("s3", data_dir, uri, _s3_snapshot(s3, bucket), env)


@pytest.fixture(params=["local", "s3"])
def lake(request: pytest.FixtureRequest) -> LakeUnderTest:
    fixture: LakeUnderTest = request.getfixturevalue(f"{request.param}_lake")
    return fixture


def sql(
    lake: LakeUnderTest, capsys: pytest.CaptureFixture[str], *argv: str
) -> tuple[int, str, str]:
    """`cdrhouse sql ARGV` through the real entry point: exit code, stdout, stderr."""
    capsys.readouterr()
    code = main(["sql", *argv], env=lake.env)
    out, err = capsys.readouterr()
    return code, out, err


def assert_refused(
    lake: LakeUnderTest, capsys: pytest.CaptureFixture[str], *argv: str, why: str = REFUSED
) -> str:
    """The query is refused in one line with exit 1, and the lake and warehouse are as they were."""
    before = lake.snapshot()
    warehouse = (lake.data_dir / WAREHOUSE_FILE).read_bytes()
    data_dir = sorted(p.name for p in lake.data_dir.iterdir())
    code, out, err = sql(lake, capsys, *argv)
    lines = err.strip().splitlines()
    assert code == 1, (code, out, err)
    assert len(lines) == 1, err
    assert lines[0].startswith("cdrhouse sql: error: "), err
    assert why in lines[0], err
    assert "Traceback" not in err
    assert lake.snapshot() == before, f"{argv[0]!r} changed the {lake.name} lake"
    assert (lake.data_dir / WAREHOUSE_FILE).read_bytes() == warehouse
    assert sorted(p.name for p in lake.data_dir.iterdir()) == data_dir
    return lines[0]


# The four attempts the issue names, on both lakes.
ATTACKS = {
    "copy_to_lake": "COPY (SELECT * FROM cdrs WHERE 1=0) TO '{lake}/"
    + PARTITION
    + "' (FORMAT parquet)",
    "attach_read_write": "ATTACH '{lake}/evil.duckdb' AS evil (READ_WRITE)",
    "read_text_outside": "SELECT * FROM read_text('/etc/passwd')",
    "install": "INSTALL httpfs",
    # DuckDB 2.0 parses this as a SELECT statement, and runs the COPY.
    "copy_inside_with": "WITH c AS (COPY (SELECT * FROM cdrs WHERE 1=0) TO '{lake}/"
    + PARTITION
    + "' (FORMAT parquet)) SELECT * FROM c",
}


@pytest.mark.parametrize("attack", ATTACKS)
def test_named_attacks_are_refused_and_leave_every_lake_byte(
    lake: LakeUnderTest, attack: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert_refused(lake, capsys, ATTACKS[attack].format(lake=lake.uri))


# More ways to write or to read elsewhere, each a statement an analyst (or a pasted snippet)
# could send. On the local lake: the engine allows writes *inside* the lake directory, so
# these prove the statement check; the s3 lake is covered by the engine test below as well.
MORE_ATTACKS = [
    "COPY cdrs TO '{lake}/cdrs/date=2026-11-09/part-0.parquet'",
    "COPY (SELECT 1 AS x) TO '{outside}/escape.csv'",
    "EXPORT DATABASE '{lake}/export'",
    "EXPLAIN ANALYZE COPY (SELECT 1) TO '{lake}/" + PARTITION + "'",
    "/* harmless */ EXPLAIN (ANALYZE) COPY (SELECT 1) TO '{lake}/x.parquet'",
    "COPY (PIVOT cdrs ON type USING count(*)) TO '{lake}/pivot.csv'",
    "SELECT 1; COPY (SELECT 1) TO '{lake}/" + PARTITION + "'",
    "SELECT 1;\nATTACH '{lake}/evil.duckdb' (READ_WRITE)",
    "ATTACH ':memory:' AS scratch",
    "ATTACH '{lake}/evil.duckdb'",
    "LOAD httpfs",
    "FORCE INSTALL httpfs",
    "SET TimeZone = 'America/New_York'",
    "SET enable_external_access = true",
    "RESET lock_configuration",
    "PRAGMA enable_profiling",
    "PRAGMA profiling_output = '{lake}/profile.json'",
    "IMPORT DATABASE '{lake}'",
    "CALL enable_logging(storage = 'file', storage_config = {{'path': '{lake}/logs'}})",
    "SELECT * FROM enable_logging(storage = 'file', storage_config = {{'path': '{lake}/logs'}})",
    "CHECKPOINT",
    "CREATE TABLE memory.main.t AS SELECT 1 AS x",
    "CREATE TEMP TABLE t AS SELECT 1 AS x",
    "CREATE PERSISTENT SECRET s (TYPE s3, KEY_ID 'a', SECRET 'b')",
    "INSERT INTO cdrs SELECT * FROM cdrs",
    "WITH gone AS (DELETE FROM cdrs RETURNING *) SELECT count(*) FROM gone",
    "UPDATE cdrs SET cost = 0",
    "DROP VIEW cdrs",
    "USE memory",
    "DETACH warehouse",
    "SELECT * FROM read_text('{lake}/../../../../../../etc/hostname')",
    "SELECT * FROM glob('/etc/*')",
    "SELECT * FROM read_csv('/proc/self/environ')",
    "SELECT count(*) FROM read_parquet('{outside}/*.parquet')",
    "SELECT * FROM query('SELECT * FROM read_text(''/etc/passwd'')')",
    "SELECT * FROM checkpoint()",
    "CALL force_checkpoint()",
    "PIVOT (SELECT * FROM query('SELECT 1 AS k, ''a'' AS v')) ON v USING count(*)",
    "WITH p AS (PIVOT cdrs ON type USING count(*)) INSERT INTO cdrs SELECT * FROM p",
    "PREPARE p AS SELECT 1",
    "UPDATE EXTENSIONS",  # a statement type the Python enum does not know
]


@pytest.mark.parametrize("attack", MORE_ATTACKS)
def test_more_attacks_are_refused_on_a_local_lake(
    local_lake: LakeUnderTest, attack: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    pl.DataFrame({"x": [1]}).write_parquet(outside / "o.parquet")
    query = attack.format(lake=local_lake.uri, outside=outside)
    assert_refused(local_lake, capsys, query)
    assert sorted(p.name for p in outside.iterdir()) == ["o.parquet"]


def test_output_inside_the_lake_or_onto_the_warehouse_is_refused(
    local_lake: LakeUnderTest, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    lake_root = Path(local_lake.uri)
    query = "SELECT * FROM cdrs WHERE false"
    assert_refused(
        local_lake,
        capsys,
        query,
        "--format",
        "parquet",
        "--output",
        str(lake_root / PARTITION),
        why="--output",
    )
    assert_refused(
        local_lake,
        capsys,
        query,
        "--format",
        "csv",
        "--output",
        str(local_lake.data_dir / WAREHOUSE_FILE),
        why="--output",
    )
    link = tmp_path / "innocent"
    link.symlink_to(lake_root / "cdrs")
    assert_refused(
        local_lake,
        capsys,
        query,
        "--format",
        "csv",
        "--output",
        str(link / "x.csv"),
        why="--output",
    )
    # Anywhere else is the analyst's choice.
    out = tmp_path / "fine.csv"
    assert sql(local_lake, capsys, "SELECT 1 AS x", "--format", "csv", "--output", str(out))[0] == 0
    assert out.read_text().splitlines() == ["x", "1"]


def test_the_engine_itself_refuses_without_the_statement_check(
    lake: LakeUnderTest, tmp_path: Path
) -> None:
    """Defence in depth: on the analyst's connection, with no statement check in front, DuckDB
    reads nothing outside the lake, loads nothing, changes no setting, and (object store)
    writes nothing to the lake."""
    from warehouse.duck import connect_analyst

    before = lake.snapshot()
    con = connect_analyst(lake.data_dir)
    try:
        assert con.execute("SELECT count(*) FROM cdrs").fetchall() == [(2400,)]
        assert con.execute("SELECT current_setting('TimeZone')").fetchall() == [("UTC",)]
        refused = [
            "SELECT * FROM read_text('/etc/passwd')",
            "SELECT * FROM glob('/*')",
            f"COPY (SELECT 1) TO '{tmp_path}/escape.csv'",
            f"ATTACH '{tmp_path}/escape.duckdb' (READ_WRITE)",
            "INSTALL httpfs",
            "LOAD httpfs",
            "SET enable_external_access = true",
            "SET TimeZone = 'America/New_York'",
            "SET allowed_directories = ['/']",
            "SELECT * FROM enable_logging(storage = 'file')",
            "CREATE TABLE t AS SELECT 1",
        ]
        if lake.name == "s3":
            refused += [
                f"COPY (SELECT 1) TO '{lake.uri}/{PARTITION}'",
                f"COPY (SELECT 1) TO '{lake.uri}/new.parquet'",
                f"EXPORT DATABASE '{lake.uri}/export'",
                f"SELECT * FROM read_text('{lake.uri.rsplit('/', 1)[0]}/elsewhere.txt')",
            ]
        for statement in refused:
            with pytest.raises(duckdb.Error):
                con.execute(statement)
    finally:
        con.close()
    assert lake.snapshot() == before
    assert list(tmp_path.iterdir()) == []


# --- time zones ---------------------------------------------------------------------------

RUNNER = """
import json, sys
from pipelines.cli import main
jobs = json.load(sys.stdin)
print(json.dumps([main(["sql", q, "--format", "json", "--output", out], env=env)
                  for q, out, env in jobs]))
"""


def cli_in_tz(tz: str, data_dir: Path, queries: list[str], work: Path) -> list[Any]:
    """Each query through `pipelines.cli.main` in one process whose TZ is `tz` (an analyst's
    shell); the rows of each, or the exit code when it failed."""
    outs = [str(work / f"{tz.replace('/', '_')}-{i}.json") for i in range(len(queries))]
    env = {"CDRHOUSE_DATA_DIR": str(data_dir)}
    done = subprocess.run(
        [sys.executable, "-c", RUNNER],
        input=json.dumps([[q, o, env] for q, o in zip(queries, outs, strict=True)]),
        env={**os.environ, "TZ": tz, "PYTHONPATH": str(REPO_ROOT)},
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    codes = json.loads(done.stdout.strip().splitlines()[-1])
    return [
        json.loads(Path(o).read_text()) if c == 0 else c for c, o in zip(codes, outs, strict=True)
    ]


def test_answers_do_not_depend_on_the_analysts_time_zone(
    small: SmallWarehouse, tmp_path: Path
) -> None:
    query = (
        "SELECT id FROM cdrs WHERE started_at >= '2026-11-02' AND started_at < '2026-11-03' "
        "ORDER BY id"
    )
    utc = dt.UTC
    truth = (
        small.tables["cdrs"]
        .filter(
            (pl.col("started_at") >= dt.datetime(2026, 11, 2, tzinfo=utc))
            & (pl.col("started_at") < dt.datetime(2026, 11, 3, tzinfo=utc))
        )["id"]
        .sort()
        .to_list()
    )
    assert len(truth) > 700
    for tz in ("UTC", "America/New_York", "Pacific/Kiritimati"):
        (rows,) = cli_in_tz(tz, small.data_dir, [query], tmp_path)
        assert [r["id"] for r in rows] == truth, f"TZ={tz}: {len(rows)} rows, not {len(truth)}"


# --- the README's analyst examples --------------------------------------------------------


def readme_analyst_queries() -> list[str]:
    """Every query of the README's "For analysts" section: the `cdrhouse sql "…"` lines, the
    `con.sql("…")` line and each statement of its SQL blocks."""
    readme = (REPO_ROOT / "README.md").read_text()
    section = readme.split("\n## For analysts\n", 1)[1].split("\n## ", 1)[0]
    queries = re.findall(r'cdrhouse sql "([^"]+)"', section)
    queries += re.findall(r'con\.sql\("([^"]+)"\)', section)
    con = duckdb.connect()
    for block in re.findall(r"```sql\n(.*?)```", section, flags=re.DOTALL):
        queries += [s.query for s in con.extract_statements(block)]
    return queries


@pytest.fixture(scope="module")
def recent_warehouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Yesterday (UTC), so the README's `current_date` examples have rows (one day: its
    `LIMIT 20` of `rpt_daily_volume` holds every row, no tie decides which), and snapshots of
    two days, so the `*_history` views have versions."""
    yesterday = dt.datetime.now(dt.UTC).date() - dt.timedelta(days=1)
    ds = Dataset(seed=5, start_date=yesterday, days=1, cdrs_per_day=200)
    data_dir = tmp_path_factory.mktemp("sql-readme")
    lake = Lake((data_dir / "lake").as_uri())
    write_day(lake, ds, yesterday)
    for days_before, balance in ((1, "100.5"), (0, "90.25")):
        day = yesterday - dt.timedelta(days=days_before)
        at = dt.datetime.combine(day, dt.time(1), tzinfo=dt.UTC)
        write_snapshots(lake, ds, ds.users, at, balance)
    build_warehouse(data_dir)
    return data_dir


def plain_rows(data_dir: Path, query: str) -> list[Any]:
    """What a plain read-only DuckDB connection returns, in the warehouse's zone (UTC), through
    the same polars JSON writer as `--format json`."""
    with duckdb.connect(str(data_dir / WAREHOUSE_FILE), read_only=True) as con:
        con.execute("SET TimeZone = 'UTC'")
        last = con.extract_statements(query)[-1]  # `--file` answers with the last statement
        frame = pl.DataFrame(pl.from_arrow(con.sql(last).to_arrow_table()))
    rows: list[Any] = json.loads(frame.write_json())
    return rows


# Read forms analysts use beyond the README; the rows must match a plain connection's too.
READ_FORMS = [
    "WITH d AS (SELECT date, count(*) AS n FROM cdrs GROUP BY date) SELECT * FROM d ORDER BY date",
    "FROM cdrs SELECT type, count(*) AS n GROUP BY type ORDER BY type",
    "FROM rpt_daily_volume ORDER BY ALL LIMIT 5",  # ordered: the view holds more than 5 rows
    "DESCRIBE cdrs",
    "DESCRIBE SELECT id, cost FROM cdrs",
    "SHOW TABLES",
    "PIVOT cdrs ON type USING count(*) GROUP BY date ORDER BY date",
    "PRAGMA table_info('cdr_calls')",
    "CALL pragma_table_info('cdr_sms')",
    "SELECT view_name, column_count, sql FROM duckdb_views() WHERE view_name = 'cdrs'",
    "VALUES (1, 'a'), (2, 'b')",
    "SELECT count(*) AS n FROM read_parquet('{lake}/cdrs/*/*.parquet')",
    "SELECT 1 AS one; SELECT 2 AS two",
    "SELECT " + "1 + " * 900 + "1 AS long_sum",  # a tree deeper than Python's recursion limit
]


def test_readme_examples_and_read_forms_answer_as_a_plain_connection(
    recent_warehouse: Path, tmp_path: Path
) -> None:
    """In an analyst's shell whose local date is not the UTC date, so `current_date` (README
    examples 1 and 2) is the warehouse's UTC day, as every timestamp in it."""
    readme = readme_analyst_queries()
    assert len(readme) >= 7, readme
    lake_root = (recent_warehouse / "lake").resolve()
    forms = [q.format(lake=lake_root) for q in READ_FORMS]
    # A zone whose date differs from the UTC date right now: UTC+14 from 10:00 UTC on, UTC-11
    # before (neither has summer time).
    today = dt.datetime.now(dt.UTC)
    tz = "Pacific/Kiritimati" if today.hour >= 10 else "Pacific/Pago_Pago"
    # Shape-only: plans, summaries with approximate statistics.
    loose = ["EXPLAIN (SELECT * FROM rpt_cost_daily)", "SUMMARIZE cdr_calls"]
    got = cli_in_tz(tz, recent_warehouse, [*readme, *forms, *loose], tmp_path)
    wants = [plain_rows(recent_warehouse, q) for q in [*readme, *forms]]
    if dt.datetime.now(dt.UTC).date() != today.date():
        pytest.skip("midnight UTC passed while the queries ran: current_date moved")
    for query, rows, want in zip([*readme, *forms], got, wants, strict=False):
        assert isinstance(rows, list), f"exit {rows}: {query}"
        key = json.dumps
        assert sorted(map(key, rows)) == sorted(map(key, want)), f"TZ={tz}: {query}"
    explain, summary = got[-2:]
    assert isinstance(explain, list)
    assert explain
    assert isinstance(summary, list)
    assert len(summary) == len(plain_rows(recent_warehouse, "DESCRIBE cdr_calls"))
