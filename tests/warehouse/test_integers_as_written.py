"""An integer field read by the tolerant path (a page the native pass refused): the value as
written, never one it is not. The text went through f64: past 2**53 it was rounded, and a
fraction was cut (`1.7` landed as 1)."""

from __future__ import annotations

import pytest

from warehouse.decode import decode_page_counted
from warehouse.normalize import normalize_decoded

_SMS = (
    '{"id":"r%d","type":"sms","subtype":"outbound_sms","disposition":"answered","from":null,'
    '"to":null,"user":null,"cost":0.5,"tags":[],"started_at":"2026-11-20T10:00:00.000Z",'
    '"ended_at":"2026-11-20T10:01:00.000Z","data":{"sent":true,"segments_count":%s}}'
)


@pytest.mark.parametrize(
    ("written", "landed"),
    [
        ("9007199254740993", 9007199254740993),
        ("-9007199254740993", -9007199254740993),
        ("1.7", None),
        ("1e2", 100),
        ("3", 3),
    ],
)
def test_an_integer_lands_as_written_or_not_at_all(written: str, landed: int | None) -> None:
    texts = [_SMS % (0, "1"), _SMS % (1, written), _SMS % (2, "1")]
    body = ('{"cdrs":[' + ",".join(texts) + '],"metadata":{"total":3}}').encode()
    decoded = decode_page_counted(body)
    tables = normalize_decoded(decoded.frame)
    sms = tables.cdr_sms.filter(tables.cdr_sms["id"] == "r1")
    assert sms["segments_count"].to_list() == [landed]
    raw = decoded.frame.filter(decoded.frame["id"] == "r1")["record"].to_list()[0]
    assert f'"segments_count":{written}' in raw  # the exact bytes stay in raw_cdrs
