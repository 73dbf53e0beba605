"""`cdrhouse report` and the `contact_center_report` asset on a real 7-day sandbox warehouse.

The warehouse is built by `cdrhouse ingest` (in-process sandbox, 300 CDRs a day); the report
is written by the real command in a subprocess and opened in Debian's Chromium with the network
off. Each headline tile (this period and the previous one) must equal a figure the test asks
of the views with its own SQL, every row of the per-queue table too; every chart must draw one
SVG mark per row of its embedded data, and the numbers behind the heatmap, SLA, volume,
outbound, cost and SMS charts must equal what SQL on the reporting views returns. The
screenshot is saved under `.artifacts/` (docs/report.png is one of 14 `make demo` days).
"""

from __future__ import annotations

import io
import json
import shutil
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, date, datetime, time, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import dagster as dg
import pytest
from playwright.sync_api import Browser, Page, expect

from pipelines.cli import cmd_demo, cmd_ingest
from pipelines.definitions import build_defs
from pipelines.defs.report.assets import REPORT_FILE, REPORTS_DIR
from pipelines.names import REPORT_ASSET
from pipelines.resources import ContactCenterResource, WarehouseResource
from tests.pipelines._dagster_dev import ARTIFACTS_DIR
from tests.support.browser import CHROMIUM, UI_TIMEOUT_MS, chromium, new_context
from tests.support.clock import SessionClock
from tests.support.fresh import heavy, run_main
from tests.support.lake import warehouse
from tests.support.paths import REPO_ROOT
from tests.support.screenshots import measure, page_region

# What the sandbox showed for the ingested range, before and after the ingest.
VISIBLE: dict[Path, tuple[int, int]] = {}
# The report's range: the 7 days before the session's today.
DAYS = 7
# Each chart, the view it reads and an axis title with its unit.
VIEWS = {
    "heatmap": "rpt_interval_kpis",
    "sla": "rpt_conversation_sla",
    "volume": "rpt_daily_volume",
    "outbound": "rpt_outbound_kpis",
    "agents": "rpt_agent_kpis",
    "cost": "rpt_cost_daily",
    "sms": "rpt_sms_delivery",
}
UNITS = {
    "heatmap": "hour of day (local time)",
    "sla": "conversations (count)",
    "volume": "CDRs (count)",
    "outbound": "connect rate (%)",
    "agents": "talk time (hours)",
    "cost": "cost (account currency)",
    "sms": "SMS (count)",
}
CHARTS = tuple(VIEWS)
# How long a page may take to show what a check waits for (a loaded, shared machine).
WAIT = UI_TIMEOUT_MS  # a deadline, not a wait: expect returns once the page shows it
TILES = ("offered", "service_level", "asa", "abandon", "aht", "conversation_sla", "cost")
# Each tile's figures, asked of the views here, apart from the report's code: the sums over
# the days `$first` .. `$last` (inclusive), the percentage or average computed below in Python.
TILE_SQL = {
    "offered": "SELECT sum(offered) FROM rpt_queue_kpis WHERE local_date BETWEEN $first AND $last",
    "service_level": "SELECT sum(answered_within_sl), sum(answered), sum(abandoned) "
    "FROM rpt_queue_kpis WHERE local_date BETWEEN $first AND $last",
    "asa": "SELECT sum(answered_queue_s), sum(answered) FROM rpt_queue_kpis "
    "WHERE local_date BETWEEN $first AND $last",
    "abandon": "SELECT sum(abandoned), sum(answered), sum(abandoned) FROM rpt_queue_kpis "
    "WHERE local_date BETWEEN $first AND $last",
    "aht": "SELECT sum(handle_s), sum(answered) FROM rpt_queue_kpis "
    "WHERE local_date BETWEEN $first AND $last",
    "conversation_sla": "SELECT sum(met), sum(met), sum(breached) FROM rpt_conversation_sla "
    "WHERE local_date BETWEEN $first AND $last",
    "cost": "SELECT sum(cost) FROM rpt_cost_daily WHERE date BETWEEN $first AND $last",
}
TILE_KIND = {
    "offered": "count",
    "service_level": "pct",
    "asa": "seconds",
    "abandon": "pct",
    "aht": "seconds",
    "conversation_sla": "pct",
    "cost": "money",
}


