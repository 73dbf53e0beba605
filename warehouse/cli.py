"""`cdrhouse sql` and `cdrhouse lake`: query the warehouse; inspect or reset the lake.

`sql` runs one query and prints an aligned table or writes a file. On a machine that has no
`warehouse.duckdb` yet (an analyst's laptop, a fresh pod), it first builds the views over the
configured lake (`CDRHOUSE_LAKE_URI`), writing nothing to the lake.

The warehouse is opened read-only and holds only views, so a query never blocks a pipeline run
(which swaps in a new `warehouse.duckdb` and writes new Parquet files atomically), and a running
pipeline never breaks a query: the open connection keeps the file it opened.
"""

from __future__ import annotations

import argparse
import datetime as dt
import shutil
import sys
import tempfile
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO, TypeVar

if TYPE_CHECKING:
    import duckdb
    import polars as pl

    from warehouse.lake import Lake

# DuckDB, polars and the lake are imported by the commands that run, not here: `cdrhouse` builds
# its parser from this module, and `cdrhouse --help` must not pay for them. `cdrhouse sql` in
# table format loads DuckDB alone (`warehouse.analyst`), never polars, pyarrow or the lake
# (tests/pipelines/test_cli_startup.py).

T = TypeVar("T")

FORMATS = ("table", "csv", "json", "parquet")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("query", nargs="?", help='SQL to run, e.g. "SELECT * FROM rpt_cost_daily"')
    parser.add_argument("--file", "-f", type=Path, help="read the query from this .sql file")
    parser.add_argument("--format", choices=FORMATS, default="table", help="output format")
    parser.add_argument("--output", "-o", type=Path, help="write the result to this file")
    parser.add_argument(
        "--max-rows",
        type=_rows_shown,
        default=200,
        help="rows shown in table format, 0 or more (default 200)",
    )


def _rows_shown(text: str) -> int:
    """--max-rows: 0 or more (a negative count sliced the rows from the end)."""
    try:
        rows = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid count {text!r}: expected 0 or more") from None
    if rows < 0:
        raise argparse.ArgumentTypeError(f"invalid count {rows}: expected 0 or more")
    if rows > MAX_ROWS_SHOWN:
        # DuckDB's LIMIT is a 64-bit integer: a bigger one was a "Conversion Error".
        raise argparse.ArgumentTypeError(
            f"invalid count {rows}: at most {MAX_ROWS_SHOWN:,}; save a bigger result with "
            "--format and --output FILE"
        )
    return rows


MAX_ROWS_SHOWN = 10**9


def _fail(message: str) -> int:
    print(f"cdrhouse sql: error: {message}", file=sys.stderr)
    return 1


def _query_text(args: argparse.Namespace) -> str | None:
    if args.file is not None:
        if args.query:
            raise ValueError("give the query or --file, not both")
        try:
            return str(Path(args.file).read_text())
        except OSError as exc:
            raise ValueError(f"cannot read {args.file}: {exc.strerror}") from None
    return str(args.query) if args.query else None


@dataclass(frozen=True)
class Rows:
    """A result as DuckDB hands it to Python: what the aligned table prints, without polars
    or pyarrow (a query printed as a table costs little more than DuckDB's own start-up)."""

    columns: list[str]
    numeric: list[bool]
    rows: list[tuple[Any, ...]]
    height: int  # every row of the result; `rows` may hold only the first ones


# DuckDB's numeric types (right-aligned in the table); DECIMAL(p,s) by its prefix.
NUMERIC_TYPES = frozenset(
    {"TINYINT", "SMALLINT", "INTEGER", "BIGINT", "HUGEINT", "UTINYINT", "USMALLINT",
     "UINTEGER", "UBIGINT", "UHUGEINT", "FLOAT", "DOUBLE"}
)  # fmt: skip


