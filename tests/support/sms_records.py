"""Small SMS CDRs of one day, decoded as the day step decodes a page: for tests of the checks
and of what the lake holds of a day."""

from __future__ import annotations

import orjson
import polars as pl

from connectors.sandbox.generator import encode_page
from warehouse.decode import decode_page_typed

DAY = "2026-11-05"


def sms_record(i: int, **over: object) -> dict[str, object]:
    """SMS CDR number `i` of `DAY` (its id and second from `i`), with `over`'s fields."""
    rec: dict[str, object] = {
        "id": f"00000000-0000-0000-0000-{i:012d}",
        "type": "sms",
        "subtype": "outbound_sms",
        "disposition": "sent",
        "from": {"type": "phone_number", "phone_number": "4930123"},
        "to": {"type": "phone_number", "phone_number": "4930999"},
        "user": {"id": "u-1", "name": "Ann"},
        "cost": 0.01,
        "tags": [],
        "started_at": f"{DAY}T10:00:{i % 60:02d}.000Z",
        "ended_at": f"{DAY}T10:01:00.000Z",
        "data": {"sent": True, "segments_count": 1, "message": "hi"},
    }
    rec.update(over)
    return rec


def decoded_page(*records: dict[str, object]) -> pl.DataFrame:
    """`records` as one API page, decoded."""
    return decode_page_typed(encode_page([orjson.dumps(r) for r in records], len(records), None))
