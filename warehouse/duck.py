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
* the reporting views from `warehouse/sql/*.sql`, with `kpi_settings` (one row: the KPI
  settings they apply, `warehouse.kpi`);
* `lake_info` (one row per account: the lake URI, the account's sub-lake and its data source)
  and `lake_partitions` (one row per partition file: account, table, partition, source, write
  time, rows), read from the files' Parquet metadata.

Every view has `account_id` first: the lake root is the account `default`, each
`account_id=<id>/` sub-lake another account (`warehouse.lake`); `account_settings` holds each
account's business-day zone.

The lake may be local or on object storage (`s3://…`); for the latter the views hold `s3://`
paths and every connection registers the lake's fsspec filesystem (`connect()` does).

The analyst's locked connection (`connect_analyst`) lives in `warehouse.analyst`, re-exported
here: it opens the warehouse without loading this module's polars and pyarrow.
"""

from __future__ import annotations

import contextlib
import copy
import hashlib
import tempfile
import time
import uuid
from collections.abc import Collection, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa

from models import cdr_fields as cdr_fields_module
from models import tables as tables_module
from models.tables import ALL_TABLES, BALANCE_SNAPSHOTS, CDR_TABLES
from warehouse import kpi as kpi_module
from warehouse import viewsql as viewsql_module
from warehouse.analyst import LAKE_DIR as LAKE_DIR
from warehouse.analyst import LAKE_INFO_VIEW as LAKE_INFO_VIEW
from warehouse.analyst import WAREHOUSE_FILE as WAREHOUSE_FILE
from warehouse.analyst import built_account_zones as built_account_zones
from warehouse.analyst import built_kpi_settings as built_kpi_settings
from warehouse.analyst import connect_analyst as connect_analyst
from warehouse.analyst import default_lake_uri as default_lake_uri
from warehouse.analyst import read_whole
from warehouse.analyst import warehouse_lake_uri as warehouse_lake_uri
from warehouse.interrupt import interruptible
from warehouse.kpi import (
    ANSWERED_CALLS_MACRO,
    KpiSettings,
    account_settings_sql,
    settings_view_sql,
    zones_json,
)
from warehouse.lake import (
    ACCOUNT_COLUMN,
    DEFAULT_ACCOUNT,
    META_SOURCE,
    META_WRITTEN_AT,
    Lake,
    footer_source,
)
from warehouse.stores import is_local_uri
from warehouse.viewsql import (
    AGG_SOURCES,
    aggregate_names,
    base_view_sql,
    current_sql,
    empty_select,
    history_sql,
    lit,
    q,
    reporting_sql_files,
    scan_sql,
    view_name,
)

# One-row view: what the views were built from (see `views_fingerprint`).
FINGERPRINT_VIEW = "_cdrhouse_views"
# How long one DuckDB connection trusts its listing of an object-store lake.
LISTING_CACHE_S = 30.0
LAKE_PARTITIONS_VIEW = "lake_partitions"
LAKE_PARTITIONS = (
    ("account_id", "VARCHAR"),
    ("table_name", "VARCHAR"),
    ("partition_key", "VARCHAR"),
    ("source", "VARCHAR"),
    ("written_at", "TIMESTAMPTZ"),
    ("num_rows", "BIGINT"),
    ("file", "VARCHAR"),
)


def register_lake(con: duckdb.DuckDBPyConnection, lake: Lake) -> None:
    """Let DuckDB read an object-store lake through an fsspec filesystem (works offline,
    unlike the httpfs extension, which must be downloaded).

    DuckDB re-lists every glob and stats every file each time a view is bound, and views are
    bound on views: hundreds of requests per build or query. So each connection gets its own
    filesystem whose listings are cached for a short while; a new connection sees new files.
    The filesystem only reads: DuckDB never writes the lake (`Lake` does), so a statement
    that tries (COPY, EXPORT) fails in the filesystem itself."""
    if lake.is_local or any(
        name.split("://")[0] in _protocols(lake) for name in con.list_filesystems()
    ):
        return
    fs = _read_only_class(type(lake.fs))(
        **{
            **lake.fs.storage_options,
            "use_listings_cache": True,
            "listings_expiry_time": LISTING_CACHE_S,
            "skip_instance_cache": True,
        }
    )
    con.register_filesystem(fs)


# fsspec methods that change a store; the read-only filesystem refuses each (sync and async).
_FS_WRITES = (
    "rm", "rm_file", "rmdir", "mv", "copy", "cp_file", "put", "put_file", "pipe", "pipe_file",
    "mkdir", "makedirs", "touch", "setxattrs",
)  # fmt: skip


def _read_only_class(base: type[Any]) -> type[Any]:
    """A subclass of the lake's fsspec filesystem that opens files for reading only."""

    def refuse(_self: Any, path: Any = "", *_args: Any, **_kwargs: Any) -> Any:
        raise PermissionError(f"{path}: DuckDB reads the lake, it does not write it")

    async def refuse_async(_self: Any, path: Any = "", *_args: Any, **_kwargs: Any) -> Any:
        refuse(_self, path)

    def _open(self: Any, path: Any, mode: str = "rb", *args: Any, **kwargs: Any) -> Any:
        if mode not in ("rb", "r"):
            refuse(self, path)
        return base._open(self, path, mode, *args, **kwargs)

    def glob(self: Any, path: Any, *args: Any, **kwargs: Any) -> Any:
        # A table's `**` glob is one flat listing, which fsspec's listings cache does not
        # keep, and DuckDB globs a table again for each view it binds over it.
        key = (path, args, tuple(sorted(kwargs.items())))
        globs = self.__dict__.setdefault("_cdrhouse_globs", {})
        hit = globs.get(key)
        if hit is None or time.monotonic() - hit[0] > LISTING_CACHE_S:
            hit = globs[key] = (time.monotonic(), base.glob(self, path, *args, **kwargs))
        return copy.copy(hit[1])

    attrs: dict[str, Any] = {"_open": _open, "glob": glob}
    for name in _FS_WRITES:
        attrs[name] = refuse
        attrs[f"_{name}"] = refuse_async
    return type(f"ReadOnly{base.__name__}", (base,), attrs)


def _protocols(lake: Lake) -> tuple[str, ...]:
    protocol = lake.fs.protocol
    return (protocol,) if isinstance(protocol, str) else tuple(protocol)


def _lake_views(con: duckdb.DuckDBPyConnection, lake: Lake) -> None:
    """`lake_info` (one row per account: the lake's URI, the account's sub-lake and source)
    and `lake_partitions` (provenance per file, with its account)."""
    accounts = lake.accounts() or [lake.account_id]
    rows = []
    for account in accounts:
        source = lake.account(account).source_shown()
        rows.append(
            f"SELECT {lit(account)} AS account_id, {lit(lake.uri)} AS lake_uri, "
            f"{lit(lake.account_uri(account))} AS account_uri, "
            f"CAST({lit(source) if source else 'NULL'} AS VARCHAR) AS source"
        )
    con.execute(f"CREATE OR REPLACE VIEW {LAKE_INFO_VIEW} AS {' UNION ALL '.join(rows)}")
    globs = []
    if any(lake.has_data(spec.name) for spec in ALL_TABLES):
        globs.append((lit(lake.account_id), lake.files_glob()))
    if any(a != lake.account_id for a in accounts):
        # account_id=<id>/<table>/<key>/part-0.parquet
        account = "split_part(split_part(k.file_name, '/', -4), '=', 2)"
        globs.append((account, lake.accounts_files_glob()))
    if not globs:
        con.execute(
            f"CREATE OR REPLACE VIEW {LAKE_PARTITIONS_VIEW} AS {empty_select(LAKE_PARTITIONS)}"
        )
        return
    parts = [
        f"""SELECT {account} AS account_id,
       split_part(k.file_name, '/', -3) AS table_name,
       split_part(k.file_name, '/', -2) AS partition_key,
       max(CASE WHEN decode(k.key) = {lit(META_SOURCE)} THEN decode(k.value) END) AS source,
       CAST(max(CASE WHEN decode(k.key) = {lit(META_WRITTEN_AT)} THEN decode(k.value) END)
            AS TIMESTAMPTZ) AS written_at,
       any_value(m.num_rows) AS num_rows,
       k.file_name AS file
FROM parquet_kv_metadata({lit(files)}) k
JOIN parquet_file_metadata({lit(files)}) m USING (file_name)
GROUP BY k.file_name"""
        for account, files in globs
    ]
    con.execute(f"CREATE OR REPLACE VIEW {LAKE_PARTITIONS_VIEW} AS {' UNION ALL '.join(parts)}")


def create_views(
    con: duckdb.DuckDBPyConnection,
    lake: Lake,
    *,
    day: str | None = None,
    use_aggregates: bool = True,
    kpi: KpiSettings | None = None,
    account_zones: Mapping[str, str] | None = None,
) -> None:
    """All views, over every account of `lake` (a root; or one account's sub-lake).

    `day` restricts the CDR tables to one date partition (for materializing one account's
    day: pass its sub-lake); `kpi` is what the KPI views apply (default: `KpiSettings()`; no
    `agg_*` depends on it); `account_zones` is each account's business-day zone
    (`account_settings`; an account not in it uses `kpi.timezone`)."""
    register_lake(con, lake)
    con.execute(settings_view_sql(kpi or KpiSettings()))
    con.execute(ANSWERED_CALLS_MACRO)  # (the UTC-day views' answered counts)
    con.execute(account_settings_sql(account_zones or {}))
    for spec in ALL_TABLES:
        name = view_name(spec)
        con.execute(f"CREATE OR REPLACE VIEW {q(name)} AS {base_view_sql(spec, lake, day)}")
        if spec.kind != "snapshot":
            continue
        current = "balance" if spec is BALANCE_SNAPSHOTS else spec.name
        con.execute(f"CREATE OR REPLACE VIEW {q(current)} AS {current_sql(spec)}")
        if spec.history_key:
            con.execute(
                f"CREATE OR REPLACE VIEW {q(spec.name + '_history')} AS {history_sql(spec)}"
            )
    for path in reporting_sql_files():
        # One statement at a time: a file holds the agg_* view and the rpt_* view on top.
        for statement in con.extract_statements(path.read_text()):
            con.execute(statement)
    if use_aggregates:
        for agg in aggregate_names():
            _point_at_materialized(con, lake, agg)
    if day is None:
        _lake_views(con, lake)


def _point_at_materialized(con: duckdb.DuckDBPyConnection, lake: Lake, agg: str) -> None:
    """Swap an `agg_*` view for a scan of its materialized per-day Parquet files, every
    account's (`account_id` from the path, as for the lake tables)."""
    cols = con.execute(f"DESCRIBE {q(agg)}").fetchall()
    scan = scan_sql([(str(c[0]), str(c[1])) for c in cols], lake, agg, "date")
    if scan is None:
        return  # nothing materialized: the view computes from the CDR tables
    con.execute(f"CREATE OR REPLACE VIEW {q(agg)} AS {scan}")


def aggregate_day(lake: Lake, key: str, only: Collection[str] | None = None) -> dict[str, pa.Table]:
    """Every `agg_*` pre-aggregate (or `only` those) of one date partition of one account
    (`lake` is its sub-lake, `Lake.account(id)`; the root for `default`), from that date's CDR
    partitions alone: the cost does not grow with the days the lake holds. Like `date`, the
    account is in the path, not in the tables."""
    with _day_sources(lake, key) as sources:
        return _aggregates(sources, key, only)


def _aggregates(sources: Lake, key: str, only: Collection[str] | None) -> dict[str, pa.Table]:
    """`aggregate_day` of the day's copy (`_day_sources`)."""
    # One thread: each thread holds its own partial groups (`agg_call_intervals` keeps a
    # histogram per group), the command's peak RSS on a big day: a 1M-CDR day's call
    # intervals took +78 MB on 2 threads, +50 MB on one, for ~0.4 s more wall.
    con = duckdb.connect(config={"threads": 1})
    try:
        # (DuckDB's progress bar would go to the step's standard output: `cdrhouse ingest`'s.)
        con.execute("SET enable_progress_bar = false")
        create_views(con, sources, day=key.partition("=")[2], use_aggregates=False)
        return {
            agg: con.sql(
                f"SELECT * EXCLUDE (date, {ACCOUNT_COLUMN}) FROM {q(agg)}"
            ).to_arrow_table()
            for agg in aggregate_names()
            if only is None or agg in only
        }
    finally:
        con.close()


@contextlib.contextmanager
def _day_sources(lake: Lake, key: str) -> Iterator[Lake]:
    """The lake the day's aggregates read: the day's `AGG_SOURCES` partitions as they are now,
    in a temp lake of their own.

    DuckDB opens each file again for each view it binds and each query. Read in place, a
    concurrent run replacing the day (two backfills of it, or the nightly lookback during
    one) made it read one version's footer and another's pages ("TProtocolException: Invalid
    data"), and mix versions across the sources. A local lake's copy is hard links (no bytes
    copied); an object store's is one download each, where DuckDB over fsspec made four HEADs
    and a GET per open: ~180 requests a day on moto. The copies are made under the day's
    publish lock (`Lake.lock`): a run publishing the day meanwhile would otherwise leave the
    copy with `cdrs` of one version and `cdr_calls` of the next."""
    spool = lake.store.spool_dir()
    spool.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="aggregate-day-", dir=spool) as tmp:
        copy = Lake(Path(tmp).as_uri(), account_id=lake.account_id)
        with lake.lock(key):
            for table in AGG_SOURCES:
                lake.copy_partition(table, key, copy)
        yield copy