def _rows(shown: int | None) -> Callable[[duckdb.DuckDBPyRelation], Rows]:
    """The first `shown` rows (None: all), and how many there are in all. Only `shown` + 1
    rows are fetched; when there are more, DuckDB counts them: `SELECT * FROM cdrs` on a
    terminal held every row of the lake in Python to print 200 of them."""

    def fetch(rel: duckdb.DuckDBPyRelation) -> Rows:
        numeric = [str(t) in NUMERIC_TYPES or str(t).startswith("DECIMAL") for t in rel.types]
        columns = list(rel.columns)
        if shown is None:
            rows = rel.fetchall()
            return Rows(columns, numeric, rows, len(rows))
        rows = rel.limit(shown + 1).fetchall()
        if len(rows) <= shown:
            return Rows(columns, numeric, rows, len(rows))
        [(counted,)] = rel.aggregate("count(*)").fetchall()
        return Rows(columns, numeric, rows[:shown], max(int(counted), shown + 1))

    return fetch


def _frame(rel: duckdb.DuckDBPyRelation) -> pl.DataFrame:
    import polars as pl

    return pl.DataFrame(pl.from_arrow(rel.to_arrow_table()))


def run_query(
    data_dir: Path, query: str, lake_uri: str | None = None, output: Path | None = None
) -> pl.DataFrame | None:
    """Run `query` if every statement in it only reads; the last one's rows as a polars frame
    (None: no rows). See `answer`."""
    return answer(data_dir, query, _frame, lake_uri, output)


def answer(
    data_dir: Path,
    query: str,
    fetch: Callable[[duckdb.DuckDBPyRelation], T],
    lake_uri: str | None = None,
    output: Path | None = None,
) -> T | None:
    """Run `query` if every statement in it only reads; `fetch` of the last one's relation
    (None: it has no rows).

    Two layers: `read_statements` runs only statements that read (DuckDB's own parse), on a
    connection where DuckDB itself reads nothing outside the lake and changes no setting
    (`connect_analyst`). `output`, where the caller will write the rows, must be outside the
    lake and not the warehouse. Raises `RefusedQuery` or `duckdb.Error`."""
    from warehouse.analyst import connect_analyst, read_whole, warehouse_lake
    from warehouse.interrupt import interruptible
    from warehouse.sqlguard import read_statements

    def read() -> T | None:
        con = connect_analyst(data_dir, lake_uri)
        try:
            with interruptible(con):
                if output is not None:
                    _check_output(con, Path(data_dir), output)
                statements = read_statements(con, query)
                for statement in statements[:-1]:
                    con.execute(statement).fetchall()
                rel = con.sql(statements[-1])
                return None if rel is None else fetch(rel)
        finally:
            con.close()

    return read_whole(read, lambda: warehouse_lake(data_dir, lake_uri))


def _check_output(con: duckdb.DuckDBPyConnection, data_dir: Path, output: Path) -> None:
    """Refuse an `--output` inside the lake (the directories the connection may read) or onto
    the warehouse file, wherever a symlink on the way points."""
    from warehouse.sqlguard import RefusedQuery

    rows = con.execute(
        "SELECT current_setting('allowed_directories'), current_setting('temp_directory')"
    ).fetchall()
    allowed, spill = rows[0] if rows else ([], "")
    # The spill dir is DuckDB's own, not the lake's.
    problem = output_problem("--output", output, data_dir, [d for d in allowed if d != spill])
    if problem is not None:
        raise RefusedQuery(problem)


def output_problem(flag: str, output: Path, data_dir: Path, lake_dirs: Sequence[str]) -> str | None:
    """Why a command may not write `output` (`flag`'s value): the warehouse file, or a path
    inside the lake (`lake_dirs`; an object store's URI is no local path), wherever a symlink
    on the way points. None when it may."""
    from warehouse.analyst import WAREHOUSE_FILE

    target = output.resolve()
    warehouse = (data_dir / WAREHOUSE_FILE).resolve()
    if target.parent == warehouse.parent and target.name.startswith(WAREHOUSE_FILE):
        return f"{flag} {output} is the warehouse ({warehouse}); write elsewhere"
    for lake_dir in lake_dirs:
        if "://" in lake_dir:
            continue
        if target.is_relative_to(Path(lake_dir).resolve()):
            return f"{flag} {output} is inside the lake ({lake_dir}); write elsewhere"
    return None


