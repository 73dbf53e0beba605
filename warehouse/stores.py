"""Where the lake's files live: a local directory tree or an fsspec object store.

Each store offers the few operations the lake needs (exists, read, create-exclusive, list,
spool, publish, delete); `publish` is the atomic step: fsync + `os.replace` on a local disk, one
PUT (or a completed multipart upload) on an object store. `warehouse.lake` builds on them.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import shutil
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

import pyarrow.parquet as pq

PART_FILE = "part-0.parquet"
TMP_DIR = "_tmp"
LOCAL_SCHEMES = ("", "file")
# Where partitions bound for an object store are spooled (the pod's own throwaway disk).
SPOOL_DIR = "cdrhouse-spool"


def is_local_uri(uri: str) -> bool:
    return urlparse(uri).scheme in LOCAL_SCHEMES


def root_from_uri(uri: str) -> Path:
    """`file:///abs/path` or a plain path -> Path (local lakes only)."""
    parsed = urlparse(uri)
    if parsed.scheme in LOCAL_SCHEMES:
        return Path(unquote(parsed.path) if parsed.scheme else uri).resolve()
    raise ValueError(f"not a local lake URI (scheme {parsed.scheme!r}): {uri}")


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

    def read_footer(self, rel: str) -> pq.FileMetaData | None:
        try:
            return pq.read_metadata(self.root / rel)
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

    def _parts(self, table: str | None) -> Iterator[Path]:
        return self.root.glob(f"{table or '*'}/*=*/{PART_FILE}")

    def list_all(self, table: str | None = None) -> dict[str, dict[str, float]]:
        """`table -> key -> mtime` of every published partition (of one table, if given)."""
        out: dict[str, dict[str, float]] = {}
        for path in self._parts(table):
            with contextlib.suppress(FileNotFoundError):
                keys = out.setdefault(path.parent.parent.name, {})
                keys[path.parent.name] = path.stat().st_mtime
        return out

    def has_partitions(self, table: str) -> bool:
        """Stops at the first published partition found."""
        return next(self._parts(table), None) is not None

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

    def read_footer(self, rel: str) -> pq.FileMetaData | None:
        """The Parquet footer alone (ranged reads at the end, not the whole object). s3fs pins
        the ETag, so an object replaced between two reads fails them: read it again."""
        for attempt in range(2):
            try:
                with self.fs.open(self._p(rel), "rb") as f:
                    return pq.read_metadata(f)
            except FileNotFoundError:
                return None
            except OSError:
                if attempt:
                    raise
        return None

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

    def has_partitions(self, table: str) -> bool:
        """One listing of the table's prefix (an object store has no glob to stop early)."""
        return bool(self.list_all(table))

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
