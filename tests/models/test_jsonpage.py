"""`models.jsonpage` (issue 22): it splits a whole page byte for byte whatever one record holds,
and refuses every body that is not a whole page, so a cut body stays a transient fault."""

from __future__ import annotations

import msgspec
import pytest

from models.jsonpage import PageSyntaxError, split_page

RECORDS = [
    b'{"id":"a","cost":0.5,"data":{"summary":"say \\"hi\\" [x] {y}, ok: \\\\"}}',
    b'{"id":"b","cost":1e400,"tags":[]}',
    b'{"id":"c","cost":NaN,"data":{}}',
    b'{"id":"d","subtype":"in\\xffbound"}'.replace(b"\\xff", b"\xff"),
    b'{"id":"e","nested":' + b"[" * 3000 + b"]" * 3000 + b"}",
    b"17",
    b'"a string record"',
]
BODY = b'{"cdrs":[' + b",".join(RECORDS) + b'],"metadata":{"total":7,"next_cursor":"x"}}'


def test_a_page_with_odd_records_splits_byte_for_byte() -> None:
    page = split_page(BODY, "cdrs")
    assert page.records == RECORDS
    assert page.others == {"metadata": b'{"total":7,"next_cursor":"x"}'}
    # Pretty-printed, the records come back minified, every token as written.
    pretty = b'{\n  "cdrs" : [\n    ' + b" ,\n    ".join(RECORDS) + b'\n  ],\n  "metadata":{}\n}'
    assert split_page(pretty, "cdrs").records == RECORDS


def test_every_cut_of_a_page_is_refused() -> None:
    body = BODY.replace(b"[" * 3000 + b"]" * 3000, b"[" * 40 + b"]" * 40)
    assert len(split_page(body, "cdrs").records) == len(RECORDS)
    for end in range(len(body)):
        with pytest.raises(PageSyntaxError):
            split_page(body[:end], "cdrs")


@pytest.mark.parametrize(
    "body",
    [
        b"<html><body>502 Bad Gateway</body></html>",
        b"",
        b"   ",
        b'{"metadata":{"total":0}}',
        b'{"cdrs":{"id":"a"}}',
        b'{"cdrs":[1 2]}',
        b'{"cdrs":[1,]}',
        b'{"cdrs":[{"id" "a"}]}',
        b'{"cdrs":[{"id":"a"]]}',
        b'{"cdrs":[]} {}',
    ],
)
def test_what_is_not_a_page_is_refused(body: bytes) -> None:
    with pytest.raises(PageSyntaxError):
        split_page(body, "cdrs")


def test_a_plain_page_splits_as_msgspec_does() -> None:
    plain = [r for r in RECORDS if b"NaN" not in r and b"[[[" not in r and b"\xff" not in r]
    body = b'{"links":{"next":null},"cdrs":[' + b",".join(plain) + b"]}"

    class Page(msgspec.Struct):
        cdrs: list[msgspec.Raw]

    assert split_page(body, "cdrs").records == [
        bytes(r) for r in msgspec.json.decode(body, type=Page).cdrs
    ]