def _cell(value: Any) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, Decimal):
        return format(value, "f")
    return str(value)


def print_table(result: Rows, out: TextIO, max_rows: int) -> None:
    shown = result.rows[:max_rows]
    rows = [[_cell(v) for v in row] for row in shown]
    widths = [max([len(name), *(len(r[i]) for r in rows)]) for i, name in enumerate(result.columns)]

    def line(cells: list[str]) -> str:
        parts = [
            c.rjust(w) if num else c.ljust(w)
            for c, w, num in zip(cells, widths, result.numeric, strict=True)
        ]
        return " | ".join(parts).rstrip()

    out.write(line(list(result.columns)) + "\n")
    out.write("-+-".join("-" * w for w in widths) + "\n")
    for r in rows:
        out.write(line(r) + "\n")
    more = f", showing {max_rows}" if result.height > max_rows else ""
    out.write(f"({result.height} row{'s' if result.height != 1 else ''}{more})\n")


def _write_table(result: Rows, output: Path | None, max_rows: int) -> None:
    """Print the table, or write it to `output` whole (`write_whole`: a failed write leaves
    the file that was there)."""
    from warehouse.outfile import write_whole

    if output is None:
        print_table(result, sys.stdout, max_rows)
        return

    def table(path: Path) -> None:
        with path.open("w") as fh:
            print_table(result, fh, result.height)

    write_whole(output, table)


def _exporter(fmt: str, output: Path | None) -> Callable[[duckdb.DuckDBPyRelation], bool]:
    """Write the rows as `fmt` while the query's connection is open (`warehouse.export`, a
    batch at a time) to `output` whole (`write_whole`), or to standard output: through a
    temp file, so that standard output gets every row or none, as when the result was held
    in memory (a query that fails half-way, or that `read_whole` runs again because the
    lake changed under it, prints nothing twice and nothing half)."""
    from warehouse import export
    from warehouse.outfile import write_whole

    def write(rel: duckdb.DuckDBPyRelation) -> bool:
        if output is not None:
            if fmt == "parquet":
                write_whole(output, lambda path: export.write_parquet(rel, path))
            else:
                write_whole(output, lambda path: export.write_text_file(rel, fmt, path))
            return True
        with tempfile.TemporaryDirectory(prefix="cdrhouse-sql-") as tmp:
            held = Path(tmp) / f"rows.{fmt}"
            export.write_text_file(rel, fmt, held)
            out = getattr(sys.stdout, "buffer", None)  # None: a text-only stream
            sys.stdout.flush()
            with held.open(
                "rb" if out is not None else "r", encoding=None if out else "utf-8"
            ) as rows:
                shutil.copyfileobj(rows, out or sys.stdout, 1 << 20)
            sys.stdout.flush()
        return True

    return write


def _ensure_views(data_dir: Path, lake_uri: str | None) -> str | None:
    """Build `warehouse.duckdb` over the lake when this machine has none yet (writing nothing
    to the lake); what is wrong when the lake holds no data either."""
    from warehouse.analyst import WAREHOUSE_FILE

    if (data_dir / WAREHOUSE_FILE).exists():
        return None
    from warehouse.duck import build_warehouse, default_lake_uri
    from warehouse.lake import Lake

    lake = Lake(lake_uri or default_lake_uri(data_dir))
    problem = _nothing_to_view(data_dir, lake)
    if problem is None:
        build_warehouse(data_dir, lake.uri)
    return problem


def _nothing_to_view(data_dir: Path, lake: Lake) -> str | None:
    """What is wrong when there is no warehouse and the lake holds no account's data (a lake
    of several accounts holds it in its sub-lakes only); None when views can be built."""
    from warehouse.analyst import WAREHOUSE_FILE

    if (data_dir / WAREHOUSE_FILE).exists() or lake.accounts():
        return None
    return (
        f"no warehouse at {data_dir / WAREHOUSE_FILE} and no data in the lake at {lake.uri}; "
        "run `cdrhouse ingest` first"
    )


