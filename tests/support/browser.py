"""Debian's Chromium driven by Playwright, with waits that end on the page's state.

A loaded 2-core machine can take many seconds to render a page, so no wait here is a fixed
sleep or a short cap: every Playwright wait (actions, navigation, `expect`, whose own default
is 5 s) gets `UI_TIMEOUT_MS` as its deadline and returns as soon as the state is reached.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from playwright.sync_api import Browser, BrowserContext, Page, expect, sync_playwright

CHROMIUM = Path("/usr/bin/chromium")
LAUNCH_ARGS = [
    "--no-sandbox",  # CI and these sessions run as root
    "--headless",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
# The deadline of every wait: generous, since a wait that is met returns at once.
UI_TIMEOUT_MS = 120_000

# Dagster's asset graph draws inside a viewport whose first child carries the zoom as
# `matrix(scale, 0, 0, scale, x, y)`; `data-svg-viewport` is how Dagster itself marks it.
_VIEWPORT_TRANSFORM = "[data-svg-viewport] > div"
# Both a JavaScript and a Python regex: `expect` matches it in the page, `graph_scale` here.
_MATRIX = re.compile(r"matrix\(([-0-9.e]+),")
# True once the graph's transform has stayed the same for `frames` animation frames in a row
# (the state lives on `window` between polls; `token` starts a fresh count for each wait).
_STILL = """
([selector, token, frames]) => {
    const el = document.querySelector(selector);
    if (!el) return false;
    const now = el.style.transform;
    const w = window.__cdrhouseStill;
    if (!w || w.token !== token || w.last !== now) {
        window.__cdrhouseStill = {token, last: now, frames: 0};
        return false;
    }
    w.frames += 1;
    return w.frames >= frames;
}
"""
_TOKENS = itertools.count()


@contextmanager
def chromium() -> Iterator[Browser]:
    """A headless Chromium for the block; `expect` waits up to `UI_TIMEOUT_MS` meanwhile."""
    expect.set_options(timeout=UI_TIMEOUT_MS)
    with sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path=str(CHROMIUM), args=LAUNCH_ARGS, timeout=UI_TIMEOUT_MS
        )
        try:
            yield browser
        finally:
            browser.close()


def new_context(browser: Browser, **options: Any) -> BrowserContext:
    """A browser context whose actions and navigations wait up to `UI_TIMEOUT_MS`."""
    context = browser.new_context(**options)
    context.set_default_timeout(UI_TIMEOUT_MS)
    context.set_default_navigation_timeout(UI_TIMEOUT_MS)
    return context


def graph_scale(page: Page) -> float:
    """The zoom of the Dagster asset graph on the page (waits for the graph to be drawn)."""
    transform = page.locator(_VIEWPORT_TRANSFORM).first
    expect(transform).to_have_attribute("style", _MATRIX)
    match = _MATRIX.search(transform.get_attribute("style") or "")
    assert match, "the asset graph has no zoom transform"
    return float(match[1])


def wait_until_graph_still(page: Page, frames: int = 10) -> None:
    """Wait until the asset graph stops moving: its zoom and position unchanged for `frames`
    animation frames in a row (an autocenter or a zoom animation has ended)."""
    token = next(_TOKENS)
    page.wait_for_function(
        _STILL, arg=[_VIEWPORT_TRANSFORM, token, frames], polling="raf", timeout=UI_TIMEOUT_MS
    )
