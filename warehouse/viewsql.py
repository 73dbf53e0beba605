"""The SQL text of the warehouse's views: DuckDB types, view names, the lake table views and
the snapshot `current` and `history` views, and the reporting SQL files (`warehouse/sql/`).

Pure text builders: `warehouse.duck` runs them on a connection.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

import polars as pl

from models.tables import BALANCE_SNAPSHOTS, TableSpec, landed

# Named in `warehouse.analyst`, which loads no DuckDB, polars or pyarrow to name them.
from warehouse.analyst import WAREHOUSE_FILE as WAREHOUSE_FILE
from warehouse.analyst import lit as lit
from warehouse.lake import ACCOUNT_COLUMN, LANDED_COLUMNS, Lake, top_level_names

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


def view_columns(spec: TableSpec) -> list[tuple[str, str]]:
    """A lake table's view columns: `account_id` first (from the path, as the partition
    column), then the spec's."""
    return [(ACCOUNT_COLUMN, "VARCHAR")] + [(c.name, duck_type(c.dtype)) for c in spec.columns]


def empty_sql(spec: TableSpec) -> str:
    return empty_select(view_columns(spec))


def scan_sql(
    columns: Sequence[tuple[str, str]], lake: Lake, table: str, partition_key: str | None
) -> str | None:
    """Every account's partitions of `table` as typed rows with `account_id`; None when no
    account has any. The lake's own files get its account id as a constant (the root's are
    `default`); the sub-lakes' (`account_id=<id>/…`, root only) get theirs from the path. Only
    the parts that have files are read: a glob matching nothing is an error in DuckDB."""
    holders = lake.holders(table)
    types = {partition_key: "DATE"} if partition_key else {}
    in_path = {ACCOUNT_COLUMN, *types}
    parts = []
    if lake.account_id in holders:
        present = lake.file_columns(table) | in_path
        parts.append(
            _read(_typed(columns, present, lake.account_id), lake.table_glob(table), types)
        )
    others = [h for h in holders if h != lake.account_id]
    if others:
        present = frozenset().union(*(lake.account(h).file_columns(table) for h in others))
        hive = {ACCOUNT_COLUMN: "VARCHAR", **types}
        parts.append(
            _read(_typed(columns, present | in_path), lake.accounts_table_glob(table), hive)
        )
    # BY NAME: a part without the privacy stage's columns gets nulls for them.
    return " UNION ALL BY NAME ".join(parts) or None


def _typed(
    columns: Sequence[tuple[str, str]], present: frozenset[str], account: str | None = None
) -> str:
    """The typed select list of a part: `account_id` from `account` (a lake's own files) or
    the path; the privacy stage's columns (`LANDED_COLUMNS`) only when its files have them
    (landed under CDRHOUSE_PHONE_NUMBERS=token), so a lake landed under `raw` reads as before;
    any other column its files (`present`: the newest's, and the path's) do not have is null
    (files written before it was added: no file has it, and DuckDB would refuse the name)."""

    def value(name: str, ctype: str) -> str:
        if account and name == ACCOUNT_COLUMN:
            return f"CAST({lit(account)} AS {ctype})"
        return f"CAST({q(name) if name in present else 'NULL'} AS {ctype})"

    return ", ".join(
        f"{value(name, ctype)} AS {q(name)}"
        for name, ctype in columns
        if name not in LANDED_COLUMNS or name in present
    )


def _read(typed: str, pattern: str, hive_types: dict[str, str]) -> str:
    hive = "{" + ", ".join(f"{lit(k)}: {lit(v)}" for k, v in hive_types.items()) + "}"
    return (
        f"SELECT {typed} FROM read_parquet({lit(pattern)}, hive_partitioning = true, "
        f"hive_types = {hive}, union_by_name = true)"
    )


def base_view_sql(spec: TableSpec, lake: Lake, day: str | None = None) -> str:
    """The view of a lake table over every account (`account_id` first). `day`: that date
    partition of `lake` alone (one account's day, for its aggregates)."""
    columns = view_columns(landed(spec))
    if day and spec.partition_key != "date":
        return empty_sql(spec)  # one day's aggregates read only that day's CDR tables
    if day:
        key = f"date={day}"
        if not lake.exists(spec.name, key):
            return empty_sql(spec)
        footer = lake.partition_footer(spec.name, key)
        present = top_level_names(footer) | {ACCOUNT_COLUMN, "date"}
        typed = _typed(columns, present, lake.account_id)
        return _read(typed, lake.partition_url(spec.name, key), {"date": "DATE"})
    return scan_sql(columns, lake, spec.name, spec.partition_key) or empty_sql(spec)


def current_sql(spec: TableSpec) -> str:
    """Each account's latest snapshot (not the latest date over every account)."""
    src = q(view_name(spec))
    return (
        f"SELECT * EXCLUDE (snapshot_date) FROM {src} "
        f"QUALIFY snapshot_date = max(snapshot_date) OVER (PARTITION BY {ACCOUNT_COLUMN})"
    )


def history_sql(spec: TableSpec) -> str:
    """Islands of identical rows per key over consecutive snapshots -> valid_from/valid_to.

    valid_to is the first snapshot date on which the version no longer held (exclusive), NULL
    while it still holds. A key that disappears and comes back gets two versions. Per
    account: each account's snapshots are its own sequence, and its keys are its own.
    """
    src = q(view_name(spec))
    acc = q(ACCOUNT_COLUMN)
    key = ", ".join([acc] + [q(k) for k in spec.history_key])
    values = ", ".join(q(c) for c in spec.column_names if c not in SNAPSHOT_COLUMNS)
    return f"""
WITH d AS (
    SELECT {acc}, snapshot_date,
           row_number() OVER (PARTITION BY {acc} ORDER BY snapshot_date) AS _n,
           lead(snapshot_date) OVER (PARTITION BY {acc} ORDER BY snapshot_date) AS _next
    FROM (SELECT DISTINCT {acc}, snapshot_date FROM {src})
),
x AS (
    SELECT s.*, d._n, d._next, hash({values}) AS _h
    FROM {src} s JOIN d USING ({acc}, snapshot_date)
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