def run(args: argparse.Namespace, data_dir: Path, lake_uri: str | None = None) -> int:
    """Entry point used by `cdrhouse sql`; returns the exit code, never raises on user errors."""
    try:
        query = _query_text(args)
    except ValueError as exc:
        return _fail(str(exc))
    if not query or not query.strip():
        return _fail("give a query or --file q.sql")
    if args.format == "parquet" and args.output is None:
        return _fail("--format parquet needs --output PATH")
    output = args.output
    if output is not None:
        from warehouse.outfile import out_target

        try:
            output = out_target("--output", Path(output), stream_ok=True)
        except ValueError as exc:
            return _fail(str(exc))
    import duckdb  # after the argument checks: a usage error answers without loading DuckDB

    from warehouse.sqlguard import RefusedQuery
    from warehouse.stores import UnreadablePartitions

    problem = _ensure_views(Path(data_dir), lake_uri)
    if problem is not None:
        return _fail(f"{problem}, or set CDRHOUSE_LAKE_URI")
    # The aligned table straight from DuckDB's rows; the file formats written as they come.
    fetch: Callable[[duckdb.DuckDBPyRelation], Rows | bool] = (
        _rows(None if output is not None else args.max_rows)
        if args.format == "table"
        else _exporter(args.format, output)
    )
    try:
        result = answer(Path(data_dir), query, fetch, lake_uri, output)
        if result is None:
            print("OK")
        elif isinstance(result, Rows):
            _write_table(result, output, args.max_rows)
    except (RefusedQuery, UnreadablePartitions) as exc:
        return _fail(str(exc))
    except duckdb.Error as exc:
        return _fail(_one_line(exc))
    except BrokenPipeError:
        raise  # the reader went away (`| head`): `cdrhouse` ends quietly
    except (OSError, ValueError) as exc:
        return _fail(_one_line(exc))
    return 0


def _one_line(exc: Exception) -> str:
    """DuckDB's first line; a file outside the lake or a locked setting says why."""
    import duckdb

    text = str(exc).strip()
    line = text.splitlines()[0] if text else type(exc).__name__
    if isinstance(exc, duckdb.PermissionException):
        line += " (`cdrhouse sql` only reads the lake and the warehouse)"
    elif "configuration has been locked" in line:
        line += " (`cdrhouse sql` is read-only and its settings are fixed)"
    return line


# --- `cdrhouse lake` --------------------------------------------------------------------------


def add_lake_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="lake_command", required=True)
    info = sub.add_parser(
        "info", help="the lake's URI, and each account's data source and partitions per table"
    )
    info.add_argument("--account", help="this account only (default: every account)")
    reset = sub.add_parser(
        "reset",
        help="delete every file of the lake, or of one account (--account), and "
        "warehouse.duckdb; needs --yes",
    )
    reset.add_argument(
        "--account",
        help="delete this account's files only (its sub-lake, provenance included): the others "
        "stay",
    )
    reset.add_argument("--yes", action="store_true", help="really delete them")
    sub.add_parser("views", help="rebuild warehouse.duckdb's views over the lake (no lake writes)")