@dataclass(frozen=True)
class AggregateDay:
    """What `write_aggregates` wrote for one day, and the day's `cdrs` rows it checks against."""

    tables: dict[str, pa.Table]
    cdrs_rows: int


def write_aggregates(lake: Lake, key: str, only: Collection[str] | None = None) -> AggregateDay:
    """Replace one day's `agg_*` partitions (or `only` those) of one account (`lake` is its
    sub-lake) with `aggregate_day`'s tables: the work of the `reporting_aggregates` asset for
    a partition. They carry the source of the
    day's `cdrs` partition (the lake's when it has none)."""
    with _day_sources(lake, key) as sources:
        tables = _aggregates(sources, key, only)
        # The footer of the very `cdrs` file aggregated (an object store's day is copied once):
        # the source the derived data carries, and the rows its check compares with.
        footer = sources.partition_footer("cdrs", key)
    # Published together under the day's lock, as a snapshot family: a second run's
    # aggregates of the day, or a signal, never leave them of two versions.
    lake.write_together(key, tables, source=footer_source(footer))
    return AggregateDay(tables, footer.num_rows if footer else 0)


def build_warehouse(
    data_dir: Path,
    lake_uri: str | None = None,
    *,
    kpi: KpiSettings | None = None,
    account_zones: Mapping[str, str] | None = None,
) -> Path:
    """(Re)build `data_dir/warehouse.duckdb` atomically; returns its path.

    The views read the lake at `lake_uri` (default `data_dir/lake`), so moving the lake is a
    configuration change. It writes nothing to the lake (an analyst's machine with read-only
    credentials builds its views too; the `agg_*` partitions are the `reporting_aggregates`
    asset's, `write_aggregates`). `kpi=None` keeps the KPI settings
    the current file was built with (the defaults for a new file): a rebuild by a command that
    is not handed the settings does not silently change the business day. `account_zones`
    (each account's zone, `account_settings`) likewise: None keeps the file's."""
    data_dir = Path(data_dir).resolve()
    data_dir.mkdir(parents=True, exist_ok=True)
    lake = Lake(lake_uri or default_lake_uri(data_dir))
    kpi = kpi or built_kpi_settings(data_dir) or KpiSettings()
    zones = _zones(data_dir, lake, account_zones)
    final = data_dir / WAREHOUSE_FILE
    tmp = data_dir / f".{WAREHOUSE_FILE}.{uuid.uuid4().hex}.tmp"

    def build() -> None:
        # Binding a view reads file footers; a partition replaced by a concurrent run between
        # the listing and the read fails it. The lake is whole: `read_whole` looks again.
        tmp.unlink(missing_ok=True)
        con = duckdb.connect(str(tmp))
        try:
            with interruptible(con), lake.cached_listing():
                create_views(con, lake, kpi=kpi, account_zones=zones)
                fingerprint = views_fingerprint(lake, kpi, zones)
                con.execute(
                    f"CREATE OR REPLACE VIEW {FINGERPRINT_VIEW} AS "
                    f"SELECT {lit(fingerprint)} AS fingerprint"
                )
                con.execute("CHECKPOINT")
        finally:
            con.close()

    try:
        read_whole(build, lambda: lake)
        tmp.replace(final)
    finally:
        for leftover in (tmp, Path(f"{tmp}.wal")):
            with contextlib.suppress(FileNotFoundError):
                leftover.unlink()
    return final


