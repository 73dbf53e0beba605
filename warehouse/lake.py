"""The Parquet lake: hive layout, one file per partition, atomic replace, recorded provenance.

Layout: `<root>/<table>/<key>/part-0.parquet` with `key` like `date=2026-11-20` or
`snapshot_date=2026-11-20`. The root is a local path (`file://…`, the default) or an object
store URI (`s3://bucket/prefix`, and `gs://`, `abfs://` with their fsspec packages installed).

Atomic replace, per store:
* local: the partition is written to `<root>/_tmp/`, fsynced, then `os.replace`d into place;
* object store: there is no rename, so the partition is spooled to a local temp file and
  published with one PUT. An object appears whole or not at all, so a reader sees the old object
  or the new one, and a killed writer leaves only its local spool file behind. Big partitions
  (over s3fs's single-PUT limit) go up as a multipart upload, which is only visible once
  completed; a writer aborts stale uploads of its key before it publishes.

Provenance: every lake belongs to one data source (`sandbox:<seed>` or the API host), recorded
in `<root>/_cdrhouse_lake.json` by the first write. Each partition file also carries its source
and write time in its Parquet key-value metadata. A write from another source is refused before
anything is written (`LakeSourceConflict`).

The partition column is not stored in the files (it is in the path); `read` adds it back.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import shutil
import tempfile
import time
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any
from urllib.parse import unquote, urlparse

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

from models.tables import TABLES
from models.timestamps import iso_ms

PART_FILE = "part-0.parquet"
TMP_DIR = "_tmp"
MARKER_FILE = "_cdrhouse_lake.json"
# Parquet key-value metadata written into every partition file.
META_SOURCE = "cdrhouse.source"
META_WRITTEN_AT = "cdrhouse.written_at"
# Big row groups keep DuckDB scans cheap; 128k rows of CDRs is ~10-20 MB uncompressed.
ROW_GROUP_SIZE = 128 * 1024
COMPRESSION = "zstd"
STALE_TMP_SECONDS = 6 * 3600
LOCAL_SCHEMES = ("", "file")
# Where partitions bound for an object store are spooled (the pod's own throwaway disk).
SPOOL_DIR = "cdrhouse-spool"


class LakeSourceConflict(Exception):
    """A write from one data source into a lake that holds another source's data."""

    @classmethod
    def between(cls, wanted: str, current: str, uri: str) -> LakeSourceConflict:
        return cls(
            f"refusing to write data from {wanted!r} into the lake at {uri}, which holds data "
            f"from {current!r}; point CDRHOUSE_LAKE_URI at another lake, or empty this one "
            "with `cdrhouse lake reset --yes`"
        )


def is_local_uri(uri: str) -> bool:
    return urlparse(uri).scheme in LOCAL_SCHEMES


def root_from_uri(uri: str) -> Path:
    """`file:///abs/path` or a plain path -> Path (local lakes only)."""
    parsed = urlparse(uri)
    if parsed.scheme in LOCAL_SCHEMES:
        return Path(unquote(parsed.path) if parsed.scheme else uri).resolve()
    raise ValueError(f"not a local lake URI (scheme {parsed.scheme!r}): {uri}")


def partition_key(column: str, value: dt.date | str) -> str:
    return f"{column}={value.isoformat() if isinstance(value, dt.date) else value}"


def _parse_key(key: str) -> tuple[str, str]:
    column, sep, value = key.partition("=")
    if not sep or not column or not value or "/" in key:
        raise ValueError(f"bad partition key {key!r}; expected column=value")
    return column, value


def _now_ms() -> str:
    return iso_ms(dt.datetime.now(dt.UTC))


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
        table = table.select(schema.names).cast(schema.remove_metadata())
    return table


# --- Stores: the few operations the lake needs, on a local disk or an object store ----------


