"""Regenerate the golden normalization fixture: `python -m tests.warehouse.golden.make`.

`pages.parquet` holds API page bodies, exactly as served: one sandbox day with drift (unknown
fields, unknown types), corrupt records and revisions, cut into odd page sizes, plus hand-made
pages (pretty-printed, non-object records, non-string ids, nested unknown fields, a structure
mismatch). `<table>.parquet` holds what normalization made of them.

The expected tables were written by the normalization of commit 09c26c9 (`decode_page` then
`normalize`, the code before issue 13 changed how pages are decoded). Regenerating them with
newer code makes the golden test compare the code with itself: only do it on purpose, when the
tables are meant to change, and say so in the commit.
"""

from __future__ import annotations

import asyncio
from datetime import date
from pathlib import Path

import httpx
import orjson
import polars as pl

from connectors.sandbox import DEFAULT_API_KEY, FaultConfig, Sandbox, SandboxConfig

HERE = Path(__file__).parent
DAY = date(2026, 11, 5)
CDRS_PATH = "/api/v4/reporting/cdrs"


def _rec(**over: object) -> dict[str, object]:
    base: dict[str, object] = {
        "id": "00000000-0000-0000-0000-00000000000a",
        "type": "sms",
        "subtype": "outbound_sms",
        "disposition": "sent",
        "from": {"type": "phone_number", "phone_number": "4930123"},
        "to": {"type": "phone_number", "phone_number": "4930999"},
        "user": None,
        "cost": 0.0123,
        "tags": ["a", "b"],
        "started_at": "2026-11-05T10:00:00.123Z",
        "ended_at": "2026-11-05T10:00:01.000Z",
        "data": {"sent": True, "segments_count": 2, "message": "hi", "canned_message": None},
    }
    base.update(over)
    return base


def _page(records: list[bytes]) -> bytes:
    meta = orjson.dumps({"total": len(records), "next_cursor": None})
    return b'{"cdrs":[' + b",".join(records) + b'],"metadata":' + meta + b"}"


def handmade_pages() -> list[bytes]:
    """Pages no sandbox day produces but the spec allows (or a broken server might send)."""
    dump = orjson.dumps
    pretty = orjson.dumps(
        {"cdrs": [_rec(id="pretty-1"), _rec(id="pretty-2", cost=1.5)], "metadata": {"total": 2}},
        option=orjson.OPT_INDENT_2,
    )
    odd = _page(
        [
            dump(_rec(id="nested-unknown", user={"id": "u1", "avatar": {"url": "x"}})),
            dump(_rec(id="top-unknown", priority=3, data={"sent": False, "carrier": "tmo"})),
            dump(_rec(id=12345)),  # a number where the spec has a UUID string
            dump(_rec(id="str-cost", cost="0.50")),
            dump(_rec(id="bad-ts", started_at="yesterday")),
            dump(_rec(id="shape", data="not an object")),
            dump(_rec(id="fax-1", type="fax", data={"pages": 3})),
            dump(_rec(id="no-type", type=None)),
            dump(_rec(id=None)),
            b"[1,2]",
            b'"just a string"',
            dump(_rec(id="long-cost", cost=0.1000000000000000055511151231257827)),
            dump(_rec(id="tz", started_at="2026-11-05T11:00:00.5+01:00", ended_at=None)),
            dump(_rec(id="pretty-1", cost=2.25)),  # a later revision of an earlier record
        ]
    )
    return [pretty, odd]


async def sandbox_pages() -> list[bytes]:
    faults = FaultConfig(
        drift_extra_field=True,
        drift_unknown_type_rate=0.05,
        corrupt_rate=0.03,
        revise_rate=0.02,
        paths=(CDRS_PATH,),
    )
    config = SandboxConfig(seed=11, cdrs_per_day=3000, start_date=DAY, days=1, faults=faults)
    sandbox = Sandbox(config)
    bodies: list[bytes] = []
    window = {"started_at[gte]": f"{DAY}T00:00:00.000Z", "started_at[lt]": f"{DAY}T23:59:59.999Z"}
    async with httpx.AsyncClient(
        transport=sandbox.transport(),
        base_url="http://sandbox",
        headers={"Authorization": f"Bearer {DEFAULT_API_KEY}"},
    ) as client:
        cursor: str | None = None
        limits = iter([333, 1000, 7, 1, 999] * 100)
        while True:
            params: dict[str, str | int] = {**window, "limit": next(limits)}
            if cursor:
                params["cursor"] = cursor
            response = await client.get(CDRS_PATH, params=params)
            response.raise_for_status()
            bodies.append(response.content)
            cursor = orjson.loads(response.content)["metadata"].get("next_cursor")
            if not cursor:
                return bodies


def main() -> None:
    from warehouse.decode import decode_page
    from warehouse.normalize import normalize

    pages = [*asyncio.run(sandbox_pages()), *handmade_pages()]
    pl.DataFrame({"body": pl.Series(pages, dtype=pl.Binary())}).write_parquet(
        HERE / "pages.parquet", compression="zstd", compression_level=19
    )
    tables = normalize(pl.concat([decode_page(p) for p in pages])).tables()
    for name, frame in tables.items():
        frame.write_parquet(HERE / f"{name}.parquet", compression="zstd")
        print(name, frame.height)


if __name__ == "__main__":
    main()
