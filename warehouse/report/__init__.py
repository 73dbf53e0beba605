"""The contact-center report: one self-contained HTML file of charts over the reporting views.

`build_report(con, start, end)` runs one query per headline tile (for the days `[start, end)`
and the period of equal length before them), one for the per-queue table and one per chart
against the `rpt_*` views (the warehouse's public contract, see docs/warehouse.md) and returns
a `Report`: business days (`local_date`, CDRHOUSE_TIMEZONE) in the KPI views, UTC days in the
older ones; `render_html(report)` writes it as a single page that opens offline: the Vega,
Vega-Lite and vega-embed JavaScript is inlined (from vl-convert's bundle) and every chart's
Vega-Lite spec carries its own rows, so nothing is fetched. `write_report` does both from a
data directory.

Why Vega-Lite through altair: the inlined libraries are ~0.9 MB, against ~4.7 MB for
plotly.js; the charts render as SVG, so a test (or a person) finds every bar and point in the
DOM; and altair validates each spec against the Vega-Lite schema when it is built.

Money stays exact: a cost is drawn from a float but its tooltip and table show the DECIMAL the
view returned, as text (`cost_exact`); the tiles write it in CDRHOUSE_CURRENCY with 2 decimals
rounded from the Decimal, and list it exactly beside. A chart whose query finds no rows says
so in a sentence instead of drawing empty axes. Above the tiles, the UTC days of the period
without a CDR are listed per account (`Report.missing`): a night whose ingest failed for one
account shows there, not only as lower totals.

Modules: `data.py` (the typed results, rows as JSON-ready values), `charts.py` (each chart's
query and reshape, in page order), `drawings.py` (the altair charts), `page.py` (the HTML) and
`build.py` (query, draw, write).
"""

from warehouse.report.build import build_report, report_accounts, report_target, write_report
from warehouse.report.charts import CHARTS
from warehouse.report.data import Chart, ChartResult, Headline, QueueTable, Report, Tile
from warehouse.report.page import javascript_bundle, missing_lines, render_html

__all__ = [
    "CHARTS",
    "Chart",
    "ChartResult",
    "Headline",
    "QueueTable",
    "Report",
    "Tile",
    "build_report",
    "javascript_bundle",
    "missing_lines",
    "render_html",
    "report_accounts",
    "report_target",
    "write_report",
]
