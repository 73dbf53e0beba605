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

Rejected partitions: a day that fails a blocking check publishes nothing, and its raw records go
to `<root>/_rejected/<table>/<key>/part-0.parquet` instead (`PartitionWriter.reject`), for
diagnosis. No reader takes them for the table: they are one level deeper than every partition
glob (`<table>/*/part-0.parquet`, `*/*/part-0.parquet`) and every listing (`partitions`,
`stamps`); the next day the pipeline publishes whole for that key (`land_day`) deletes them.

Accounts (several contact centers in one lake): an account's data is a sub-lake of its own at
`<root>/account_id=<id>/`, with exactly the layout above inside (its partitions, its own
provenance marker, `_rejected/` and `_tmp/`): `Lake.account(id)`. The account `default` is the
root itself, so a lake written before accounts existed is the `default` account's data as it
is, without migration. Provenance is therefore per account: a sub-lake refuses another source
for that account only, and other accounts go on. The root's listings (`partitions`, `stamps`,
`files_glob`, the `_rejected` area) see the root's own partitions only: an `account_id=<id>`
directory is never a table (its partitions are one level deeper than every root glob).
`Lake.accounts()` lists the accounts that hold data; the warehouse views read them all, with
`account_id` from the path (`warehouse.viewsql`).

`reset()` of the root deletes the lake's files under it (`lake_file`: partitions, rejected
days, temp files, source markers), the sub-lakes of every account too: `cdrhouse lake reset
--yes`. `reset()` of a sub-lake deletes that account's only (`--account ID`). A file of anything
else under the root stays.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import logging
import re
import shutil
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

from models.tables import RAW_CDRS, TABLES, TableSpec, landed
from models.timestamps import iso_ms
from warehouse.interrupt import held_signals
from warehouse.stores import (
    ACCOUNT_DIR_PREFIX,
    LOCK_DIR,
    LOCK_WAIT_S,
    PART_FILE,
    TMP_DIR,
    LocalStore,
    ObjectStore,
    Store,
    UnreadablePartitions,
    is_local_uri,
    root_from_uri,
)

_LOG = logging.getLogger(__name__)
MARKER_FILE = "_cdrhouse_lake.json"
# The account's business-day zone as its last landing was configured (the accounts file):
# read by whoever builds views over the lake, so a day's local date does not depend on which
# machine's `warehouse.duckdb` remembers it.
ZONE_FILE = "_cdrhouse_zone.json"
# The account's privacy records, which outlive a reset (`Lake.reset`); no table glob reads them.
PRIVACY_DIR = "_privacy"
# The erased people's tokens (never their numbers), one per line: every landing of the account
# honours it (`warehouse.privacy`).
FORGET_LIST = f"{PRIVACY_DIR}/forgotten_tokens.txt"
FORGET_LIST_LOCK = "forget-list"  # its read-merge-publish, one erasure at a time
_TOKEN_LINE = re.compile(rb"[0-9a-f]{64}")  # a forget-list line: a token, as `forget` writes
# Which key makes the account's tokens (its `META_KEY_CHECK`, not the key): created by the first
# partition published with tokens, exclusively, as MARKER_FILE is, so of two first landings
# under different keys one lands and the other is refused at its publish. It stays with the
# forget-list, whose tokens that key made.
KEY_MARKER_FILE = f"{PRIVACY_DIR}/pii_key.json"
# Every warehouse table and view has it, first; in the lake it is the sub-lake's path.
ACCOUNT_COLUMN = "account_id"
# Its meaning, in the dictionary and the catalog (here, so neither needs the other's imports:
# the catalog is loaded with the definitions, which must not load DuckDB).
ACCOUNT_MEANING = "account (contact center) id; `default` for a lake without accounts"
# A lake table's: the files do not hold it.
LAKE_TABLE_ACCOUNT_MEANING = f"{ACCOUNT_MEANING} (from the lake path, not stored in the files)"
# The account whose data is the lake root itself (the one account of a lake without accounts).
DEFAULT_ACCOUNT = "default"
# As `pipelines.accounts.ACCOUNT_ID`: part of every row and lake path.
ACCOUNT_ID = re.compile(r"[a-z0-9_]{1,63}")
REJECTED_DIR = "_rejected"
# Damaged partition files an error names (`Lake.unreadable`), the count of the rest after.
UNREADABLE_SHOWN = 3
# Parquet key-value metadata written into every partition file.
META_SOURCE = "cdrhouse.source"
META_WRITTEN_AT = "cdrhouse.written_at"
KEYED_TABLE = RAW_CDRS.name  # whose footers say which key a day's tokens were made with
# Under CDRHOUSE_PHONE_NUMBERS=token: which key made the partition's tokens, as an HMAC of a
# constant under it (`warehouse.privacy.PrivacyPolicy.key_check`; the key cannot be read back).
META_KEY_CHECK = "cdrhouse.pii_key_check"
# Big row groups keep DuckDB scans cheap; 128k rows of CDRs is ~10-20 MB uncompressed.
ROW_GROUP_SIZE = 128 * 1024
COMPRESSION = "zstd"
# A write this big (big records; ordinary row groups are a few MB) is followed by an empty
# row group, which frees the Parquet writer's buffers (see PartitionWriter.write).
RELEASE_AFTER_BYTES = 16 * 2**20
STALE_TMP_SECONDS = 6 * 3600


