"""The contact-center report: one self-contained HTML file of charts over the reporting views.

`build_report(con, start, end)` runs one query per chart against the `rpt_*` views (the
warehouse's public contract, see docs/warehouse.md) for the UTC days `[start, end)` and returns
a `Report`; `render_html(report)` writes it as a single page that opens offline: the Vega,
Vega-Lite and vega-embed JavaScript is inlined (from vl-convert's bundle) and every chart's
Vega-Lite spec carries its own rows, so nothing is fetched.

Why Vega-Lite through altair: the inlined libraries are ~0.9 MB, against ~4.7 MB for
plotly.js; the charts render as SVG, so a test (or a person) finds every bar and point in the
DOM; and altair validates each spec against the Vega-Lite schema when it is built.

Money stays exact: a cost is drawn from a float but its tooltip and table show the DECIMAL the
view returned, as text (`cost_exact`). A chart whose query finds no rows says so in a sentence
instead of drawing empty axes.
"""

from __future__ import annotations

import html
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from decimal import Decimal
from functools import cache
from pathlib import Path
from typing import Any

import altair as alt
import duckdb

from models.timestamps import iso_ms

TOP_AGENTS = 10
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


# --- values ------------------------------------------------------------------------------------


def _json_value(value: Any) -> Any:
    if isinstance(value, Decimal):
        return float(value)
    if isinstance(value, datetime):
        return iso_ms(value)
    if isinstance(value, date):
        return value.isoformat()
    return value


def _exact(value: Any) -> str:
    return "" if value is None else format(value, "f") if isinstance(value, Decimal) else str(value)


def _row(names: Sequence[str], values: Sequence[Any]) -> Row:
    """JSON-ready row; each DECIMAL also as exact text in `<name>_exact`."""
    row: Row = {}
    for name, value in zip(names, values, strict=True):
        row[name] = _json_value(value)
        if isinstance(value, Decimal):
            row[f"{name}_exact"] = _exact(value)
    return row


def query(con: duckdb.DuckDBPyConnection, sql: str, start: date, end: date) -> list[Row]:
    cursor = con.execute(sql, {"start": start, "end": end})
    names = [d[0] for d in cursor.description or []]
    return [_row(names, values) for values in cursor.fetchall()]


# --- chart builders ----------------------------------------------------------------------------


def _data(rows: list[Row]) -> Drawing:
    """The rows inline in the spec: the report carries its own data."""
    return alt.Data(values=rows)  # type: ignore[no-untyped-call]


DAY = alt.X("date:O", title="day (UTC)", axis=alt.Axis(labelAngle=-45))


def _tip(name: str, title: str, fmt: str | None = None) -> alt.Tooltip:
    return alt.Tooltip(name, title=title, format=fmt) if fmt else alt.Tooltip(name, title=title)


def _volume(rows: list[Row]) -> Drawing:
    return (
        alt.Chart(_data(rows))
        .mark_bar()
        .encode(
            x=DAY,
            y=alt.Y("cdrs:Q", title="CDRs (count)", stack="zero"),
            color=alt.Color("type:N", title="CDR type"),
            tooltip=[_tip("date:O", "day"), _tip("type:N", "type"), _tip("cdrs:Q", "CDRs")],
        )
    )


def _cost(rows: list[Row]) -> Drawing:
    return (
        alt.Chart(_data(rows))
        .mark_bar()
        .encode(
            x=DAY,
            y=alt.Y("cost:Q", title="cost (account currency)", stack="zero"),
            color=alt.Color("type:N", title="CDR type"),
            tooltip=[
                _tip("date:O", "day"),
                _tip("type:N", "type"),
                _tip("cost_exact:N", "cost (exact)"),
                _tip("cdrs:Q", "CDRs"),
            ],
        )
    )


SLA_KINDS = ("first_response", "resolution", "avg_reply")


def _sla_rows(rows: list[Row]) -> list[Row]:
    """One row per (day, SLA kind, met|breached) from the per-day sums."""
    return [
        {"date": r["date"], "sla": kind.replace("_", " "), "status": status, "conversations": n}
        for r in rows
        for kind in SLA_KINDS
        for status in ("met", "breached")
        if (n := int(r[f"{kind}_{status}"] or 0))
    ]


