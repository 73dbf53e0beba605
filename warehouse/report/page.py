"""The report as one HTML page that opens offline.

The Vega, Vega-Lite and vega-embed JavaScript is inlined once (from vl-convert's bundle) and
each chart's Vega-Lite spec sits in a JSON script element beside its `<div>`, rendered as SVG
on load. A chart without rows shows its sentence instead; every chart's rows are also in a
table under it, with the exact decimals. Above the charts: the headline tiles (each with the
previous period's value, and its exact value in `data-value` / `data-previous`), a table of
their exact figures, and the per-queue table.
"""

from __future__ import annotations

import html
import json
from datetime import UTC, date
from functools import cache
from typing import Any

import altair as alt

from warehouse.report.data import ChartResult, QueueTable, Report, Row, duration, exact, written


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
.tiles { display: grid; grid-template-columns: repeat(7, 1fr); gap: 8px; margin: 14px 0 10px; }
.tile { border: 1px solid #ddd; border-top: 4px solid #4c78a8; padding: 6px 8px 8px;
        background: #fafbfc; }
.tile .label { font-weight: 600; color: #333; }
.tile .current { display: block; font-size: 20px; font-weight: 700; margin: 2px 0;
                 white-space: nowrap; }
.tile .previous { display: block; color: #555; font-size: 12px; }
.tile .note { display: block; color: #777; font-size: 11px; margin-top: 4px; line-height: 1.3; }
.tile sup { color: #8a4b08; }
.footnote { color: #555; font-size: 12px; margin: 4px 0 12px; }
table.kpi { font-size: 13px; }
table.kpi td:first-child, table.kpi th:first-child { text-align: left; }
table.kpi tr.total td { font-weight: 700; border-top: 2px solid #999; }
.figure { font-size: 26px; font-weight: 700; margin: 8px 0; }
section { border-top: 1px solid #ddd; padding: 16px 0; }
.source { color: #666; font-size: 12px; }
section > .note { color: #444; font-size: 13px; margin: 4px 0; }
.empty { font-size: 16px; color: #8a4b08; background: #fff7e6; padding: 10px 14px; }
.missing { color: #8a4b08; background: #fff7e6; border-left: 4px solid #e0a030;
           padding: 4px 12px; margin: 10px 0; }
.missing p, .missing ul { margin: 4px 0; }
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
    if chart.note:
        source = f'<p class="note">{html.escape(chart.note)}</p>{source}'
    title = f"<h2>{html.escape(chart.title)}</h2>"
    if result.figure is not None:
        return (
            f'<section id="section-{chart.key}">{title}'
            f'<p class="figure" id="figure-{chart.key}">{html.escape(result.figure)}</p>'
            f"{source}<details><summary>Data ({len(result.rows)} row, exact decimals)"
            f"</summary>{_table(result.rows)}</details></section>"
        )
    if result.spec is None:
        return (
            f'<section id="section-{chart.key}">{title}'
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


def _attr(value: object) -> str:
    """A tile's exact value for `data-*`: all the digits of a DECIMAL, repr of a float."""
    return "" if value is None else exact(value) if not isinstance(value, float) else repr(value)


def _tiles(report: Report) -> str:
    days = (report.end - report.start).days
    items = []
    for t in report.tiles:
        note = t.tile.note.format(sl=report.sl_threshold_s)
        mark = "<sup>*</sup>" if t.tile.key == "aht" else ""
        current = written(t.tile.kind, t.value, report.currency)
        previous = written(t.tile.kind, t.previous, report.currency)
        items.append(
            f'<div class="tile" id="tile-{t.tile.key}" data-tile="{t.tile.key}" '
            f'data-value="{_attr(t.value)}" data-previous="{_attr(t.previous)}" '
            f'title="{html.escape(note)} (view {t.tile.view})">'
            f'<span class="label">{html.escape(t.tile.label)}{mark}</span>'
            f'<b class="current">{html.escape(current)}</b>'
            f'<span class="previous">prev. {days} days: '
            f'<span class="previous-value">{html.escape(previous)}</span></span>'
            f'<span class="note">{html.escape(note)}</span></div>'
        )
    return '<div class="tiles" id="tiles">' + "".join(items) + "</div>"


def _exact_figures(report: Report) -> str:
    """Every tile's value with all its digits (the cost as the exact DECIMAL of the view)."""
    body = "".join(
        f'<tr data-tile="{t.tile.key}"><td>{html.escape(t.tile.label)}</td>'
        f"<td>{html.escape(_attr(t.value))}</td><td>{html.escape(_attr(t.previous))}</td>"
        f"<td><code>{t.tile.view}</code></td></tr>"
        for t in report.tiles
    )
    unit = f" (cost in {report.currency})" if report.currency else ""
    return (
        f'<details id="exact-figures"><summary>Headline figures, exact{html.escape(unit)}'
        '</summary><table class="kpi"><thead><tr><th>figure</th><th>this period</th>'
        f"<th>previous period</th><th>view</th></tr></thead><tbody>{body}</tbody></table>"
        "</details>"
    )


QUEUE_COLUMNS = (
    ("queue", "queue"),
    ("offered", "offered"),
    ("answered", "answered"),
    ("answered_within_sl", "answered in SL"),
    ("abandoned", "abandoned"),
    ("short_abandoned", "short abandoned"),
    ("blocked", "blocked"),
    ("service_level_pct", "service level"),
    ("abandon_rate_pct", "abandon rate"),
    ("asa_s", "ASA"),
    ("aht_s", "AHT*"),
)


def _queue_cell(column: str, value: object) -> str:
    if value is None:
        return "—"
    if column.endswith("_pct"):
        return f"{float(value):.1f} %"  # type: ignore[arg-type]
    if column.endswith("_s"):
        return duration(float(value))  # type: ignore[arg-type]
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def _queue_table(queues: QueueTable, report: Report) -> str:
    title = (
        f"<h2>Queues: inbound calls over the period (service level: answered within "
        f"{report.sl_threshold_s} s)</h2>"
    )
    source = '<p class="source">SQL view: <code>rpt_queue_kpis</code></p>'
    if not queues.rows:
        return (
            f'<section id="section-queues">{title}'
            f'<p class="empty">No inbound calls routed to a queue in this range.</p>'
            f"{source}</section>"
        )
    head = "".join(f"<th>{html.escape(label)}</th>" for _, label in QUEUE_COLUMNS)

    def row(r: Row, attrs: str) -> str:
        cells = "".join(
            f'<td data-column="{c}">{html.escape(_queue_cell(c, r.get(c)))}</td>'
            for c, _ in QUEUE_COLUMNS
        )
        return f"<tr {attrs}>{cells}</tr>"

    body = "".join(row(r, f'data-queue-id="{r["queue_id"]}"') for r in queues.rows)
    if queues.total is not None:
        body += row({**queues.total, "queue": "all queues"}, 'class="total"')
    return (
        f'<section id="section-queues">{title}'
        f'<table class="kpi" id="queue-table"><thead><tr>{head}</tr></thead>'
        f"<tbody>{body}</tbody></table>{source}"
        '<p class="footnote">Rates and averages are computed from the summed counts and '
        "seconds of the period. * AHT is talk + hold time: the API gives no after-call work."
        "</p></section>"
    )


def _runs(days: tuple[date, ...]) -> str:
    """`2026-11-20 to 2026-11-22, 2026-11-25`: consecutive days as one range."""
    runs: list[list[date]] = []
    for day in days:
        if runs and (day - runs[-1][-1]).days == 1:
            runs[-1].append(day)
        else:
            runs.append([day])
    return ", ".join(str(r[0]) if len(r) == 1 else f"{r[0]} to {r[-1]}" for r in runs)


def missing_lines(report: Report) -> list[str]:
    """The days without CDRs as text, one line per account (`cdrhouse report`, the asset's
    log)."""
    named = report.account is not None or len(report.accounts) > 1
    return [
        ("account " + account + ": " if named else "")
        + f"no CDRs for {_runs(days)} ({len(days)} of {_utc_days(report, account)} days, UTC)"
        for account, days in sorted(report.missing.items())
    ]


def _utc_days(report: Report, account: str) -> int:
    """The UTC days the account's local days of the period cover."""
    return report.utc_days.get(account, (report.end - report.start).days)


def _missing_days(report: Report) -> str:
    """Which accounts lack which days: otherwise a failed night only shows as lower totals."""
    named = report.account is not None or len(report.accounts) > 1
    items = "".join(
        f'<li data-account="{html.escape(account)}" data-days="{len(days)}">'
        + (f"account {html.escape(account)}: " if named else "")
        + f"{html.escape(_runs(days))} ({len(days)} of {_utc_days(report, account)} days)</li>"
        for account, days in sorted(report.missing.items())
    )
    return (
        '<div class="missing" id="missing-days"><p>Days without CDRs in this warehouse (UTC '
        "days, those the period's local days cover): every figure below leaves them out. A "
        "night whose ingest failed, or days not ingested yet (<code>cdrhouse ingest "
        "--start DAY --end DAY</code>).</p>"
        f"<ul>{items}</ul></div>"
    )


def render_html(report: Report) -> str:
    last = date.fromordinal(report.end.toordinal() - 1)
    before = date.fromordinal(report.start.toordinal() - 1)
    period = (
        f"{report.start.isoformat()} to {last.isoformat()} ({(report.end - report.start).days} "
        f"days, inclusive; previous period {report.previous_start} to {before}). Calls, "
        f"conversations and agents by business day in {report.timezone}; volume, cost, SMS "
        "and balance by UTC day"
    )
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>Contact-center report {report.start} to {last}</title>",
        f"<style>{STYLE}</style>",
    ]
    if not report.empty:
        parts.append(f"<script>{javascript_bundle()}</script>")
    if report.account is not None:
        period += f"; account {report.account}"
    elif len(report.accounts) > 1:
        period += f"; every account summed ({', '.join(report.accounts)})"
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
        if report.missing:
            parts.append(_missing_days(report))
        parts.append(_tiles(report))
        parts.append(
            '<p class="footnote">* AHT (average handle time) is talk + hold: the API gives no '
            "after-call work. Service level and abandon rate count abandons after "
            "the short-abandon threshold only (docs/metrics.md).</p>"
        )
        parts.append(_exact_figures(report))
        parts.append(_queue_table(report.queues, report))
        parts += [_section(result) for result in report.charts]
        parts.append(f"<script>{RENDER}</script>")
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"