def run_lake(args: argparse.Namespace, data_dir: Path, lake_uri: str | None) -> int:
    """Entry point of `cdrhouse lake`; exit 2 for a reset without --yes or an unknown account."""
    from warehouse.duck import WAREHOUSE_FILE, build_warehouse, default_lake_uri
    from warehouse.lake import Lake
    from warehouse.stores import UnreadablePartitions

    lake = Lake(lake_uri or default_lake_uri(data_dir))
    if args.lake_command == "views":
        # A typo in CDRHOUSE_DATA_DIR made a directory and empty views there.
        if (problem := _nothing_to_view(Path(data_dir), lake)) is not None:
            print(
                f"cdrhouse lake views: error: {problem}, or set CDRHOUSE_LAKE_URI", file=sys.stderr
            )
            return 1
        try:
            path = build_warehouse(Path(data_dir), lake.uri)
        except UnreadablePartitions as exc:
            print(f"cdrhouse lake views: error: {exc}", file=sys.stderr)
            return 1
        print(f"cdrhouse lake: views over {lake.uri} in {path}")
        return 0
    account: str | None = getattr(args, "account", None)
    if args.lake_command == "reset" and account is None:
        # The whole lake: no listing needed (on S3 the reset lists it once itself).
        return _lake_reset(lake, None, [], Path(data_dir) / WAREHOUSE_FILE, args.yes)
    with lake.cached_listing():  # one listing of the lake, not one per table or account
        held = lake.accounts()
    if account is not None and account not in held and not _claimed(lake, account):
        known = ", ".join(held) or "none: the lake is empty"
        print(
            f"cdrhouse lake {args.lake_command}: no account {account!r} in {lake.uri} "
            f"(accounts with data: {known})",
            file=sys.stderr,
        )
        return 2
    if args.lake_command == "info":
        _lake_info(lake, [account] if account else held)
        return 0
    return _lake_reset(lake, account, held, Path(data_dir) / WAREHOUSE_FILE, args.yes)


def _claimed(lake: Lake, account: str) -> bool:
    """Whether `account` is a valid id whose sub-lake records a source (it may hold no data:
    a reset of it is how a wrong claim is undone)."""
    try:
        return lake.account(account).source_shown() is not None
    except ValueError:  # not an account id: no such account
        return False


def _lake_info(lake: Lake, accounts: list[str]) -> None:
    """The root's URI and source, then each account's (the root's own first, unnamed)."""
    from models.tables import ALL_TABLES
    from warehouse.lake import DEFAULT_ACCOUNT

    print(f"lake:   {lake.uri}")
    if not accounts:
        print(f"source: {lake.source_shown() or '(empty lake: the first ingest claims it)'}")
        _privacy_info(lake)
        return
    for account in accounts:
        sub = lake.account(account)
        if account != DEFAULT_ACCOUNT:
            print(f"account {account}: {sub.uri}")
        print(f"source: {sub.source_shown() or '(none recorded)'}")
        _privacy_info(sub)
        with sub.cached_listing():
            for spec in ALL_TABLES:
                keys = sub.partitions(spec.name)
                if keys:
                    print(f"  {spec.name:<24} {len(keys):>5} partitions  {keys[0]} .. {keys[-1]}")


def _privacy_info(lake: Lake) -> None:
    """Which key the account's tokens are made with (its check, never the key) and how many
    people were erased: what `LakeKeyConflict` and `privacy forget` refer to."""
    from warehouse.lake import KEY_MARKER_FILE, LakeMarkerDamaged

    try:
        check, erased = lake.key_claimed(), len(lake.forgotten())
    except LakeMarkerDamaged as exc:
        print(f"tokens: {exc.shown}; landings with tokens are refused until it is restored")
        return
    if check is None and not erased:
        return
    key = f"key check {check[:12]}… ({KEY_MARKER_FILE})" if check else "no key claimed"
    print(f"tokens: {key}; {erased} erased (forget-list)")


