"""Issue 23: a page is decoded in one native pass (pyarrow under the field table's schema); a
page that pass refuses goes whole to the tolerant path, and every page ends exactly as the
tolerant path alone makes it: same rows, same values, same quarantine reasons, same `extra`.

The pages are the in-process sandbox's own (over its httpx transport), one record of a page
rewritten where a case needs it. Each case is decoded twice, by `decode_page_counted` (native
first) and with the native pass turned off, and the two results compared table by table."""

from __future__ import annotations

import asyncio
import base64
import datetime as dt
import re
from decimal import Decimal

import httpx
import orjson
import polars as pl
import pytest
from polars.testing import assert_frame_equal

from connectors.sandbox import Sandbox, SandboxConfig
from connectors.sandbox.config import DEFAULT_API_KEY
from connectors.sandbox.generator.encoding import encode_page
from connectors.sandbox.rewriting import CDRS_PATH, page_records
from warehouse.decode import decode_page, decode_page_counted, decode_page_typed
from warehouse.native import decode_native
from warehouse.normalize import NormalizedTables, normalize, normalize_decoded

DAY = dt.date(2026, 11, 5)
RAW = ["id", "type", "started_at_raw", "record"]


@pytest.fixture(scope="module")
def page() -> bytes:
    """One page of 1,000 records as the sandbox serves it."""
    sandbox = Sandbox(SandboxConfig(seed=23, cdrs_per_day=1500, start_date=DAY, days=1))

    async def get() -> bytes:
        async with httpx.AsyncClient(
            transport=sandbox.transport(),
            base_url="http://sandbox",
            headers={"Authorization": f"Bearer {DEFAULT_API_KEY}"},
        ) as client:
            params: dict[str, str | int] = {
                "started_at[gte]": f"{DAY}T00:00:00.000Z",
                "started_at[lt]": f"{DAY + dt.timedelta(days=1)}T00:00:00.000Z",
                "limit": 1000,
            }
            response = await client.get(CDRS_PATH, params=params)
            response.raise_for_status()
            return response.content

    return asyncio.run(get())


def _records(page: bytes) -> list[bytes]:
    return page_records(page)


def _rewrite(page: bytes, index: int, record: bytes) -> bytes:
    records = _records(page)
    records[index] = record
    return encode_page(records, len(records), None)


def _both(pages: list[bytes]) -> tuple[NormalizedTables, NormalizedTables, list[bool]]:
    """(native first, tolerant only, which pages the native pass decoded)."""
    decoded = [decode_page_counted(p) for p in pages]
    tolerant = [decode_page_typed(p, native=False) for p in pages]
    for d, t in zip(decoded, tolerant, strict=True):
        assert_frame_equal(d.frame.select(RAW), t.select(RAW), check_exact=True)
    native = normalize_decoded(pl.concat([d.frame for d in decoded], how="vertical_relaxed"))
    alone = normalize_decoded(pl.concat(tolerant, how="vertical_relaxed"))
    return native, alone, [d.native for d in decoded]


def _assert_same(a: NormalizedTables, b: NormalizedTables) -> None:
    for name, frame in a.tables().items():
        assert_frame_equal(frame, b.tables()[name], check_exact=True)


def test_a_sandbox_page_is_decoded_in_the_native_pass_with_the_tolerant_paths_result(
    page: bytes,
) -> None:
    native, alone, taken = _both([page])
    assert taken == [True]
    _assert_same(native, alone)
    # ... and the lake path's (its raw rows normalized again, record by record).
    _assert_same(native, normalize(decode_page(page)))
    assert native.cdrs.height == 1000
    assert native.quarantine.height == 0
    types = set(native.cdrs["type"].to_list())
    assert types == {"call", "conversation", "sms", "hlr_lookup"}
    costs = dict(zip(native.cdrs["id"], native.cdrs["cost"], strict=True))
    for record in _records(page):
        obj = orjson.loads(record)
        token = re.search(rb'"cost":(-?[0-9][0-9.eE+-]*|null)', record)
        assert token is not None
        want = None if token.group(1) == b"null" else Decimal(token.group(1).decode())
        assert costs[obj["id"]] == want  # the token as written, to the last digit