# The files a lake writes (relative to its root): a partition or a rejected day, its source
# marker, a writer's temp file, a publish lock; at the root, the same inside an account's
# sub-lake.
_LAKE_FILE = (
    rf"(?:{re.escape(MARKER_FILE)}|{re.escape(ZONE_FILE)}|{TMP_DIR}/.+|{LOCK_DIR}/[^/]+"
    rf"|(?:{REJECTED_DIR}/)?[a-z0-9_]+/[a-z0-9_]+=[^/]+/{re.escape(PART_FILE)})"
)
_ROOT_FILE = re.compile(rf"(?:{re.escape(ACCOUNT_DIR_PREFIX)}[a-z0-9_]{{1,63}}/)?{_LAKE_FILE}")
_SUB_LAKE_FILE = re.compile(_LAKE_FILE)


def lake_file(rel: str, *, accounts: bool = True) -> bool:
    """Whether `rel` (a path under a lake's root, with `/`) is a file the lake writes: what a
    reset deletes. `accounts`: the root's, whose account sub-lakes are its own too."""
    return (_ROOT_FILE if accounts else _SUB_LAKE_FILE).fullmatch(rel) is not None


@dataclass(frozen=True)
class LakeReset:
    """What `Lake.reset` did: the files deleted, and the paths of the files under the root
    that are not the lake's (kept, not deleted); the privacy records are not listed."""

    removed: int
    others: list[str]


class LakeSourceConflict(Exception):
    """A write from one data source into a lake that holds another source's data."""

    @classmethod
    def between(
        cls, wanted: str, current: str, uri: str, account: str = DEFAULT_ACCOUNT
    ) -> LakeSourceConflict:
        if account != DEFAULT_ACCOUNT:
            return cls(
                f"refusing to write data from {wanted!r} into account {account!r} of the lake "
                f"({uri}), which holds that account's data from {current!r}; give the account "
                "another id, or empty its sub-lake"
            )
        return cls(
            f"refusing to write data from {wanted!r} into the lake at {uri}, which holds data "
            f"from {current!r}; point CDRHOUSE_LAKE_URI at another lake, or empty this one "
            "with `cdrhouse lake reset --yes`"
        )


def _where(uri: str, account: str) -> str:
    """The lake, or the account's sub-lake, as a refusal names it."""
    if account == DEFAULT_ACCOUNT:
        return f"the lake at {uri}"
    return f"account {account!r} of the lake ({uri})"


class LakeMarkerDamaged(LakeSourceConflict):
    """A marker (`rel`: the source's or the key's) that is not the JSON object cdrhouse wrote:
    what it guarded is unknown, so nothing is written; `lake info` shows it, `lake reset`
    removes it."""

    def __init__(self, rel: str, uri: str, account: str) -> None:
        # A reset keeps the privacy folder (the key's claim): it removes the source's only.
        which = "" if account == DEFAULT_ACCOUNT else f" --account {account}"
        reset = f" (`cdrhouse lake reset{which} --yes` removes it with the data)"
        reset *= rel == MARKER_FILE
        super().__init__(
            f"refusing to write into {_where(uri, account)}: {rel} is not the JSON object "
            f"cdrhouse wrote; restore it from a backup, or remove it if you know what it "
            f"recorded{reset}"
        )
        self.rel = rel

    @property
    def shown(self) -> str:
        """What a reader shows in place of the marker's value."""
        return f"(damaged: {self.rel} is not the JSON object cdrhouse wrote)"


class ForgetListDamaged(LakeMarkerDamaged):
    """A forget-list line that is not a token cdrhouse wrote (a hand edit, perhaps a number
    in clear): who it erases is unknown, so nothing lands until it is mended. The line is
    named by its number only: its text may be a person's number."""

    def __init__(self, line: int, uri: str, account: str) -> None:
        LakeSourceConflict.__init__(
            self,
            f"refusing to write into {_where(uri, account)}: line {line} of {FORGET_LIST} is "
            "not a token cdrhouse wrote (64 lowercase hex digits), so the people it erases "
            "are unknown and could come back; restore the file from a backup, or delete that "
            "line and run `cdrhouse privacy forget` for the person it named",
        )
        self.rel = FORGET_LIST
        self.line = line

    @property
    def shown(self) -> str:
        return f"(damaged: line {self.line} of {FORGET_LIST} is not a token cdrhouse wrote)"


class LakeKeyConflict(LakeSourceConflict):
    """Tokens keyed by one key into a lake whose days were landed under another: they would
    not join, and an erasure by number would miss the other key's days."""

    @classmethod
    def between_keys(cls, days: Sequence[str], uri: str, account: str) -> LakeKeyConflict:
        where = _where(uri, account)
        shown = ", ".join(days[:3]) + (f" and {len(days) - 3} more" if len(days) > 3 else "")
        return cls(
            f"refusing to use this CDRHOUSE_PII_KEY (or the account's pii_key_env) with {where}: "
            f"its tokens were made with another key ({len(days)} day(s): {shown}), so a "
            "number's token would not match them; set the key those days were landed with"
        )

    @classmethod
    def claimed(cls, uri: str, account: str) -> LakeKeyConflict:
        where = _where(uri, account)
        return cls(
            f"refusing to use this CDRHOUSE_PII_KEY (or the account's pii_key_env) with {where}: "
            f"its tokens and forget-list are made with another key ({KEY_MARKER_FILE}), so a "
            "number's token would not match them; set the key they are made with"
        )

    @classmethod
    def in_clear(cls, uri: str, account: str) -> LakeKeyConflict:
        where = _where(uri, account)
        return cls(
            "refusing to land callers' numbers as the API sends them "
            f"(CDRHOUSE_PHONE_NUMBERS=raw) into {where}: its days hold keyed tokens "
            f"({KEY_MARKER_FILE}); set CDRHOUSE_PHONE_NUMBERS=token and the key they are made "
            "with, or land raw numbers into another lake"
        )


