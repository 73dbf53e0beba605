"""The Dagster UI in a real browser: the asset graph, and a backfill launched by clicking; and
against the same `dagster dev`, an automation user's backfill over GraphQL, without a browser.

`dagster dev` (webserver + daemon) runs on loopback against the in-process sandbox, with the
repository's `dagster.yaml` in a temporary `DAGSTER_HOME`.
Debian's Chromium is driven by Playwright (the Makefile's `browser` target installs it;
Playwright downloads nothing). Every wait ends on the page's state, with a generous deadline
(tests/support/browser.py). Selectors
were found by looking at screenshots of Dagster 1.13's UI; the final screenshot is saved under
`.artifacts/` for a person to look at. Elements are found by role, by label, or by text cdrhouse
controls (group, asset and check names), not by Dagster's internal CSS classes.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator

import pytest
from playwright.sync_api import Browser, Locator, Page, ViewportSize, expect

from models.tables import TABLES
from pipelines.checks import RAW_CDRS, ROW_COUNT_CHECK, SHRINK_CHECK
from pipelines.names import CDR_GROUP, REPORT_GROUP, SNAPSHOT_GROUP
from tests.pipelines._dagster_dev import (
    ARTIFACTS_DIR,
    DAYS,
    LAUNCH_BACKFILL,
    DagsterDev,
    run_dagster_dev,
    small_env,
)
from tests.support.browser import (
    CHROMIUM,
    UI_TIMEOUT_MS,
    chromium,
    graph_scale,
    new_context,
    wait_until_graph_still,
)
from tests.support.clock import SessionClock
from tests.support.keys import AGG_ASSETS, CDR_ASSETS, REPORT_ASSETS, SNAPSHOT_ASSETS
from tests.support.screenshots import measure, page_region

# Past the default 300 s: the module's `dagster dev` starts in a test's setup, and a backfill
# waits for its runs (deadlines only: the waits end when the state is reached).
pytestmark = pytest.mark.timeout(1500)

# Tall enough that the whole CDR group and the sidebar tree render (both are virtualized).
VIEWPORT: ViewportSize = {"width": 1800, "height": 1400}

# Every group and its pinned assets (tests/support/keys.py): a rename is never silent.
EXPECTED = {
    CDR_GROUP: CDR_ASSETS | AGG_ASSETS,
    SNAPSHOT_GROUP: SNAPSHOT_ASSETS,
    REPORT_GROUP: REPORT_ASSETS,
}
# The CDR group's nodes whose names the zoomed-out graph draws in full (it elides longer ones,
# e.g. "agg_a…_performance").
DRAWN = frozenset(name for name in EXPECTED[CDR_GROUP] if len(name) <= 17)

# Dagster's asset graph draws names only below this zoom (MINIMAL_SCALE in AssetGraphExplorer).
WHOLE_NODES_SCALE = 0.6

ASSET_GROUPS_QUERY = "{ assetNodes { assetKey { path } groupName } }"


@pytest.fixture(scope="module")
def dagster_dev(
    tmp_path_factory: pytest.TempPathFactory, clock: SessionClock
) -> Iterator[DagsterDev]:
    """One `dagster dev` for the module (starting one costs ~30-50 s on 2 cores), stopped
    after its last test; its partitions start `DAYS` days before the session's today."""
    workdir = tmp_path_factory.mktemp("dagster_dev")
    with run_dagster_dev(workdir, extra_env=small_env(clock.days_ago(DAYS))) as dev:
        yield dev


@pytest.fixture(scope="module")
def browser(dagster_dev: DagsterDev) -> Iterator[Browser]:
    if not CHROMIUM.exists():
        pytest.skip(f"{CHROMIUM} is missing: run `make browser` (installs Debian's chromium)")
    with chromium() as launched:
        yield launched


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    context = new_context(browser, viewport=VIEWPORT)
    page = context.new_page()
    # A fresh DAGSTER_HOME shows a "Join the Dagster community" modal over the page, at a
    # moment of its own choosing; Playwright clicks its "Skip" whenever it gets in the way.
    skip = page.get_by_role("button", name="Skip", exact=True)
    page.add_locator_handler(skip, lambda button: button.click())
    yield page
    context.close()


