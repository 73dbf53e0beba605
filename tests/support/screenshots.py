"""What a screenshot shows, measured: decoded by the browser itself, no imaging library needed.

A PNG's byte size says little (a blank page compresses to a few KB, noise to megabytes); these
helpers count the colours inside given regions of the image, so a test can require that the
area where a chart or a graph node is drawn is really drawn, not uniform.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass

from playwright.sync_api import Browser, Locator

# Decode the PNG in a blank page, then count the distinct colours of each region.
_MEASURE = """
async ([png, regions]) => {
    const image = new Image();
    image.src = "data:image/png;base64," + png;
    await image.decode();
    const canvas = document.createElement("canvas");
    canvas.width = image.width;
    canvas.height = image.height;
    const context = canvas.getContext("2d");
    context.drawImage(image, 0, 0);
    const colours = regions.map(([x, y, w, h]) => {
        const x0 = Math.max(0, Math.floor(x)), y0 = Math.max(0, Math.floor(y));
        const width = Math.min(image.width - x0, Math.ceil(w));
        const height = Math.min(image.height - y0, Math.ceil(h));
        if (width <= 0 || height <= 0) return 0;
        const data = context.getImageData(x0, y0, width, height).data;
        const seen = new Set();
        for (let i = 0; i < data.length; i += 4) {
            seen.add((data[i] << 16) | (data[i + 1] << 8) | data[i + 2]);
        }
        return seen.size;
    });
    return {width: image.width, height: image.height, colours};
}
"""

Region = tuple[float, float, float, float]  # x, y, width, height in image pixels


@dataclass(frozen=True)
class Measured:
    width: int
    height: int
    colours: list[int]  # distinct colours in each region asked for, in order


def measure(browser: Browser, png: bytes, regions: list[Region]) -> Measured:
    """The image's size and the number of distinct colours in each region."""
    page = browser.new_page()
    try:
        result = page.evaluate(_MEASURE, [base64.b64encode(png).decode(), regions])
    finally:
        page.close()
    return Measured(int(result["width"]), int(result["height"]), list(result["colours"]))


def page_region(locator: Locator) -> Region:
    """Where an element is on a full-page screenshot (its box plus the page's scroll)."""
    x, y, width, height = locator.evaluate(
        """(el) => { const r = el.getBoundingClientRect();
                     return [r.x + window.scrollX, r.y + window.scrollY, r.width, r.height]; }"""
    )
    return (float(x), float(y), float(width), float(height))