def _known_zone(name: str) -> bool:
    """A zone name the views can use: one edited by hand into a zone file, unknown, would
    fail every KPI query (the view converts with it)."""
    try:
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        return False
    return True


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


def without_absent(schema: Any, names: Sequence[str]) -> Any:
    """`schema` without the columns the privacy stage adds (`LANDED_COLUMNS`) that `names`
    lacks: under CDRHOUSE_PHONE_NUMBERS=raw a partition keeps its pre-privacy schema, and
    readers show those columns as null."""
    keep = [i for i, n in enumerate(schema.names) if n in names or n not in LANDED_COLUMNS]
    if len(keep) == len(schema.names):
        return schema
    return pa.schema([schema.field(i) for i in keep], metadata=schema.metadata)


def _landed(specs: dict[str, TableSpec]) -> frozenset[str]:
    return frozenset(c.name for s in specs.values() for c in landed(s).columns if c.landed)


LANDED_COLUMNS = _landed(TABLES)


def footer_key_check(footer: pq.FileMetaData | None) -> str | None:
    """The key check a partition's footer records (`META_KEY_CHECK`), None if none."""
    value = (footer.metadata or {}).get(META_KEY_CHECK.encode()) if footer else None
    return value.decode() if value else None


def top_level_names(footer: pq.FileMetaData | None) -> frozenset[str]:
    """A Parquet file's column names (a map's or a struct's own name, not its leaves'), none
    without a file."""
    return frozenset(footer.schema.to_arrow_schema().names) if footer is not None else frozenset()


def footer_source(footer: pq.FileMetaData | None) -> str | None:
    """The source a partition's footer records (None: no footer, or none recorded)."""
    value = (footer.metadata or {}).get(META_SOURCE.encode()) if footer else None
    return value.decode() if value else None


def _is_time(f: pa.Field) -> bool:
    return bool(pa.types.is_timestamp(f.type))


def _leaf_paths(path: str, kind: pa.DataType) -> list[str]:
    """The Parquet column paths of an Arrow column's leaves (a list's items are
    `<name>.list.element`)."""
    if pa.types.is_struct(kind):
        return [p for f in kind for p in _leaf_paths(f"{path}.{f.name}", f.type)]
    if pa.types.is_list(kind) or pa.types.is_large_list(kind):
        return _leaf_paths(f"{path}.list.element", kind.value_type)
    return [path]


@dataclass
class PartitionWriter:
    """Streams row groups into a local temp file; publishes it atomically on a clean exit."""

    lake: Lake
    rel: str
    tmp: Path
    schema: Any
    drop: str | None  # the partition column: in the path, not in the file
    claim: str | None  # the source that claims the lake with this first partition
    free_text: frozenset[str] = frozenset()  # no dictionary, no statistics (TableSpec)
    unique: frozenset[str] = frozenset()  # no dictionary (TableSpec.unique_columns)
    key_claim: str | None = None  # the key check of the tokens it holds (KEY_MARKER_FILE)
    # Published with the other files of its group, at the group's exit (`PublishGroup`).
    group: PublishGroup | None = None
    rows: int = 0
    _writer: Any = field(default=None, repr=False)

    def reject(self) -> None:
        """Publish to the rejected area instead (`REJECTED_DIR`): out of every reader's way,
        the published partition untouched. Rejected data claims no lake."""
        if not self.rel.startswith(f"{REJECTED_DIR}/"):
            self.rel = f"{REJECTED_DIR}/{self.rel}"
        self.claim = self.key_claim = None

    def __enter__(self) -> PartitionWriter:
        self.tmp.parent.mkdir(parents=True, exist_ok=True)
        return self

    def _open(self, names: Sequence[str]) -> None:
        """The file's writer, at the first write: its schema keeps the privacy stage's columns
        only when the data has them."""
        self.schema = without_absent(self.schema, names)
        # A dictionary only pays for repeated values. A key or a millisecond timestamp hardly
        # repeats: its dictionary is built, then dropped for plain pages once it fills. A
        # 200k day without: `started_at` and `ended_at` of cdrs ~40 % smaller, the day's seven
        # files 5 % smaller and 6 % less CPU to write. Their statistics stay (min/max prune).
        plain = self.free_text | self.unique
        self._writer = pq.ParquetWriter(
            str(self.tmp),
            self.schema,
            compression=COMPRESSION,
            use_dictionary=self._leaves(lambda f: f.name not in plain and not _is_time(f)),
            write_statistics=self._leaves(lambda f: f.name not in self.free_text),
        )

    def _leaves(self, keep: Callable[[pa.Field], bool]) -> list[str]:
        """The Parquet leaf paths of the columns `keep` takes: what the writer's per-column
        options name (a top-level name matches no leaf of a list or struct)."""
        return [path for f in self.schema if keep(f) for path in _leaf_paths(f.name, f.type)]

    def write(self, data: pl.DataFrame | Any) -> None:
        if self._writer is None:
            self._open(data.columns if isinstance(data, pl.DataFrame) else data.column_names)
        table = _to_arrow(data, self.schema, self.drop)
        if table.num_rows:
            self._writer.write_table(table, row_group_size=ROW_GROUP_SIZE)
            self.rows += table.num_rows
            if table.nbytes >= RELEASE_AFTER_BYTES:
                # Arrow keeps the last row group's column buffers, sized to its biggest page,
                # until the next row group starts: after a 40 MB value, ~80 MB until the next
                # write, under the next page's decode. An empty row group ends it now.
                del data
                self._writer.write_table(table.slice(0, 0))

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._writer is None and exc_type is None:
            self._open(())  # an empty partition
        writer, self._writer = self._writer, None
        if exc_type is not None:
            with contextlib.suppress(Exception):
                if writer is not None:
                    writer.close()
            self.tmp.unlink(missing_ok=True)
            return
        try:
            writer.close()
            if self.claim is not None:
                self.lake.claim(self.claim)  # the first partition claims the lake
            if self.key_claim is not None:
                self.lake.claim_key(self.key_claim)  # and the first with tokens, their key
            if self.group is not None:
                self.group.files.append((self.tmp, self.rel))
                return
            self.lake.store.publish(self.tmp, self.rel)
        except BaseException:
            self.tmp.unlink(missing_ok=True)
            raise