def test_extra_fields_are_found_on_the_records_text_as_the_tolerant_path_finds_them(
    page: bytes,
) -> None:
    records = _records(page)
    call = next(i for i, r in enumerate(records) if b'"type":"call"' in r)
    obj = orjson.loads(records[call])
    obj["priority"] = {"level": 3, "id": "p"}  # unknown top-level, with a known key name inside
    obj["data"]["carrier"] = "tmo"  # unknown in `data`
    obj["data"]["channel"] = "voice"  # a conversation's field on a call
    odd = _rewrite(page, call, orjson.dumps(obj))
    native, alone, taken = _both([odd])
    assert taken == [True]  # unknown fields do not stop the native pass ...
    _assert_same(native, alone)  # ... and `extra` comes out the same
    row = native.cdrs.filter(pl.col("id") == obj["id"]).row(0, named=True)
    assert orjson.loads(row["extra"]) == {"priority": {"level": 3, "id": "p"}}
    calls = native.cdr_calls.filter(pl.col("id") == obj["id"])
    assert calls["extra"].item() is not None
    assert orjson.loads(calls["extra"].item())["carrier"] == "tmo"


def _sms(records: list[bytes]) -> int:
    return next(i for i, r in enumerate(records) if b'"type":"sms"' in r)


def _with(record: bytes, **changes: object) -> bytes:
    obj = orjson.loads(record)
    obj.update(changes)
    return orjson.dumps(obj)


def _deep(record: bytes) -> bytes:
    return record[:-1] + b',"nest":' + b"[" * 3000 + b"]" * 3000 + b"}"


def _not_utf8(record: bytes) -> bytes:
    return record.replace(b'"subtype":"', b'"subtype":"\xff', 1)


def _cost(record: bytes, token: bytes) -> bytes:
    return re.sub(rb'"cost":(-?[0-9][0-9.eE+-]*|null)', b'"cost":' + token, record, count=1)


def _queue_id(record: bytes, token: bytes) -> bytes:
    out = re.sub(rb'"queue":\{"id":[0-9]+', b'"queue":{"id":' + token, record, count=1)
    assert out != record
    return out


def _escaped_cost_key(record: bytes) -> bytes:
    return _cost(record, b'"1.5e0"').replace(b'"cost":', b'"co\\u0073t":', 1)


# Each refused page: how one record is rewritten, and what its quarantine reason says (None:
# the record lands, as the tolerant path lands it).
REFUSED = {
    "wrong type (user.id a number)": (lambda r: _with(r, user={"id": 42}), None),
    "cost with 7 decimals": (lambda r: _cost(r, b"0.1234567"), "more than 6 decimals"),
    "cost with 13 integer digits": (lambda r: _cost(r, b"1234567890123.5"), "integer digits"),
    "cost as a JSON string": (lambda r: _cost(r, b'"0.50"'), "cost is a string"),
    "cost as a string under an escaped key": (_escaped_cost_key, "cost is a string"),
    "invalid UTF-8": (_not_utf8, "not valid UTF-8"),
    "a record 3,000 deep": (_deep, "nested deeper than 64 levels"),
    "a key twice": (lambda r: r[:-1] + b',"subtype":"again"}', None),
    "a record that is null": (lambda r: b"null", "missing id"),
}


