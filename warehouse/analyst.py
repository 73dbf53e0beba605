"""The warehouse as an analyst opens it: its file, its lake, the locked read-only connection of
`cdrhouse sql`, and the one path of the contact-center report, on DuckDB and the standard
library alone.

Kept apart from `warehouse.duck` (which builds the views and needs polars, pyarrow and the
table specs) so that a query over a local lake costs what DuckDB's own start-up costs. Only an
object-store lake loads `warehouse.duck` and `warehouse.lake`, for its fsspec filesystem.
Nothing here imports DuckDB at module level either: naming the warehouse file loads nothing.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from warehouse.kpi import ACCOUNT_SETTINGS_VIEW, KPI_SETTINGS_VIEW, KpiSettings
from warehouse.stores import is_local_uri, root_from_uri

T = TypeVar("T")

if TYPE_CHECKING:
    import duckdb

    from warehouse.lake import Lake

# The DuckDB file of the views, in the data dir.
WAREHOUSE_FILE = "warehouse.duckdb"
LAKE_DIR = "lake"
LAKE_INFO_VIEW = "lake_info"
# The report's one file in the data dir: `cdrhouse report` writes it by default, and so does
# the `contact_center_report` asset (which `cdrhouse demo` materializes).
REPORTS_DIR = "reports"
REPORT_FILE = "contact_center_report.html"


def lit(text: str) -> str:
    """A SQL string literal."""
    return "'" + text.replace("'", "''") + "'"


def default_lake_uri(data_dir: Path) -> str:
    return (Path(data_dir).resolve() / LAKE_DIR).as_uri()


def report_path(data_dir: Path) -> Path:
    """Where the contact-center report of a data dir is written (absolute)."""
    return Path(data_dir).resolve() / REPORTS_DIR / REPORT_FILE


def warehouse_lake_uri(con: duckdb.DuckDBPyConnection) -> str | None:
    """The lake URI recorded in an open warehouse (None for a file built before it was)."""
    import duckdb

    try:
        rows = con.execute(f"SELECT lake_uri FROM {LAKE_INFO_VIEW}").fetchall()
    except duckdb.CatalogException:
        return None
    return str(rows[0][0]) if rows and rows[0][0] else None


# What DuckDB or pyarrow say of a footer they cannot read, or of a file too short to be
# Parquet: a file replaced between two opens, or one damaged for good, which DuckDB does not
# name (`read_whole` tells the two apart).
FOOTER_ERRORS = ("TProtocolException", "invalid TType", "don't know what type", "magic bytes")
# What DuckDB says when a lake file was replaced or removed while it read it: gone between
# its glob and its read; or replaced between two opens of it (DuckDB opens a file again for
# each scan), so the footer read first describes another version than the bytes read next.
LAKE_MOVED = ("FileExpired", "FileNotFoundError", "No files found", *FOOTER_ERRORS)


# Runs of a read that met a lake file replaced while it read (`lake_moved`): a run replaces
# each partition once, so a read meets it again only under another run's replace. With 3, a
# query of `cdrs` met a replace every 20 ms on 3 attempts in a row 2 times in 158 on a busy
# machine; with 5, 0 times in 740 (a damaged file is named after 5 fast failures).
READ_ATTEMPTS = 5


def lake_moved(exc: BaseException) -> bool:
    """Whether a DuckDB error comes from a lake file replaced or removed while it was read
    (read again, it is whole: a publish replaces a file by renaming a whole one over it)."""
    import duckdb

    if isinstance(exc, duckdb.IOException):
        return True
    text = str(exc)
    return any(m in text for m in LAKE_MOVED)


def read_whole(read: Callable[[], T], lake: Callable[[], Lake | None] | None = None) -> T:
    """`read()` (which opens and closes its own connection), run again while it meets a lake
    file replaced under it: the views' build, `cdrhouse sql`, the report.

    When the last attempt still meets an unreadable footer, the file is damaged, not being
    replaced: with `lake` (the lake read, made only then), the error is `UnreadablePartitions`,
    which names the damaged files and how to replace them."""
    import duckdb

    for attempt in range(READ_ATTEMPTS):
        try:
            return read()
        except (duckdb.Error, OSError, ValueError) as exc:  # pyarrow's footer reads: ArrowInvalid
            if not lake_moved(exc):
                raise
            if attempt < READ_ATTEMPTS - 1:
                continue
            damaged = None
            if lake is not None and any(m in str(exc) for m in FOOTER_ERRORS):
                read_lake = lake()
                damaged = read_lake.unreadable() if read_lake is not None else None
            if damaged is not None:
                raise damaged from exc
            raise
    raise AssertionError("unreachable: the last attempt returns or raises")


def fetch_whole(
    con: duckdb.DuckDBPyConnection, sql: str, parameters: object = None
) -> tuple[list[str], list[tuple[Any, ...]]]:
    """One query's column names and rows, run again (`read_whole`) while it meets a lake file
    replaced under it: for a read of many queries (the report), whose every query may meet a
    replace, so that one query's attempts, not the whole read's, are counted."""

    def fetch() -> tuple[list[str], list[tuple[Any, ...]]]:
        cursor = con.execute(sql, parameters)
        return [d[0] for d in cursor.description or []], cursor.fetchall()

    return read_whole(fetch)


def warehouse_lake(data_dir: Path, lake_uri: str | None = None) -> Lake | None:
    """The lake `warehouse.duckdb` reads (the one it records; else `lake_uri`, else the data
    dir's), None when it cannot tell."""
    import duckdb

    from warehouse.lake import Lake

    recorded = None
    path = Path(data_dir) / WAREHOUSE_FILE
    if path.exists():
        try:
            with duckdb.connect(str(path), read_only=True) as con:
                recorded = warehouse_lake_uri(con)
        except duckdb.Error:
            recorded = None
    try:
        return Lake(recorded or lake_uri or default_lake_uri(Path(data_dir)))
    except ValueError:
        return None


def connect_analyst(data_dir: Path, lake_uri: str | None = None) -> duckdb.DuckDBPyConnection:
    """The warehouse as `cdrhouse sql` opens it: DuckDB itself reads nothing but the lake and
    the warehouse, writes neither, loads no extension, and its settings are locked.

    * an in-memory database with the warehouse attached read-only (not `duckdb.connect(path)`,
      whose instance this process may share with another connection to the same file);
    * `enable_external_access=false` with the lake as the only allowed directory, so every
      file function, COPY, ATTACH and EXPORT outside the lake is refused by the engine, and an
      object-store lake is read through a filesystem that cannot write
      (`warehouse.duck.register_lake`); on a local lake the engine would still write *inside*
      the lake directory, which is why `cdrhouse sql` also runs only statements that read
      (`warehouse.sqlguard`);
    * no extension auto-install or auto-load, no persistent secrets read from the home dir;
    * `TimeZone` UTC, as every timestamp in the warehouse: the answers do not depend on the
      analyst's zone (`current_date`, string literals compared with `TIMESTAMPTZ`);
    * spills go to a temp dir of this process next to the warehouse (made and removed by DuckDB
      only if a query spills; DuckDB allows its temp dir, so not the working dir, which might
      be the lake);
    * `lock_configuration`, so no statement can undo any of this.

    `lake_uri` is the lake to allow for an old warehouse that does not record its own."""
    import duckdb

    path = Path(data_dir).resolve() / WAREHOUSE_FILE
    if not path.exists():
        raise FileNotFoundError(f"no warehouse at {path}; run `cdrhouse ingest` first")
    con = duckdb.connect(
        ":memory:",
        config={
            "autoinstall_known_extensions": False,
            "autoload_known_extensions": False,
            "allow_community_extensions": False,
            "allow_persistent_secrets": False,
            "python_enable_replacements": False,
        },
    )
    try:
        con.execute(f"ATTACH {lit(str(path))} AS warehouse (READ_ONLY)")
        con.execute("USE warehouse")
        uri = warehouse_lake_uri(con) or lake_uri or default_lake_uri(path.parent)
        allowed = ", ".join(lit(d) for d in _allowed_lake(con, uri))
        # Next to the warehouse, as DuckDB's default for a database file, but per process.
        spill = path.with_name(f".{WAREHOUSE_FILE}.{os.getpid()}.spill")
        for setting in (
            f"allowed_directories = [{allowed}]",
            f"temp_directory = {lit(str(spill))}",
            "enable_external_access = false",
            "TimeZone = 'UTC'",
            # DuckDB draws its progress bar on standard output (a file too) once a query runs
            # 2 s: `sql --format csv > out.csv` began with it.
            "enable_progress_bar = false",
            "lock_configuration = true",
        ):
            con.execute(f"SET {setting}")
    except BaseException:
        con.close()
        raise
    return con


def _allowed_lake(con: duckdb.DuckDBPyConnection, uri: str) -> list[str]:
    """The lake's directories for `allowed_directories`; an object-store lake's read-only
    filesystem is registered on `con` on the way (the only path that needs fsspec)."""
    if is_local_uri(uri):
        return local_lake_directories(root_from_uri(uri))
    from warehouse.duck import register_lake
    from warehouse.lake import Lake

    lake = Lake(uri)
    register_lake(con, lake)
    return [lake.store.url("").rstrip("/") + "/"]


def local_lake_directories(root: Path) -> list[str]:
    """A local lake's root as DuckDB's views spell it and as the OS resolves it, with a
    trailing slash: a sibling such as `lake_old/` is not inside `lake/`."""
    return sorted({f"{root}/", f"{root.resolve()}/"})


def built_kpi_settings(data_dir: Path) -> KpiSettings | None:
    """The KPI settings `warehouse.duckdb` was built with (None: absent or older than them)."""
    return built_kpi_and_lake(data_dir)[0]


def built_kpi_and_lake(data_dir: Path) -> tuple[KpiSettings | None, str | None]:
    """The KPI settings and the lake URI `warehouse.duckdb` was built with, in one open of the
    file (each None: absent, or the file is older than its record)."""
    path = Path(data_dir).resolve() / WAREHOUSE_FILE
    if not path.exists():
        return None, None
    import duckdb

    try:
        with duckdb.connect(str(path), read_only=True) as con:
            uri = warehouse_lake_uri(con)
            try:
                row = con.execute(f"SELECT settings_json FROM {KPI_SETTINGS_VIEW}").fetchone()
            except duckdb.CatalogException:
                row = None
    except duckdb.Error:
        return None, None
    return (KpiSettings.from_json(str(row[0])) if row else None), uri


def same_lake(a: str, b: str) -> bool:
    """Whether two lake URIs name one lake (a local one by its resolved path)."""
    if is_local_uri(a) and is_local_uri(b):
        return root_from_uri(a) == root_from_uri(b)
    return a.rstrip("/") == b.rstrip("/")


def built_account_zones(data_dir: Path) -> dict[str, str] | None:
    """The account zones `warehouse.duckdb` was built with (`account_settings`; None: absent
    or older than accounts)."""
    path = Path(data_dir).resolve() / WAREHOUSE_FILE
    if not path.exists():
        return None
    import duckdb

    try:
        with duckdb.connect(str(path), read_only=True) as con:
            rows = con.execute(
                f"SELECT account_id, timezone FROM {ACCOUNT_SETTINGS_VIEW}"
            ).fetchall()
    except duckdb.Error:
        return None
    return {str(a): str(z) for a, z in rows}
