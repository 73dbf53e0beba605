"""Build the report: run each chart's query, turn its rows into a Vega-Lite spec, write the page."""

from __future__ import annotations

import uuid
from datetime import UTC, date, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import altair as alt
import duckdb

from warehouse.report.charts import CHARTS, DAILY, HEADLINE_SQL
from warehouse.report.data import Chart, ChartResult, Headline, Report, Row, query
from warehouse.report.page import render_html


def build_report(
    con: duckdb.DuckDBPyConnection, start: date, end: date, *, now: datetime | None = None
) -> Report:
    """Query every chart's view for the UTC days `[start, end)`."""
    charts = []
    for chart in CHARTS:
        rows = chart.reshape(query(con, chart.sql, start, end))
        spec = _spec(chart, rows) if rows else None
        charts.append(ChartResult(chart, rows, spec))
    headline = con.execute(HEADLINE_SQL, {"start": start, "end": end}).fetchone()
    cdrs, cost, met, breached = headline or (0, Decimal(0), 0, 0)
    try:
        source_row = con.execute("SELECT source FROM lake_info").fetchone()
    except duckdb.CatalogException:
        source_row = None
    return Report(
        start=start,
        end=end,
        generated_at=now or datetime.now(UTC),
        source=str(source_row[0]) if source_row and source_row[0] else None,
        headline=Headline(int(cdrs), Decimal(cost), int(met), int(breached)),
        charts=charts,
    )


def _spec(chart: Chart, rows: list[Row]) -> dict[str, Any]:
    drawn = chart.draw(rows)
    if chart.key in DAILY:
        drawn = drawn.properties(width=720, height=300)
    drawn = drawn.properties(
        title=alt.TitleParams(chart.title, subtitle=f"source: {chart.view}", anchor="start")
    )
    spec: dict[str, Any] = drawn.to_dict()
    spec["usermeta"] = {"cdrhouse": {"chart": chart.key, "view": chart.view}}
    return spec


def write_report(
    data_dir: Path, start: date, end: date, out: Path, *, now: datetime | None = None
) -> Report:
    """Build the report from `data_dir/warehouse.duckdb` (read-only) and write it to `out`
    atomically (a reader never sees half a file)."""
    from warehouse.duck import connect

    con = connect(data_dir, read_only=True)
    try:
        report = build_report(con, start, end, now=now)
    finally:
        con.close()
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    # A temp name of its own: two runs writing the same report never share (and mix) one file.
    tmp = out.with_name(f".{out.name}.{uuid.uuid4().hex}.tmp")
    try:
        tmp.write_text(render_html(report), encoding="utf-8")
        tmp.replace(out)
    finally:
        tmp.unlink(missing_ok=True)
    return report