@dataclass
class PublishGroup:
    """Partitions published as one (a day's `raw_cdrs` and typed tables; a snapshot's tables):
    each writer's file waits for the group's exit, then all are renamed into place. If one of
    those fails (a full disk, a refused rename, an object store's error), the files already
    replaced get their previous versions back and new ones go: a failure never leaves a day's
    tables from two fetches. (A process killed between two renames still can: SIGINT and
    SIGTERM are held meanwhile, SIGKILL cannot be.)"""

    lake: Lake
    files: list[tuple[Path, str]] = field(default_factory=list)

    def __enter__(self) -> PublishGroup:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        files, self.files = self.files, []
        if exc_type is not None:
            for tmp, _ in files:
                tmp.unlink(missing_ok=True)
            return
        store = self.lake.store
        done: list[tuple[str, str | None]] = []  # each file published: rel, its previous kept
        try:
            for tmp, rel in files:
                done.append((rel, store.keep(rel)))
                store.publish(tmp, rel)
        except BaseException:
            for tmp, _ in files:
                tmp.unlink(missing_ok=True)
            for rel, kept in reversed(done):
                try:
                    if kept is None:
                        store.delete(rel)
                    else:
                        store.put_back(kept, rel)
                except Exception:  # the first error is the one to raise
                    _LOG.exception("could not put the previous version of %s back", rel)
            raise
        for _, kept in done:
            if kept is not None:
                with contextlib.suppress(Exception):
                    store.drop_kept(kept)


