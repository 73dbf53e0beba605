"""`cdrhouse sql`: run one query against the warehouse, print an aligned table or write a file.

The warehouse is opened read-only and holds only views, so a query never blocks a pipeline run
(which swaps in a new `warehouse.duckdb` and writes new Parquet files atomically), and a running
pipeline never breaks a query: the open connection keeps the file it opened.
"""

from __future__ import annotations

import argparse
import sys
from decimal import Decimal
from pathlib import Path
from typing import Any, TextIO

import duckdb
import polars as pl

from warehouse.duck import WAREHOUSE_FILE, connect

FORMATS = ("table", "csv", "json", "parquet")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("query", nargs="?", help='SQL to run, e.g. "SELECT * FROM rpt_cost_daily"')
    parser.add_argument("--file", "-f", type=Path, help="read the query from this .sql file")
    parser.add_argument("--format", choices=FORMATS, default="table", help="output format")
    parser.add_argument("--output", "-o", type=Path, help="write the result to this file")
    parser.add_argument(
        "--max-rows", type=int, default=200, help="rows shown in table format (default 200)"
    )


def _fail(message: str) -> int:
    print(f"cdrhouse sql: error: {message}", file=sys.stderr)
    return 1


def _query_text(args: argparse.Namespace) -> str | None:
    if args.file is not None:
        try:
            return str(Path(args.file).read_text())
        except OSError as exc:
            raise ValueError(f"cannot read {args.file}: {exc.strerror}") from None
    return str(args.query) if args.query else None


def run_query(data_dir: Path, query: str) -> pl.DataFrame | None:
    """Run `query` read-only; None for a statement without a result set."""
    for attempt in range(2):
        con = connect(data_dir, read_only=True)
        try:
            rel = con.sql(query)
            return None if rel is None else pl.from_arrow(rel.to_arrow_table())  # type: ignore[return-value]
        except duckdb.IOException:
            # A partition was swapped between DuckDB's glob and its open: run once more.
            if attempt:
                raise
        finally:
            con.close()
    return None


def _cell(value: Any) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, Decimal):
        return format(value, "f")
    return str(value)


def print_table(df: pl.DataFrame, out: TextIO, max_rows: int) -> None:
    shown = df.head(max_rows)
    rows = [[_cell(v) for v in row] for row in shown.iter_rows()]
    widths = [max([len(name), *(len(r[i]) for r in rows)]) for i, name in enumerate(shown.columns)]
    numeric = [dtype.is_numeric() for dtype in shown.dtypes]

    def line(cells: list[str]) -> str:
        parts = [
            c.rjust(w) if num else c.ljust(w)
            for c, w, num in zip(cells, widths, numeric, strict=True)
        ]
        return " | ".join(parts).rstrip()

    out.write(line(list(shown.columns)) + "\n")
    out.write("-+-".join("-" * w for w in widths) + "\n")
    for r in rows:
        out.write(line(r) + "\n")
    more = f", showing {max_rows}" if df.height > max_rows else ""
    out.write(f"({df.height} row{'s' if df.height != 1 else ''}{more})\n")


def _write(df: pl.DataFrame, fmt: str, output: Path | None, max_rows: int) -> None:
    if fmt == "table":
        if output is None:
            print_table(df, sys.stdout, max_rows)
        else:
            with output.open("w") as fh:
                print_table(df, fh, df.height)
    elif fmt == "csv":
        text = df.write_csv()
        output.write_text(text) if output else sys.stdout.write(text)
    elif fmt == "json":
        text = df.write_json()
        output.write_text(text) if output else sys.stdout.write(text + "\n")
    else:
        if output is None:
            raise ValueError("--format parquet needs --output PATH")
        df.write_parquet(output)


def run(args: argparse.Namespace, data_dir: Path) -> int:
    """Entry point used by `cdrhouse sql`; returns the exit code, never raises on user errors."""
    try:
        query = _query_text(args)
    except ValueError as exc:
        return _fail(str(exc))
    if not query or not query.strip():
        return _fail("give a query or --file q.sql")
    if args.format == "parquet" and args.output is None:
        return _fail("--format parquet needs --output PATH")
    if not (Path(data_dir) / WAREHOUSE_FILE).exists():
        return _fail(
            f"no warehouse at {Path(data_dir) / WAREHOUSE_FILE}; run `cdrhouse ingest` first"
        )
    try:
        df = run_query(Path(data_dir), query)
    except duckdb.Error as exc:
        return _fail(str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__)
    if df is None:
        print("OK")
        return 0
    try:
        _write(df, args.format, args.output, args.max_rows)
    except (OSError, ValueError) as exc:
        return _fail(str(exc))
    return 0