class LocalStore:
    """A directory tree; publish is fsync + `os.replace`."""

    is_local = True

    def __init__(self, root: Path) -> None:
        self.root = root

    def url(self, rel: str) -> str:
        return str(self.root / rel)

    def exists(self, rel: str) -> bool:
        return (self.root / rel).exists()

    def read_bytes(self, rel: str) -> bytes | None:
        try:
            return (self.root / rel).read_bytes()
        except FileNotFoundError:
            return None

    def create_exclusive(self, rel: str, data: bytes) -> None:
        """Write `rel` only if it does not exist (a concurrent creator wins, silently)."""
        path = self.root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}")
        tmp.write_bytes(data)
        try:
            os.link(tmp, path)  # atomic, and fails if the file exists
        except FileExistsError:
            pass
        finally:
            tmp.unlink(missing_ok=True)

    def list_all(self, table: str | None = None) -> dict[str, dict[str, float]]:
        """`table -> key -> mtime` of every published partition (of one table, if given)."""
        out: dict[str, dict[str, float]] = {}
        for path in self.root.glob(f"{table or '*'}/*=*/{PART_FILE}"):
            with contextlib.suppress(FileNotFoundError):
                keys = out.setdefault(path.parent.parent.name, {})
                keys[path.parent.name] = path.stat().st_mtime
        return out

    def spool_dir(self) -> Path:
        return self.root / TMP_DIR

    def publish(self, tmp: Path, rel: str) -> None:
        fd = os.open(tmp, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        final = self.root / rel
        final.parent.mkdir(parents=True, exist_ok=True)
        tmp.replace(final)
        _fsync_dir(final.parent)

    def set_stamp(self, rel: str, stamp: float) -> bool:
        os.utime(self.root / rel, (stamp, stamp))
        return True

    def delete(self, rel: str) -> bool:
        path = self.root / rel
        if not path.exists():
            return False
        path.unlink()
        with contextlib.suppress(OSError):
            path.parent.rmdir()
        return True

    def remove_all(self) -> int:
        if not self.root.is_dir():
            return 0
        removed = 0
        for child in self.root.iterdir():
            if child.is_dir():
                removed += sum(1 for p in child.rglob("*") if p.is_file())
                shutil.rmtree(child)
            else:
                child.unlink()
                removed += 1
        return removed


class ObjectStore:
    """An fsspec filesystem (s3fs, gcsfs, adlfs); publish is a single PUT of a spooled file.

    Credentials and endpoint come from the store's standard chain (for S3: `AWS_ACCESS_KEY_ID`,
    `AWS_SECRET_ACCESS_KEY`, `AWS_REGION`, `AWS_ENDPOINT_URL`, profiles, instance roles).
    Listing caches are off: other runs write the same lake at any time.
    """

    is_local = False

    def __init__(self, uri: str) -> None:
        import fsspec  # only object-store lakes need it

        # fsspec caches the instance (per process, per options): its client is reused.
        self.fs, path = fsspec.url_to_fs(uri, use_listings_cache=False)
        self.protocol = urlparse(uri).scheme
        self.path = path.rstrip("/")
        self.uri = f"{self.protocol}://{self.path}"

    def _p(self, rel: str) -> str:
        return f"{self.path}/{rel}"

    def url(self, rel: str) -> str:
        return f"{self.protocol}://{self._p(rel)}"

    def exists(self, rel: str) -> bool:
        return bool(self.fs.exists(self._p(rel)))

    def read_bytes(self, rel: str) -> bytes | None:
        try:
            data: bytes = self.fs.cat_file(self._p(rel))
        except FileNotFoundError:
            return None
        return data

    def create_exclusive(self, rel: str, data: bytes) -> None:
        if self.protocol in ("s3", "s3a"):
            bucket, key, _ = self.fs.split_path(self._p(rel))
            # A conditional PUT: of two first writers, exactly one creates the marker (s3fs
            # reports the loser's 412 PreconditionFailed as FileExistsError).
            with contextlib.suppress(FileExistsError):
                self.fs.call_s3("put_object", Bucket=bucket, Key=key, Body=data, IfNoneMatch="*")
            return
        if not self.exists(rel):
            self.fs.pipe_file(self._p(rel), data)

    def list_all(self, table: str | None = None) -> dict[str, dict[str, float]]:
        """One listing (of the whole lake, or of one table's prefix)."""
        out: dict[str, dict[str, float]] = {}
        try:
            found = self.fs.find(self._p(table) if table else self.path, detail=True)
        except FileNotFoundError:
            return out
        for name, info in found.items():
            parts = name[len(self.path) + 1 :].split("/")
            if len(parts) == 3 and parts[2] == PART_FILE and "=" in parts[1]:
                out.setdefault(parts[0], {})[parts[1]] = _info_stamp(info)
        return out

    def spool_dir(self) -> Path:
        return Path(tempfile.gettempdir()) / SPOOL_DIR

    def _abort_uploads(self, rel: str) -> None:
        """Abort unfinished multipart uploads of this key (left by a killed writer)."""
        if self.protocol not in ("s3", "s3a"):
            return
        bucket, key, _ = self.fs.split_path(self._p(rel))
        listed = self.fs.call_s3("list_multipart_uploads", Bucket=bucket, Prefix=key)
        for upload in listed.get("Uploads", []):
            if upload["Key"] == key:
                self.fs.call_s3(
                    "abort_multipart_upload", Bucket=bucket, Key=key, UploadId=upload["UploadId"]
                )

    def publish(self, tmp: Path, rel: str) -> None:
        self._abort_uploads(rel)
        try:
            self.fs.put_file(str(tmp), self._p(rel))
        finally:
            tmp.unlink(missing_ok=True)

    def set_stamp(self, rel: str, stamp: float) -> bool:  # noqa: ARG002 - the store interface
        return False  # objects keep their LastModified

    def delete(self, rel: str) -> bool:
        if not self.exists(rel):
            return False
        self.fs.rm_file(self._p(rel))
        return True

    def remove_all(self) -> int:
        try:
            files = self.fs.find(self.path)
        except FileNotFoundError:
            return 0
        if files:
            self.fs.rm(files)
        return len(files)


Store = LocalStore | ObjectStore


def _info_stamp(info: dict[str, Any]) -> float:
    modified = info.get("LastModified") or info.get("mtime") or info.get("last_modified")
    if isinstance(modified, dt.datetime):
        return modified.timestamp()
    return float(modified or 0.0)


def _fsync_dir(path: Path) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


class PartitionWriter:
    """Streams row groups into a local temp file; publishes it atomically on a clean exit."""

    def __init__(
        self, lake: Lake, rel: str, tmp: Path, schema: Any, drop: str | None, claim: str | None
    ) -> None:
        self.lake = lake
        self.claim = claim
        self.rel = rel
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
            if self.claim is not None:
                self.lake.claim(self.claim)  # the first partition claims the lake
            self.lake.store.publish(self.tmp, self.rel)
        except BaseException:
            self.tmp.unlink(missing_ok=True)
            raise


class Lake:
    """A hive-partitioned Parquet lake rooted at a local path or an object store URI."""

    def __init__(self, uri: str) -> None:
        self.uri = uri
        self.store: Store = (
            LocalStore(root_from_uri(uri)) if is_local_uri(uri) else ObjectStore(uri)
        )
        self._listing: dict[str, dict[str, float]] | None = None
        self._source: str | None = None

    def __repr__(self) -> str:
        return f"Lake({self.uri!r})"

    @property
    def is_local(self) -> bool:
        return self.store.is_local

    @property
    def root(self) -> Path:
        """The local root directory (local lakes only)."""
        if not isinstance(self.store, LocalStore):
            raise ValueError(f"{self.uri} is not a local lake")  # noqa: TRY004 - a config value
        return self.store.root

    @property
    def fs(self) -> Any:
        """The fsspec filesystem of an object-store lake (DuckDB registers it)."""
        if not isinstance(self.store, ObjectStore):
            raise ValueError(f"{self.uri} is a local lake")  # noqa: TRY004 - a config value
        return self.store.fs

    def _rel(self, table: str, key: str) -> str:
        _parse_key(key)
        return f"{table}/{key}/{PART_FILE}"

    def partition_url(self, table: str, key: str) -> str:
        """Where readers find a partition: an absolute path or an `s3://…` URL."""
        return self.store.url(self._rel(table, key))

    def table_glob(self, table: str) -> str:
        """A glob over every partition file of a table, for DuckDB and other engines."""
        return self.store.url(f"{table}/*/{PART_FILE}")

    def files_glob(self) -> str:
        """A glob over every partition file of every table."""
        return self.store.url(f"*/*/{PART_FILE}")

    def partition_path(self, table: str, key: str) -> Path:
        """The local file of a partition (local lakes only)."""
        return self.root / self._rel(table, key)

    def exists(self, table: str, key: str) -> bool:
        return self.store.exists(self._rel(table, key))

    # --- provenance -----------------------------------------------------------------------

    def source(self) -> str | None:
        """The data source this lake belongs to, or None while it holds nothing."""
        if self._source is not None:
            return self._source  # a claimed lake keeps its source until a reset
        data = self.store.read_bytes(MARKER_FILE)
        if data is None:
            return None
        source = json.loads(data).get("source")
        self._source = str(source) if source else None
        return self._source

    def check_source(self, source: str) -> None:
        """Refuse `source` if the lake holds another source's data; writes nothing."""
        current = self.source()
        if current is not None and current != source:
            raise LakeSourceConflict.between(source, current, self.uri)

    def claim(self, source: str) -> None:
        """Record `source` as this lake's source, or refuse if it holds another source's data.

        Called when a partition is published, not before: a run that fails (a mistyped host)
        must not claim the lake for a source it never read from."""
        current = self.source()
        if current is None:
            marker = {"source": source, "claimed_at": _now_ms()}
            self.store.create_exclusive(MARKER_FILE, json.dumps(marker).encode())
            current = self.source()  # a concurrent first writer may have won
        if current != source:
            raise LakeSourceConflict.between(source, str(current), self.uri)

    def partition_source(self, table: str, key: str) -> str | None:
        """The source recorded in a partition file's metadata (None if absent)."""
        parquet = self.open_parquet(table, key)
        if parquet is None:
            return None
        meta = parquet.schema_arrow.metadata or {}
        value = meta.get(META_SOURCE.encode())
        return value.decode() if value else None

    # --- writing --------------------------------------------------------------------------

    def _schema(self, table: str, schema: Any) -> tuple[Any, str | None]:
        spec = TABLES.get(table)
        drop = spec.partition_key if spec else None
        if schema is None and spec is not None:
            schema = spec.arrow_schema()
        elif isinstance(schema, pl.Schema):
            schema = pl.DataFrame(schema=schema).drop(drop or [], strict=False).to_arrow().schema
        return schema, drop

    def writer(
        self, table: str, key: str, schema: Any = None, *, source: str | None = None
    ) -> PartitionWriter:
        """A context manager writing one partition atomically; schema defaults to the spec's.

        `source` is where the rows came from; a lake holding another source's data refuses it
        here, before anything is written. Derived tables pass None and inherit the lake's.
        """
        rel = self._rel(table, key)
        schema, drop = self._schema(table, schema)
        if schema is None:
            raise ValueError(f"no schema for table {table!r}")
        claim: str | None = source
        if source is not None:
            self.check_source(source)
        else:
            source = self.source() or "unknown"
        schema = schema.with_metadata(
            {**(schema.metadata or {}), META_SOURCE: source, META_WRITTEN_AT: _now_ms()}
        )
        self.cleanup_tmp()
        tmp = self.store.spool_dir() / f"{table}.{key}.{uuid.uuid4().hex}.parquet"
        return PartitionWriter(self, rel, tmp, schema, drop, claim)

    def write(
        self,
        table: str,
        key: str,
        data: pl.DataFrame | Any,
        schema: Any = None,
        *,
        source: str | None = None,
    ) -> int:
        if schema is None and table not in TABLES:
            schema = _to_arrow(data, None, None).schema
        with self.writer(table, key, schema, source=source) as w:
            w.write(data)
        return w.rows

    def set_stamp(self, table: str, key: str, stamp: float) -> bool:
        """Backdate a partition's modification time, where the store allows it."""
        return self.store.set_stamp(self._rel(table, key), stamp)

    # --- reading --------------------------------------------------------------------------

    def open_parquet(self, table: str, key: str) -> pq.ParquetFile | None:
        """The partition's Parquet file, or None if it is absent."""
        rel = self._rel(table, key)
        if isinstance(self.store, LocalStore):
            try:
                return pq.ParquetFile(self.store.url(rel))  # an open file keeps its inode
            except FileNotFoundError:
                return None
        # One GET returns one version of the object; ranged reads of a file replaced
        # meanwhile would fail half-way (s3fs pins the ETag), so read the object whole.
        data = self.store.read_bytes(rel)
        return None if data is None else pq.ParquetFile(pa.BufferReader(data))

    def iter_batches(
        self, table: str, key: str, *, columns: Sequence[str] | None = None, rows: int = 10_000
    ) -> Iterator[pl.DataFrame]:
        """The partition's rows (without the partition column), `rows` at a time: memory stays
        bounded whatever the size of the day. Nothing when the partition is absent."""
        parquet = self.open_parquet(table, key)
        if parquet is None:
            return
        for batch in parquet.iter_batches(batch_size=rows, columns=columns):
            yield pl.DataFrame(pl.from_arrow(batch))

    def read(self, table: str, key: str) -> pl.DataFrame | None:
        parquet = self.open_parquet(table, key)
        if parquet is None:
            return None
        df = pl.DataFrame(pl.from_arrow(parquet.read()))
        column, value = _parse_key(key)
        spec = TABLES.get(table)
        if spec is not None and spec.partition_key == column:
            df = df.with_columns(pl.lit(value).str.to_date().alias(column)).select(
                spec.column_names
            )
        return df

    def scan(self, table: str) -> pl.LazyFrame | None:
        """All partitions of a table as one lazy frame (partition column from the path)."""
        keys = self.partitions(table)
        if not keys:
            return None
        spec = TABLES.get(table)
        hive_schema: dict[str, pl.DataType] | None = None
        if spec is not None and spec.partition_key is not None:
            hive_schema = {spec.partition_key: pl.Date()}
        files = [self.partition_url(table, k) for k in keys]
        return pl.scan_parquet(files, hive_partitioning=True, hive_schema=hive_schema)

    def partitions(self, table: str) -> list[str]:
        return sorted(self.stamps(table))

    def has_data(self, table: str) -> bool:
        """Whether the table has any published partition (stops at the first one found)."""
        if self._listing is not None:
            return bool(self._listing.get(table))
        if isinstance(self.store, LocalStore):
            return next(self.store.root.glob(f"{table}/*=*/{PART_FILE}"), None) is not None
        return bool(self.store.list_all(table))

    def stamps(self, table: str) -> dict[str, float]:
        """`key -> modification time` of every partition of a table (one listing)."""
        listing = self._listing if self._listing is not None else self.store.list_all(table)
        return dict(listing.get(table, {}))

    @contextlib.contextmanager
    def cached_listing(self) -> Iterator[None]:
        """Answer `partitions`/`stamps` from one listing of the whole lake while inside.

        Building the views asks about every table; on an object store that is one request
        instead of one per table. Only for readers: writes inside are not reflected."""
        self._listing = self.store.list_all()
        try:
            yield
        finally:
            self._listing = None

    # --- maintenance ----------------------------------------------------------------------

    def delete_partition(self, table: str, key: str) -> bool:
        return self.store.delete(self._rel(table, key))

    def reset(self) -> int:
        """Delete every file of the lake, its source marker included; returns how many."""
        self._source = None
        return self.store.remove_all()

    def cleanup_tmp(self, older_than_s: float = STALE_TMP_SECONDS) -> int:
        """Delete temp files left by killed writers (old enough not to be in use)."""
        tmp = self.store.spool_dir()
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
