"""Build the report: run the tiles' and the queue table's queries and each chart's, turn the
chart rows into Vega-Lite specs, write the page."""

from __future__ import annotations

from datetime import UTC, date, datetime, time, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import altair as alt
import duckdb

from warehouse.analyst import fetch_whole
from warehouse.outfile import out_target, write_whole
from warehouse.report.charts import (
    CHARTS,
    DAILY,
    HEADLINE_SQL,
    QUEUE_SQL,
    QUEUE_TOTAL_SQL,
    TILES,
)
from warehouse.report.data import (
    Chart,
    ChartResult,
    Headline,
    QueueTable,
    Report,
    Row,
    Tile,
    money,
    params,
    query,
)
from warehouse.report.page import render_html


def build_report(
    con: duckdb.DuckDBPyConnection,
    start: date,
    end: date,
    *,
    now: datetime | None = None,
    currency: str | None = None,
    account: str | None = None,
) -> Report:
    """Query the views for the days `[start, end)` (and the tiles for the period of equal
    length before it too); `account`: that account's numbers only (None: every account's,
    summed)."""
    unit = currency or "account currency"
    charts = []
    for chart in CHARTS:
        rows = chart.reshape(query(con, chart.sql, start, end, account))
        if chart.key == "balance" and len(rows) == 1:
            # One snapshot is a number, not a line.
            amount = Decimal(rows[0]["amount_exact"])
            figure = f"{money(amount, currency)} on {rows[0]['snapshot_date']}"
            charts.append(ChartResult(chart, rows, None, figure))
            continue
        spec = _spec(chart, rows, unit) if rows else None
        charts.append(ChartResult(chart, rows, spec))
    previous = start - (end - start)
    tiles = [
        Tile(
            tile,
            _one(con, tile.sql, start, end, account),
            _one(con, tile.sql, previous, start, account),
        )
        for tile in TILES
    ]
    queues = QueueTable(query(con, QUEUE_SQL, start, end, account), None)
    if queues.rows:
        queues = QueueTable(queues.rows, query(con, QUEUE_TOTAL_SQL, start, end, account)[0])
    _, headline = fetch_whole(con, HEADLINE_SQL, params(start, end, account))
    cdrs, cost, met, breached = headline[0] if headline else (0, Decimal(0), 0, 0)
    sources = _sources(con)
    settings = con.execute("SELECT timezone, sl_threshold_s FROM kpi_settings").fetchone()
    timezone, sl_threshold_s = settings or ("UTC", 20)
    zones = _zones(con)
    if account is not None:
        timezone = zones.get(account, timezone)
    elif zones and len(sources) > 1:
        timezone = "each account's own zone"
    if account is not None:
        source = sources.get(account)
    elif len(sources) == 1:
        source = next(iter(sources.values()))
    else:
        source = "; ".join(f"{a}: {s or 'unknown'}" for a, s in sorted(sources.items())) or None
    return Report(
        start=start,
        end=end,
        generated_at=now or datetime.now(UTC),
        source=source,
        headline=Headline(int(cdrs), Decimal(cost), int(met), int(breached)),
        charts=charts,
        tiles=tiles,
        queues=queues,
        timezone=str(timezone),
        sl_threshold_s=int(sl_threshold_s),
        currency=currency,
        account=account,
        accounts=tuple(sorted(sources)),
        **_missing(
            con,
            start,
            end,
            {
                a: zones.get(a, str(settings[0]) if settings else "UTC")
                for a in ([account] if account is not None else sorted(sources))
            },
        ),
    )


# The UTC days (`date`, the partition) of the period each account has CDRs for: read from the
# partition paths of the period only.
_DAYS_SQL = (
    "SELECT account_id, date FROM cdrs WHERE date >= $start AND date < $end "
    "AND ($account IS NULL OR account_id = $account) GROUP BY ALL"
)