def open_ui(page: Page, url: str) -> None:
    page.goto(url, wait_until="networkidle")


def lineage_graph(page: Page) -> Locator:
    """The lineage graph: the image on the page that draws cdrhouse's CDR group."""
    return page.get_by_role("img").filter(has_text=CDR_GROUP)


# Each text node under an element, in document order (the graph is SVG: no `innerText`, and
# `textContent` would run "cdrs", "15" and "1" together).
_TEXT_NODES = """el => {
  const walker = document.createTreeWalker(el, NodeFilter.SHOW_TEXT);
  const texts = [];
  while (walker.nextNode()) texts.push(walker.currentNode.nodeValue);
  return texts;
}"""


def texts_of(element: Locator) -> str:
    texts: list[str] = element.evaluate(_TEXT_NODES)
    return " ".join(texts)


def group_counts(text: str) -> dict[str, int]:
    """Each group's asset count as the collapsed group nodes draw it: the group's name, then its
    per-status counts (a number beside each status dot), up to the next group's name."""
    counts: dict[str, int] = {}
    group: str | None = None
    for token in re.findall(r"[A-Za-z_]+|\d+", text):
        if token in EXPECTED:
            group = token
            counts[group] = 0
        elif token.isdigit() and group is not None:
            counts[group] += int(token)
    return counts


def graph_node(page: Page, name: str) -> str:
    """The name of one asset node, as the lineage graph draws it."""
    labels = lineage_graph(page).get_by_text(name, exact=True)
    # The node's label; an unfolded group of the same name ("cdrs") labels its box first.
    expect(labels).to_have_count(2 if name in EXPECTED else 1)
    label = labels.last
    expect(label).to_be_visible()
    return label.text_content() or ""


def node_showing(page: Page, name: str, *texts: str) -> Locator:
    """The innermost element of the graph that holds the node `name` and every one of `texts`
    (empty until the node shows them all)."""
    node = lineage_graph(page).locator("*").filter(has=page.get_by_text(name, exact=True))
    for text in texts:
        node = node.filter(has_text=text)
    return node.last


def sidebar_rows(page: Page, name: str) -> Locator:
    """Rows of the sidebar tree (buttons) named after a group or an asset."""
    return page.get_by_role("button", name=re.compile(rf"(^|\s){re.escape(name)}(\s|$)"))


def show_cdr_group(page: Page, dev: DagsterDev) -> None:
    """The global lineage with only the CDR group expanded, zoomed out to fit the window."""
    open_ui(page, f"{dev.url}/asset-groups?expanded=global%40global%3A{CDR_GROUP}")
    expect(page.get_by_text("Global asset lineage")).to_be_visible()
    # The graph centres itself once drawn (animated): zoom out from where it settles.
    wait_until_graph_still(page)
    # Zoom out one step at a time until every node of the group is drawn: how far depends on
    # the group's size (more aggregates, a wider graph), and too far draws no label at all.
    zoom_out = page.get_by_role("button", name="zoom_out", exact=True)
    for _ in range(8):
        if all(lineage_graph(page).get_by_text(name, exact=True).count() for name in DRAWN):
            return
        scale = graph_scale(page)
        zoom_out.click()
        wait_until_graph_still(page)
        assert graph_scale(page) < scale, "zoom_out did not zoom out"


