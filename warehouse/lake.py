"""The Parquet lake: hive layout, one file per partition, atomic replace.

Layout: `<root>/<table>/<key>/part-0.parquet` with `key` like `date=2026-11-20` or
`snapshot_date=2026-11-20`. A partition is written to `<root>/_tmp/` first, fsynced, then
`os.replace`d into place, so a reader sees the old file or the new one, never a partial one, and a
failed or killed write leaves the previous partition whole.

The partition column is not stored in the files (it is in the path); `read` adds it back.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import time
import uuid
from pathlib import Path
from types import TracebackType
from typing import Any
from urllib.parse import unquote, urlparse

import polars as pl
import pyarrow.parquet as pq

from models.tables import TABLES

PART_FILE = "part-0.parquet"
TMP_DIR = "_tmp"
# Big row groups keep DuckDB scans cheap; 128k rows of CDRs is ~10-20 MB uncompressed.
ROW_GROUP_SIZE = 128 * 1024
COMPRESSION = "zstd"
STALE_TMP_SECONDS = 6 * 3600


def root_from_uri(uri: str) -> Path:
    """`file:///abs/path` or a plain path -> Path. Other schemes are not supported yet."""
    parsed = urlparse(uri)
    if parsed.scheme in ("", "file"):
        return Path(unquote(parsed.path) if parsed.scheme else uri).resolve()
    raise ValueError(f"unsupported lake URI scheme: {parsed.scheme!r}")


def partition_key(column: str, value: dt.date | str) -> str:
    return f"{column}={value.isoformat() if isinstance(value, dt.date) else value}"


def _parse_key(key: str) -> tuple[str, str]:
    column, sep, value = key.partition("=")
    if not sep or not column or not value or "/" in key:
        raise ValueError(f"bad partition key {key!r}; expected column=value")
    return column, value


def _to_arrow(data: pl.DataFrame | Any, schema: Any, drop: str | None) -> Any:
    if isinstance(data, pl.DataFrame):
        if drop is not None and drop in data.columns:
            data = data.drop(drop)
        table = data.to_arrow()
    else:
        table = data
        if drop is not None and drop in table.column_names:
            table = table.drop_columns([drop])
    if schema is not None:
        table = table.select(schema.names).cast(schema)
    return table


class PartitionWriter:
    """Streams row groups into a temp file; swaps it into place on a clean exit."""

    def __init__(self, final: Path, tmp: Path, schema: Any, drop: str | None) -> None:
        self.final = final
        self.tmp = tmp
        self.schema = schema
        self.drop = drop
        self.rows = 0
        self._writer: Any = None

    def __enter__(self) -> PartitionWriter:
        self.tmp.parent.mkdir(parents=True, exist_ok=True)
        self._writer = pq.ParquetWriter(
            str(self.tmp), self.schema, compression=COMPRESSION, write_statistics=True
        )
        return self

    def write(self, data: pl.DataFrame | Any) -> None:
        table = _to_arrow(data, self.schema, self.drop)
        if table.num_rows:
            self._writer.write_table(table, row_group_size=ROW_GROUP_SIZE)
            self.rows += table.num_rows

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        writer, self._writer = self._writer, None
        if exc_type is not None:
            with contextlib.suppress(Exception):
                writer.close()
            self.tmp.unlink(missing_ok=True)
            return
        try:
            writer.close()
            fd = os.open(self.tmp, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
            self.final.parent.mkdir(parents=True, exist_ok=True)
            os.replace(self.tmp, self.final)
            _fsync_dir(self.final.parent)
        except BaseException:
            self.tmp.unlink(missing_ok=True)
            raise


def _fsync_dir(path: Path) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


class Lake:
    """A hive-partitioned Parquet lake rooted at a `file://` URI or a plain path."""

    def __init__(self, uri: str) -> None:
        self.uri = uri
        self.root = root_from_uri(uri)

    def __repr__(self) -> str:
        return f"Lake({self.uri!r})"

    def table_dir(self, table: str) -> Path:
        return self.root / table

    def partition_path(self, table: str, key: str) -> Path:
        _parse_key(key)
        return self.root / table / key / PART_FILE

    def _schema(self, table: str, schema: Any) -> tuple[Any, str | None]:
        spec = TABLES.get(table)
        drop = spec.partition_key if spec else None
        if schema is None and spec is not None:
            schema = spec.arrow_schema()
        elif isinstance(schema, pl.Schema):
            schema = pl.DataFrame(schema=schema).drop(drop or [], strict=False).to_arrow().schema
        return schema, drop

    def writer(self, table: str, key: str, schema: Any = None) -> PartitionWriter:
        """A context manager writing one partition atomically; schema defaults to the spec's."""
        final = self.partition_path(table, key)
        schema, drop = self._schema(table, schema)
        if schema is None:
            raise ValueError(f"no schema for table {table!r}")
        self.cleanup_tmp()
        tmp = self.root / TMP_DIR / f"{table}.{key}.{uuid.uuid4().hex}.parquet"
        return PartitionWriter(final, tmp, schema, drop)

    def write(self, table: str, key: str, data: pl.DataFrame | Any, schema: Any = None) -> int:
        if schema is None and table not in TABLES:
            schema = _to_arrow(data, None, None).schema
        with self.writer(table, key, schema) as w:
            w.write(data)
        return w.rows

    def read(self, table: str, key: str) -> pl.DataFrame | None:
        path = self.partition_path(table, key)
        if not path.exists():
            return None
        df = pl.read_parquet(path)
        column, value = _parse_key(key)
        spec = TABLES.get(table)
        if spec is not None and spec.partition_key == column:
            df = df.with_columns(pl.lit(value).str.to_date().alias(column)).select(
                spec.column_names
            )
        return df

    def scan(self, table: str) -> pl.LazyFrame | None:
        """All partitions of a table as one lazy frame (partition column from the path)."""
        files = sorted(self.table_dir(table).glob(f"*=*/{PART_FILE}"))
        if not files:
            return None
        spec = TABLES.get(table)
        hive_schema: dict[str, pl.DataType] | None = None
        if spec is not None and spec.partition_key is not None:
            hive_schema = {spec.partition_key: pl.Date()}
        return pl.scan_parquet(files, hive_partitioning=True, hive_schema=hive_schema)

    def partitions(self, table: str) -> list[str]:
        return sorted(p.parent.name for p in self.table_dir(table).glob(f"*=*/{PART_FILE}"))

    def delete_partition(self, table: str, key: str) -> bool:
        path = self.partition_path(table, key)
        if not path.exists():
            return False
        path.unlink()
        with contextlib.suppress(OSError):
            path.parent.rmdir()
        return True

    def cleanup_tmp(self, older_than_s: float = STALE_TMP_SECONDS) -> int:
        """Delete temp files left by killed writers (old enough not to be in use)."""
        tmp = self.root / TMP_DIR
        if not tmp.is_dir():
            return 0
        cutoff = time.time() - older_than_s
        removed = 0
        for f in tmp.iterdir():
            with contextlib.suppress(OSError):
                if f.stat().st_mtime < cutoff:
                    f.unlink()
                    removed += 1
        return removed
