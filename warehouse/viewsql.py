"""The SQL text of the warehouse's views: DuckDB types, view names, the lake table views and
the snapshot `current` and `history` views, and the reporting SQL files (`warehouse/sql/`).

Pure text builders: `warehouse.duck` runs them on a connection.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

import polars as pl

from models.tables import BALANCE_SNAPSHOTS, TableSpec

# Named in `warehouse.analyst`, which loads no DuckDB, polars or pyarrow to name them.
from warehouse.analyst import WAREHOUSE_FILE as WAREHOUSE_FILE
from warehouse.analyst import lit as lit
from warehouse.lake import Lake

SQL_DIR = Path(__file__).parent / "sql"
SNAPSHOT_COLUMNS = ("snapshot_date", "snapshot_at")
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


def q(ident: str) -> str:
    return '"' + ident.replace('"', '""') + '"'


def view_name(spec: TableSpec) -> str:
    """Name of the view over all partitions of a lake table."""
    if spec.kind == "snapshot" and spec is not BALANCE_SNAPSHOTS:
        return f"{spec.name}_snapshots"
    return spec.name


def empty_select(columns: Sequence[tuple[str, str]]) -> str:
    """An empty view of typed columns keeps queries valid while a table has no files."""
    nulls = ", ".join(f"CAST(NULL AS {ctype}) AS {q(name)}" for name, ctype in columns)
    return f"SELECT {nulls} WHERE false"


def empty_sql(spec: TableSpec) -> str:
    return empty_select([(c.name, duck_type(c.dtype)) for c in spec.columns])


def base_view_sql(spec: TableSpec, lake: Lake, day: str | None = None) -> str:
    typed = ", ".join(
        f"CAST({q(c.name)} AS {duck_type(c.dtype)}) AS {q(c.name)}" for c in spec.columns
    )
    if day and spec.partition_key != "date":
        return empty_sql(spec)  # one day's aggregates read only that day's CDR tables
    if day:
        key = f"date={day}"
        if not lake.exists(spec.name, key):
            return empty_sql(spec)
        pattern = lake.partition_url(spec.name, key)
    else:
        if not lake.partitions(spec.name):
            return empty_sql(spec)
        pattern = lake.table_glob(spec.name)
    hive = f"{{{lit(spec.partition_key)}: 'DATE'}}" if spec.partition_key else "{}"
    return (
        f"SELECT {typed} FROM read_parquet({lit(pattern)}, hive_partitioning = true, "
        f"hive_types = {hive}, union_by_name = true)"
    )


def current_sql(spec: TableSpec) -> str:
    src = q(view_name(spec))
    return (
        f"SELECT * EXCLUDE (snapshot_date) FROM {src} "
        f"WHERE snapshot_date = (SELECT max(snapshot_date) FROM {src})"
    )


def history_sql(spec: TableSpec) -> str:
    """Islands of identical rows per key over consecutive snapshots -> valid_from/valid_to.

    valid_to is the first snapshot date on which the version no longer held (exclusive), NULL
    while it still holds. A key that disappears and comes back gets two versions.
    """
    src = q(view_name(spec))
    key = ", ".join(q(k) for k in spec.history_key)
    values = ", ".join(q(c) for c in spec.column_names if c not in SNAPSHOT_COLUMNS)
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


# Date-partitioned inputs of the per-day pre-aggregates (`agg_*` views in warehouse/sql).
AGG_SOURCES = ("cdrs", "cdr_calls", "cdr_conversations", "cdr_sms")


def aggregate_names() -> list[str]:
    return [m for p in reporting_sql_files() for m in _AGG_RE.findall(p.read_text())]
