"""The report as one HTML page that opens offline.

The Vega, Vega-Lite and vega-embed JavaScript is inlined once (from vl-convert's bundle) and
each chart's Vega-Lite spec sits in a JSON script element beside its `<div>`, rendered as SVG
on load. A chart without rows shows its sentence instead; every chart's rows are also in a
table under it, with the exact decimals.
"""

from __future__ import annotations

import html
import json
from datetime import UTC, date
from functools import cache
from typing import Any

import altair as alt

from warehouse.report.data import ChartResult, Report, Row, exact


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
        ("cost (exact)", exact(h.cost)),
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
