"""Where the lake's files live: a local directory tree or an fsspec object store.

Each store offers the few operations the lake needs (exists, read, create-exclusive, list,
spool, publish, delete); `publish` is the atomic step: fsync + `os.replace` on a local disk, one
PUT (or a completed multipart upload) on an object store. `warehouse.lake` builds on them.

Setup mistakes are told apart from transient failures here, where the errors are known:
`lake_uri_problem` (a URI that cannot name a lake), `probe()` (can this store be written, now,
without retries: the bucket exists, the credentials are accepted, the disk has room) and
`setup_problem(exc)` (an error met mid-run that no retry can fix: a full disk, a missing bucket,
refused credentials). Each gives one line saying what to fix, never a credential.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import errno
import fcntl
import hashlib
import os
import shutil
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlparse

if TYPE_CHECKING:
    import pyarrow.parquet as pq

# pyarrow only where a footer is read: `cdrhouse sql` checks a lake URI and opens the analyst's
# connection through this module, and pays for no Arrow on the way.

PART_FILE = "part-0.parquet"
# An account's sub-lake, under the lake root (`warehouse.lake.Lake.account`).
ACCOUNT_DIR_PREFIX = "account_id="
TMP_DIR = "_tmp"
# A published file's previous version, kept while the rest of its group is published.
UNDO_PREFIX = "undo-"
# A lake's publish locks (`Lake.publishing`): one empty file per partition key, never deleted
# while the lake is in use (a name another process may hold).
LOCK_DIR = "_locks"
# Where an object-store lake's publish locks are: the host's, so they hold only between the
# processes of one host (runs in other pods are not held back).
HOST_LOCK_DIR = "cdrhouse-locks"
# How often a publish waiting for another's tries the lock again, and for how long: a publish
# takes well under a second, so a holder past this is hung (its process stopped on a dead
# mount, say), and the waiting run fails saying so rather than waiting for ever.
LOCK_POLL_S = 0.05
LOCK_WAIT_S = 600.0
LOCAL_SCHEMES = ("", "file")
# Object stores a lake may live on, and the fsspec package each needs.
OBJECT_SCHEMES = {
    "s3": "s3fs",
    "s3a": "s3fs",
    "gs": "gcsfs",
    "gcs": "gcsfs",
    "abfs": "adlfs",
    "abfss": "adlfs",
    "az": "adlfs",
}
S3_SCHEMES = ("s3", "s3a")
# Where partitions bound for an object store are spooled (the pod's own throwaway disk).
SPOOL_DIR = "cdrhouse-spool"
# What the write probe writes (and removes): enough to meet a full disk, too little to matter.
PROBE_BYTES = 16 * 1024
PROBE_TIMEOUT_S = 5.0
# Errors of a disk that has no room left (or a file size or quota limit): no retry helps.
DISK_FULL_ERRNOS = frozenset({errno.ENOSPC, errno.EFBIG, errno.EDQUOT})
_DISK_FULL_TEXTS = tuple(os.strerror(e) for e in sorted(DISK_FULL_ERRNOS))
_USAGE = (
    "a lake is a local path, file:///abs/path, s3://<bucket>/<prefix>, gs://<bucket>/<prefix> "
    "or abfs://<container>/<prefix>"
)


class StoreSetupError(Exception):
    """The lake's store cannot be used as configured (message: one line, what to fix)."""


class LockTimeout(Exception):
    """Another process held a publish lock past the wait (`hold_lock`); nothing was published."""


class UnreadablePartitions(Exception):
    """Published partition files whose Parquet footer cannot be read (damaged on disk or in
    the bucket): every read of their table fails the same way, so no retry helps. The
    message names them and how to replace them (`Lake.unreadable`)."""


# What DuckDB's file globs (and fsspec's, on an object store) read as a pattern, and the
# backslash DuckDB reads as a separator. The views read a table as `<lake>/<table>/*/…`: a lake
# at `/srv/data*` also read `/srv/data2`'s files, one at `/srv/x[1]` read none, and a `?` cut
# DuckDB's database path short (`warehouse.duckdb` could not be written).
PATTERN_CHARACTERS = ("*", "?", "[", "\\")


def pattern_problem(path: str) -> str | None:
    """Why DuckDB cannot be pointed at `path` (one line), or None."""
    found = [c for c in PATTERN_CHARACTERS if c in path]
    if not found:
        return None
    return (
        f"the path holds {' '.join(found)}, which DuckDB reads as a file pattern: the views "
        "would read another directory's files, or none; use a path without * ? [ or \\"
    )


