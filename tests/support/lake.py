"""Reading what a run left behind: warehouse views, published lake files, temp files."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import date
from pathlib import Path
from typing import Any

import duckdb
import polars as pl

from warehouse.duck import WAREHOUSE_FILE
from warehouse.lake import MARKER_FILE, Lake
from warehouse.stores import LOCK_DIR, TMP_DIR


@contextmanager
def warehouse(data_dir: Path) -> Iterator[duckdb.DuckDBPyConnection]:
    """A fresh read-only connection to `warehouse.duckdb`, as an analyst opens it."""
    with duckdb.connect(str(data_dir / WAREHOUSE_FILE), read_only=True) as con:
        yield con


def one_row(
    con: duckdb.DuckDBPyConnection, sql: str, params: Sequence[Any] | None = None
) -> tuple[Any, ...]:
    """The single row `sql` returns (it must return one)."""
    row = con.execute(sql, params).fetchone()
    assert row is not None, sql
    return row


def read_table(data_dir: Path, table: str, drop: tuple[str, ...] = ()) -> pl.DataFrame:
    """A whole warehouse view, in a stable order, through a fresh read-only connection."""
    with warehouse(data_dir) as con:
        frame = pl.DataFrame(pl.from_arrow(con.sql(f'select * from "{table}"').to_arrow_table()))
    frame = frame.drop([c for c in drop if c in frame.columns])
    keys = [c for c, t in frame.schema.items() if not isinstance(t, pl.List | pl.Struct)]
    return frame.sort(keys, nulls_last=True) if frame.height else frame


def published(lake: Lake, key: str, *tables: str) -> list[pl.DataFrame]:
    """Each table's published partition `key`, read whole; each must exist."""
    frames = [lake.read(table, key) for table in tables]
    missing = [t for t, f in zip(tables, frames, strict=True) if f is None]
    assert not missing, f"no {key} partition of {missing}"
    return [f for f in frames if f is not None]


def warehouse_rows(data_dir: Path, day: date, table: str = "cdrs") -> list[tuple[str, str]]:
    """(id, cost) of one day as an analyst sees it through `warehouse.duckdb`."""
    with warehouse(data_dir) as con:
        rows = con.execute(
            f"select id, cost::varchar from {table} where date = ?", [day]
        ).fetchall()
    return [(str(i), str(c)) for i, c in rows]


def lake_files(data_dir: Path, *, marker: bool = True) -> dict[str, bytes]:
    """Every published file of the lake: the partitions and, unless `marker` is False, the
    source marker (temp files and publish locks excluded)."""
    lake = data_dir / "lake"
    return {
        str(p.relative_to(lake)): p.read_bytes()
        for p in sorted(lake.rglob("*"))
        if p.is_file()
        and not {TMP_DIR, LOCK_DIR} & set(p.relative_to(lake).parts)
        and (marker or p.name != MARKER_FILE)
    }


def tmp_files(data_dir: Path) -> list[Path]:
    """What the writers left in the lake's temp folder (nothing, once they are done)."""
    tmp = data_dir / "lake" / "_tmp"
    return sorted(tmp.iterdir()) if tmp.is_dir() else []