class Lake:
    """A hive-partitioned Parquet lake rooted at a local path or an object store URI."""

    def __init__(self, uri: str, *, account_id: str = DEFAULT_ACCOUNT) -> None:
        """`account_id`: which account this lake holds (`account` makes the sub-lakes; the
        root is `default`)."""
        self.uri = uri
        self.account_id = account_id
        self.store: Store = (
            LocalStore(root_from_uri(uri)) if is_local_uri(uri) else ObjectStore(uri)
        )
        self._listing: dict[str, dict[str, float]] | None = None
        self._accounts: dict[str, dict[str, dict[str, float]]] | None = None
        self._source: str | None = None
        self._key: str | None = None  # the key check claimed (KEY_MARKER_FILE), once read

    def __repr__(self) -> str:
        if self.is_sub_lake:
            return f"Lake({self.uri!r}, account_id={self.account_id!r})"
        return f"Lake({self.uri!r})"

    # --- accounts -------------------------------------------------------------------------

    @property
    def is_sub_lake(self) -> bool:
        """An account's sub-lake (it has no accounts of its own)."""
        return self.account_id != DEFAULT_ACCOUNT

    def account(self, account_id: str) -> Lake:
        """The lake of one account: `<root>/account_id=<id>/`, the root itself for
        `default`. Same layout, own provenance; creating it writes nothing."""
        if not ACCOUNT_ID.fullmatch(account_id):
            raise ValueError(f"bad account id {account_id!r}; expected 1-63 of a-z, 0-9 and _")
        if account_id == self.account_id:
            return self
        if self.is_sub_lake:
            raise ValueError(f"{self!r} is an account's lake; ask its root for {account_id!r}")
        return Lake(self.account_uri(account_id), account_id=account_id)

    def account_uri(self, account_id: str) -> str:
        """Where an account's sub-lake is (the root's URI for `default`)."""
        if account_id == DEFAULT_ACCOUNT:
            return self.uri
        return f"{self.uri.rstrip('/')}/{ACCOUNT_DIR_PREFIX}{account_id}"

    def _account_listing(self) -> dict[str, dict[str, dict[str, float]]]:
        if self._accounts is None and self.is_sub_lake:
            return {}
        listing = self._accounts if self._accounts is not None else self.store.list_accounts()
        # A directory named like an account but not one (`account_id=Bad`) is no account.
        return {
            a: t for a, t in listing.items() if ACCOUNT_ID.fullmatch(a) and a != self.account_id
        }

    def _account_dirs(self) -> list[str]:
        """The account ids of the sub-lake directories of a local root (data or not)."""
        if not self.root.is_dir():
            return []
        ids = (
            p.name[len(ACCOUNT_DIR_PREFIX) :]
            for p in self.root.iterdir()
            if p.name.startswith(ACCOUNT_DIR_PREFIX) and p.is_dir()
        )
        return sorted(i for i in ids if ACCOUNT_ID.fullmatch(i) and i != DEFAULT_ACCOUNT)

    def accounts(self) -> list[str]:
        """The accounts holding data (any published partition): `default` first when the
        root holds one, then every sub-lake's id, sorted."""
        listing = self._listing if self._listing is not None else self.store.list_all()
        own = [self.account_id] if any(listing.values()) else []
        return own + sorted(a for a, tables in self._account_listing().items() if tables)

    def holders(self, table: str) -> list[str]:
        """The accounts with a published partition of `table` (as `accounts`)."""
        own = [self.account_id] if self.has_data(table) else []
        if self.is_sub_lake:
            return own
        if self._accounts is None and self.is_local:
            # Stops at each sub-lake's first file: the cost does not grow with the days.
            return own + [a for a in self._account_dirs() if self.account(a).has_data(table)]
        listing = self._account_listing()
        return own + sorted(a for a, tables in listing.items() if tables.get(table))

    def accounts_table_glob(self, table: str) -> str:
        """A glob over every partition file of a table in every account sub-lake (the
        root's own are `table_glob`'s)."""
        return self.store.url(f"{ACCOUNT_DIR_PREFIX}*/{table}/{self._days}/{PART_FILE}")

    def accounts_files_glob(self) -> str:
        """A glob over every partition file of every sub-lake."""
        return self.store.url(f"{ACCOUNT_DIR_PREFIX}*/*/*/{PART_FILE}")

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

    def _rel(self, table: str, key: str, *, rejected: bool = False) -> str:
        _parse_key(key)
        return f"{REJECTED_DIR}/" * rejected + f"{table}/{key}/{PART_FILE}"

    def partition_url(self, table: str, key: str, *, rejected: bool = False) -> str:
        """Where readers find a partition (or its rejected copy): an absolute path or an
        `s3://…` URL."""
        return self.store.url(self._rel(table, key, rejected=rejected))

    def table_glob(self, table: str) -> str:
        """A glob over every partition file of a table, for DuckDB and other engines."""
        return self.store.url(f"{table}/{self._days}/{PART_FILE}")

    @property
    def _days(self) -> str:
        """The partitions' level of a table glob. On an object store `**`: fsspec lists the
        table's keys flat (a request per 1,000), where `*` lists each day's prefix, a request
        per day each time a view is bound. The table holds nothing deeper than its days."""
        return "*" if self.is_local else "**"

    def files_glob(self) -> str:
        """A glob over every partition file of every table."""
        return self.store.url(f"*/*/{PART_FILE}")

    def partition_path(self, table: str, key: str) -> Path:
        """The local file of a partition (local lakes only)."""
        return self.root / self._rel(table, key)

    def exists(self, table: str, key: str, *, rejected: bool = False) -> bool:
        return self.store.exists(self._rel(table, key, rejected=rejected))

    def copy_partition(self, table: str, key: str, into: Lake) -> bool:
        """Copy a partition, as it is now, into the local lake `into`, for reading (a local
        lake's is a hard link where it can): its readers then need no request to the store,
        and a concurrent replace of the partition does not change what they read. False when
        this lake has no such partition."""
        dest = into.partition_path(table, key)
        dest.parent.mkdir(parents=True, exist_ok=True)  # (left empty: readers list files)
        return self.store.get(self._rel(table, key), dest)

    # --- provenance -----------------------------------------------------------------------

    def source(self) -> str | None:
        """The data source this lake belongs to, or None while it holds nothing."""
        if self._source is not None:
            return self._source  # a claimed lake keeps its source until a reset
        data = self.store.read_bytes(MARKER_FILE)
        if data is None:
            return None
        source = self._marker_field(MARKER_FILE, data, "source")
        self._source = str(source) if source else None
        return self._source

    def source_shown(self) -> str | None:
        """`source`, or for a damaged marker a text saying so: reading the lake (its views,
        `lake info`, a reset's prompt) needs no claim, and shows what is wrong instead."""
        try:
            return self.source()
        except LakeMarkerDamaged as exc:
            return exc.shown

    def forgotten(self) -> frozenset[str]:
        """The tokens `cdrhouse privacy forget` erased from this account's lake; a line
        that is not one (`ForgetListDamaged`) stops every landing and erasure."""
        data = self.store.read_bytes(FORGET_LIST)
        tokens = set()
        for n, line in enumerate((data or b"").split(b"\n"), 1):
            token = line.strip()
            if not token:
                continue
            if _TOKEN_LINE.fullmatch(token) is None:
                raise ForgetListDamaged(n, self.uri, self.account_id)
            tokens.add(token.decode())
        return frozenset(tokens)

    def forget(self, tokens: Sequence[str]) -> frozenset[str]:
        """Add `tokens` to the forget-list (replaced atomically); returns the whole list.
        Read, merged and published under the list's lock: two erasures at once each kept
        only their own tokens, and a re-pull then brought the other's person back."""
        with self.lock(FORGET_LIST_LOCK):
            merged = self.forgotten() | frozenset(tokens)
            self._replace_small(FORGET_LIST, "".join(f"{t}\n" for t in sorted(merged)).encode())
        return merged

    def _replace_small(self, rel: str, data: bytes) -> None:
        """Replace a small record file of the lake (the forget-list, the zone) atomically:
        written in the spool, then published as a partition is."""
        spool = self.store.spool_dir()
        spool.mkdir(parents=True, exist_ok=True)
        tmp = spool / f"record-{uuid.uuid4().hex}.tmp"
        tmp.write_bytes(data)
        try:
            self.store.publish(tmp, rel)
        finally:
            tmp.unlink(missing_ok=True)

    def key_check_of(self, table: str, key: str) -> str | None:
        """The key check a partition's footer records (None: absent, or landed without
        tokens, or before the check was recorded)."""
        return footer_key_check(self.partition_footer(table, key))

    def day_footers(self, *, newest: bool = False) -> dict[str, pq.FileMetaData | None]:
        """The footer of each day's `raw_cdrs` partition (`newest`: the newest day's only), by
        partition key: which key made its tokens, and whether it was landed under `token`."""
        keys = self.partitions(KEYED_TABLE)
        return {k: self.partition_footer(KEYED_TABLE, k) for k in (keys[-1:] if newest else keys)}

    def check_key(
        self, key_check: str | None, footers: dict[str, pq.FileMetaData | None] | None = None
    ) -> None:
        """Refuse tokens made under the key of `key_check` when this lake's days were landed
        under another key (`LakeKeyConflict`): the key the lake's tokens claimed
        (KEY_MARKER_FILE), and the newest day's footer, or every day's given in `footers`
        (`day_footers`: an erasure checks every day; days landed before the check was recorded
        are taken as matching). None (no key given) is never refused."""
        if key_check is None:
            return
        found = self.day_footers(newest=True) if footers is None else footers
        other = [
            k.partition("=")[2]
            for k, footer in found.items()
            if footer_key_check(footer) not in (None, key_check)
        ]
        if other:
            raise LakeKeyConflict.between_keys(other, self.uri, self.account_id)
        if self.key_claimed() not in (None, key_check):
            raise LakeKeyConflict.claimed(self.uri, self.account_id)

    def check_landing(self, key_check: str | None) -> None:
        """`check_key` for a landing of CDRs, where None means `raw`: numbers in clear, which a
        lake whose tokens claimed a key refuses (`LakeKeyConflict`), since numbers beside
        tokens would undo what `token` promised its readers."""
        if key_check is None and self.key_claimed() is not None:
            raise LakeKeyConflict.in_clear(self.uri, self.account_id)
        self.check_key(key_check)

    def _marker_field(self, rel: str, data: bytes, name: str) -> object:
        """A marker's field; a marker that is not a JSON object (damaged by hand, a partial
        copy) is refused in one line naming it, as a conflict is: what it guarded is unknown."""
        try:
            marker = json.loads(data)
        except ValueError:
            marker = None
        if not isinstance(marker, dict):
            raise LakeMarkerDamaged(rel, self.uri, self.account_id)
        return marker.get(name)

    def key_claimed(self) -> str | None:
        """The key check of the key this lake's tokens are made with (KEY_MARKER_FILE), None
        while no partition with tokens was published since it existed."""
        if self._key is not None:
            return self._key  # a claim stays until the privacy folder is deleted
        data = self.store.read_bytes(KEY_MARKER_FILE)
        if data is None:
            return None
        check = self._marker_field(KEY_MARKER_FILE, data, "pii_key_check")
        self._key = str(check) if check else None
        return self._key

    def claim_key(self, key_check: str) -> None:
        """Record `key_check` as the key of this lake's tokens, or refuse if another key's
        is recorded (`LakeKeyConflict`). Called when a partition with tokens is published:
        two first landings under different keys both pass `check_key`, one publishes."""
        current = self.key_claimed()
        if current is None:
            marker = {"pii_key_check": key_check, "claimed_at": _now_ms()}
            self.store.create_exclusive(KEY_MARKER_FILE, json.dumps(marker).encode())
            current = self.key_claimed()  # a concurrent first writer may have won
        if current != key_check:
            raise LakeKeyConflict.claimed(self.uri, self.account_id)

    def check_source(self, source: str) -> None:
        """Refuse `source` if the lake holds another source's data; writes nothing."""
        current = self.source()
        if current is not None and current != source:
            raise LakeSourceConflict.between(source, current, self.uri, self.account_id)

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
            raise LakeSourceConflict.between(source, str(current), self.uri, self.account_id)

    def zone(self) -> str | None:
        """The business-day zone recorded by this account's last landing (`record_zone`);
        None when none was, or the file cannot be read (the views then keep theirs)."""
        data = self.store.read_bytes(ZONE_FILE)
        try:
            zone = json.loads(data).get("timezone") if data else None
        except (ValueError, AttributeError):
            return None
        return zone if isinstance(zone, str) and _known_zone(zone) else None

    def record_zone(self, zone: str) -> None:
        """Record the account's business-day zone (replaced atomically; written only when it
        changed)."""
        if self.zone() != zone:
            marker = {"timezone": zone, "recorded_at": _now_ms()}
            self._replace_small(ZONE_FILE, json.dumps(marker).encode())

    def zones(self) -> dict[str, str]:
        """Each account's recorded zone (`zone`), of the accounts holding data."""
        out = {}
        for account in self.accounts():
            zone = (self if account == self.account_id else self.account(account)).zone()
            if zone is not None:
                out[account] = zone
        return out

    def file_columns(self, table: str) -> frozenset[str]:
        """The columns of this lake's newest partition file of `table` and of the one written
        last (none without one): a view reads a column no file has yet (one added since they
        were written) as null. An older day landed again after an upgrade has the new column
        while the newest day has not yet. One footer read, two when those two differ."""
        stamps = self.stamps(table)
        if not stamps:
            return frozenset()
        newest, last = max(stamps), max(stamps, key=stamps.__getitem__)
        names = top_level_names(self.partition_footer(table, newest))
        if last != newest:
            names |= top_level_names(self.partition_footer(table, last))
        return names

    def partition_source(self, table: str, key: str) -> str | None:
        """The source recorded in a partition file's metadata (None if absent)."""
        return footer_source(self.partition_footer(table, key))

    def partition_footer(self, table: str, key: str) -> pq.FileMetaData | None:
        """The partition's Parquet footer (rows, key-value metadata), None if absent: only the
        footer is read, also from an object store (`open_parquet` takes the whole object)."""
        return self.store.read_footer(self._rel(table, key))

    # --- writing --------------------------------------------------------------------------

    def _schema(self, table: str, schema: Any) -> tuple[Any, str | None]:
        spec = TABLES.get(table)
        drop = spec.partition_key if spec else None
        if schema is None and spec is not None:
            # With the privacy stage's columns; the writer keeps those the data has.
            schema = landed(spec).arrow_schema()
        elif isinstance(schema, pl.Schema):
            schema = pl.DataFrame(schema=schema).drop(drop or [], strict=False).to_arrow().schema
        return schema, drop

    def writer(
        self,
        table: str,
        key: str,
        schema: Any = None,
        *,
        source: str | None = None,
        key_check: str | None = None,
        group: PublishGroup | None = None,
    ) -> PartitionWriter:
        """A context manager writing one partition atomically; schema defaults to the spec's.

        `source` is where the rows came from; a lake holding another source's data refuses it
        here, before anything is written. Derived tables pass None and inherit the lake's.
        `key_check`: the tokens' key's check (`META_KEY_CHECK`), for a partition holding tokens.
        `group`: published with the group's other files, at its exit (`PublishGroup`).
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
        metadata = {**(schema.metadata or {}), META_SOURCE: source, META_WRITTEN_AT: _now_ms()}
        if key_check is not None:
            metadata[META_KEY_CHECK] = key_check
        schema = schema.with_metadata(metadata)
        self.cleanup_tmp()
        tmp = self.store.spool_dir() / f"{table}.{key}.{uuid.uuid4().hex}.parquet"
        spec = TABLES.get(table)
        free_text = spec.free_text_columns if spec is not None else frozenset()
        unique = spec.unique_columns if spec is not None else frozenset()
        return PartitionWriter(
            self, rel, tmp, schema, drop, claim, free_text, unique, key_claim=key_check, group=group
        )

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

    def write_together(
        self, key: str, frames: Mapping[str, pl.DataFrame | Any], *, source: str | None = None
    ) -> None:
        """One partition (`key`) of each table of `frames`, as a whole: every file is written
        first (a failure there, a full disk say, publishes none of them), then they are
        published one after the other with SIGINT/SIGTERM held (`held_signals`), so a
        snapshot's tables (`users` and its bridge tables) never mix two readings. A table
        without a spec (the `agg_*` tables) is written in its frame's own schema."""
        publishing = contextlib.ExitStack()
        with publishing, PublishGroup(self) as group, contextlib.ExitStack() as writers:
            for table, frame in frames.items():
                schema = None if table in TABLES else frame.schema
                writer = self.writer(table, key, schema, source=source, group=group)
                writers.enter_context(writer).write(frame)
            publishing.enter_context(self.publishing(key))  # until the last one is published

    @contextlib.contextmanager
    def publishing(self, key: str, wait_s: float = LOCK_WAIT_S) -> Iterator[None]:
        """Entered when a partition key's files are written, exited once every one of them is
        published (renamed into place): SIGINT and SIGTERM are held (`held_signals`), and a
        second run publishing the same key waits for the first's publish to end (the store's
        `lock`), so the key's tables are all of one run. Two runs of one day (a UI backfill
        over the nightly's lookback days) used to publish in turns, table by table: the day's
        `raw_cdrs` of one fetch beside its `cdrs` of the other. Held between the processes
        of one host; an object-store lake's runs in other pods are not held back. A lock held
        past `wait_s` raises `LockTimeout` (the files written are dropped)."""
        with self.lock(key, wait_s), held_signals():
            yield

    def lock(
        self, key: str, wait_s: float = LOCK_WAIT_S
    ) -> contextlib.AbstractContextManager[None]:
        """The key's publish lock alone (no signal held): while it is held, no run publishes
        the key, so what is read of its tables is of one version."""
        return self.store.lock(key, wait_s)

    # --- reading --------------------------------------------------------------------------

    def open_parquet(
        self, table: str, key: str, *, rejected: bool = False
    ) -> pq.ParquetFile | None:
        """The partition's (or its rejected copy's) Parquet file, or None if it is absent."""
        rel = self._rel(table, key, rejected=rejected)
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
        self,
        table: str,
        key: str,
        *,
        columns: Sequence[str] | None = None,
        rows: int = 10_000,
        rejected: bool = False,
    ) -> Iterator[pl.DataFrame]:
        """The partition's rows (without the partition column), at most `rows` at a time and
        never across row groups: memory stays bounded whatever the size of the day, and by
        the writer's bytes per row group whatever the size of its records (a batch spanning
        five row groups of one 40 MB record each would hold 200 MB). Nothing when the
        partition is absent. `rejected`: the rows of its rejected copy instead."""
        parquet = self.open_parquet(table, key, rejected=rejected)
        if parquet is None:
            return
        for group in range(parquet.metadata.num_row_groups):
            for batch in parquet.iter_batches(batch_size=rows, row_groups=[group], columns=columns):
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
                c for c in landed(spec).column_names if c in df.columns or c not in LANDED_COLUMNS
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

    def rejected_partitions(self, table: str) -> list[str]:
        """The keys of the table's rejected copies (`PartitionWriter.reject`), sorted."""
        listing = self.store.list_all(f"{REJECTED_DIR}/{table}")
        return sorted(listing.get(table, {}))

    def has_data(self, table: str) -> bool:
        """Whether the table has any published partition (cheaper than `partitions` where the
        store allows it: a local lake stops at the first file found)."""
        if self._listing is not None:
            return bool(self._listing.get(table))
        return self.store.has_partitions(table)

    def stamps(self, table: str) -> dict[str, float]:
        """`key -> modification time` of every partition of a table (one listing)."""
        listing = self._listing if self._listing is not None else self.store.list_all(table)
        return dict(listing.get(table, {}))

    def unreadable(self, limit: int = UNREADABLE_SHOWN) -> UnreadablePartitions | None:
        """The error naming the published partitions (every account's, from a root) whose
        footer cannot be read, the first `limit` of them, and how to replace them; None when
        every footer reads. Reads every footer: for after a reader met an unreadable one
        (DuckDB's error does not say which file), not on the way."""
        lakes = [self]
        if not self.is_sub_lake:
            lakes += [self.account(a) for a in sorted(self._account_listing())]
        bad: list[tuple[Lake, str, str, str]] = []
        for lake in lakes:
            for table, keys in sorted(lake.store.list_all().items()):
                for key in sorted(keys):
                    try:
                        lake.store.read_footer(lake._rel(table, key))
                    except (OSError, ValueError) as exc:  # ArrowInvalid is a ValueError
                        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
                        bad.append((lake, table, key, first))
        if not bad:
            return None
        shown = "; ".join(
            f"{lake.partition_url(table, key)} ({error})" for lake, table, key, error in bad[:limit]
        )
        more = f" and {len(bad) - limit} more" if len(bad) > limit else ""
        days = sorted({key.partition("=")[2] for _, _, key, _ in bad if key.startswith("date=")})
        fix = "delete the file(s) (a view reads the partitions that remain)"
        if days:
            end = (dt.date.fromisoformat(days[-1]) + dt.timedelta(days=1)).isoformat()
            fix = (
                f"re-ingest the day(s) to replace them (`cdrhouse ingest --start {days[0]} "
                f"--end {end}`), or {fix}"
            )
        return UnreadablePartitions(
            f"{len(bad)} lake file(s) cannot be read, damaged: {shown}{more}; {fix}"
        )

    @contextlib.contextmanager
    def cached_listing(self) -> Iterator[None]:
        """Answer `partitions`/`stamps` from one listing of the whole lake while inside.

        Building the views asks about every table; on an object store that is one request
        instead of one per table. Only for readers: writes inside are not reflected."""
        self._listing = self.store.list_all()
        self._accounts = {} if self.is_sub_lake else self.store.list_accounts()
        try:
            yield
        finally:
            self._listing = None
            self._accounts = None

    # --- maintenance ----------------------------------------------------------------------

    def delete_partition(self, table: str, key: str, *, rejected: bool = False) -> bool:
        return self.store.delete(self._rel(table, key, rejected=rejected))

    def reset(self) -> LakeReset:
        """Delete the files of the lake, its source marker included. Of the root: every
        account's sub-lake too. Of a sub-lake: that account's files only.

        Only what the lake writes goes (`lake_file`): a file of anything else under the same
        root (a lake URI set one folder too high, a bucket shared with other data) stays, and
        is named in the result. The forget-list stays (`_privacy/`, tokens only): an erasure
        outlives a reset, or a re-ingest of the same calls would bring the erased person back.
        So does the record of the key its tokens are made with (KEY_MARKER_FILE): under
        another key they would not match."""
        self._source = None
        accounts = not self.is_sub_lake
        removed, left = self.store.remove_where(lambda rel: lake_file(rel, accounts=accounts))
        others = [r for r in left if PRIVACY_DIR not in r.split("/")]
        return LakeReset(removed, others)

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
                    if f.is_dir():  # a killed process's copy of a day (`aggregate_day`)
                        shutil.rmtree(f)
                    else:
                        f.unlink()
                    removed += 1
        return removed