def _lake_reset(lake: Lake, account: str | None, held: list[str], views: Path, yes: bool) -> int:
    from warehouse.lake import DEFAULT_ACCOUNT, PRIVACY_DIR

    others = [a for a in held if a != DEFAULT_ACCOUNT]
    if account == DEFAULT_ACCOUNT and others:
        # The root's reset takes every sub-lake with it.
        print(
            f"cdrhouse lake reset: the account 'default' is the lake's root, and resetting it "
            f"alone would delete accounts {', '.join(others)} too; reset them one by one, or "
            "the whole lake without --account",
            file=sys.stderr,
        )
        return 2
    target = lake.account(account) if account else lake
    what = f"account {account}'s files" if account and account != DEFAULT_ACCOUNT else "the files"
    source = target.source_shown()
    if not yes:
        print(
            f"cdrhouse lake reset: this deletes {what} of the lake at {target.uri} "
            f"(source: {source or 'none'}) and {views}, keeping {PRIVACY_DIR}/ (the "
            "forget-list and the tokens' key check) and any file cdrhouse did not write; "
            "re-run with --yes to do it",
            file=sys.stderr,
        )
        return 2
    from warehouse.analyst import built_kpi_and_lake, same_lake

    recorded = built_kpi_and_lake(views.parent)[1]
    done = target.reset()
    # The views scan each account's files: rebuilt from what is left when next needed. Views
    # over another lake (a mistyped CDRHOUSE_LAKE_URI reset an empty one) are not this one's.
    if recorded is None or same_lake(recorded, lake.uri):
        views.unlink(missing_ok=True)
    print(
        f"cdrhouse lake reset: deleted {done.removed} file(s) from {target.uri} (source was "
        f"{source or 'none'}); kept {PRIVACY_DIR}/"
    )
    if done.others:
        shown = ", ".join(done.others[:3]) + (", ..." if len(done.others) > 3 else "")
        print(
            f"cdrhouse lake reset: kept {len(done.others)} file(s) under it that cdrhouse did "
            f"not write ({shown}): is CDRHOUSE_LAKE_URI the lake's own folder?"
        )
    return 0


# --- `cdrhouse report` ------------------------------------------------------------------------

REPORT_DAYS = 7


def add_report_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--start", help="first business day, YYYY-MM-DD (with --end)")
    parser.add_argument(
        "--end", help="day after the last one, YYYY-MM-DD (the range is [start, end))"
    )
    parser.add_argument(
        "--days",
        type=int,
        help=f"the last N complete business days (CDRHOUSE_TIMEZONE), ending yesterday "
        f"(default {REPORT_DAYS})",
    )
    parser.add_argument(
        "--out",
        type=Path,
        help="HTML file to write (default <data dir>/reports/contact_center_report.html, the "
        "file the Dagster asset contact_center_report writes)",
    )
    parser.add_argument(
        "--account",
        help="report on this account only (default: every account, summed)",
    )


def last_complete_local_end(now: dt.datetime, zone: dt.tzinfo) -> dt.date:
    """The exclusive end of the complete business days: only whole UTC days are ingested, so
    the last complete local day is the one that ended by today's 00:00 UTC (west of UTC that
    is the day before the local date now; east of it, yesterday)."""
    midnight = dt.datetime.combine(now.astimezone(dt.UTC).date(), dt.time(0), dt.UTC)
    return midnight.astimezone(zone).date()


def report_end(now: dt.datetime, zones: Iterable[str]) -> dt.date:
    """The exclusive end of the business days complete in every zone of `zones` (the
    accounts a report sums): an account west of UTC ends its day later, and a report whose
    last day it has not ended yet would hold a part of that day."""
    from zoneinfo import ZoneInfo

    return min(last_complete_local_end(now, ZoneInfo(zone)) for zone in {"UTC", *zones})


def report_range(args: argparse.Namespace, today: dt.date) -> tuple[dt.date, dt.date]:
    """`[start, end)` from `--start/--end` or `--days N`; ValueError says what is wrong."""
    from models.timestamps import EARLIEST_DAY, parse_day

    if args.days is not None and (args.start or args.end):
        raise ValueError("give either --days or --start/--end, not both")
    if args.start or args.end:
        if not (args.start and args.end):
            raise ValueError("--start and --end go together (the range is [start, end))")
        try:
            start, end = parse_day(args.start), parse_day(args.end)
        except ValueError:
            raise ValueError(
                f"--start {args.start!r} / --end {args.end!r}: use YYYY-MM-DD, e.g. 2026-11-20"
            ) from None
        if end <= start:
            raise ValueError(f"--end {end} must be after --start {start}")
        if start < EARLIEST_DAY:
            raise ValueError(f"--start {start} is before {EARLIEST_DAY}; check the year")
        if end > today + dt.timedelta(days=366):
            raise ValueError(f"--end {end} is more than a year after today; check the year")
        return start, end
    days = REPORT_DAYS if args.days is None else args.days
    if days < 1:
        raise ValueError(f"--days {days}: give at least 1")
    if days > (today - EARLIEST_DAY).days:
        # A typo (--days 100000) would chart centuries of empty days, or overflow the calendar.
        raise ValueError(f"--days {days} reaches back before {EARLIEST_DAY}; give fewer days")
    return today - dt.timedelta(days=days), today