def lake_uri_problem(uri: str) -> str | None:
    """Why `uri` cannot name a lake (one line), or None. Checks the shape only: no I/O."""
    if not uri.strip() or uri != uri.strip():
        return f"the lake URI must not be empty or padded with spaces; {_USAGE}"
    try:
        parsed = urlparse(uri)
    except ValueError as exc:
        return f"not a URI ({exc}); {_USAGE}"
    scheme = parsed.scheme.lower()
    if scheme == "":
        return pattern_problem(uri)  # a plain path
    if scheme == "file":
        if parsed.netloc not in ("", "localhost"):
            return (
                f"file:// takes an absolute path after a third slash (file:///abs/path): here "
                f"{parsed.netloc!r} would be read as a host name"
            )
        if not parsed.path.startswith("/"):
            return "file: takes an absolute path: file:///abs/path"
        return pattern_problem(unquote(parsed.path))
    if scheme not in OBJECT_SCHEMES:
        return f"{scheme}:// is not supported; {_USAGE}"
    if not uri.lower().startswith(f"{scheme}://") or not parsed.netloc:
        return (
            f"no bucket could be read from it: write {scheme}://<bucket>/<prefix> (two "
            "slashes, then the bucket)"
        )
    if "@" in parsed.netloc:
        return "the lake URI must not carry credentials: use the store's own variables"
    if parsed.query or parsed.fragment:
        return "the lake URI must not carry a query or a fragment"
    return pattern_problem(parsed.netloc + parsed.path)


def shown_uri(uri: str) -> str:
    """`uri` as an error may show it: without credentials, query or fragment (a refused
    URI may carry a secret in them)."""
    try:
        parsed = urlparse(uri)
    except ValueError:
        return "(a lake URI that cannot be parsed)"
    netloc = parsed.netloc
    if "@" in netloc:
        netloc = "…@" + netloc.rpartition("@")[2]
    tail = "?…" if parsed.query or parsed.fragment else ""
    if parsed.scheme and "://" in uri:
        return f"{parsed.scheme}://{netloc}{parsed.path}{tail}"
    return uri if not tail else uri.split("?", 1)[0].split("#", 1)[0] + tail


def _check_uri(uri: str) -> None:
    problem = lake_uri_problem(uri)
    if problem is not None:
        raise ValueError(f"lake URI {shown_uri(uri)!r}: {problem}")


def is_local_uri(uri: str) -> bool:
    return urlparse(uri).scheme in LOCAL_SCHEMES


def root_from_uri(uri: str) -> Path:
    """`file:///abs/path` or a plain path -> Path (local lakes only)."""
    parsed = urlparse(uri)
    if parsed.scheme in LOCAL_SCHEMES:
        _check_uri(uri)
        return Path(unquote(parsed.path) if parsed.scheme else uri).resolve()
    raise ValueError(f"not a local lake URI (scheme {parsed.scheme!r}): {uri}")


def disk_full(exc: BaseException) -> OSError | None:
    """The out-of-space error in `exc`'s chain (ENOSPC, EFBIG, EDQUOT), if any. DuckDB reports
    one as text only ("IO Error: Could not write file ...: No space left on device"); other
    errors' text is not read (an API's message may quote its own server's full disk)."""
    for link in _chain(exc):
        if isinstance(link, OSError) and link.errno in DISK_FULL_ERRNOS:
            return link
        if not type(link).__module__.startswith(("duckdb", "_duckdb")):
            continue
        text = str(link)
        for code, strerror in zip(sorted(DISK_FULL_ERRNOS), _DISK_FULL_TEXTS, strict=True):
            if strerror in text:
                return OSError(code, strerror)
    return None


def disk_full_message(where: Path | str, error: OSError) -> str:
    strerror = os.strerror(error.errno or errno.ENOSPC)  # pyarrow's strerror is a paragraph
    return (
        f"{strerror} on the disk holding {where}: free space there (or point "
        "CDRHOUSE_DATA_DIR / CDRHOUSE_LAKE_URI, or TMPDIR for an object-store lake's spool, "
        "at a bigger disk) and re-run"
    )