def _zones(data_dir: Path, lake: Lake, given: Mapping[str, str] | None) -> dict[str, str]:
    """Each account's business-day zone: as given (the accounts file), else as the lake
    records it (each account's last landing), else as the current file was built with. A
    new data dir over an existing lake (an analyst's machine), a reset `warehouse.duckdb`, or
    an account no longer in the accounts file keeps its days' zone."""
    zones = built_account_zones(data_dir) or {}
    zones.update(lake.zones())
    zones.update(given or {})
    return zones


CDR_TABLE_NAMES = tuple(spec.name for spec in CDR_TABLES)


def views_fingerprint(
    lake: Lake, kpi: KpiSettings | None = None, account_zones: Mapping[str, str] | None = None
) -> str:
    """What the views depend on: the lake and its accounts' sources, which accounts have
    files of which table (a table's first partition in an account adds its scan to the
    view), the KPI settings and account zones, and the code and SQL that write them. New
    partitions of a table an account has files of need no rebuild: its glob finds them."""
    digest = hashlib.sha256()
    digest.update(f"{lake.uri}\0{lake.source_shown()}\0".encode())
    digest.update(f"{(kpi or KpiSettings()).to_json()}\0".encode())
    digest.update(f"{zones_json(account_zones or {})}\0".encode())
    holders: dict[str, list[str]] = {}
    for name in [spec.name for spec in ALL_TABLES] + aggregate_names():
        holders[name] = lake.holders(name)
        digest.update(f"{name}={holders[name]}\0".encode())
    for account in sorted({a for held in holders.values() for a in held} - {DEFAULT_ACCOUNT}):
        digest.update(f"{account}:{lake.account(account).source_shown()}\0".encode())
    # The CDR tables' columns: a day landed again under `token` over `raw` days gains the
    # privacy stage's columns (`pii_forgotten`...), which the views take from the files.
    for name in CDR_TABLE_NAMES:
        for holder in holders[name]:
            sub = lake if holder == lake.account_id else lake.account(holder)
            digest.update(f"{holder}:{name}:{sorted(sub.file_columns(name))}\0".encode())
    # duck.py runs the views, viewsql.py writes their text, tables.py gives their columns (the
    # CDR tables' from the field table, cdr_fields.py).
    code = [
        Path(__file__),
        Path(viewsql_module.__file__),
        Path(kpi_module.__file__),
        Path(tables_module.__file__ or ""),
        Path(cdr_fields_module.__file__ or ""),
    ]
    for path in [*code, *reporting_sql_files()]:
        digest.update(path.read_bytes())
    return digest.hexdigest()


