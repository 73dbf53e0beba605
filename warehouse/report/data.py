"""What the report holds: its charts' rows as JSON-ready values, and the typed results.

Money stays exact: a DECIMAL becomes a float for drawing and, beside it, the exact text in
`<name>_exact`, which the tooltips and tables show.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime
from decimal import Decimal
from typing import Any

import duckdb

from models.timestamps import iso_ms
from warehouse.analyst import fetch_whole

Row = dict[str, Any]
# altair's chained builders (`.mark_bar().encode(...)`) are typed as Any; say so once.
Drawing = Any


@dataclass(frozen=True)
class Chart:
    """One chart of the report: where its numbers come from and how they are drawn."""

    key: str
    title: str
    view: str
    sql: str  # `$start` and `$end` are the range's first day and the day after its last
    empty: str  # the sentence shown instead of a chart when the query finds no rows
    draw: Callable[[list[Row], str], Drawing]  # rows, money unit
    reshape: Callable[[list[Row]], list[Row]] = field(default=lambda rows: rows)
    note: str = ""  # how to read it, under the chart


@dataclass(frozen=True)
class ChartResult:
    chart: Chart
    rows: list[Row]  # what the chart draws (after reshape), JSON-ready
    spec: dict[str, Any] | None  # None when there are no rows, or `figure` says it all
    figure: str | None = None  # one number instead of a chart (a single balance snapshot)


@dataclass(frozen=True)
class TileDef:
    """One headline number: one value from `sql` over `[$start, $end)` (NULL: no data)."""

    key: str
    label: str
    view: str
    sql: str
    kind: str  # count, pct, seconds or money: how it is written
    note: str = ""  # a footnote under the number (and its tooltip)


@dataclass(frozen=True)
class Tile:
    tile: TileDef
    value: float | int | Decimal | None  # the report's period
    previous: float | int | Decimal | None  # the period of equal length just before it


@dataclass(frozen=True)
class Headline:
    cdrs: int
    cost: Decimal
    sla_met: int
    sla_breached: int

    @property
    def sla_met_pct(self) -> float | None:
        """Met over evaluated SLAs (first response, resolution, average reply), in percent."""
        evaluated = self.sla_met + self.sla_breached
        return round(100.0 * self.sla_met / evaluated, 2) if evaluated else None


@dataclass(frozen=True)
class QueueTable:
    """`rpt_queue_kpis` summed per queue over the period, and the total of every queue."""

    rows: list[Row]
    total: Row | None


@dataclass(frozen=True)
class Report:
    start: date
    end: date  # exclusive
    generated_at: datetime
    source: str | None
    headline: Headline
    charts: list[ChartResult]
    tiles: list[Tile] = field(default_factory=list)
    queues: QueueTable = field(default_factory=lambda: QueueTable([], None))
    timezone: str = "UTC"  # the business day's zone (kpi_settings) of every local day
    sl_threshold_s: int = 20
    currency: str | None = None  # CDRHOUSE_CURRENCY: the sign written before money
    account: str | None = None  # the one account reported on; None: every account, summed
    accounts: tuple[str, ...] = ()  # the accounts the warehouse holds
    # The UTC days of the period without a CDR in the warehouse, per account reported on
    # (accounts with every day have none): a failed night's account is absent from the totals.
    missing: dict[str, tuple[date, ...]] = field(default_factory=dict)
    # Per account, the UTC days its local days of the period cover (`missing` is among them).
    utc_days: dict[str, int] = field(default_factory=dict)

    @property
    def previous_start(self) -> date:
        return self.start - (self.end - self.start)

    @property
    def empty(self) -> bool:
        return self.headline.cdrs == 0


def _json_value(value: Any) -> Any:
    if isinstance(value, Decimal):
        return float(value)
    if isinstance(value, datetime):
        return iso_ms(value)
    if isinstance(value, date):
        return value.isoformat()
    return value


def exact(value: Any) -> str:
    """A value as text, a DECIMAL with all its digits (never through a float)."""
    return "" if value is None else format(value, "f") if isinstance(value, Decimal) else str(value)


def _row(names: Sequence[str], values: Sequence[Any]) -> Row:
    """JSON-ready row; each DECIMAL also as exact text in `<name>_exact`."""
    row: Row = {}
    for name, value in zip(names, values, strict=True):
        row[name] = _json_value(value)
        if isinstance(value, Decimal):
            row[f"{name}_exact"] = exact(value)
    return row


def params(start: date, end: date, account: str | None) -> dict[str, Any]:
    """The parameters of every report query (`$account` NULL: every account)."""
    return {"start": start, "end": end, "account": account}


def query(
    con: duckdb.DuckDBPyConnection, sql: str, start: date, end: date, account: str | None = None
) -> list[Row]:
    names, rows = fetch_whole(con, sql, params(start, end, account))
    return [_row(names, values) for values in rows]


def money(value: Decimal, currency: str | None) -> str:
    """`EUR 12,345.68`: thousands separators, 2 decimals (rounded half-even from the exact
    Decimal, never through a float); no sign when no currency is set."""
    text = format(value, ",.2f")
    return f"{currency} {text}" if currency else text


def duration(seconds: float) -> str:
    """`8.4 s` under a minute, `4:05 min` (minutes:seconds) from one minute on."""
    if seconds < 59.95:
        return f"{seconds:.1f} s"
    whole = round(seconds)
    return f"{whole // 60}:{whole % 60:02d} min"


def written(kind: str, value: float | int | Decimal | None, currency: str | None) -> str:
    """A tile's number as the page shows it; `—` when its period has no data."""
    if value is None:
        return "—"
    if kind == "money":
        return money(Decimal(value), currency)
    if kind == "pct":
        return f"{float(value):.1f} %"
    if kind == "seconds":
        return duration(float(value))
    return f"{int(value):,}"
