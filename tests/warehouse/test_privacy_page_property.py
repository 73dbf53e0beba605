"""`Pseudonymizer.page` (the vectorized rewrite of a row group's records) against
`Pseudonymizer.record` (one record by path, the slow, exact way), on generated pages.

The pages mix calls, SMS and conversations whose customers' values are drawn to collide: the
same number on both sides or in several records, a number that is a prefix of another, a name
that is also a number, an agent's or a queue's name, another customer's name, a value with
quotes, backslashes or multi-byte text, numbers in fields the spec does not name, records whose
keys come in another order. Whatever path `page` takes for a record, it must come out as the
by-path rewrite reads it, and no value of a customer may be left in it."""

from __future__ import annotations

import json
from typing import Any, Literal

import polars as pl
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from models.tables import RAW_CDRS as RAW_SPEC
from models.tables import landed
from warehouse.decode import decode_page_counted, decode_page_typed, narrow, with_decoded
from warehouse.normalize import normalize_decoded
from warehouse.privacy import FORGOTTEN, PrivacyPolicy, Pseudonymizer

KEY = b"test-key-for-page-property-00001"
TIMES = {"started_at": "2026-11-20T10:00:00.000Z", "ended_at": "2026-11-20T10:01:00.000Z"}
AGENT = "Ada Agent"
QUEUE = "Sales"

# Digits with the odd ways a server could write them; most draws are plain E.164 digits.
_numbers = st.one_of(
    st.sampled_from(["4915112345678", "491511234567", "4930123456", "12025550143", "447700900123"]),
    st.text(alphabet="0123456789", min_size=1, max_size=15),
    st.text(alphabet="0123456789+ -()", min_size=1, max_size=18),
)
_names = st.one_of(
    st.sampled_from([AGENT, QUEUE, "Eve", "Zoë Müller", "Café ☎", "4915112345678", "e"]),
    st.text(alphabet=st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=12),
    st.text(alphabet='ab "\\/:,{}', min_size=1, max_size=8),
)


def _call(cdr_id: str, **fields: Any) -> dict[str, Any]:
    """A call as the API sends it (from +4915112345678 to +4930123456); `fields` replace or
    add top-level fields (`**{"from": ...}` for the caller)."""
    rec: dict[str, Any] = {
        "id": cdr_id,
        "type": "call",
        "subtype": "inbound",
        "disposition": "answered",
        "from": _phone("4915112345678"),
        "to": _phone("4930123456"),
        "user": None,
        "cost": 0.5,
        "tags": [],
        **TIMES,
        "data": {},
    }
    return rec | fields


def _phone(number: str) -> dict[str, str]:
    return {"type": "phone_number", "phone_number": number}


def _page(records: list[dict[str, Any]]) -> tuple[list[str], bytes]:
    """Each record's compact JSON text, and the page of them."""
    texts = [json.dumps(r, separators=(",", ":"), ensure_ascii=False) for r in records]
    return texts, f'{{"cdrs":[{",".join(texts)}],"metadata":{{"total":{len(texts)}}}}}'.encode()


@st.composite
def _party(draw: st.DrawFn, channel: bool) -> dict[str, Any]:
    if not channel:
        return {"type": "phone_number", "phone_number": draw(_numbers)}
    name = draw(_names)
    return {
        "type": "channel_account",
        "channel_account": {
            "id": "a1",
            "channel": "whatsapp",
            "identifier": draw(st.one_of(_numbers, _names)),
            "data": {"name": name, "username": draw(st.one_of(_names, st.just(name)))},
            "name_snapshot": draw(st.one_of(_names, st.just(name))),
            "deleted": False,
        },
    }


@st.composite
def _record(draw: st.DrawFn, index: int) -> dict[str, Any]:
    kind = draw(st.sampled_from(["call", "sms", "conversation"]))
    channel = kind == "conversation"
    rec: dict[str, Any] = {
        "id": f"r{index}",
        "type": kind,
        "subtype": {"call": "inbound", "sms": "outbound_sms", "conversation": "whatsapp"}[kind],
        "disposition": "answered",
        "from": draw(_party(channel and draw(st.booleans()))),
        "to": draw(_party(channel)),
        "user": {
            "id": "u1",
            "name": AGENT,
            "email": "ada@cc.example",
            "name_snapshot": AGENT,
            "deleted": False,
        },
        "cost": 0.5,
        "tags": draw(st.lists(st.one_of(_names, _numbers), max_size=2)),
        **TIMES,
    }
    data: dict[str, Any] = {}
    if kind == "sms":
        data = {"sent": True, "segments_count": 1, "message": draw(st.one_of(_names, _numbers))}
    elif kind == "call":
        data = {"queue": {"id": "q1", "name": QUEUE}, "durations": {"overall": 60}}
    else:
        data = {"channel": "whatsapp"}
    if draw(st.integers(0, 9)) == 0:  # a field the spec does not name, holding a number
        data["callback"] = draw(st.one_of(_numbers, st.integers(0, 10**15)))
    rec["data"] = data
    if draw(st.booleans()):  # the keys in another order
        rec = dict(reversed(list(rec.items())))
    return rec