@pytest.mark.browser
def test_asset_graph_shows_cdr_normalization_and_snapshot_assets(
    dagster_dev: DagsterDev, page: Page
) -> None:
    nodes = dagster_dev.graphql(ASSET_GROUPS_QUERY)["assetNodes"]
    by_group: dict[str, set[str]] = {}
    for node in nodes:
        by_group.setdefault(node["groupName"], set()).add("/".join(node["assetKey"]["path"]))
    for group, names in EXPECTED.items():
        assert names <= by_group.get(group, set()), (group, by_group.get(group))

    open_ui(page, f"{dagster_dev.url}/asset-groups")
    expect(page.get_by_text("Global asset lineage")).to_be_visible()
    # The graph starts with one collapsed node per group, showing how many assets it holds:
    # one count per status (before any run, one "missing" count; after a backfill of this
    # shared `dagster dev`, e.g. 15 materialized and 1 never run). They add up to the group.
    graph = lineage_graph(page)
    expected_counts = {group: len(by_group[group]) for group in EXPECTED}
    deadline = time.monotonic() + UI_TIMEOUT_MS / 1000
    while (shown := group_counts(texts_of(graph.first))) != expected_counts:
        assert time.monotonic() < deadline, (shown, expected_counts)
        page.wait_for_timeout(250)

    # The sidebar tree of the same page lists every asset once its group is unfolded: one more
    # row named after it (the group row of `cdrs` has the name of an asset too).
    all_names = {name for group_names in by_group.values() for name in group_names}
    for group in EXPECTED:  # the folded tree is drawn: count its rows only then
        expect(sidebar_rows(page, group)).to_have_count(1)
    folded = {name: sidebar_rows(page, name).count() for name in all_names}
    for group in EXPECTED:
        row = sidebar_rows(page, group)
        row.click()  # the tree takes the focus; the right arrow unfolds the focused group
        row.press("ArrowRight")
    for name in all_names:
        rows = sidebar_rows(page, name)
        expect(rows).to_have_count(folded[name] + 1)
        expect(rows.last).to_be_visible()

    # And the CDR group, unfolded in the graph, draws raw_cdrs, the normalized tables and the
    # per-day aggregates below them.
    show_cdr_group(page, dagster_dev)
    for name in DRAWN:
        assert name in graph_node(page, name)


@pytest.mark.browser
def test_backfill_launched_from_ui_materializes_and_checks(
    dagster_dev: DagsterDev, browser: Browser, page: Page
) -> None:
    # The partitions as the instance sees them: its clock, not the test's, decides the last.
    partition_keys = dagster_dev.partition_keys(RAW_CDRS)
    backfill_keys = partition_keys[:3]
    # Asset page of raw_cdrs -> "Materialize…" -> the partition selection dialog.
    open_ui(page, f"{dagster_dev.url}/assets/{RAW_CDRS}")
    page.get_by_role("button", name="Materialize…").click()
    selection = page.get_by_placeholder("No matching partitions")
    selection.fill(f"[{backfill_keys[0]}...{backfill_keys[-1]}]")
    selection.press("Enter")
    expect(page.get_by_text("3 partitions", exact=True)).to_be_visible()
    page.get_by_role("button", name="Launch backfill").click()

    toast = page.get_by_text(re.compile(r"Created backfill\s+\w+"))
    expect(toast.first).to_be_visible()
    match = re.search(r"Created backfill\s+(\w+)", toast.first.text_content() or "")
    assert match, "no backfill id in the toast"
    # Leave the live-updating page while the runs work: the 2-core machine needs the CPU.
    page.goto("about:blank")
    status = dagster_dev.wait_for_backfill(match.group(1))
    assert status in {"COMPLETED", "COMPLETED_SUCCESS"}, dagster_dev.log_tail()

    # The GraphQL test may have filled other days of the same instance: count them all.
    materialized = dagster_dev.asset_status(RAW_CDRS).materialized
    assert set(backfill_keys) <= materialized

    # The materializations show on the asset's Partitions tab ...
    open_ui(page, f"{dagster_dev.url}/assets/{RAW_CDRS}?view=partitions")
    expect(page.get_by_text(f"Materialized ({len(materialized)})")).to_be_visible()
    # ... and the blocking row-count check's result on its Checks tab.
    open_ui(page, f"{dagster_dev.url}/assets/{RAW_CDRS}?view=checks")
    check = page.get_by_text(re.compile(rf"{re.escape(ROW_COUNT_CHECK)}.*Succeeded"))
    expect(check.first).to_be_visible()
    expect(page.get_by_text("Passed", exact=True).first).to_be_visible()

    # The lineage graph: raw_cdrs partly filled (3 or 5 of 6 days), its check passed.
    show_cdr_group(page, dagster_dev)
    assert RAW_CDRS in graph_node(page, RAW_CDRS)
    # Zoomed out, the graph draws names only; from Dagster's MINIMAL_SCALE up it draws whole
    # nodes, which then load their status. Zoom in step by step until the scale gets there
    # (the fitted scale depends on the graph's width, which grew with the report group).
    zoom_in = page.get_by_role("button", name="zoom_in", exact=True)
    while (scale := graph_scale(page)) < WHOLE_NODES_SCALE:
        zoom_in.click()
        wait_until_graph_still(page)
        assert graph_scale(page) > scale, "zoom_in did not zoom in"
    node = node_showing(page, RAW_CDRS, "Passed", "filled")
    expect(node).to_be_visible()
    raw = node.text_content() or ""
    assert "2 / 2 Passed" in raw, raw  # its row count and its shrink check
    assert f"{round(100 * len(materialized) / len(partition_keys))}% filled" in raw, raw
    # The element read is the raw_cdrs node alone, not a box around several nodes.
    assert [name for name in DRAWN if node.get_by_text(name, exact=True).count()] == [RAW_CDRS]

    ARTIFACTS_DIR.mkdir(exist_ok=True)
    shot = ARTIFACTS_DIR / "ui_asset_graph_after_backfill.png"
    region = page_region(node)
    page.screenshot(path=str(shot))
    # The saved image is the window, and the node just read is drawn in it: its name, status
    # and fill bar take many colours where a blank or unrendered area takes one.
    image = measure(browser, shot.read_bytes(), [region])
    assert (image.width, image.height) == (VIEWPORT["width"], VIEWPORT["height"])
    x, y, width, height = region
    assert 0 <= x <= x + width <= image.width, region  # wholly on screen
    assert 0 <= y <= y + height <= image.height, region
    assert image.colours[0] >= 8, image.colours