def run_report(args: argparse.Namespace, data_dir: Path, lake_uri: str | None = None) -> int:
    """Entry point of `cdrhouse report`: exit 2 for bad arguments, 1 when it cannot write."""
    from zoneinfo import ZoneInfo

    zone = ZoneInfo(getattr(args, "timezone", None) or "UTC")
    try:
        start, end = report_range(args, last_complete_local_end(dt.datetime.now(dt.UTC), zone))
    except ValueError as exc:
        print(f"cdrhouse report: error: {exc}", file=sys.stderr)
        return 2
    import duckdb

    from warehouse.analyst import (
        built_account_zones,
        built_kpi_and_lake,
        default_lake_uri,
        report_path,
    )
    from warehouse.report import missing_lines, report_accounts, report_target, write_report
    from warehouse.stores import UnreadablePartitions, is_local_uri, root_from_uri

    out = Path(args.out) if args.out is not None else report_path(data_dir)
    # The lake set now, and the one the views read (an analyst's views over a lake named
    # once with CDRHOUSE_LAKE_URI keep reading it after the variable is unset).
    uris = [lake_uri or default_lake_uri(Path(data_dir)), built_kpi_and_lake(Path(data_dir))[1]]
    lake_dirs = [str(root_from_uri(u)) for u in uris if u is not None and is_local_uri(u)]
    # A report written over a day's partition (or the warehouse file) replaced it whole.
    problem = output_problem("--out", out, Path(data_dir), lake_dirs)
    try:
        report_target(out)
    except ValueError as exc:
        problem = str(exc)
    if problem is not None:
        print(f"cdrhouse report: error: {problem}", file=sys.stderr)
        return 2
    problem = _ensure_views(Path(data_dir), lake_uri)
    if problem is not None:
        print(f"cdrhouse report: error: {problem}", file=sys.stderr)
        return 1
    account = getattr(args, "account", None)
    if not (args.start or args.end):
        # `--days N` ends with the last day complete in the zones of the accounts reported.
        default = getattr(args, "timezone", None) or "UTC"
        zones = built_account_zones(Path(data_dir)) or {}
        chosen = [zones.get(account, default)] if account else [*zones.values(), default]
        start, end = report_range(args, report_end(dt.datetime.now(dt.UTC), chosen))
    if account is not None:
        # A mistyped id would give a report of nothing, as if the account had no calls.
        held = report_accounts(Path(data_dir))
        if held and account not in held:
            print(
                f"cdrhouse report: error: --account {account}: no such account in this "
                f"warehouse (it holds {', '.join(held)})",
                file=sys.stderr,
            )
            return 2
    try:
        report = write_report(
            Path(data_dir),
            start,
            end,
            out,
            currency=getattr(args, "currency", None),
            account=getattr(args, "account", None),
        )
    except (OSError, duckdb.Error, UnreadablePartitions) as exc:
        print(f"cdrhouse report: error: {exc}", file=sys.stderr)
        return 1
    last = end - dt.timedelta(days=1)
    what = "no CDRs in that range" if report.empty else f"{report.headline.cdrs:,} CDRs"
    print(f"cdrhouse report: {start} .. {last} ({what}) -> {out.resolve()}")
    if not report.empty:
        for line in missing_lines(report):
            print(f"cdrhouse report: {line}")
    return 0