def _secrets(rec: dict[str, Any], sms_bodies: str) -> set[str]:
    """The customer's values of a record as sent (the ones a rewrite must replace)."""
    out = set()
    for side in ("from", "to"):
        end = rec[side]
        if "phone_number" in end:
            out.add(end["phone_number"])
        else:
            account = end["channel_account"]
            out |= {account["identifier"], account["name_snapshot"], *account["data"].values()}
    if sms_bodies == "drop" and "message" in rec["data"]:
        out.add(rec["data"]["message"])
    return out


@settings(
    max_examples=120,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(st.data(), st.sampled_from(["drop", "keep"]))
def test_page_rewrites_each_record_as_the_path_does(
    data: st.DataObject, sms: Literal["drop", "keep"]
) -> None:
    size = data.draw(st.integers(1, 8))
    recs = [data.draw(_record(i)) for i in range(size)]
    texts, page = _page(recs)
    policy = PrivacyPolicy("token", KEY, sms_bodies=sms)
    # Some people erased (`cdrhouse privacy forget`): a number, a name.
    made = Pseudonymizer(policy)
    erasable = [made.phone("4915112345678"), made.phone("4930123456"), made.text("Eve")]
    forgotten = frozenset(data.draw(st.lists(st.sampled_from(erasable), max_size=2)))
    fast = Pseudonymizer(policy, forgotten).page(decode_page_counted(page).frame)
    path = Pseudonymizer(policy, forgotten)
    got = fast["record"].to_list()
    flags = fast[FORGOTTEN].to_list()
    for text, rec, out, flag in zip(texts, recs, got, flags, strict=True):
        want, erased = path.record(text)
        assert out is not None
        assert want is not None
        assert json.loads(out) == json.loads(want), (text, out, want)
        assert flag is erased, (text, out, flag)
        # What the customer sent is nowhere in the record as a JSON string value, unless a
        # field the rewrite keeps (the CDR's own, an agent's, a queue's) holds the same text.
        parsed = json.loads(out)
        # (and the countries written beside the tokens: a customer may be named "GB")
        kept = _kept(rec, sms) | {parsed[side].get("phone_country") for side in ("from", "to")}
        values = set(_strings(parsed))
        leaked = (_secrets(rec, sms) - kept) & values
        assert not leaked, (text, out, leaked)
    # The typed values follow the records: each side's number is its record's token.
    r = fast.get_column("r").struct
    for i, out in enumerate(got):
        parsed = json.loads(out)
        for side in ("from", "to"):
            if "phone_number" in parsed[side]:
                typed = r.field(side).struct.field("phone_number")[i]
                assert typed == parsed[side]["phone_number"], (i, side)


def _kept(rec: dict[str, Any], sms: str) -> set[str]:
    """The record's strings outside the customer's fields (its endpoints' values, the SMS
    body unless kept): they stay (a field the spec does not name: unless a number)."""
    rest = {k: v for k, v in rec.items() if k not in ("from", "to", "data")}
    data = {k: v for k, v in rec["data"].items() if k != "message" or sms == "keep"}
    ends = [{"type": rec[side]["type"]} for side in ("from", "to")]
    return {*_strings(rest), *_strings(data), *_strings(ends), "whatsapp", "a1"}


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []


def test_the_property_sees_a_record_left_unrewritten() -> None:
    """The check above can fail: a record as sent is not its by-path rewrite."""
    [text], _ = _page([_call("r0")])
    want, _ = Pseudonymizer(PrivacyPolicy("token", KEY)).record(text)
    assert want is not None
    assert json.loads(text) != json.loads(want)
    assert "4915112345678" in _strings(json.loads(text))
    assert pl.Series([text]).str.contains("4915112345678").all()


def test_a_number_in_a_field_the_spec_names_stays_whichever_path_the_record_takes() -> None:
    """Found by the property above: a tag or a campaign's name that is all digits (a date, a
    ticket number) is not the customer's number. It stayed as sent when `page` rewrote the
    record by splicing, and became a token when the record went by path (a backslash in its
    summary, a field the spec does not name in its page), so the same record landed two ways.
    Now it stays on every path, and a number in a field the spec does not name becomes its
    token on every path."""

    def call(cdr_id: str, summary: str, **extra: Any) -> dict[str, Any]:
        campaign = {"id": 7, "name": "2026112001"}
        data = {"campaign": campaign, "summary": summary, **extra}
        return _call(cdr_id, tags=["20261120", "vip"], data=data)

    kept = ('"tags":["20261120","vip"]', '"name":"2026112001"')
    token = Pseudonymizer(PrivacyPolicy("token", KEY)).phone("4915112345678")
    pages = {
        "spliced": [call("a", "ok")],
        "a backslash": [call("b", 'said "hi"')],
        "an unknown field": [call("c", "ok", ani="4915112345678", legs=[{"n": 4915112345678}])],
    }
    for why, records in pages.items():
        [text], page = _page(records)
        pz = Pseudonymizer(PrivacyPolicy("token", KEY))
        frame = pz.page(decode_page_counted(page).frame)
        [out] = frame["record"].to_list()
        assert json.loads(out) == json.loads(pz.record(text)[0] or ""), why
        for text in kept:
            assert text in out, (why, out)
        assert "4915112345678" not in out, (why, out)
        if why == "an unknown field":
            assert f'"ani":"{token}"' in out, out
            assert f'"legs":[{{"n":"{token}"}}]' in out, out
        tables = pz.tables(normalize_decoded(frame).tables())
        assert tables["cdrs"]["tags"].to_list() == [["20261120", "vip"]], why
        assert tables["cdrs"]["from_phone_number"].to_list() == [token], why
        for name, table in tables.items():  # `extra` included: every value, as JSON text
            assert "4915112345678" not in table.write_ndjson(), (why, name)


def test_a_name_spelled_like_an_erased_number_does_not_flag_its_record() -> None:
    """Found by the property above: `pii_forgotten` was set on every row holding the text of
    an erased value in any of its value columns, so a customer whose username is the digits
    of an erased number was flagged, though its username's token (a name's) is not erased."""
    number = "4915112345678"

    def record(cdr_id: str, to: dict[str, Any]) -> dict[str, Any]:
        chat = {"type": "conversation", "subtype": "whatsapp", "disposition": "archived"}
        data = {"channel": "whatsapp"}
        return _call(cdr_id, **chat, **{"from": _phone("4930123456")}, to=to, cost=0, data=data)

    account = {"id": "a1", "channel": "whatsapp", "identifier": "eve-wa", "deleted": False}
    records = [
        record("erased", _phone(number)),
        record(
            "named",
            {
                "type": "channel_account",
                "channel_account": {
                    **account,
                    "data": {"name": "Eve", "username": number},
                    "name_snapshot": "Eve",
                },
            },
        ),
    ]
    policy = PrivacyPolicy("token", KEY)
    forgotten = frozenset({Pseudonymizer(policy).phone(number)})
    texts, page = _page(records)
    pz = Pseudonymizer(policy, forgotten)
    frame = pz.page(decode_page_counted(page).frame)
    assert frame[FORGOTTEN].to_list() == [True, False]
    assert [pz.record(t)[1] for t in texts] == [True, False]
    assert '"phone_number":null' in frame["record"][0]
    assert pz.text(number) in frame["record"][1]


def _landings(
    records: list[dict[str, Any]], policy: PrivacyPolicy, forgotten: frozenset[str]
) -> tuple[dict[str, pl.DataFrame], dict[str, pl.DataFrame]]:
    """A page's typed tables as they first land, and as normalized again from its rewritten
    records read back from `raw_cdrs` (`renormalize_day`'s way: `with_decoded`, `learn`, the
    erased ids from `pii_forgotten`)."""
    _, page = _page(records)
    pz = Pseudonymizer(policy, forgotten)
    frame = pz.page(decode_page_counted(page).frame)

    def erased(group: pl.DataFrame) -> list[str]:
        return group.filter(pl.col(FORGOTTEN).fill_null(False))["id"].drop_nulls().to_list()

    first = pz.tables(normalize_decoded(frame).tables(), erased(frame))
    group = with_decoded(narrow(frame, landed(RAW_SPEC).column_names))
    again = Pseudonymizer(policy, forgotten, landed=True)
    again.learn(group)
    return first, again.tables(normalize_decoded(group).tables(), erased(group))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data(), st.sampled_from(["drop", "keep"]))
