"""The suite's search for a secret (the API key) in everything a run leaves behind.

Raw bytes are not enough: Dagster stores job snapshots as zlib-compressed JSON (in SQLite and
PostgreSQL alike), Parquet pages and DuckDB strings are compressed, SQLite spreads a large cell
over overflow pages, and PostgreSQL compresses large values (TOAST). So `SecretSearch` reads
each store through its own reader as well as byte by byte, and inside every byte string it
searches it also opens what it can decode: zlib and gzip streams, ZIP members and base64 text
(recursively: base64 of zlib of JSON is found too).

- `path(root)`: every file under `root`, by content: SQLite databases cell by cell, Parquet files
  by value and by key-value metadata, DuckDB files by table cell and view text, any file byte by
  byte (compressed streams inside it included);
- `postgres(connection)`: every column of every row of every table of the database;
- `s3(client, bucket)`: every object's bytes (Parquet read like a file), its user metadata, its
  headers and its tags;
- `text(where, text)`: captured stdout/stderr, log records, exception texts.

`places` counts what was searched (files, cells, objects, texts), `blobs` the decompressed
streams searched inside them; `assert_clean()` fails naming every place the key was found in.
"""

from __future__ import annotations

import base64
import binascii
import io
import json
import re
import sqlite3
import zipfile
import zlib
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# A zlib stream starts with 0x78 (deflate, 32K window) and a check byte (the four levels).
_ZLIB = re.compile(rb"\x78[\x01\x5e\x9c\xda]")
_GZIP = re.compile(rb"\x1f\x8b\x08")
_ZIP = b"PK\x03\x04"
# base64 (standard or URL-safe) long enough to hold a compressed stream or the key.
_BASE64 = re.compile(rb"[A-Za-z0-9+/_-]{20,}={0,2}")
_SQLITE = b"SQLite format 3\x00"
_PARQUET = b"PAR1"
_MAX_DEPTH = 4
_MAX_INFLATED = 512 * 1024 * 1024
_CHUNK = 64 * 1024


@dataclass(frozen=True)
class Hit:
    where: str
    count: int