@pytest.mark.parametrize("case", list(REFUSED))
def test_a_page_the_native_pass_refuses_ends_as_the_tolerant_path_makes_it(
    page: bytes, case: str
) -> None:
    rewrite, reason = REFUSED[case]
    records = _records(page)
    i = _sms(records)
    odd = _rewrite(page, i, rewrite(records[i]))
    native, alone, taken = _both([page, odd])
    assert taken == [True, False]
    _assert_same(native, alone)
    quarantine = native.quarantine
    if reason is None:
        assert quarantine.height == 0
        assert native.cdrs.height == 1000
    else:
        assert quarantine.height == 1, quarantine
        assert reason in quarantine["reason"].item()
        # The odd copy (same id, later page) wins over the first page's; a null record has none.
        assert native.cdrs.height == (1000 if case == "a record that is null" else 999)
    if case == "invalid UTF-8":
        text = quarantine["record"].item()
        assert base64.b64decode(text.removeprefix("base64:")) == rewrite(records[i])


@pytest.mark.parametrize(
    ("token", "why"),
    [
        (b"9007199254740993", "past 2**53 the tolerant path's f64 would change it"),
        (b"-9223372036854775808", "its magnitude does not fit int64"),
    ],
)
def test_an_integer_the_tolerant_path_reads_through_f64_is_not_taken_natively(
    page: bytes, token: bytes, why: str
) -> None:
    records = _records(page)
    i = next(j for j, r in enumerate(records) if re.search(rb'"queue":\{"id":[0-9]+', r))
    odd = _rewrite(page, i, _queue_id(records[i], token))
    texts = pl.Series(_records(odd), dtype=pl.Binary).cast(pl.String)
    assert decode_native(odd, texts) is None, why
    native, alone, taken = _both([odd])
    assert taken == [False]
    _assert_same(native, alone)


def test_a_negative_zero_integer_in_a_float_field_is_not_taken_natively(page: bytes) -> None:
    # The tolerant path reads `-0` as the text "0" (0.0); pyarrow reads -0.0: another byte.
    records = _records(page)
    i = next(j for j, r in enumerate(records) if b'"talk":' in r)
    odd_record = re.sub(rb'"talk":[0-9.eE+-]+', b'"talk":-0', records[i], count=1)
    odd = _rewrite(page, i, odd_record)
    native, alone, taken = _both([odd])
    assert taken == [False]
    _assert_same(native, alone)
    written = native.cdrs.filter(pl.col("id") == orjson.loads(odd_record)["id"])
    assert written.height == 1


@pytest.mark.parametrize(
    ("subtype", "data_extra"),
    [
        ("inbound", None),  # every key is a name the field table knows: no key count needed
        (":inbound", {"channel": "voice"}),  # a string starting with `:` makes the count look
        ('in\\":x', {"channel": "voice"}),  # ... and so does a backslash, a quote and `:`
    ],
)
def test_a_page_without_unknown_keys_gets_the_extra_the_key_count_gives_it(
    page: bytes, subtype: str, data_extra: dict[str, str] | None
) -> None:
    # A call holding a conversation's `data.channel`: a name the field table knows (in another
    # type), so the native pass sees no unknown key; the tolerant path's key count finds it
    # only when the record's text fools the count, and the native page must do the same.
    records = _records(page)
    call = next(i for i, r in enumerate(records) if b'"type":"call"' in r)
    obj = orjson.loads(records[call])
    obj["data"]["channel"] = "voice"
    obj["subtype"] = subtype
    native, alone, taken = _both([_rewrite(page, call, orjson.dumps(obj))])
    assert taken == [True]
    _assert_same(native, alone)
    extra = native.cdr_calls.filter(pl.col("id") == obj["id"])["extra"].item()
    assert (None if extra is None else orjson.loads(extra)) == data_extra


def test_an_empty_page_decodes_natively_to_no_row_with_the_tolerant_paths_schema() -> None:
    """The last page of a quiet window holds no record: the native frame (built column by
    column) is empty and shaped exactly as the tolerant path's, so the day's groups concat."""
    body = encode_page([], 0, None)
    native = decode_page_counted(body)
    tolerant = decode_page_counted(body, native=False)
    assert native.native
    assert not tolerant.native
    assert native.frame.height == 0
    assert native.frame.schema == tolerant.frame.schema
    assert_frame_equal(native.frame, tolerant.frame)
