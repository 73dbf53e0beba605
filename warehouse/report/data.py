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
    draw: Callable[[list[Row]], Drawing]
    reshape: Callable[[list[Row]], list[Row]] = field(default=lambda rows: rows)


@dataclass(frozen=True)
class ChartResult:
    chart: Chart
    rows: list[Row]  # what the chart draws (after reshape), JSON-ready
    spec: dict[str, Any] | None  # None when there are no rows


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
class Report:
    start: date
    end: date  # exclusive
    generated_at: datetime
    source: str | None
    headline: Headline
    charts: list[ChartResult]

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


def query(con: duckdb.DuckDBPyConnection, sql: str, start: date, end: date) -> list[Row]:
    cursor = con.execute(sql, {"start": start, "end": end})
    names = [d[0] for d in cursor.description or []]
    return [_row(names, values) for values in cursor.fetchall()]