def setup_problem(exc: BaseException, where: str = "the lake") -> str | None:
    """A one-line description of `exc` if no retry can fix it (a full disk, a missing bucket,
    refused or missing credentials), else None: it may be transient, let the retries run."""
    full = disk_full(exc)
    if full is not None:
        return disk_full_message(getattr(full, "filename", None) or where, full)
    damaged = next((e for e in _chain(exc) if isinstance(e, UnreadablePartitions)), None)
    if damaged is not None:
        return str(damaged)
    return _s3_problem(exc, where, during_run=True)


def _chain(exc: BaseException) -> Iterator[BaseException]:
    seen: set[int] = set()
    link: BaseException | None = exc
    while link is not None and id(link) not in seen:
        seen.add(id(link))
        yield link
        link = link.__cause__ or link.__context__


# S3 error codes that no retry can fix, and what to do about each.
_S3_CREDENTIALS = "check AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY (or AWS_PROFILE)"
_S3_FIXES = {
    "InvalidAccessKeyId": (
        f"S3 does not know the access key id (InvalidAccessKeyId): {_S3_CREDENTIALS}"
    ),
    "SignatureDoesNotMatch": (
        "S3 rejected the signature (SignatureDoesNotMatch): AWS_SECRET_ACCESS_KEY does not "
        "belong to AWS_ACCESS_KEY_ID"
    ),
    "InvalidToken": "S3 rejected the session token (InvalidToken): refresh AWS_SESSION_TOKEN",
    "ExpiredToken": "the S3 session token has expired (ExpiredToken): refresh the credentials",
    "AccessDenied": (
        "access denied (AccessDenied): the credentials need s3:ListBucket, s3:GetObject, "
        "s3:PutObject and s3:DeleteObject on the lake's bucket and prefix"
    ),
    "AllAccessDisabled": "all access to the bucket is disabled (AllAccessDisabled)",
    "InvalidBucketName": "the bucket name is not a valid S3 bucket name (InvalidBucketName)",
    "PermanentRedirect": (
        "the bucket is in another region (PermanentRedirect): set AWS_REGION to the bucket's"
    ),
}


def _s3_problem(exc: BaseException, where: str, *, during_run: bool) -> str | None:
    try:
        from botocore import exceptions as bx
    except ImportError:  # no S3 support installed: no S3 error either
        return None
    for link in _chain(exc):
        if isinstance(link, bx.NoCredentialsError | bx.PartialCredentialsError):
            return (
                f"no S3 credentials found for {where}: set AWS_ACCESS_KEY_ID and "
                "AWS_SECRET_ACCESS_KEY (or AWS_PROFILE, or give the pod an IAM role)"
            )
        if isinstance(link, bx.ClientError):
            error = link.response.get("Error", {})
            code = str(error.get("Code", ""))
            bucket = error.get("BucketName")
            if code in ("NoSuchBucket", "404") and (code == "NoSuchBucket" or not during_run):
                name = f"{bucket!r} " if bucket else ""
                return (
                    f"the bucket {name}of {where} does not exist: create it, or fix the "
                    "bucket in CDRHOUSE_LAKE_URI"
                )
            if code in _S3_FIXES:
                return f"{where}: {_S3_FIXES[code]}"
            if code == "403" and not during_run:
                return f"{where}: {_S3_FIXES['AccessDenied']}"
            return None
        if not during_run and isinstance(
            link, bx.EndpointConnectionError | bx.ConnectTimeoutError | bx.ReadTimeoutError
        ):
            return (
                f"cannot reach the object store of {where} ({link}): check AWS_ENDPOINT_URL "
                "and the network"
            )
    return None


def probe_directory(path: Path, what: str) -> None:
    """Raise `StoreSetupError` unless `path` can be created and written: writes PROBE_BYTES to
    a hidden temp file in its nearest existing directory, fsyncs, and removes it. Creates
    nothing else (not `path` itself)."""
    existing = path
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        raise StoreSetupError(f"{what} {path}: {existing} is not a directory")
    probe = existing / f".cdrhouse-probe-{uuid.uuid4().hex}"
    try:
        fd = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            os.write(fd, b"\0" * PROBE_BYTES)
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError as exc:
        if exc.errno in DISK_FULL_ERRNOS:
            raise StoreSetupError(disk_full_message(existing, exc)) from None
        raise StoreSetupError(
            f"cannot write {what} {path} ({exc.strerror or exc}): fix the permissions of "
            f"{existing} or point the variable elsewhere"
        ) from None
    finally:
        with contextlib.suppress(OSError):
            probe.unlink()