def tile_figure(data_dir: Path, key: str, first: date, last: date) -> Any:
    """A tile's figure over the days `first` .. `last`: None when those days have no data."""
    with warehouse(data_dir) as con:
        row = con.execute(TILE_SQL[key], {"first": first, "last": last}).fetchone()
    assert row is not None
    if len(row) == 1:
        return row[0]
    if len(row) == 2:  # an average: seconds over answered calls
        seconds, calls = row
        return None if not calls else seconds / calls
    part, a, b = row  # a percentage: 100 x part / (a + b)
    return None if a is None or not (a + b) else 100.0 * part / (a + b)


def shown(kind: str, value: Any, currency: str | None) -> str:
    """How the page writes a figure (docs: README "The contact-center report")."""
    if value is None:
        return "—"
    if kind == "count":
        return f"{value:,}"
    if kind == "pct":
        return f"{value:.1f} %"
    if kind == "seconds":
        if value < 59.95:
            return f"{value:.1f} s"
        return f"{round(value) // 60}:{round(value) % 60:02d} min"
    text = f"{Decimal(value):,.2f}"
    return f"{currency} {text}" if currency else text


def marks_expected(key: str, rows: list[dict[str, Any]]) -> int:
    """SVG marks each chart draws for its rows: one bar (or cell) per row, plus the second
    panel of the heatmap (one cell per weekday and hour with a service level), of the outbound
    chart (connect rate: one bar per campaign, i.e. per 2 rows) and of the agents (talk)."""
    n = len(rows)
    if key == "heatmap":
        return n + sum(r["service_level_pct"] is not None for r in rows)
    return {"outbound": n + n // 2, "agents": 2 * n}.get(key, n)


@pytest.fixture(scope="module")
def window(clock: SessionClock) -> tuple[date, date]:
    """[start, end) of the report: the 7 complete days before the session's today."""
    return clock.days_ago(DAYS), clock.today


@pytest.fixture(scope="module")
def warehouse_dir(
    tmp_path_factory: pytest.TempPathFactory, clock: SessionClock, window: tuple[date, date]
) -> Path:
    start, end = window
    data_dir = tmp_path_factory.mktemp("report") / "data"
    env = {
        "CC_API_BASE_URL": "sandbox",
        "CDRHOUSE_DATA_DIR": str(data_dir),
        "CDRHOUSE_START_DATE": start.isoformat(),
        "CDRHOUSE_SANDBOX_CDRS_PER_DAY": "300",
        "CDRHOUSE_PHONE_NUMBERS": "raw",
    }
    # The API serves a CDR once it has ended: just after midnight UTC the last calls of
    # yesterday are still running. The CLI's sandbox (process-wide for this shape) is frozen at
    # the session's clock, so what it shows cannot change during the ingest; count it anyway.
    instants = (datetime.combine(start, time(0), UTC), datetime.combine(end, time(0), UTC))
    sandbox = ContactCenterResource(
        base_url="sandbox", sandbox_start_date=start.isoformat(), sandbox_cdrs_per_day=300
    ).sandbox()
    clock.freeze(sandbox)
    try:
        before = len(sandbox.truth_cdrs(*instants))
        assert cmd_ingest(start, end, env, out=io.StringIO()) == 0
        VISIBLE[data_dir] = (before, len(sandbox.truth_cdrs(*instants)))
    finally:
        sandbox.clock.set(None)
    return data_dir


def run_report(
    data_dir: Path, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """The real `cdrhouse report`, in its own process (`env`: more variables)."""
    env = {"CDRHOUSE_DATA_DIR": str(data_dir), "PATH": "/usr/bin:/bin", **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "pipelines.cli", "report", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO_ROOT,
        timeout=120,
        check=False,
    )


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    if not CHROMIUM.exists():
        pytest.skip(f"{CHROMIUM} is missing: run `make browser` (installs Debian's chromium)")
    with chromium() as launched:
        yield launched


def open_offline(browser: Browser, path: Path) -> tuple[Page, list[str]]:
    """The file in a context with the network off; every request other than the file itself
    is recorded and aborted."""
    context = new_context(browser, viewport={"width": 1280, "height": 1000}, offline=True)
    fetched: list[str] = []

    def refuse(route: Any) -> None:
        if route.request.url != path.as_uri():
            fetched.append(route.request.url)
            route.abort()
        else:
            route.continue_()

    context.route("**/*", refuse)
    page = context.new_page()
    page.goto(path.as_uri())
    return page, fetched


def embedded(page: Page) -> dict[str, list[dict[str, Any]]]:
    """The rows each chart draws, read from its embedded Vega-Lite spec in the page."""
    specs = page.evaluate(
        """() => Object.fromEntries(Array.from(
            document.querySelectorAll('script[type="application/json"][data-chart]'),
            (el) => [el.dataset.chart, JSON.parse(el.textContent)]))"""
    )
    return {key: spec["data"]["values"] for key, spec in specs.items()}


def sql(
    data_dir: Path, query: str, window: tuple[date, date] | None = None
) -> list[tuple[Any, ...]]:
    """Rows of `query`; `$start` and `$end` are the report's window."""
    with warehouse(data_dir) as con:
        params = {"start": window[0], "end": window[1]} if window is not None else None
        return con.execute(query, params).fetchall()


@pytest.mark.parametrize(
    ("argv", "code", "expected"),
    [
        (["report", "--help"], 0, "--out OUT"),
        (["report", "--days", "0"], 2, "cdrhouse report: error: --days 0: give at least 1"),
    ],
    ids=["help", "usage-error"],
)
def test_report_help_and_usage_errors_import_nothing_heavy(
    tmp_path: Path, argv: list[str], code: int, expected: str
) -> None:
    result = run_main(tmp_path, argv, {"CDRHOUSE_DATA_DIR": str(tmp_path / "data")})
    assert result["code"] == code, result
    assert expected in str(result["out"] if code == 0 else result["err"])
    modules: list[str] = result["modules"]  # type: ignore[assignment]
    assert heavy(modules) == []
    assert not [m for m in modules if m.split(".")[0] in ("altair", "vl_convert")]


def test_demo_ends_with_the_path_of_the_report(tmp_path: Path) -> None:
    env = {"CDRHOUSE_DATA_DIR": str(tmp_path), "CDRHOUSE_SANDBOX_CDRS_PER_DAY": "200"}
    out = io.StringIO()
    assert cmd_demo(env, days=2, out=out) == 0
    last = out.getvalue().rstrip().splitlines()[-1]
    path = tmp_path / REPORTS_DIR / REPORT_FILE  # the asset's file, `cdrhouse report`'s default
    assert last == f"contact-center report (open it in a browser, works offline): {path}"
    assert 'data-chart="volume"' in path.read_text()


# The Dagster tests run before the browser starts: Playwright's sync API keeps its own event
# loop in this thread while it runs.


def test_report_asset_writes_the_file_and_headline_numbers(
    warehouse_dir: Path, window: tuple[date, date]
) -> None:
    warehouse = WarehouseResource(data_dir=str(warehouse_dir))
    defs = build_defs(
        contact_center=ContactCenterResource(base_url="sandbox"),
        warehouse=warehouse,
        start_date=window[0],
    )
    asset = defs.resolve_assets_def(REPORT_ASSET)
    with dg.DagsterInstance.ephemeral() as instance:
        result = dg.materialize([asset], instance=instance)
        (event,) = result.get_asset_materialization_events()
    metadata = {k: v.value for k, v in event.materialization.metadata.items()}
    path = warehouse_dir / REPORTS_DIR / REPORT_FILE
    assert metadata["report"] == path.as_uri()
    assert 'data-chart="volume"' in path.read_text()  # drawn by the browser from inline data
    (cdrs, cost, met, breached) = sql(
        warehouse_dir,
        "SELECT (SELECT count(*) FROM cdrs), (SELECT sum(cost) FROM cdrs), "
        "(SELECT sum(met) FROM rpt_conversation_sla), "
        "(SELECT sum(breached) FROM rpt_conversation_sla)",
    )[0]
    # Floats, so that Dagster's metadata plots chart them over materializations.
    assert isinstance(metadata["cdrs"], float)
    assert metadata["cdrs"] == float(cdrs)
    assert isinstance(metadata["cost"], float)
    assert metadata["cost"] == float(cost)
    cost_exact = metadata["cost_exact"]
    assert isinstance(cost_exact, str)
    assert Decimal(cost_exact) == cost
    assert metadata["sla_met_pct"] == round(100.0 * met / (met + breached), 2)
    assert json.dumps(metadata["range"])


def test_report_is_requested_once_yesterday_and_the_balance_landed_after_the_tick(
    tmp_path: Path, window: tuple[date, date]
) -> None:
    start, today = window
    defs = build_defs(
        contact_center=ContactCenterResource(base_url="sandbox"),
        warehouse=WarehouseResource(data_dir=str(tmp_path)),
        start_date=start,
    )
    report = dg.AssetKey(REPORT_ASSET)
    yesterday = (today - timedelta(days=1)).isoformat()
    aggregates = [
        key
        for key in defs.resolve_asset_graph().get(report).parent_keys
        if key.to_user_string().startswith("agg_")
    ]
    clock = iter(
        datetime.combine(today, time(0, 30), UTC) + timedelta(minutes=20 * i) for i in range(9)
    )

    with dg.DagsterInstance.ephemeral() as instance:
        cursor = None

        def tick() -> int:
            nonlocal cursor
            result = dg.evaluate_automation_conditions(
                defs, instance, evaluation_time=next(clock), cursor=cursor
            )
            cursor = result.cursor
            return result.get_num_requested(report)

        def land(key: dg.AssetKey, partition: str | None) -> None:
            instance.report_runless_asset_event(dg.AssetMaterialization(key, partition=partition))

        assert tick() == 0  # 00:30: before the nightly tick
        assert tick() == 0  # 00:50
        assert tick() == 0  # 01:10: the tick passed, nothing landed yet
        for key in aggregates:  # an older day (a lookback or a backfill) is not enough
            land(key, (today - timedelta(days=3)).isoformat())
        land(dg.AssetKey("balance_snapshots"), None)
        assert tick() == 0  # 01:30
        for key in aggregates[:-1]:
            land(key, yesterday)
        assert tick() == 0  # 01:50: one aggregate of yesterday still missing
        land(aggregates[-1], yesterday)
        assert tick() == 1  # 02:10: yesterday and the balance are in: one report
        assert tick() == 0  # 02:30: and only one


def rendered(page: Page) -> None:
    """Every chart's vega-embed promise has settled (the page says so on <body>)."""
    page.wait_for_function("document.body.dataset.rendered !== undefined", timeout=WAIT)
    assert page.evaluate("window.cdrhouseErrors") == []


def check_tiles(
    page: Page, data_dir: Path, start: date, end: date, currency: str | None
) -> dict[str, tuple[Any, Any]]:
    """Each tile's number, this period's and the previous one's, equals the views' figure,
    in its `data-*` (all digits) and as written; returns them."""
    days = end - start
    periods = ((start, end - timedelta(days=1)), (start - days, start - timedelta(days=1)))
    figures: dict[str, tuple[Any, Any]] = {}
    expect(page.locator("#tiles .tile")).to_have_count(len(TILES), timeout=WAIT)
    for key in TILES:
        tile = page.locator(f"#tile-{key}")
        current, previous = (tile_figure(data_dir, key, *period) for period in periods)
        figures[key] = (current, previous)
        for value, attr in ((current, "data-value"), (previous, "data-previous")):
            text = tile.get_attribute(attr)
            assert text is not None, (key, attr)
            if value is None:
                assert text == "", (key, attr)
            elif isinstance(value, Decimal):
                assert Decimal(text) == value, (key, attr)  # exact, every decimal
            else:
                assert float(text) == pytest.approx(float(value), rel=1e-9), (key, attr)
        kind = TILE_KIND[key]
        expect(tile.locator(".current")).to_have_text(shown(kind, current, currency), timeout=WAIT)
        expect(tile.locator(".previous-value")).to_have_text(
            shown(kind, previous, currency), timeout=WAIT
        )
    note = page.locator("#tile-aht")
    assert "no after-call work" in (note.get_attribute("title") or "")
    expect(note.locator(".note")).to_contain_text("no after-call work", timeout=WAIT)
    # The exact figures: the cost with every decimal of the DECIMAL the view returns.
    cost = page.locator('#exact-figures tr[data-tile="cost"] td')
    exact_cost = figures["cost"][0]
    expect(cost.nth(1)).to_have_text(
        "" if exact_cost is None else format(exact_cost, "f"), timeout=WAIT
    )
    return figures


def check_queue_table(page: Page, data_dir: Path, start: date, end: date) -> None:
    """One row per queue with the period's sums and rates of `rpt_queue_kpis`, and a total."""
    expected = sql(
        data_dir,
        "SELECT queue_id, sum(offered), sum(answered), sum(answered_within_sl), sum(abandoned), "
        "sum(short_abandoned), sum(blocked) FROM rpt_queue_kpis "
        "WHERE local_date >= $start AND local_date < $end GROUP BY queue_id",
        (start, end),
    )
    rows = page.locator("#queue-table tbody tr[data-queue-id]")
    expect(rows).to_have_count(len(expected), timeout=WAIT)
    counts = ("offered", "answered", "answered_within_sl", "abandoned", "short_abandoned")
    columns = (*counts, "blocked")
    shown_rows = {}
    for i in range(rows.count()):
        row = rows.nth(i)
        cells = {c: row.locator(f'td[data-column="{c}"]').inner_text() for c in columns}
        cells["service_level_pct"] = row.locator('td[data-column="service_level_pct"]').inner_text()
        shown_rows[int(row.get_attribute("data-queue-id") or -1)] = cells
    for queue_id, offered, answered, within, abandoned, short, blocked in expected:
        cells = shown_rows[queue_id]
        numbers = (offered, answered, within, abandoned, short, blocked)
        assert tuple(int(cells[c].replace(",", "")) for c in columns) == numbers, queue_id
        sl = 100.0 * within / (answered + abandoned) if answered + abandoned else None
        assert cells["service_level_pct"] == shown("pct", sl, None), queue_id
    total = page.locator("#queue-table tr.total td[data-column=offered]")
    expect(total).to_have_text(f"{sum(r[1] for r in expected):,}", timeout=WAIT)


@pytest.mark.browser
def test_report_renders_every_chart_offline_with_the_views_numbers(
    warehouse_dir: Path, window: tuple[date, date], browser: Browser, tmp_path: Path
) -> None:
    start, end = window
    out = tmp_path / "report.html"
    done = run_report(warehouse_dir, "--start", str(start), "--end", str(end), "--out", str(out))
    assert done.returncode == 0, done.stderr
    assert str(out) in done.stdout
    html = out.read_text()
    assert "<script src" not in html  # everything inline
    assert "<link" not in html

    page, fetched = open_offline(browser, out)
    rendered(page)
    assert page.evaluate("window.cdrhouseRendered") == len(CHARTS)
    assert fetched == []

    # The tiles: nothing was ingested before the range, so every previous figure is "—".
    figures = check_tiles(page, warehouse_dir, start, end, None)
    assert all(current is not None for current, _ in figures.values()), figures
    assert all(previous is None for _, previous in figures.values()), figures
    # Conversations without a queue count in the SLA tile (the old headline left them out).
    met, breached = sql(
        warehouse_dir,
        "SELECT sum(met), sum(breached) FROM rpt_conversation_sla WHERE queue_id IS NOT NULL",
    )[0]
    assert figures["conversation_sla"][0] != pytest.approx(100.0 * met / (met + breached))
    check_queue_table(page, warehouse_dir, start, end)

    data = embedded(page)
    assert set(data) == set(CHARTS)
    for key in CHARTS:
        chart = page.locator(f"#chart-{key}")
        rows = data[key]
        assert rows, key
        # One SVG mark per row: bars, cells (legend symbols are not marks).
        marks = chart.locator("svg .role-mark path")
        expect(marks).to_have_count(marks_expected(key, rows), timeout=WAIT)
        # Title, axis titles with units, and the view it came from.
        text = chart.locator("svg").text_content() or ""
        assert f"source: {VIEWS[key]}" in text, key
        assert UNITS[key] in text, key
        section = page.locator(f"#section-{key}")
        assert f"SQL view: {VIEWS[key]}" in (section.text_content() or "")

    # The heatmap: offered calls per local weekday and hour, as rpt_interval_kpis sums them.
    heat = {(r["weekday_no"], r["hour"]): r["offered"] for r in data["heatmap"]}
    expected = sql(
        warehouse_dir,
        "SELECT isodow(interval_start_local), hour(interval_start_local), sum(offered) "
        "FROM rpt_interval_kpis WHERE local_date >= $start AND local_date < $end GROUP BY ALL",
        window,
    )
    assert heat == {(d, h): n for d, h, n in expected}
    assert sum(heat.values()) == figures["offered"][0]

    # The SLA chart has a legend naming each SLA kind and status it draws.
    legend = page.locator("#chart-sla svg .role-legend-label text")
    expect(legend.first).to_be_visible(timeout=WAIT)
    assert set(legend.all_text_contents()) >= {r["series"] for r in data["sla"]}
    sla_rows = sql(
        warehouse_dir,
        "SELECT local_date, sla_kind, sum(met), sum(breached) FROM rpt_conversation_sla "
        "WHERE local_date >= $start AND local_date < $end GROUP BY ALL",
        window,
    )
    assert {(r["date"], r["sla"], r["status"]): r["conversations"] for r in data["sla"]} == {
        (d.isoformat(), kind.replace("_", " "), status): n
        for d, kind, met, breached in sla_rows
        for status, n in (("met", met), ("breached", breached))
        if n
    }

    # Daily volume by type equals the view's sums.
    volume = {(r["date"], r["type"]): r["cdrs"] for r in data["volume"]}
    expected = sql(
        warehouse_dir,
        "SELECT date, type, sum(cdrs) FROM rpt_daily_volume "
        "WHERE date >= $start AND date < $end GROUP BY ALL",
        window,
    )
    assert volume == {(d.isoformat(), t): int(n) for d, t, n in expected}
    cdrs = sql(warehouse_dir, "SELECT count(*) FROM cdrs")[0][0]
    assert sum(volume.values()) == cdrs
    # 7 days x 300, less the calls still running when it was ingested (only near midnight).
    before, after = VISIBLE[warehouse_dir]
    assert before <= cdrs <= after <= 2100

    # Outbound connect rate per campaign (calls without a campaign are their own bar).
    outbound = {r["campaign_id"]: r["connect_rate_pct"] for r in data["outbound"]}
    expected = sql(
        warehouse_dir,
        "SELECT campaign_id, sum(connects), sum(attempts) FROM rpt_outbound_kpis "
        "WHERE local_date >= $start AND local_date < $end GROUP BY campaign_id",
        window,
    )
    assert outbound == pytest.approx({c: 100.0 * n / a for c, n, a in expected})

    # Cost per day and type, exact decimals (the text behind the tooltips).
    cost = {(r["date"], r["type"]): Decimal(r["cost_exact"]) for r in data["cost"]}
    expected = sql(
        warehouse_dir,
        "SELECT date, type, sum(cost) FROM rpt_cost_daily "
        "WHERE date >= $start AND date < $end GROUP BY ALL",
        window,
    )
    assert cost == {(d.isoformat(), t): c for d, t, c in expected}
    assert all(isinstance(c, Decimal) for _, _, c in expected)
    assert sum(cost.values()) == figures["cost"][0]

    # SMS sent and failed per day.
    sms = {(r["date"], r["status"]): r["messages"] for r in data["sms"]}
    expected = sql(
        warehouse_dir,
        "SELECT date, sent, failed FROM rpt_sms_delivery WHERE date >= $start AND date < $end",
        window,
    )
    assert sms == {
        (d.isoformat(), status): n
        for d, sent, failed in expected
        for status, n in (("sent", sent), ("failed", failed))
    }

    # One balance snapshot (taken by the ingest): a figure, not a one-point line.
    ((day, amount),) = sql(
        warehouse_dir,
        "SELECT snapshot_date, amount FROM rpt_balance WHERE snapshot_date BETWEEN $start AND $end",
        window,
    )
    expect(page.locator("#figure-balance")).to_have_text(f"{amount:,.2f} on {day}", timeout=WAIT)
    assert page.locator("#chart-balance").count() == 0

    # A tooltip shows the exact decimal: the tallest cost bar's.
    biggest = max(data["cost"], key=lambda r: r["cost"])
    bars = page.locator("#chart-cost svg .role-mark path")
    labels = [bars.nth(i).get_attribute("aria-label") or "" for i in range(bars.count())]
    assert any(biggest["cost_exact"] in label for label in labels)

    ARTIFACTS_DIR.mkdir(exist_ok=True)
    shot = ARTIFACTS_DIR / "contact_center_report.png"
    page.screenshot(path=str(shot), full_page=True)
    # The saved image is the whole page, and every chart's area in it is drawn: its axes,
    # labels and marks take many colours where an empty or unrendered chart takes one or two.
    width, height = page.evaluate(
        "[document.documentElement.scrollWidth, document.documentElement.scrollHeight]"
    )
    regions = [page_region(page.locator(f"#chart-{key} svg").first) for key in CHARTS]
    image = measure(browser, shot.read_bytes(), regions)
    assert (image.width, image.height) == (width, height)
    for key, region, colours in zip(CHARTS, regions, image.colours, strict=True):
        assert region[2] * region[3] > 10_000, (key, region)  # a real chart, not a speck
        assert colours >= 8, (key, colours)
    page.context.close()


@pytest.mark.browser
def test_report_tiles_show_the_previous_period_in_the_currency(
    warehouse_dir: Path, window: tuple[date, date], browser: Browser, tmp_path: Path
) -> None:
    """The last 3 days of the warehouse, beside the 3 before them, with CDRHOUSE_CURRENCY."""
    start, end = window[1] - timedelta(days=3), window[1]
    out = tmp_path / "report.html"
    done = run_report(
        warehouse_dir,
        *("--start", str(start), "--end", str(end), "--out", str(out)),
        env={"CDRHOUSE_CURRENCY": "EUR"},
    )
    assert done.returncode == 0, done.stderr
    page, fetched = open_offline(browser, out)
    rendered(page)
    figures = check_tiles(page, warehouse_dir, start, end, "EUR")
    assert all(None not in pair for pair in figures.values()), figures
    expect(page.locator("#figure-balance")).to_contain_text("EUR ", timeout=WAIT)
    check_queue_table(page, warehouse_dir, start, end)
    expect(page.locator("#chart-cost svg")).to_contain_text("cost (EUR)", timeout=WAIT)
    assert fetched == []
    page.context.close()


@pytest.mark.browser
def test_report_days_are_business_days_in_the_zone(
    warehouse_dir: Path, window: tuple[date, date], browser: Browser, tmp_path: Path
) -> None:
    """With CDRHOUSE_TIMEZONE=America/New_York (UTC-5 in winter) the tiles and the heatmap
    read local days and hours: the local day before the range holds the first UTC hours of the
    ingest, so the previous period has calls although no UTC day before the range was ingested."""
    data_dir = tmp_path / "data"
    shutil.copytree(warehouse_dir, data_dir)  # the views are rebuilt for the zone in the copy
    start, end = window
    out = tmp_path / "report.html"
    env = {"CDRHOUSE_TIMEZONE": "America/New_York"}
    args = ("--start", str(start), "--end", str(end), "--out", str(out))
    done = run_report(data_dir, *args, env=env)
    assert done.returncode == 0, done.stderr
    assert sql(data_dir, "SELECT timezone FROM kpi_settings") == [("America/New_York",)]
    page, fetched = open_offline(browser, out)
    rendered(page)
    expect(page.locator(".meta")).to_contain_text("business day in America/New_York", timeout=WAIT)
    figures = check_tiles(page, data_dir, start, end, None)
    assert figures["offered"][1], figures  # local days before `start` hold UTC hours of it
    assert figures["offered"][0] != tile_figure(warehouse_dir, "offered", start, end - timedelta(1))
    check_queue_table(page, data_dir, start, end)
    heat = {(r["weekday_no"], r["hour"]): r["offered"] for r in embedded(page)["heatmap"]}
    expected = sql(
        data_dir,
        "SELECT isodow(interval_start_local), hour(interval_start_local), sum(offered) "
        "FROM rpt_interval_kpis WHERE local_date >= $start AND local_date < $end GROUP BY ALL",
        window,
    )
    assert heat == {(d, h): n for d, h, n in expected}
    assert fetched == []
    page.context.close()


@pytest.mark.browser
def test_report_over_an_empty_range_says_so(
    warehouse_dir: Path, browser: Browser, tmp_path: Path
) -> None:
    out = tmp_path / "empty.html"
    done = run_report(
        warehouse_dir, "--start", "2020-01-01", "--end", "2020-01-08", "--out", str(out)
    )
    assert done.returncode == 0, done.stderr
    assert "no CDRs in that range" in done.stdout
    page, fetched = open_offline(browser, out)
    message = page.get_by_text("No CDRs between 2020-01-01 and 2020-01-07")
    expect(message).to_be_visible(timeout=WAIT)
    assert page.locator("svg").count() == 0  # no empty axes
    assert fetched == []
    page.context.close()


@pytest.mark.parametrize(
    "args",
    [
        ["--days", "3", "--start", "2026-11-01", "--end", "2026-11-02"],
        ["--start", "2026-11-01"],
        ["--start", "2026-11-05", "--end", "2026-11-01"],
        ["--start", "yesterday", "--end", "2026-11-01"],
        ["--days", "0"],
    ],
    ids=["days-and-range", "start-alone", "end-before-start", "not-a-date", "zero-days"],
)
def test_bad_report_arguments_exit_2_with_one_line(tmp_path: Path, args: list[str]) -> None:
    done = run_report(tmp_path, *args, "--out", str(tmp_path / "r.html"))
    assert done.returncode == 2
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert not (tmp_path / "r.html").exists()


def test_a_bad_currency_exits_2_naming_it(tmp_path: Path) -> None:
    out = tmp_path / "r.html"
    done = run_report(tmp_path, "--days", "1", "--out", str(out), env={"CDRHOUSE_CURRENCY": "eur"})
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "cdrhouse: error: CDRHOUSE_CURRENCY='eur': not an ISO 4217 currency code "
        "(three capital letters, like EUR or USD); did you mean 'EUR'?"
    ]
    assert not out.exists()
