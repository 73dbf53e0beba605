"""`warehouse.duckdb`: views only, over the Parquet lake, rebuilt into a temp file and swapped.

Why views in a swapped file:
* the file holds no data, so partitions written by concurrent runs show up without any DuckDB
  write at all;
* the rebuild writes a *new* file and `os.replace`s it, so the pipeline never takes DuckDB's
  lock on the file an analyst holds open (their connection keeps the old inode; a new connection
  sees the new views). Concurrent rebuilds are safe: each writes its own temp file, last wins.

What it exposes:
* every CDR lake table under its own name (`cdrs`, `cdr_calls`, ...);
* every snapshot lake table as `<name>_snapshots` (all days), `<name>` (latest snapshot) and
  `<name>_history` (one row per version with `valid_from`/`valid_to`, built from the daily
  snapshots); `balance_snapshots` stays as is, with `balance` as its latest row;
* the reporting views from `warehouse/sql/*.sql`.
"""

from __future__ import annotations

import contextlib
import os
import re
import uuid
from pathlib import Path

import duckdb
import polars as pl

from models.tables import ALL_TABLES, BALANCE_SNAPSHOTS, TableSpec
from warehouse.lake import PART_FILE, Lake

WAREHOUSE_FILE = "warehouse.duckdb"
LAKE_DIR = "lake"
SQL_DIR = Path(__file__).parent / "sql"
SNAPSHOT_COLUMNS = ("snapshot_date", "snapshot_at")
# Date-partitioned inputs of the per-day pre-aggregates (`agg_*` views in warehouse/sql).
AGG_SOURCES = ("cdrs", "cdr_calls", "cdr_conversations", "cdr_sms")
_AGG_RE = re.compile(r"CREATE OR REPLACE VIEW\s+(agg_\w+)\s+AS", re.IGNORECASE)


def duck_type(dtype: pl.DataType) -> str:
    """DuckDB type of a polars dtype (the ones the table specs use)."""
    if isinstance(dtype, pl.Decimal):
        return f"DECIMAL({dtype.precision}, {dtype.scale})"
    if isinstance(dtype, pl.List):
        return f"{duck_type(dtype.inner)}[]"  # type: ignore[arg-type]
    if isinstance(dtype, pl.Datetime):
        return "TIMESTAMPTZ" if dtype.time_zone else "TIMESTAMP"
    simple = {
        pl.String: "VARCHAR",
        pl.Int64: "BIGINT",
        pl.Int32: "INTEGER",
        pl.Float64: "DOUBLE",
        pl.Boolean: "BOOLEAN",
        pl.Date: "DATE",
    }
    for cls, name in simple.items():
        if isinstance(dtype, cls):
            return name
    raise TypeError(f"no DuckDB type for {dtype}")


def _q(ident: str) -> str:
    return '"' + ident.replace('"', '""') + '"'