def built_fingerprint(data_dir: Path) -> str | None:
    """The fingerprint `warehouse.duckdb` was built with (None: absent or older than that)."""
    path = Path(data_dir).resolve() / WAREHOUSE_FILE
    if not path.exists():
        return None
    try:
        with duckdb.connect(str(path), read_only=True) as con:
            row = con.execute(f"SELECT fingerprint FROM {FINGERPRINT_VIEW}").fetchone()
    except duckdb.Error:
        return None
    return str(row[0]) if row else None


def refresh_views(
    data_dir: Path,
    lake_uri: str | None = None,
    kpi: KpiSettings | None = None,
    account_zones: Mapping[str, str] | None = None,
) -> bool:
    """Rebuild `warehouse.duckdb` only when its views would change; True if it was rebuilt.

    The cost does not grow with the days the lake holds: one listing per table and one small
    read of the current file, unless a table got its first partition, the code or the KPI
    settings changed (`kpi=None`, `account_zones=None`: keep those the file was built with)."""
    lake = Lake(lake_uri or default_lake_uri(Path(data_dir).resolve()))
    kpi = kpi or built_kpi_settings(data_dir) or KpiSettings()
    zones = _zones(Path(data_dir).resolve(), lake, account_zones)
    if built_fingerprint(data_dir) == views_fingerprint(lake, kpi, zones):
        return False
    build_warehouse(data_dir, lake_uri, kpi=kpi, account_zones=zones)
    return True


def connect(data_dir: Path, *, read_only: bool = True) -> duckdb.DuckDBPyConnection:
    """Open the warehouse; read-only by default so it never blocks a pipeline run.

    An object-store lake's filesystem is registered on the connection, so its views read."""
    path = Path(data_dir).resolve() / WAREHOUSE_FILE
    if not path.exists():
        raise FileNotFoundError(f"no warehouse at {path}; run `cdrhouse ingest` first")
    con = duckdb.connect(str(path), read_only=read_only)
    # Its progress bar goes to standard output (a file too) once a query runs 2 s. A setting
    # of this connection, not a `config=`: another connection of this process to the same
    # file, opened without it, would refuse to share the database.
    con.execute("SET enable_progress_bar = false")
    uri = warehouse_lake_uri(con)
    if uri is not None and not is_local_uri(uri):
        register_lake(con, Lake(uri))
    return con
