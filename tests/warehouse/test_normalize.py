"""decode_page + normalize against generator pages, drift and corrupt records."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import orjson
import polars as pl
import pytest

from connectors.sandbox.generator import Dataset, encode_page
from models.tables import CDRS, TYPE_TABLES
from warehouse.decode import PageDecodeError, decode_page, with_timestamps
from warehouse.normalize import normalize

DAY = dt.date(2026, 11, 5)


@pytest.fixture(scope="module")
def dataset() -> Dataset:
    return Dataset(seed=5, start_date=DAY, days=1, cdrs_per_day=1500)


def pages(records: list[bytes], size: int = 400) -> list[bytes]:
    return [
        encode_page(records[i : i + size], len(records), None) for i in range(0, len(records), size)
    ]


def test_generator_day_normalizes_exactly(dataset: Dataset) -> None:
    day = dataset.day(DAY)
    raw = pl.concat([decode_page(p) for p in pages(day.records)])
    assert raw.height == len(day.records)
    assert raw["id"].to_list() == day.ids
    n = normalize(raw)
    assert n.quarantine.height == 0
    assert n.cdrs.schema == CDRS.polars_schema()
    assert sorted(n.cdrs["id"].to_list()) == sorted(day.ids)
    # Exact cost: the generator keeps costs in ten-thousandths as integers.
    expected = {i: Decimal(c) / 10000 for i, c in zip(day.ids, day.costs, strict=True)}
    got = dict(zip(n.cdrs["id"].to_list(), n.cdrs["cost"].to_list(), strict=True))
    assert got == expected
    assert n.cdrs["cost"].sum() == sum(expected.values())
    # Timestamps are UTC ms and match the generator's epoch milliseconds.
    starts = dict(zip(day.ids, day.started_ms, strict=True))
    row = n.cdrs.row(0, named=True)
    assert int(row["started_at"].timestamp() * 1000) == starts[row["id"]]
    assert n.cdrs["date"].unique().to_list() == [DAY]
    # Per-type tables add up to cdrs, with typed data columns.
    per_type = {k: getattr(n, s.name) for k, s in TYPE_TABLES.items()}
    assert sum(f.height for f in per_type.values()) == n.cdrs.height
    for kind, frame in per_type.items():
        assert frame.schema == TYPE_TABLES[kind].polars_schema()
        assert frame.height == sum(1 for t in day.types if t == kind)
    calls = n.cdr_calls
    assert calls["duration_talk"].null_count() == 0
    assert calls["queue_name_snapshot"].drop_nulls().len() > 0
    assert (
        n.cdr_conversations["sla_first_response_status"]
        .drop_nulls()
        .is_in(["met", "breached"])
        .all()
    )
    segments_min = n.cdr_sms["segments_count"].min()
    assert isinstance(segments_min, int)
    assert segments_min >= 1


def _rec(**over: object) -> dict[str, object]:
    base: dict[str, object] = {
        "id": "00000000-0000-0000-0000-000000000001",
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
        "data": {
            "sent": True,
            "segments_count": 2,
            "message": "hi",
            "canned_message": None,
            "related_call": None,
        },
    }
    base.update(over)
    return base


def page_of(*records: dict) -> bytes:
    return encode_page([orjson.dumps(r) for r in records], len(records), None)


def test_drift_unknown_fields_and_types_are_kept() -> None:
    drift = _rec(
        id="id-drift",
        new_top={"x": 1},
        data={"sent": False, "segments_count": 1, "message": "m", "carrier": "tmo"},
    )
    fax = _rec(id="id-fax", type="fax", data={"pages": 3})
    n = normalize(decode_page(page_of(_rec(), drift, fax)))
    assert n.quarantine.height == 0
    assert n.cdrs.height == 3
    by_id = {r["id"]: r for r in n.cdrs.iter_rows(named=True)}
    assert orjson.loads(by_id["id-drift"]["extra"]) == {"new_top": {"x": 1}}
    assert by_id["id-fax"]["data"] == '{"pages":3}'
    assert by_id["id-fax"]["type"] == "fax"
    assert by_id[_rec()["id"]]["cost"] == Decimal("0.0123")
    assert by_id[_rec()["id"]]["tags"] == ["a", "b"]
    sms = {r["id"]: r for r in n.cdr_sms.iter_rows(named=True)}
    assert orjson.loads(sms["id-drift"]["extra"]) == {"carrier": "tmo"}
    assert sms["id-drift"]["sent"] is False
    assert set(sms) == {_rec()["id"], "id-drift"}  # the fax is in no per-type table


def test_corrupt_records_are_quarantined_with_a_reason_not_dropped() -> None:
    good = _rec(id="good")
    string_cost = _rec(id="s-cost", cost="0.50")
    bad_ts = _rec(id="bad-ts", started_at="yesterday")
    wrong_shape = _rec(id="shape", data="not an object")
    raw = decode_page(page_of(good, string_cost, bad_ts, wrong_shape))
    n = normalize(raw)
    assert n.cdrs["id"].to_list() == ["good"]
    reasons = dict(zip(n.quarantine["id"].to_list(), n.quarantine["reason"].to_list(), strict=True))
    assert set(reasons) == {"s-cost", "bad-ts", "shape"}
    assert "cost is a string" in reasons["s-cost"]
    assert "started_at" in reasons["bad-ts"]
    assert "structure" in reasons["shape"]
    assert n.cdrs.height + n.quarantine.height == raw.height
    assert (
        orjson.loads(n.quarantine.filter(pl.col("id") == "s-cost")["record"][0])["cost"] == "0.50"
    )


def test_dedup_keeps_the_last_revision() -> None:
    first = _rec(id="dup", cost=0.1)
    revised = _rec(id="dup", cost=0.25)
    n = normalize(
        pl.concat([decode_page(page_of(first)), decode_page(page_of(revised, _rec(id="other")))])
    )
    assert n.cdrs.height == 2
    assert n.cdrs.filter(pl.col("id") == "dup")["cost"].to_list() == [Decimal("0.25")]


def test_cost_with_float_noise_is_quarantined_not_rounded() -> None:
    # Issue 22: money is never rounded; before, this cost landed as 0.1.
    body = b'{"cdrs":[' + orjson.dumps(_rec(id="a"))[:-1] + b'}],"metadata":{"total":1}}'
    body = body.replace(b'"cost":0.0123', b'"cost":0.1000000000000000055511151231257827')
    n = normalize(decode_page(body))
    assert n.cdrs.height == 0
    assert n.quarantine["reason"].to_list() == [
        "cost has more than 6 decimals (Decimal(18,6) would round it)"
    ]


def test_a_page_without_cdrs_is_an_error() -> None:
    with pytest.raises(PageDecodeError):
        decode_page(b'{"metadata":{"total":0}}')
    with pytest.raises(PageDecodeError):
        decode_page(b"<html>")
    assert decode_page(b'{"cdrs":[],"metadata":{"total":0}}').height == 0


def test_unknown_keys_of_any_spelling_are_kept_in_extra() -> None:
    # Keys outside [A-Za-z0-9_] and text that looks like a key inside a string value.
    odd = _rec(id="odd-keys", **{"x-trace-id": "t1"})
    quoted = _rec(id="quoted", note='say "cost": 1')
    tricky = _rec(id="in-string", data={"sent": True, "message": 'a "sent": b'})
    n = normalize(decode_page(page_of(odd, quoted, tricky)))
    by_id = {r["id"]: r for r in n.cdrs.iter_rows(named=True)}
    assert orjson.loads(by_id["odd-keys"]["extra"]) == {"x-trace-id": "t1"}
    assert orjson.loads(by_id["quoted"]["extra"]) == {"note": 'say "cost": 1'}
    assert by_id["in-string"]["extra"] is None
    assert n.cdr_sms.filter(pl.col("id") == "in-string")["extra"].to_list() == [None]


@pytest.mark.parametrize("into", ["at", "parsed"])
def test_timestamps_in_a_rarer_form_are_parsed_also_into_the_column_they_are_read_from(
    into: str,
) -> None:
    """The common form first, every form only where needed: that second pass must see the
    texts, also when the parsed column replaces the one holding them."""
    texts = ["2026-11-20T10:00:00.000Z", "2026-11-20T12:00:00.000+02:00", None]
    out = with_timestamps(pl.DataFrame({"at": texts}), {into: pl.col("at")})
    utc = dt.datetime(2026, 11, 20, 10, tzinfo=dt.UTC)
    assert out[into].to_list() == [utc, utc, None]
    assert out.columns == (["at"] if into == "at" else ["at", "parsed"])


def test_a_group_with_no_record_or_no_bad_record_lands_whole_and_a_bad_one_alone() -> None:
    # normalize_decoded skips the ok/bad split when nothing is quarantined: an empty group, a
    # group of good records and a group with one bad record each land every row once.
    from warehouse.decode import decode_page_counted
    from warehouse.normalize import normalize_decoded

    good = b'{"id":"g","type":"call","started_at":"2026-11-26T00:00:00.000Z","cost":0.5}'
    bad = b'{"id":"b","type":"call","started_at":"not a time"}'
    for records, landed, quarantined in (([], 0, []), ([good], 1, []), ([bad, good], 1, ["b"])):
        body = b'{"cdrs":[' + b",".join(records) + b'],"metadata":{"total":%d}}' % len(records)
        tables = normalize_decoded(decode_page_counted(body).frame)
        assert tables.cdrs.height == tables.cdr_calls.height == landed
        assert tables.cdrs["id"].to_list() == (["g"] if landed else [])
        assert tables.quarantine["id"].to_list() == quarantined
        if quarantined:
            assert tables.quarantine["reason"].to_list() == ["started_at missing or unparseable"]
        for name, frame in tables.tables().items():
            assert frame.columns, name  # every table keeps its columns, rows or not


def test_an_unknown_field_nested_hundreds_of_levels_deep_does_not_stop_the_day() -> None:
    """A broken or hostile server nests an unknown field 300 and 900 levels deep (the decoders
    take ~1,000; orjson writes 255): those records land, their `extra` empty, their exact text
    in the raw records, and the record beside them lands as always. Before, the day failed
    with orjson's "Recursion limit reached"."""
    records = [orjson.dumps(_rec())]
    for depth in (300, 900):
        deep = b'{"x":' * depth + b'"4915112345678"' + b"}" * depth
        rec = orjson.dumps(_rec(id=f"id-deep-{depth}", new_top="@", data={"sent": True, "d": "@"}))
        records.append(rec.replace(b'"@"', deep))
    raw = decode_page(encode_page(records, len(records), None))
    assert raw["record"].to_list() == [r.decode() for r in records]
    n = normalize(raw)
    assert n.quarantine.height == 0
    by_id = {r["id"]: r for r in n.cdrs.iter_rows(named=True)}
    assert set(by_id) == {_rec()["id"], "id-deep-300", "id-deep-900"}
    assert by_id["id-deep-300"]["extra"] is None
    assert by_id["id-deep-900"]["extra"] is None
    sms = {r["id"]: r for r in n.cdr_sms.iter_rows(named=True)}
    assert sms["id-deep-900"]["extra"] is None
    assert sms["id-deep-900"]["sent"] is True