def _sla(rows: list[Row]) -> Drawing:
    return (
        alt.Chart(_data(rows))
        .mark_bar()
        .encode(
            x=DAY,
            xOffset=alt.XOffset("sla:N", title="SLA"),
            y=alt.Y("conversations:Q", title="conversations (count)", stack="zero"),
            color=alt.Color(
                "status:N",
                title="SLA status",
                scale=alt.Scale(domain=["met", "breached"], range=["#4c9a2a", "#d1495b"]),
            ),
            tooltip=[
                _tip("date:O", "day"),
                _tip("sla:N", "SLA"),
                _tip("status:N", "status"),
                _tip("conversations:Q", "conversations"),
            ],
        )
    )


def _queue_rows(rows: list[Row]) -> list[Row]:
    return [
        {**r, "outcome": outcome, "calls": r[f"calls_{outcome}"]}
        for r in rows
        for outcome in ("answered", "abandoned")
    ]


def _queues(rows: list[Row]) -> Drawing:
    queue = alt.Y("queue:N", title="queue", sort="-x")
    calls = (
        alt.Chart()
        .mark_bar()
        .encode(
            y=queue,
            x=alt.X("calls:Q", title="calls (count)", stack="zero"),
            color=alt.Color(
                "outcome:N",
                title="outcome",
                scale=alt.Scale(domain=["answered", "abandoned"], range=["#4c78a8", "#e45756"]),
            ),
            tooltip=[
                _tip("queue:N", "queue"),
                _tip("outcome:N", "outcome"),
                _tip("calls:Q", "calls"),
                _tip("abandonment_pct:Q", "abandoned (%)", ".2f"),
            ],
        )
        .properties(width=380)
    )
    wait = (
        alt.Chart()
        .transform_filter("datum.outcome == 'answered'")
        .mark_bar(color="#f58518")
        .encode(
            y=alt.Y("queue:N", title=None, sort=alt.EncodingSortField("calls_offered", "max")),
            x=alt.X("avg_wait_s:Q", title="average queue wait (seconds)"),
            tooltip=[_tip("queue:N", "queue"), _tip("avg_wait_s:Q", "avg wait (s)", ".1f")],
        )
        .properties(width=260)
    )
    return alt.hconcat(calls, wait, data=_data(rows))


