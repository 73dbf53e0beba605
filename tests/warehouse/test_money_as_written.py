"""A cost written as JSON allows but not as the patterns of the exact-money check expected:
whitespace around the colon (a record pretty-printed in a minified page), or a key spelled
with an escape. Each is read exactly or quarantined with the right reason, never rounded."""

from __future__ import annotations

from decimal import Decimal

import pytest

from warehouse.decode import decode_page_counted
from warehouse.normalize import normalize_decoded

_RECORD = (
    '{"id":"r%d","type":"call","subtype":"inbound","disposition":"answered","from":null,'
    '"to":null,"user":null,"cost":0.5,"tags":[],"started_at":"2026-11-20T10:00:00.000Z",'
    '"ended_at":"2026-11-20T10:01:00.000Z","data":{}}'
)
MORE_DECIMALS = "cost has more than 6 decimals (Decimal(18,6) would round it)"


@pytest.mark.parametrize(
    ("written", "cost", "reason"),
    [
        ('"cost": 0.10000000000000001', None, MORE_DECIMALS),
        ('"cost" :\n 0.1234567', None, MORE_DECIMALS),
        ('"cost": "0.50"', None, "cost is a string"),
        ('"c\\u006fst":0.10000000000000001', None, MORE_DECIMALS),
        ('"c\\u006fst":"0.50"', None, "cost is a string"),
        ('"cost" : 1.25', Decimal("1.25"), None),
        ('"c\\u006fst":1.000001', Decimal("1.000001"), None),
    ],
)
def test_a_cost_written_otherwise_is_exact_or_quarantined(
    written: str, cost: Decimal | None, reason: str | None
) -> None:
    """Between two minified records (the page is judged minified on its first and last):
    `"cost": 0.10000000000000001` landed as 0.100000 and `"cost": "0.50"` as 0.5, without a
    word, while the same written `"cost":` was quarantined."""
    texts = [_RECORD % 0, (_RECORD % 1).replace('"cost":0.5', written), _RECORD % 2]
    body = ('{"cdrs":[' + ",".join(texts) + '],"metadata":{"total":3}}').encode()
    tables = normalize_decoded(decode_page_counted(body).frame)
    landed = tables.cdrs.filter(tables.cdrs["id"] == "r1")["cost"].to_list()
    assert landed == ([] if cost is None else [cost])
    assert tables.quarantine["reason"].to_list() == ([] if reason is None else [reason])
    assert tables.cdrs.height == (3 if cost is not None else 2)