_held = threading.local()  # the lock paths this thread holds


@contextlib.contextmanager
def hold_lock(path: Path, wait_s: float = LOCK_WAIT_S) -> Iterator[None]:
    """An exclusive `flock` on `path` (created if missing), waited for up to `wait_s`
    (`LockTimeout` after); released at the end, or by the kernel when the process dies (a
    killed run never leaves it held). Taking it again in the thread that holds it raises: it
    would wait for itself forever."""
    held: set[Path] = _held.__dict__.setdefault("paths", set())
    if path in held:
        raise RuntimeError(f"{path} is already held by this thread")
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    deadline = time.monotonic() + wait_s
    try:
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise LockTimeout(
                        f"another process has held {path} for over {wait_s:g} s (a run "
                        "publishing the same partition, hung?); nothing was published: run "
                        "again once it has ended or been stopped"
                    ) from None
                # Not a blocking flock: Ctrl-C did not end one in a process whose handler was
                # set before polars and Arrow loaded, and a hung holder would hold it forever.
                time.sleep(LOCK_POLL_S)
        held.add(path)
        try:
            yield
        finally:
            held.discard(path)
    finally:
        os.close(fd)


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
        import pyarrow.parquet as pq

        try:
            return pq.read_metadata(self.root / rel)
        except FileNotFoundError:
            return None

    def get(self, rel: str, dest: Path) -> bool:
        """`rel` as the local file `dest`, for reading: a hard link where it can (no bytes
        copied; a publish replaces the name, never the file, so `dest` keeps the version
        linked), else a copy; False when it does not exist."""
        try:
            os.link(self.root / rel, dest)
        except FileNotFoundError:
            return False
        except OSError:  # another filesystem, or one without hard links
            try:
                shutil.copyfile(self.root / rel, dest)
            except FileNotFoundError:
                return False
        return True

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

    def list_accounts(self) -> dict[str, dict[str, dict[str, float]]]:
        """`account -> table -> key -> mtime` of every partition of every account sub-lake
        (`account_id=<id>/<table>/<key>/part-0.parquet`; the root's own are `list_all`'s)."""
        out: dict[str, dict[str, dict[str, float]]] = {}
        for path in self.root.glob(f"{ACCOUNT_DIR_PREFIX}*/*/*=*/{PART_FILE}"):
            with contextlib.suppress(FileNotFoundError):
                account = path.parents[2].name[len(ACCOUNT_DIR_PREFIX) :]
                tables = out.setdefault(account, {})
                tables.setdefault(path.parent.parent.name, {})[path.parent.name] = (
                    path.stat().st_mtime
                )
        return out

    def has_partitions(self, table: str) -> bool:
        """Stops at the first published partition found."""
        return next(self._parts(table), None) is not None

    def spool_dir(self) -> Path:
        return self.root / TMP_DIR

    def lock(
        self, name: str, wait_s: float = LOCK_WAIT_S
    ) -> contextlib.AbstractContextManager[None]:
        """Held by one process at a time, whichever host mounts the lake (NFS too)."""
        return hold_lock(self.root / LOCK_DIR / f"{name}.lock", wait_s)

    def probe(self) -> None:
        """Raise `StoreSetupError` unless the lake's directory can be created and written."""
        probe_directory(self.root, "the lake")

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

    def keep(self, rel: str) -> str | None:
        """A second name, under the temp folder, for the file at `rel` (a hard link: no bytes
        copied), so a publish over it can be undone (`put_back`); None if there is none."""
        kept = f"{TMP_DIR}/{UNDO_PREFIX}{uuid.uuid4().hex}/{Path(rel).name}"
        folder = (self.root / kept).parent
        folder.mkdir(parents=True, exist_ok=True)
        try:
            if self.get(rel, self.root / kept):
                return kept
        except BaseException:  # not readable: the group stops before replacing it
            shutil.rmtree(folder, ignore_errors=True)
            raise
        folder.rmdir()
        return None

    def put_back(self, kept: str, rel: str) -> None:
        """The file `keep` kept, at `rel` again (atomically)."""
        (self.root / kept).replace(self.root / rel)
        _fsync_dir((self.root / rel).parent)
        self.drop_kept(kept)

    def drop_kept(self, kept: str) -> None:
        shutil.rmtree((self.root / kept).parent, ignore_errors=True)

    def delete(self, rel: str) -> bool:
        path = self.root / rel
        if not path.exists():
            return False
        path.unlink()
        with contextlib.suppress(OSError):
            path.parent.rmdir()
        return True

    def remove_where(self, owned: Callable[[str], bool]) -> tuple[int, list[str]]:
        """Delete the files whose path (relative, with `/`) `owned` accepts, then every empty
        folder; returns how many files went and the paths of the files left."""
        if not self.root.is_dir():
            return 0, []
        removed, left, folders = 0, [], []
        for path in sorted(self.root.rglob("*")):
            if path.is_dir() and not path.is_symlink():
                folders.append(path)
                continue
            rel = path.relative_to(self.root).as_posix()
            if not owned(rel):
                left.append(rel)
                continue
            # A run's temp file may go between the walk and here: not a failed reset.
            path.unlink(missing_ok=True)
            removed += 1
        for folder in sorted(folders, key=lambda p: len(p.parts), reverse=True):
            with contextlib.suppress(OSError):  # not empty: it holds a file left
                folder.rmdir()
        return removed, left