def _lit(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def view_name(spec: TableSpec) -> str:
    """Name of the view over all partitions of a lake table."""
    if spec.kind == "snapshot" and spec is not BALANCE_SNAPSHOTS:
        return f"{spec.name}_snapshots"
    return spec.name


def _base_view_sql(spec: TableSpec, lake: Path, day: str | None = None) -> str:
    table_dir = lake / spec.name
    typed = ", ".join(
        f"CAST({_q(c.name)} AS {duck_type(c.dtype)}) AS {_q(c.name)}" for c in spec.columns
    )
    one = table_dir / f"date={day}" / PART_FILE if day and spec.partition_key == "date" else None
    if (one is not None and not one.exists()) or not any(table_dir.glob(f"*=*/{PART_FILE}")):
        # No files yet: an empty view with the spec's types keeps queries valid.
        nulls = ", ".join(
            f"CAST(NULL AS {duck_type(c.dtype)}) AS {_q(c.name)}" for c in spec.columns
        )
        return f"SELECT {nulls} WHERE false"
    pattern = str(one.resolve() if one is not None else table_dir.resolve() / "*" / PART_FILE)
    hive = f"{{{_lit(spec.partition_key)}: 'DATE'}}" if spec.partition_key else "{}"
    return (
        f"SELECT {typed} FROM read_parquet({_lit(pattern)}, hive_partitioning = true, "
        f"hive_types = {hive}, union_by_name = true)"
    )


def _current_sql(spec: TableSpec) -> str:
    src = _q(view_name(spec))
    return (
        f"SELECT * EXCLUDE (snapshot_date) FROM {src} "
        f"WHERE snapshot_date = (SELECT max(snapshot_date) FROM {src})"
    )


def _history_sql(spec: TableSpec) -> str:
    """Islands of identical rows per key over consecutive snapshots -> valid_from/valid_to.

    valid_to is the first snapshot date on which the version no longer held (exclusive), NULL
    while it still holds. A key that disappears and comes back gets two versions.
    """
    src = _q(view_name(spec))
    key = ", ".join(_q(k) for k in spec.history_key)
    values = ", ".join(_q(c) for c in spec.column_names if c not in SNAPSHOT_COLUMNS)
    return f"""
WITH d AS (
    SELECT snapshot_date,
           row_number() OVER (ORDER BY snapshot_date) AS _n,
           lead(snapshot_date) OVER (ORDER BY snapshot_date) AS _next
    FROM (SELECT DISTINCT snapshot_date FROM {src})
),
x AS (
    SELECT s.*, d._n, d._next, hash({values}) AS _h
    FROM {src} s JOIN d USING (snapshot_date)
),
y AS (
    SELECT *, _n - row_number() OVER (PARTITION BY {key}, _h ORDER BY _n) AS _grp FROM x
),
z AS (
    SELECT *, min(snapshot_date) OVER (PARTITION BY {key}, _h, _grp) AS _first FROM y
    QUALIFY row_number() OVER (PARTITION BY {key}, _h, _grp ORDER BY _n DESC) = 1
)
SELECT * EXCLUDE (_n, _next, _h, _grp, _first, snapshot_date, snapshot_at),
       _first AS valid_from,
       _next AS valid_to,
       _next IS NULL AS is_current
FROM z"""


def reporting_sql_files() -> list[Path]:
    return sorted(SQL_DIR.glob("*.sql"))


def aggregate_names() -> list[str]:
    return [m for p in reporting_sql_files() for m in _AGG_RE.findall(p.read_text())]


def create_views(
    con: duckdb.DuckDBPyConnection,
    lake: Path,
    *,
    day: str | None = None,
    use_aggregates: bool = True,
) -> None:
    """All views. `day` restricts the CDR tables to one date partition (for materializing)."""
    for spec in ALL_TABLES:
        name = view_name(spec)
        con.execute(f"CREATE OR REPLACE VIEW {_q(name)} AS {_base_view_sql(spec, lake, day)}")
        if spec.kind != "snapshot":
            continue
        current = "balance" if spec is BALANCE_SNAPSHOTS else spec.name
        con.execute(f"CREATE OR REPLACE VIEW {_q(current)} AS {_current_sql(spec)}")
        if spec.history_key:
            con.execute(
                f"CREATE OR REPLACE VIEW {_q(spec.name + '_history')} AS {_history_sql(spec)}"
            )
    for path in reporting_sql_files():
        # One statement at a time: a file holds the agg_* view and the rpt_* view on top.
        for statement in con.extract_statements(path.read_text()):
            con.execute(statement)
    if use_aggregates:
        for agg in aggregate_names():
            _point_at_materialized(con, lake, agg)


def _point_at_materialized(con: duckdb.DuckDBPyConnection, lake: Path, agg: str) -> None:
    """Swap an `agg_*` view for a scan of its materialized per-day Parquet files."""
    files = lake / agg
    if not any(files.glob(f"date=*/{PART_FILE}")):
        return  # nothing materialized: the view computes from the CDR tables
    cols = con.execute(f"DESCRIBE {_q(agg)}").fetchall()
    typed = ", ".join(f"CAST({_q(c[0])} AS {c[1]}) AS {_q(c[0])}" for c in cols)
    pattern = _lit(str(files.resolve() / "*" / PART_FILE))
    con.execute(
        f"CREATE OR REPLACE VIEW {_q(agg)} AS SELECT {typed} FROM read_parquet({pattern}, "
        "hive_partitioning = true, hive_types = {'date': 'DATE'}, union_by_name = true)"
    )


def _mtime(path: Path) -> float | None:
    try:
        return path.stat().st_mtime
    except FileNotFoundError:
        return None


def materialize_aggregates(lake_dir: Path) -> int:
    """Refresh the per-day pre-aggregates whose source partitions changed; returns how many.

    Each `agg_*` view groups by date, so one date partition of its inputs gives exactly that
    date's rows. A materialized file is stamped with the newest source mtime seen *before* it
    was computed, so a source replaced meanwhile is newer and gets recomputed next time.
    """
    lake = Lake(str(lake_dir))
    aggs = aggregate_names()
    days = {k for t in AGG_SOURCES for k in lake.partitions(t)}
    refreshed = 0
    for key in sorted(days):
        stamps = [_mtime(lake.partition_path(t, key)) for t in AGG_SOURCES]
        newest = max(m for m in stamps if m is not None)
        stale = [a for a in aggs if (_mtime(lake.partition_path(a, key)) or -1.0) < newest]
        if not stale:
            continue
        con = duckdb.connect()
        try:
            create_views(con, lake.root, day=key.partition("=")[2], use_aggregates=False)
            for agg in stale:
                table = con.sql(f"SELECT * EXCLUDE (date) FROM {_q(agg)}").to_arrow_table()
                lake.write(agg, key, table, schema=table.schema)
                os.utime(lake.partition_path(agg, key), (newest, newest))
                refreshed += 1
        finally:
            con.close()
    # A date whose CDR partitions were all deleted loses its aggregates too.
    for agg in aggs:
        for key in set(lake.partitions(agg)) - days:
            lake.delete_partition(agg, key)
    return refreshed


def build_warehouse(data_dir: Path, lake_uri: str | None = None) -> Path:
    """(Re)build `data_dir/warehouse.duckdb` atomically; returns its path.

    The views read the lake at `lake_uri` (default `data_dir/lake`), so moving the lake is a
    configuration change."""
    data_dir = Path(data_dir).resolve()
    data_dir.mkdir(parents=True, exist_ok=True)
    lake_dir = Lake(lake_uri).root if lake_uri else data_dir / LAKE_DIR
    final = data_dir / WAREHOUSE_FILE
    tmp = data_dir / f".{WAREHOUSE_FILE}.{uuid.uuid4().hex}.tmp"
    materialize_aggregates(lake_dir)
    try:
        con = duckdb.connect(str(tmp))
        try:
            create_views(con, lake_dir)
            con.execute("CHECKPOINT")
        finally:
            con.close()
        os.replace(tmp, final)
    finally:
        for leftover in (tmp, Path(f"{tmp}.wal")):
            with contextlib.suppress(FileNotFoundError):
                leftover.unlink()
    return final


def connect(data_dir: Path, *, read_only: bool = True) -> duckdb.DuckDBPyConnection:
    """Open the warehouse; read-only by default so it never blocks a pipeline run."""
    path = Path(data_dir).resolve() / WAREHOUSE_FILE
    if not path.exists():
        raise FileNotFoundError(f"no warehouse at {path}; run `cdrhouse ingest` first")
    return duckdb.connect(str(path), read_only=read_only)