@dataclass
class SecretSearch:
    """Search `secret` everywhere it is pointed at; see the module docstring."""

    secret: str
    places: Counter[str] = field(default_factory=Counter)
    blobs: int = 0
    hits: list[Hit] = field(default_factory=list)

    def __post_init__(self) -> None:
        if len(self.secret) < 8:
            raise ValueError("a secret this short would be found by chance")
        # As text, as JSON writes it (non-ASCII escaped) and as UTF-16.
        escaped = json.dumps(self.secret)[1:-1].encode()
        self._needles = {self.secret.encode(), escaped, self.secret.encode("utf-16-le")}

    # --- results ------------------------------------------------------------------------------

    @property
    def found(self) -> int:
        return sum(h.count for h in self.hits)

    @property
    def searched(self) -> int:
        return sum(self.places.values())

    def summary(self) -> str:
        kinds = ", ".join(f"{n:,} {kind}" for kind, n in sorted(self.places.items()))
        return (
            f"searched {self.searched:,} places ({kinds}) and {self.blobs:,} decompressed blobs: "
            f"the key found {self.found} times"
        )

    def assert_clean(self) -> None:
        where = "; ".join(f"{h.where} ({h.count}x)" for h in self.hits[:20])
        assert not self.hits, f"{self.summary()}, in: {where}"

    # --- entry points -------------------------------------------------------------------------

    def text(self, where: str, text: str | bytes, kind: str = "texts") -> None:
        self.places[kind] += 1
        self._bytes(where, text.encode() if isinstance(text, str) else text, 0)

    def texts(self, where: str, texts: Iterable[str], kind: str = "texts") -> None:
        for n, text in enumerate(texts):
            self.text(f"{where}[{n}]", text, kind)

    def path(self, root: Path, label: str | None = None) -> None:
        """Every file under `root` (or `root` itself), read by what its content is."""
        files = [root] if root.is_file() else sorted(p for p in root.rglob("*") if p.is_file())
        for path in files:
            name = f"{label or root.name}/{path.relative_to(root)}" if path != root else str(root)
            data = path.read_bytes()
            self.places["files"] += 1
            self._bytes(name, data, 0)
            if data.startswith(_SQLITE):
                self.sqlite(path, name)
            elif data.startswith(_PARQUET) and data.endswith(_PARQUET):
                self.parquet(data, name)
            elif data[8:12] == b"DUCK":
                self.duckdb(path, name)

    def sqlite(self, path: Path, where: str) -> None:
        """Every cell of every table (a large cell spans overflow pages: not one byte run)."""
        con = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
        try:
            tables = [
                r[0] for r in con.execute("select name from sqlite_master where type='table'")
            ]
            for table in tables:
                cursor = con.execute(f'select * from "{table}"')
                names = [d[0] for d in cursor.description]
                for n, row in enumerate(cursor):
                    for column, value in zip(names, row, strict=True):
                        self._cell(f"{where}: {table}[{n}].{column}", value, "SQLite cells")
        finally:
            con.close()

    def parquet(self, data: bytes, where: str) -> None:
        """Key-value metadata, column statistics and every value (pages are compressed)."""
        import pyarrow as pa
        import pyarrow.parquet as pq

        pf = pq.ParquetFile(pa.BufferReader(data))
        meta = pf.metadata
        for key, value in (meta.metadata or {}).items():
            self._cell(
                f"{where}: key-value metadata {key!r}", key + b"=" + value, "Parquet metadata"
            )
        for g in range(meta.num_row_groups):
            group = meta.row_group(g)
            for c in range(group.num_columns):
                stats = group.column(c).statistics
                if stats is not None and stats.has_min_max:
                    for bound in (stats.min, stats.max):
                        self._cell(f"{where}: statistics", bound, "Parquet metadata")
        table = pf.read()
        for name in table.column_names:
            self._cell(f"{where}: column {name}", table.column(name).to_pylist(), "Parquet columns")

    def duckdb(self, path: Path, where: str) -> None:
        """Every cell of every base table and every view's SQL (DuckDB compresses strings)."""
        import duckdb

        with duckdb.connect(str(path), read_only=True) as con:
            views = con.execute("select view_name, sql from duckdb_views() where not internal")
            for name, sql in views.fetchall():
                self._cell(f"{where}: view {name}", sql, "DuckDB cells")
            tables = con.execute(
                "select schema_name, table_name from duckdb_tables() where not internal"
            ).fetchall()
            for schema, table in tables:
                cursor = con.execute(f'select * from "{schema}"."{table}"')
                names = [d[0] for d in cursor.description or []]
                for n, row in enumerate(cursor.fetchall()):
                    for column, value in zip(names, row, strict=True):
                        self._cell(f"{where}: {table}[{n}].{column}", value, "DuckDB cells")

    def postgres(self, connection: Any, where: str) -> None:
        """Every column of every row of every table of the database (psycopg2 connection)."""
        with connection.cursor() as cur:
            cur.execute(
                "select table_schema, table_name from information_schema.tables "
                "where table_type = 'BASE TABLE' "
                "and table_schema not in ('pg_catalog', 'information_schema')"
            )
            tables = cur.fetchall()
        for schema, table in tables:
            with connection.cursor() as cur:
                cur.execute(f'select * from "{schema}"."{table}"')
                names = [d[0] for d in cur.description]
                for n, row in enumerate(cur.fetchall()):
                    for column, value in zip(names, row, strict=True):
                        self._cell(f"{where}: {table}[{n}].{column}", value, "PostgreSQL cells")

    def s3(self, client: Any, bucket: str, prefix: str = "") -> None:
        """Every object under `prefix`: bytes, user metadata, headers and tags (boto3 client)."""
        pages = client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
        for page in pages:
            for obj in page.get("Contents", []):
                key = obj["Key"]
                name = f"s3://{bucket}/{key}"
                got = client.get_object(Bucket=bucket, Key=key)
                data = got["Body"].read()
                self.places["S3 objects"] += 1
                self._bytes(name, data, 0)
                if data.startswith(_PARQUET) and data.endswith(_PARQUET):
                    self.parquet(data, name)
                headers = got.get("ResponseMetadata", {}).get("HTTPHeaders", {})
                self._cell(f"{name}: metadata", got.get("Metadata", {}), "S3 metadata")
                self._cell(f"{name}: headers", headers, "S3 metadata")
                tags = client.get_object_tagging(Bucket=bucket, Key=key).get("TagSet", [])
                self._cell(f"{name}: tags", tags, "S3 metadata")

    # --- the search ---------------------------------------------------------------------------

    def _cell(self, where: str, value: Any, kind: str) -> None:
        self.places[kind] += 1
        self._value(where, value)

    def _value(self, where: str, value: Any) -> None:
        if value is None or isinstance(value, bool | int | float):
            return
        if isinstance(value, bytes | bytearray | memoryview):
            self._bytes(where, bytes(value), 0)
        elif isinstance(value, str):
            self._bytes(where, value.encode("utf-8", "surrogatepass"), 0)
        elif isinstance(value, Mapping):
            for key, item in value.items():
                self._value(where, key)
                self._value(where, item)
        elif isinstance(value, list | tuple | set | frozenset):
            for item in value:
                self._value(where, item)
        else:
            self._bytes(where, str(value).encode(), 0)

    def _bytes(self, where: str, data: bytes, depth: int) -> None:
        count = sum(data.count(needle) for needle in self._needles)
        if count:
            self.hits.append(Hit(where, count))
        if depth >= _MAX_DEPTH or len(data) < 8:
            return
        for match in _ZLIB.finditer(data):
            self._inflated(f"{where} > zlib@{match.start()}", data, match.start(), 15, depth)
        for match in _GZIP.finditer(data):
            self._inflated(f"{where} > gzip@{match.start()}", data, match.start(), 31, depth)
        if data.startswith(_ZIP):
            self._zip(where, data, depth)
        for match in _BASE64.finditer(data):
            self._base64(f"{where} > base64@{match.start()}", match.group(), depth)

    def _inflated(self, where: str, data: bytes, start: int, wbits: int, depth: int) -> None:
        """Inflate the stream at `start` as far as it goes (a stream cut short still yields its
        first bytes); search what comes out."""
        inflater = zlib.decompressobj(wbits)
        out: list[bytes] = []
        size = 0
        try:
            for offset in range(start, len(data), _CHUNK):
                piece = inflater.decompress(data[offset : offset + _CHUNK])
                out.append(piece)
                size += len(piece)
                if inflater.eof or size > _MAX_INFLATED:
                    break
        except zlib.error:
            pass
        if size:
            self.blobs += 1
            self._bytes(where, b"".join(out), depth + 1)

    def _zip(self, where: str, data: bytes, depth: int) -> None:
        try:
            with zipfile.ZipFile(io.BytesIO(data)) as archive:
                for name in archive.namelist():
                    self.blobs += 1
                    self._bytes(f"{where} > zip {name}", archive.read(name), depth + 1)
        except (zipfile.BadZipFile, OSError, RuntimeError):
            pass

    def _base64(self, where: str, text: bytes, depth: int) -> None:
        padded = text.rstrip(b"=")
        padded += b"=" * (-len(padded) % 4)
        altchars = b"-_" if (b"-" in text or b"_" in text) else None
        try:
            decoded = base64.b64decode(padded, altchars=altchars)
        except (binascii.Error, ValueError):
            return
        if decoded:
            self._bytes(where, decoded, depth + 1)
