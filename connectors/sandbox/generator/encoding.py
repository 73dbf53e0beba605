"""Encoding helpers: costs as exact JSON numbers, and a CDR page joined from encoded records."""

from __future__ import annotations

from collections.abc import Sequence

import orjson


def cost_json(cost_e4: int) -> bytes:
    """Ten-thousandths to a JSON number with at most 4 decimals and no float noise."""
    whole, frac = divmod(cost_e4, 10_000)
    text = f"{whole}.{frac:04d}".rstrip("0").rstrip(".")
    return text.encode()


def cost_str(cost_e4: int) -> str:
    """The same amount as a decimal string (ground truth, `Decimal`-ready)."""
    return cost_json(cost_e4).decode()


def encode_page(records: Sequence[bytes], total: int, next_cursor: str | None) -> bytes:
    """`{"cdrs":[...],"metadata":{"total":..,"next_cursor":..}}` by joining encoded records."""
    meta = orjson.dumps({"total": total, "next_cursor": next_cursor})
    return b'{"cdrs":[' + b",".join(records) + b'],"metadata":' + meta + b"}"