class ObjectStore:
    """An fsspec filesystem (s3fs, gcsfs, adlfs); publish is a single PUT of a spooled file.

    Credentials and endpoint come from the store's standard chain (for S3: `AWS_ACCESS_KEY_ID`,
    `AWS_SECRET_ACCESS_KEY`, `AWS_REGION`, `AWS_ENDPOINT_URL`, profiles, instance roles).
    Listing caches are off: other runs write the same lake at any time.
    """

    is_local = False

    def __init__(self, uri: str) -> None:
        _check_uri(uri)
        import fsspec  # only object-store lakes need it

        self.uri = uri
        self.protocol = urlparse(uri).scheme.lower()
        try:
            # fsspec caches the instance (per process, per options): its client is reused.
            self.fs, path = fsspec.url_to_fs(uri, use_listings_cache=False)
        except ImportError:
            package = OBJECT_SCHEMES.get(self.protocol, "its fsspec package")
            raise StoreSetupError(
                f"a {self.protocol}:// lake needs the {package} package: pip install {package}"
            ) from None
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

    def get(self, rel: str, dest: Path) -> bool:
        """Download `rel` to the local file `dest` (streamed, not held in memory); False when
        it does not exist."""
        try:
            self.fs.get_file(self._p(rel), str(dest))
        except FileNotFoundError:
            return False
        return True

    def read_footer(self, rel: str) -> pq.FileMetaData | None:
        """The Parquet footer alone (ranged reads at the end, not the whole object). s3fs pins
        the ETag, so an object replaced between two reads fails them: read it again."""
        import pyarrow.parquet as pq

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

    def _find(self, rel: str | None) -> dict[str, Any]:
        try:
            found: dict[str, Any] = self.fs.find(self._p(rel) if rel else self.path, detail=True)
        except FileNotFoundError:
            return {}
        return found

    def list_all(self, table: str | None = None) -> dict[str, dict[str, float]]:
        """One listing (of the whole lake, or of one table's prefix); the root's partitions
        only (`<table>/<key>/part-0.parquet`), never an account sub-lake's. A `table` under a
        directory (`_rejected/raw_cdrs`) lists that directory's copies of the table."""
        out: dict[str, dict[str, float]] = {}
        base = self.path if table is None or "/" not in table else self._p(table.rpartition("/")[0])
        for name, info in self._find(table).items():
            parts = name[len(base) + 1 :].split("/")
            if len(parts) == 3 and parts[2] == PART_FILE and "=" in parts[1]:
                out.setdefault(parts[0], {})[parts[1]] = _info_stamp(info)
        return out

    def list_accounts(self) -> dict[str, dict[str, dict[str, float]]]:
        """`account -> table -> key -> mtime` of every account sub-lake's partitions (one
        listing of the whole lake)."""
        out: dict[str, dict[str, dict[str, float]]] = {}
        for name, info in self._find(None).items():
            parts = name[len(self.path) + 1 :].split("/")
            if (
                len(parts) == 4
                and parts[0].startswith(ACCOUNT_DIR_PREFIX)
                and parts[3] == PART_FILE
                and "=" in parts[2]
            ):
                tables = out.setdefault(parts[0][len(ACCOUNT_DIR_PREFIX) :], {})
                tables.setdefault(parts[1], {})[parts[2]] = _info_stamp(info)
        return out

    def has_partitions(self, table: str) -> bool:
        """One listing of the table's prefix (an object store has no glob to stop early)."""
        return bool(self.list_all(table))

    def spool_dir(self) -> Path:
        return Path(tempfile.gettempdir()) / SPOOL_DIR

    def lock(
        self, name: str, wait_s: float = LOCK_WAIT_S
    ) -> contextlib.AbstractContextManager[None]:
        """Held by one process of this host at a time (an object store has no lock of its
        own); outside the spool, whose stale entries are deleted."""
        lake = hashlib.sha256(f"{self.protocol}://{self.path}".encode()).hexdigest()[:16]
        path = Path(tempfile.gettempdir()) / HOST_LOCK_DIR / lake / f"{name}.lock"
        return hold_lock(path, wait_s)

    def probe(self, timeout_s: float = PROBE_TIMEOUT_S) -> None:
        """Raise `StoreSetupError` unless the bucket exists, the credentials are accepted and
        they may list and write the lake's prefix; and the local spool has room. One attempt
        per request, short timeouts: a setup mistake answers in seconds, not after retries.
        The write goes to a temp key under `<lake>/_tmp/`, deleted again."""
        probe_directory(self.spool_dir(), "the spool directory (TMPDIR)")
        if self.protocol in S3_SCHEMES:
            self._probe_s3(timeout_s)
            return
        rel = f"{TMP_DIR}/probe-{uuid.uuid4().hex}"
        try:
            self.fs.ls(self.path.split("/", 1)[0])
            self.fs.pipe_file(self._p(rel), b"")
            self.fs.rm_file(self._p(rel))
        except Exception as exc:  # any failure here is the store's setup
            raise StoreSetupError(f"the lake {self.uri} cannot be written: {exc}") from None

    def _probe_s3(self, timeout_s: float) -> None:
        import fsspec

        fs, path = fsspec.url_to_fs(
            self.uri,
            skip_instance_cache=True,  # this environment's credentials, not a cached client's
            config_kwargs={
                "connect_timeout": timeout_s,
                "read_timeout": timeout_s,
                "retries": {"total_max_attempts": 1},
            },
        )
        fs.retries = 1  # s3fs's own retry loop, around botocore's
        bucket, prefix, _ = fs.split_path(path.rstrip("/"))
        key = f"{prefix}/{TMP_DIR}/probe-{uuid.uuid4().hex}".lstrip("/")
        where = f"the lake {self.uri}"
        step = "list"
        try:
            fs.call_s3("list_objects_v2", Bucket=bucket, Prefix=prefix, MaxKeys=1)
            step = "write to"
            fs.call_s3("put_object", Bucket=bucket, Key=key, Body=b"")
            step = f"delete the probe object s3://{bucket}/{key} (left behind) from"
            fs.call_s3("delete_object", Bucket=bucket, Key=key)
        except Exception as exc:  # classified below, or reported as it is
            problem = _s3_problem(exc, where, during_run=False)
            if problem is None:
                first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
                problem = f"cannot {step} {where}: {type(exc).__name__}: {first}"
            raise StoreSetupError(problem) from None

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

    def keep(self, rel: str) -> str | None:
        """A copy of the object at `rel` under the lake's temp prefix (server-side: no bytes
        through this process), so a publish over it can be undone; None if there is none."""
        kept = f"{TMP_DIR}/{UNDO_PREFIX}{uuid.uuid4().hex}/{Path(rel).name}"
        try:
            self.fs.copy(self._p(rel), self._p(kept))
        except FileNotFoundError:
            return None
        return kept

    def put_back(self, kept: str, rel: str) -> None:
        self.fs.copy(self._p(kept), self._p(rel))
        self.drop_kept(kept)

    def drop_kept(self, kept: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            self.fs.rm_file(self._p(kept))

    def delete(self, rel: str) -> bool:
        if not self.exists(rel):
            return False
        self.fs.rm_file(self._p(rel))
        return True

    def remove_where(self, owned: Callable[[str], bool]) -> tuple[int, list[str]]:
        try:
            files = self.fs.find(self.path)
        except FileNotFoundError:
            return 0, []
        root = self.path.rstrip("/") + "/"
        gone: list[str] = []
        left: list[str] = []
        for rel in sorted(f[len(root) :] for f in files if f.startswith(root)):
            (gone if owned(rel) else left).append(rel)
        if gone:
            self.fs.rm([root + r for r in gone])
        return len(gone), left


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