def test_typed_tables_normalized_again_from_the_lake_equal_the_first_landing(
    data: st.DataObject, sms: Literal["drop", "keep"]
) -> None:
    """The README's promise: `raw_cdrs` keeps the records with the values replaced, so a day
    normalized again from the lake (a typed table materialized alone) lands what it did."""
    recs = [data.draw(_record(i)) for i in range(data.draw(st.integers(1, 6)))]
    policy = PrivacyPolicy("token", KEY, sms_bodies=sms)
    made = Pseudonymizer(policy)
    erasable = [made.phone("4915112345678"), made.phone("4930123456"), made.text("Eve")]
    forgotten = frozenset(data.draw(st.lists(st.sampled_from(erasable), max_size=2)))
    first, again = _landings(recs, policy, forgotten)
    assert first.keys() == again.keys()
    for name, table in first.items():
        assert table.sort("id").to_dicts() == again[name].sort("id").to_dicts(), (name, recs)


def test_an_erased_number_keeps_its_country_when_the_day_is_normalized_again() -> None:
    """Found by the property above: an erased number's country and calling code stay beside
    its null token, and `cdrs` had them when the day landed, but lost them when the day was
    normalized again from `raw_cdrs` (they were looked up by token, and the token is gone)."""
    policy = PrivacyPolicy("token", KEY)
    forgotten = frozenset({Pseudonymizer(policy).phone("4915112345678")})
    first, again = _landings([_call("r0", to=_phone("12025550143"))], policy, forgotten)
    columns = ["from_phone_number", "from_phone_country", "from_phone_calling_code"]
    expected = [None, "DE", 49, Pseudonymizer(policy).phone("12025550143"), "US", 1, True]
    for cdrs in (first["cdrs"], again["cdrs"]):
        row = cdrs.select(*columns, *(c.replace("from", "to") for c in columns), FORGOTTEN)
        assert list(row.row(0)) == expected