@pytest.mark.browser
def test_cdrs_asset_page_lists_its_described_columns(dagster_dev: DagsterDev, page: Page) -> None:
    # The catalog metadata (dagster/column_schema) shows as the Columns table of the overview.
    open_ui(page, f"{dagster_dev.url}/assets/cdrs")
    expect(page.get_by_text("Columns", exact=True).first).to_be_visible()
    table = page.get_by_role("table").filter(has=page.get_by_text("from_phone_number", exact=True))
    expect(table).to_be_visible()
    # Each row: name, DuckDB type, meaning (rendered as markdown: `from` becomes code).
    spec = {c.name: c for c in TABLES["cdrs"].columns}
    for column, ctype in (
        ("from_phone_number", "VARCHAR"),
        ("cost", "DECIMAL(18, 6)"),
        ("started_at", "TIMESTAMPTZ"),
    ):
        row = table.get_by_role("row").filter(has=page.get_by_text(column, exact=True)).first
        expect(row).to_contain_text(ctype)
        expect(row).to_contain_text(spec[column].description.replace("`", ""))
    # Every column of the spec is listed.
    for column in TABLES["cdrs"].column_names:
        expect(table.get_by_text(column, exact=True).first).to_be_attached()
    # The table's name and location come with it.
    expect(page.get_by_text("warehouse.main.cdrs").first).to_be_visible()

    ARTIFACTS_DIR.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS_DIR / "ui_cdrs_columns.png"), full_page=True)


def test_launch_partition_backfill_over_graphql_completes(dagster_dev: DagsterDev) -> None:
    """No browser: how a script or another scheduler drives cdrhouse. The daemon picks the
    backfill up and runs one run per partition; the test polls until it is done."""
    # The newest two days of raw CDRs, as a nightly catch-up script would ask for them.
    partitions = list(dagster_dev.partition_keys(RAW_CDRS)[-2:])
    result = dagster_dev.graphql(
        LAUNCH_BACKFILL,
        {
            "params": {
                "assetSelection": [{"path": [RAW_CDRS]}],
                "partitionNames": partitions,
                "title": "graphql test backfill",
                "tags": [{"key": "cdrhouse/launched_by", "value": "test_graphql_backfill"}],
            }
        },
    )["launchPartitionBackfill"]
    assert result["__typename"] == "LaunchBackfillSuccess", result

    status = dagster_dev.wait_for_backfill(result["backfillId"])

    assert status in {"COMPLETED", "COMPLETED_SUCCESS"}, dagster_dev.log_tail()
    raw = dagster_dev.asset_status(RAW_CDRS)
    assert raw.materialized >= set(partitions)
    # The blocking checks of raw_cdrs ran with the materialization and passed.
    assert raw.checks == {ROW_COUNT_CHECK: "SUCCEEDED", SHRINK_CHECK: "SUCCEEDED"}