def _agent_rows(rows: list[Row]) -> list[Row]:
    """The top and bottom agents by handled CDRs (all of them when there are few)."""
    ranked = sorted(rows, key=lambda r: (-int(r["handled"]), str(r["agent"])))
    if len(ranked) <= 2 * TOP_AGENTS:
        chosen = [
            (r, "top" if i < (len(ranked) + 1) // 2 else "bottom") for i, r in enumerate(ranked)
        ]
    else:
        chosen = [(r, "top") for r in ranked[:TOP_AGENTS]]
        chosen += [(r, "bottom") for r in ranked[-TOP_AGENTS:]]
    return [{**r, "group": f"{group} {TOP_AGENTS}"} for r, group in chosen]


def _agents(rows: list[Row]) -> Drawing:
    agent = alt.Y(
        "agent:N", title="agent", sort=alt.EncodingSortField("handled", "max", "descending")
    )
    color = alt.Color("group:N", title="agents")
    tips = [
        _tip("agent:N", "agent"),
        _tip("handled:Q", "handled CDRs"),
        _tip("talk_h:Q", "talk (h)", ".2f"),
        _tip("wrapup_h:Q", "wrap-up (h)", ".2f"),
    ]

    def panel(field_: str, title: str, *, first: bool) -> Drawing:
        return (
            alt.Chart()
            .mark_bar()
            .encode(
                y=agent if first else agent.axis(None),
                x=alt.X(f"{field_}:Q", title=title),
                color=color,
                tooltip=tips,
            )
            .properties(width=200)
        )

    return alt.hconcat(
        panel("handled", "handled CDRs (calls + conversations)", first=True),
        panel("talk_h", "talk time (hours)", first=False),
        panel("wrapup_h", "wrap-up time (hours)", first=False),
        data=_data(rows),
    )


def _campaign_rows(rows: list[Row]) -> list[Row]:
    out: list[Row] = []
    for r in rows:
        unanswered = int(r["attempts"]) - int(r["answered"])
        for outcome, n in (("answered", r["answered"]), ("not answered", unanswered)):
            out.append({**r, "outcome": outcome, "calls": n})
    return out


def _campaigns(rows: list[Row]) -> Drawing:
    return (
        alt.Chart(_data(rows))
        .mark_bar()
        .encode(
            y=alt.Y("campaign:N", title="campaign", sort="-x"),
            x=alt.X("calls:Q", title="campaign calls (count)", stack="zero"),
            color=alt.Color(
                "outcome:N",
                title="outcome",
                scale=alt.Scale(domain=["answered", "not answered"], range=["#54a24b", "#bab0ac"]),
            ),
            tooltip=[
                _tip("campaign:N", "campaign"),
                _tip("outcome:N", "outcome"),
                _tip("calls:Q", "calls"),
                _tip("answer_rate_pct:Q", "answer rate (%)", ".2f"),
                _tip("cost_exact:N", "cost (exact)"),
            ],
        )
    )


def _sms_rows(rows: list[Row]) -> list[Row]:
    return [
        {**r, "status": status, "messages": r[status]}
        for r in rows
        for status in ("sent", "failed")
    ]


def _sms(rows: list[Row]) -> Drawing:
    return (
        alt.Chart(_data(rows))
        .mark_bar()
        .encode(
            x=DAY,
            y=alt.Y("messages:Q", title="SMS (count)", stack="zero"),
            color=alt.Color(
                "status:N",
                title="delivery",
                scale=alt.Scale(domain=["sent", "failed"], range=["#4c78a8", "#e45756"]),
            ),
            tooltip=[
                _tip("date:O", "day"),
                _tip("status:N", "delivery"),
                _tip("messages:Q", "SMS"),
                _tip("segments:Q", "segments (day)"),
                _tip("canned:Q", "canned (day)"),
                _tip("free_text:Q", "free text (day)"),
                _tip("cost_exact:N", "cost (day, exact)"),
            ],
        )
    )


def _balance(rows: list[Row]) -> Drawing:
    return (
        alt.Chart(_data(rows))
        .mark_line(point=True)
        .encode(
            x=alt.X("snapshot_date:O", title="snapshot day (UTC)", axis=alt.Axis(labelAngle=-45)),
            y=alt.Y("amount:Q", title="balance (account currency)", scale=alt.Scale(zero=False)),
            tooltip=[
                _tip("snapshot_at:N", "read at (UTC)"),
                _tip("amount_exact:N", "balance (exact)"),
                _tip("change_exact:N", "change since previous (exact)"),
            ],
        )
    )


DAILY = frozenset({"volume", "cost", "sla", "sms", "balance"})
_IN_RANGE = "date >= $start AND date < $end"

CHARTS: tuple[Chart, ...] = (
    Chart(
        "volume",
        "Daily CDR volume by type",
        "rpt_daily_volume",
        f"SELECT date, type, sum(cdrs) AS cdrs FROM rpt_daily_volume WHERE {_IN_RANGE} "
        "GROUP BY date, type ORDER BY date, type",
        "No CDRs in this range.",
        _volume,
    ),
    Chart(
        "cost",
        "Cost per day by CDR type",
        "rpt_cost_daily",
        f"SELECT date, type, sum(cost) AS cost, sum(cdrs) AS cdrs FROM rpt_cost_daily "
        f"WHERE {_IN_RANGE} GROUP BY date, type ORDER BY date, type",
        "No costed CDRs in this range.",
        _cost,
    ),
    Chart(
        "sla",
        "Conversation SLAs met and breached per day (conversations routed to a queue)",
        "rpt_queue_service",
        "SELECT date, "
        + ", ".join(f"sum({k}_{s}) AS {k}_{s}" for k in SLA_KINDS for s in ("met", "breached"))
        + f" FROM rpt_queue_service WHERE {_IN_RANGE} GROUP BY date ORDER BY date",
        "No conversation with an SLA in this range.",
        _sla,
        _sla_rows,
    ),
    Chart(
        "queues",
        "Queue service: calls answered and abandoned, average queue wait",
        "rpt_queue_service",
        "SELECT queue_id, coalesce(any_value(current_name), any_value(name_snapshot), "
        "'queue ' || queue_id) AS queue, sum(calls_offered) AS calls_offered, "
        "sum(calls_answered) AS calls_answered, sum(calls_abandoned) AS calls_abandoned, "
        "round(100.0 * sum(calls_abandoned) / nullif(sum(calls_offered), 0), 2) "
        "AS abandonment_pct, "
        "round(sum(avg_queue_wait_s * calls_offered) / nullif(sum(calls_offered) "
        "FILTER (WHERE avg_queue_wait_s IS NOT NULL), 0), 1) AS avg_wait_s "
        f"FROM rpt_queue_service WHERE {_IN_RANGE} AND calls_offered > 0 "
        "GROUP BY queue_id ORDER BY calls_offered DESC, queue_id",
        "No calls routed to a queue in this range.",
        _queues,
        _queue_rows,
    ),
    Chart(
        "agents",
        f"Agent performance: top and bottom {TOP_AGENTS} agents by handled CDRs",
        "rpt_agent_performance",
        "SELECT user_id, coalesce(any_value(current_name), arg_max(name_snapshot, date), "
        "user_id) AS agent, sum(calls_handled + conversations_handled) AS handled, "
        "sum(calls_handled) AS calls_handled, "
        "sum(conversations_handled) AS conversations_handled, "
        "round(sum(talk_s) / 3600, 2) AS talk_h, round(sum(wrapup_s) / 3600, 2) AS wrapup_h "
        f"FROM rpt_agent_performance WHERE {_IN_RANGE} GROUP BY user_id ORDER BY handled DESC",
        "No agent handled a call or conversation in this range.",
        _agents,
        _agent_rows,
    ),
    Chart(
        "campaigns",
        "Campaign outcomes: answered and unanswered campaign calls",
        "rpt_campaign_outcomes",
        "SELECT campaign_id, coalesce(arg_max(name_snapshot, date), 'campaign ' || campaign_id) "
        "AS campaign, sum(attempts) AS attempts, sum(answered) AS answered, "
        "round(100.0 * sum(answered) / sum(attempts), 2) AS answer_rate_pct, sum(cost) AS cost "
        f"FROM rpt_campaign_outcomes WHERE {_IN_RANGE} GROUP BY campaign_id "
        "ORDER BY attempts DESC, campaign_id",
        "No campaign calls in this range.",
        _campaigns,
        _campaign_rows,
    ),
    Chart(
        "sms",
        "SMS delivery per day: sent and failed",
        "rpt_sms_delivery",
        "SELECT date, sms, sent, failed, segments, canned, free_text, cost "
        f"FROM rpt_sms_delivery WHERE {_IN_RANGE} ORDER BY date",
        "No SMS in this range.",
        _sms,
        _sms_rows,
    ),
    Chart(
        "balance",
        "Account balance over time (snapshots from the first day to the morning after the last)",
        "rpt_balance",
        "SELECT snapshot_date, snapshot_at, amount, change FROM rpt_balance "
        "WHERE snapshot_date >= $start AND snapshot_date <= $end ORDER BY snapshot_date",
        "No balance snapshot in this range (the snapshots job reads it once a day).",
        _balance,
    ),
)

HEADLINE_SQL = (
    f"SELECT (SELECT coalesce(sum(cdrs), 0) FROM rpt_daily_volume WHERE {_IN_RANGE}) AS cdrs, "
    f"(SELECT coalesce(sum(cost), 0) FROM rpt_cost_daily WHERE {_IN_RANGE}) AS cost, "
    "(SELECT coalesce(sum(first_response_met + resolution_met + avg_reply_met), 0) "
    f"FROM rpt_queue_service WHERE {_IN_RANGE}) AS sla_met, "
    "(SELECT coalesce(sum(first_response_breached + resolution_breached + avg_reply_breached), 0)"
    f" FROM rpt_queue_service WHERE {_IN_RANGE}) AS sla_breached"
)


def build_report(
    con: duckdb.DuckDBPyConnection, start: date, end: date, *, now: datetime | None = None
) -> Report:
    """Query every chart's view for the UTC days `[start, end)`."""
    charts = []
    for chart in CHARTS:
        rows = chart.reshape(query(con, chart.sql, start, end))
        spec = _spec(chart, rows) if rows else None
        charts.append(ChartResult(chart, rows, spec))
    cdrs, cost, met, breached = con.execute(
        HEADLINE_SQL, {"start": start, "end": end}
    ).fetchone() or (
        0,
        Decimal(0),
        0,
        0,
    )
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


# --- HTML --------------------------------------------------------------------------------------


@cache
def javascript_bundle() -> str:
    """vega, vega-lite and vega-embed in one script, for the Vega-Lite version altair writes."""
    import vl_convert

    major, minor = alt.SCHEMA_VERSION.lstrip("v").split(".")[:2]
    bundle: str = vl_convert.javascript_bundle(vl_version=f"v{major}_{minor}")  # type: ignore[call-arg]
    return bundle


def _script_json(value: Any) -> str:
    """JSON safe inside a <script> element (no `</script>` or `<!--` can appear)."""
    return json.dumps(value, separators=(",", ":")).replace("<", "\\u003c")


STYLE = """
body { font: 14px/1.45 system-ui, sans-serif; margin: 24px auto; max-width: 1180px;
       color: #222; padding: 0 16px; }
h1 { font-size: 22px; margin-bottom: 4px; } h2 { font-size: 17px; margin: 0 0 6px; }
.meta { color: #555; margin-top: 0; }
.headline { display: flex; gap: 28px; margin: 14px 0 22px; }
.headline div { border-left: 4px solid #4c78a8; padding: 2px 10px; }
.headline b { display: block; font-size: 20px; }
section { border-top: 1px solid #ddd; padding: 16px 0; }
.source { color: #666; font-size: 12px; }
.empty { font-size: 16px; color: #8a4b08; background: #fff7e6; padding: 10px 14px; }
table { border-collapse: collapse; font-size: 12px; margin-top: 8px; }
td, th { border: 1px solid #ddd; padding: 2px 8px; text-align: right; }
th { background: #f4f4f4; }
"""

RENDER = """
window.cdrhouseRendered = 0; window.cdrhouseErrors = [];
const specs = document.querySelectorAll('script[type="application/json"][data-chart]');
Promise.all(Array.from(specs, (el) => {
  const spec = JSON.parse(el.textContent);
  return vegaEmbed('#chart-' + el.dataset.chart, spec, {renderer: 'svg', actions: false})
    .then(() => { window.cdrhouseRendered += 1; })
    .catch((err) => { window.cdrhouseErrors.push(el.dataset.chart + ': ' + err); });
})).then(() => { document.body.dataset.rendered = String(window.cdrhouseRendered); });
"""


def _table(rows: list[Row]) -> str:
    columns = [c for c in rows[0] if not c.endswith("_exact")]
    head = "".join(f"<th>{html.escape(c)}</th>" for c in columns)

    def cell(row: Row, column: str) -> str:
        value = row.get(f"{column}_exact", row.get(column))
        return html.escape("" if value is None else str(value))

    body = "".join(
        "<tr>" + "".join(f"<td>{cell(r, c)}</td>" for c in columns) + "</tr>" for r in rows
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _section(result: ChartResult) -> str:
    chart = result.chart
    source = f'<p class="source">SQL view: <code>{chart.view}</code></p>'
    if result.spec is None:
        return (
            f'<section id="section-{chart.key}"><h2>{html.escape(chart.title)}</h2>'
            f'<p class="empty">{html.escape(chart.empty)}</p>{source}</section>'
        )
    return (
        f'<section id="section-{chart.key}">'
        f'<div class="chart" id="chart-{chart.key}" role="img" '
        f'aria-label="{html.escape(chart.title)}"></div>{source}'
        f'<script type="application/json" data-chart="{chart.key}">'
        f"{_script_json(result.spec)}</script>"
        f"<details><summary>Data ({len(result.rows)} rows, exact decimals)</summary>"
        f"{_table(result.rows)}</details></section>"
    )


def _headline(report: Report) -> str:
    h = report.headline
    sla = f"{h.sla_met_pct:.2f} %" if h.sla_met_pct is not None else "no SLA evaluated"
    items = [
        ("CDRs", f"{h.cdrs:,}"),
        ("cost (exact)", _exact(h.cost)),
        ("SLAs met", sla),
    ]
    return (
        '<div class="headline">'
        + "".join(f"<div>{html.escape(k)}<b>{html.escape(v)}</b></div>" for k, v in items)
        + "</div>"
    )


def render_html(report: Report) -> str:
    last = date.fromordinal(report.end.toordinal() - 1)
    period = f"{report.start.isoformat()} to {last.isoformat()} (UTC days, inclusive)"
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>Contact-center report {report.start} to {last}</title>",
        f"<style>{STYLE}</style>",
    ]
    if not report.empty:
        parts.append(f"<script>{javascript_bundle()}</script>")
    parts += [
        "</head><body>",
        "<h1>Contact-center report</h1>",
        f'<p class="meta">{html.escape(period)}; data source '
        f"{html.escape(report.source or 'unknown')}; generated "
        f"{report.generated_at.astimezone(UTC):%Y-%m-%d %H:%M} UTC by cdrhouse.</p>",
    ]
    if report.empty:
        parts.append(
            f'<p class="empty" id="empty-report">No CDRs between {report.start} and {last} in '
            "this warehouse, so there is nothing to chart. Ingest those days first "
            f"(<code>cdrhouse ingest --start {report.start} --end {report.end}</code>) or pick "
            "another range.</p>"
        )
    else:
        parts.append(_headline(report))
        parts += [_section(result) for result in report.charts]
        parts.append(f"<script>{RENDER}</script>")
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"


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
    tmp = out.with_name(f".{out.name}.tmp")
    tmp.write_text(render_html(report), encoding="utf-8")
    tmp.replace(out)
    return report