def test_a_number_where_the_spec_names_an_object_or_a_list_is_still_replaced() -> None:
    """A server that sends `from` as a bare number, or `tags` as one: the typed decode refuses
    the record (it is quarantined), and by path the value is read as one the spec does not
    name, so the number still becomes its token there; a named text value stays."""
    shapes = {"from": "4915112345678", "tags": "4915112345679"}
    _, page = _page([_call("q0", **shapes, data={"summary": "4915112345670"})])
    pz = Pseudonymizer(PrivacyPolicy("token", KEY))
    frame = pz.page(decode_page_counted(page).frame)
    [out] = frame["record"].to_list()
    assert frame["struct_reason"][0] is not None  # quarantined: the typed decode refused it
    got = json.loads(out)
    assert got["from"] == pz.phone("4915112345678")
    assert got["tags"] == pz.phone("4915112345679")
    assert got["to"]["phone_number"] == pz.phone("4930123456")
    assert got["data"]["summary"] == "4915112345670"  # a text the spec names: kept


def test_the_customers_own_number_in_a_tag_is_replaced_in_the_record_and_in_cdrs() -> None:
    """A field the spec names keeps its value, unless that value is, whole, one of the
    record's own customer's numbers (an agent tagged the call with the caller's number): it
    becomes the number's token in `raw_cdrs` and in `cdrs.tags` alike, and a day normalized
    again from the lake reads the same. Another number in a tag stays."""
    caller, other = "4915112345678", "4930999888777"
    record = _call("t0", tags=[caller, other, "vip"], data={"summary": caller})
    _, page = _page([record])
    policy = PrivacyPolicy("token", KEY)
    token = Pseudonymizer(policy).phone(caller)
    pz = Pseudonymizer(policy)
    [out] = pz.page(decode_page_counted(page).frame)["record"].to_list()
    got = json.loads(out)
    assert got["tags"] == [token, other, "vip"]
    assert got["data"]["summary"] == token
    assert caller not in out
    first, again = _landings([record], policy, frozenset())
    for cdrs in (first["cdrs"], again["cdrs"]):
        assert cdrs["tags"].to_list() == [[token, other, "vip"]]
        assert cdrs["from_phone_number"].to_list() == [token]
    assert first["cdr_calls"]["summary"].to_list() == [token]
    for name, table in first.items():
        assert caller not in table.write_ndjson(), name


def test_a_number_nested_hundreds_of_levels_deep_is_replaced_without_stopping_the_day() -> None:
    """A field the spec does not name, nested 900 levels deep around a number (the decoders
    take ~1,000): the by-path rewrite walks it without recursion (it raised RecursionError
    from ~500 levels, failing the whole day), the number becomes its token, and the record
    beside it is rewritten as always."""
    texts, _ = _page([_call("deep", data={"d": "@"}), _call("ok")])
    deep = '{"x":' * 900 + '"4930999888777"' + "}" * 900
    texts[0] = texts[0].replace('"@"', deep)
    page = f'{{"cdrs":[{",".join(texts)}],"metadata":{{"total":2}}}}'.encode()
    pz = Pseudonymizer(PrivacyPolicy("token", KEY))
    out = pz.page(decode_page_typed(page))["record"].to_list()
    assert "4930999888777" not in out[0]
    assert out[0].count(f'"{pz.phone("4930999888777")}"') == 1
    assert out[0].count('{"x":') == 900
    assert json.loads(out[1]) == json.loads(pz.record(texts[1])[0] or "")