def _missing(
    con: duckdb.DuckDBPyConnection, start: date, end: date, zones: dict[str, str]
) -> dict[str, Any]:
    """Per account (`zones`: each one's business-day zone), the UTC days without a CDR among
    those its local days `[start, end)` cover, and how many UTC days they cover. A local day
    spans two UTC days (Sydney's begins at 13:00 UTC the day before): a UTC day next to the
    period that is not landed leaves a local day of the period half counted."""
    if not zones:
        return {"missing": {}, "utc_days": {}}
    spans = {a: _utc_span(start, end, zone) for a, zone in zones.items()}
    first = min(s[0] for s in spans.values())
    last = max(s[-1] for s in spans.values())
    account = next(iter(zones)) if len(zones) == 1 else None
    held: dict[str, set[date]] = {a: set() for a in zones}
    found = fetch_whole(con, _DAYS_SQL, params(first, last + timedelta(days=1), account))[1]
    for account_id, day in found:
        held.setdefault(str(account_id), set()).add(day)
    gaps = {a: tuple(d for d in spans[a] if d not in held[a]) for a in zones}
    return {
        "missing": {a: days for a, days in gaps.items() if days},
        "utc_days": {a: len(span) for a, span in spans.items()},
    }


def _utc_span(start: date, end: date, zone: str) -> list[date]:
    """The UTC days the local days `[start, end)` of `zone` overlap."""
    try:
        tz: Any = ZoneInfo(zone)
    except (ZoneInfoNotFoundError, ValueError):
        tz = UTC
    first = datetime.combine(start, time(0), tz).astimezone(UTC).date()
    last = (datetime.combine(end, time(0), tz) - timedelta(milliseconds=1)).astimezone(UTC)
    return [first + timedelta(days=i) for i in range((last.date() - first).days + 1)]


def report_accounts(data_dir: Path) -> list[str]:
    """The accounts `data_dir/warehouse.duckdb` holds (empty for a warehouse built before
    accounts), for checking `--account` before a report is written."""
    from warehouse.duck import connect

    con = connect(data_dir, read_only=True)
    try:
        return sorted(_sources(con))
    finally:
        con.close()


def _sources(con: duckdb.DuckDBPyConnection) -> dict[str, str | None]:
    """`account -> source` from `lake_info` (empty for a warehouse older than both)."""
    try:
        rows = con.execute("SELECT account_id, source FROM lake_info").fetchall()
    except duckdb.Error:
        try:  # built before accounts: one row, the lake's
            rows = [
                ("default", r[0]) for r in con.execute("SELECT source FROM lake_info").fetchall()
            ]
        except duckdb.Error:
            return {}
    return {str(a): str(s) if s else None for a, s in rows}


def _zones(con: duckdb.DuckDBPyConnection) -> dict[str, str]:
    try:
        rows = con.execute("SELECT account_id, timezone FROM account_settings").fetchall()
    except duckdb.Error:
        return {}
    return {str(a): str(z) for a, z in rows}


def _one(
    con: duckdb.DuckDBPyConnection,
    sql: str,
    start: date,
    end: date,
    account: str | None = None,
) -> float | int | Decimal | None:
    _, rows = fetch_whole(con, sql, params(start, end, account))
    value: float | int | Decimal | None = rows[0][0] if rows else None
    return value


def _spec(chart: Chart, rows: list[Row], unit: str) -> dict[str, Any]:
    drawn = chart.draw(rows, unit)
    if chart.key in DAILY:
        drawn = drawn.properties(width=720, height=240)
    drawn = drawn.properties(
        title=alt.TitleParams(chart.title, subtitle=f"source: {chart.view}", anchor="start")
    )
    spec: dict[str, Any] = drawn.to_dict()
    spec["usermeta"] = {"cdrhouse": {"chart": chart.key, "view": chart.view}}
    return spec


def report_target(out: Path) -> Path:
    """The file a report is written to for `out`, checked before any work (`out_target`: no
    device or FIFO, whose rename would replace it)."""
    return out_target("--out", out)


def write_report(
    data_dir: Path,
    start: date,
    end: date,
    out: Path,
    *,
    now: datetime | None = None,
    currency: str | None = None,
    account: str | None = None,
) -> Report:
    """Build the report from `data_dir/warehouse.duckdb` (read-only) and write it to `out`
    atomically (a reader never sees half a file); `account`: that account only."""
    from warehouse.analyst import read_whole, warehouse_lake
    from warehouse.duck import connect
    from warehouse.interrupt import interruptible

    def read() -> Report:
        con = connect(data_dir, read_only=True)
        try:
            with interruptible(con):
                return build_report(con, start, end, now=now, currency=currency, account=account)
        finally:
            con.close()

    out = report_target(Path(out))
    report = read_whole(read, lambda: warehouse_lake(data_dir))
    html = render_html(report)
    write_whole(out, lambda tmp: tmp.write_text(html, encoding="utf-8"))
    return report
