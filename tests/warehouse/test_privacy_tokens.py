"""Tokens of phone numbers: keyed, stable across the ways a number is written (issue 26).

The expected token is computed here from the standard library (HMAC-SHA256 of the E.164 digits
without `+`), not from cdrhouse's code."""

from __future__ import annotations

import hashlib
import hmac

import phonenumbers
import polars as pl
from hypothesis import given, settings
from hypothesis import strategies as st

from warehouse.privacy import PrivacyPolicy, Pseudonymizer, country, e164_digits, phone_token

KEY = b"test-key-for-privacy-tokens-0001"

# Real numbers phonenumbers calls valid, one per region, as (calling code, national digits):
# the example number of each region's mobile (or fixed) metadata.
_EXAMPLES = []
for _region in sorted(phonenumbers.SUPPORTED_REGIONS):
    for _kind in (phonenumbers.PhoneNumberType.MOBILE, phonenumbers.PhoneNumberType.FIXED_LINE):
        _example = phonenumbers.example_number_for_type(_region, _kind)
        if _example is not None:
            _EXAMPLES.append(
                (_region, _example.country_code, phonenumbers.national_significant_number(_example))
            )
            break


def expected_token(key: bytes, cc: int, national: str) -> str:
    return hmac.new(key, f"{cc}{national}".encode(), hashlib.sha256).hexdigest()


@settings(max_examples=300, deadline=None)
@given(
    st.sampled_from(_EXAMPLES),
    st.sampled_from(
        ["+{cc}{n}", "00{cc}{n}", "{cc}{n}", "+{cc} {n}", "00 {cc}-{n}", "+({cc}) {n}"]
    ),
    st.binary(min_size=16, max_size=64),
)
def test_one_number_written_any_way_has_one_token(
    example: tuple[str, int, str], form: str, key: bytes
) -> None:
    region, cc, national = example
    written = form.format(cc=cc, n=national)
    token = phone_token(key, written)
    assert token == expected_token(key, cc, national), written
    assert token == phone_token(key, f"+{cc}{national}") == phone_token(key, f"00{cc}{national}")
    # The country comes with it (a shared calling code is resolved by the number's area).
    place, code = country(e164_digits(written))
    assert code == cc
    if len(phonenumbers.COUNTRY_CODE_TO_REGION_CODE[cc]) == 1:
        assert place == region


@settings(max_examples=120, deadline=None)
@given(
    st.sampled_from(_EXAMPLES),
    st.sampled_from(["{cc}{n}", "+{cc}{n}", "00{cc}{n}", "+{cc} {n}", "{cc}0{n}"]),
    st.binary(min_size=16, max_size=100),
)
def test_a_row_group_gets_the_same_tokens_and_countries_as_one_number(
    example: tuple[str, int, str], form: str, key: bytes
) -> None:
    """`Pseudonymizer.page` (the day step's path: the usual number read without phonenumbers,
    the key's pads hashed once) agrees with `phone_token` and `country`, for any written form,
    a trunk 0 after the code included, and keys longer than HMAC's block."""
    from warehouse.decode import decode_page_counted
    from warehouse.normalize import normalize_decoded

    _, cc, national = example
    written = form.format(cc=cc, n=national)
    call = (
        '{"id":"c1","type":"call","subtype":"inbound","disposition":"answered",'
        f'"from":{{"type":"phone_number","phone_number":"{written}"}},'
        '"to":{"type":"phone_number","phone_number":"4930123456"},"user":null,"cost":0,'
        '"tags":[],"started_at":"2026-11-20T10:00:00.000Z",'
        '"ended_at":"2026-11-20T10:01:00.000Z","data":{"durations":{"overall":60}}}'
    )
    page = f'{{"cdrs":[{call}],"metadata":{{"total":1}}}}'.encode()
    pz = Pseudonymizer(PrivacyPolicy("token", key))
    frame = pz.page(decode_page_counted(page).frame)
    token = hmac.new(key, e164_digits(written).encode(), hashlib.sha256).hexdigest()
    assert token == phone_token(key, written)
    place, code = country(e164_digits(written))
    record = frame["record"][0]
    assert written not in record
    assert f'"phone_number":"{token}","phone_country":' in record
    cdrs = pz.tables(normalize_decoded(frame).tables())["cdrs"]
    assert cdrs["from_phone_number"].to_list() == [token]
    assert cdrs["from_phone_country"].to_list() == [place]
    assert cdrs["from_phone_calling_code"].to_list() == [code]


def test_a_token_depends_on_the_key_and_is_lowercase_hex() -> None:
    one = phone_token(KEY, "+4915112345678")
    assert one == expected_token(KEY, 49, "15112345678")
    assert one != phone_token(KEY + b"x", "+4915112345678")
    assert len(one) == 64
    assert one == one.lower()
    assert int(one, 16) >= 0
    # A trunk 0 written after the calling code is not part of the number (phonenumbers).
    assert phone_token(KEY, "+49 (0)151 12345678") == one


def test_records_lose_numbers_names_and_sms_bodies_and_keep_their_other_bytes() -> None:
    """A page's records through `Pseudonymizer.page`: the typed decode runs first, as in the
    day step; every value that identifies the customer is replaced, nothing else changes."""
    from warehouse.decode import decode_page_counted

    call = (
        '{"id":"c1","type":"call","subtype":"outbound","disposition":"answered",'
        '"from":{"type":"phone_number","phone_number":"4930123456"},'
        '"to":{"type":"phone_number","phone_number":"4915199988877"},'
        '"user":{"id":"u1","name":"Ada Agent","email":"ada@cc.example","name_snapshot":"Ada",'
        '"deleted":false},"cost":0.0120,"tags":[],"started_at":"2026-11-20T10:00:00.000Z",'
        '"ended_at":"2026-11-20T10:01:00.000Z","data":{"destination_country":"DE",'
        '"callback":"+4915199988877","durations":{"overall":60}}}'
    )
    chat = (
        '{"id":"c2","type":"conversation","subtype":"whatsapp","disposition":"archived",'
        '"from":{"type":"channel_account","channel_account":{"id":"a1","channel":"whatsapp",'
        '"identifier":"4915199988877","data":{"name":"Eve Customer","username":"eve_c"},'
        '"name_snapshot":"Eve C.","deleted":false}},'
        '"to":{"type":"phone_number","phone_number":"4930123456"},"user":null,"cost":0,'
        '"tags":[],"started_at":"2026-11-20T11:00:00.000Z","ended_at":"2026-11-20T11:05:00.000Z",'
        '"data":{"channel":"whatsapp"}}'
    )
    sms = (
        '{"id":"c3","type":"sms","subtype":"outbound_sms","disposition":"sent",'
        '"from":{"type":"phone_number","phone_number":"4930123456"},'
        '"to":{"type":"phone_number","phone_number":"4915199988877"},"user":null,"cost":0.07,'
        '"tags":[],"started_at":"2026-11-20T12:00:00.000Z","ended_at":"2026-11-20T12:00:01.000Z",'
        '"data":{"sent":true,"segments_count":2,'
        '"message":"Hi Eve, \\"call\\" me on 4915199988877"}}'
    )
    page = f'{{"cdrs":[{call},{chat},{sms}],"metadata":{{"total":3}}}}'.encode()
    pz = Pseudonymizer(PrivacyPolicy("token", KEY))
    frame = pz.page(decode_page_counted(page).frame)
    records = frame["record"].to_list()
    canary = expected_token(KEY, 49, "15199988877")
    for secret in ("4915199988877", "Eve Customer", "eve_c", "Eve C.", "Hi Eve"):
        assert not any(secret in r for r in records), secret
    assert records[0].count(f'"{canary}"') == 2  # to.phone_number and the unknown data field
    assert '"phone_country":"DE","phone_calling_code":49' in records[0]
    assert '"cost":0.0120' in records[0]  # money exactly as sent
    assert '"name":"Ada Agent"' in records[0]  # agents are employee data: kept
    assert f'"identifier":"{canary}"' in records[1]  # a WhatsApp id that is a number
    assert '"message":null' in records[2]
    assert '"segments_count":2' in records[2]
    from warehouse.normalize import normalize_decoded

    tables = pz.tables(normalize_decoded(frame).tables())
    cdrs = tables["cdrs"].sort("id")
    assert cdrs["to_phone_number"].to_list()[0] == canary
    assert cdrs["from_identifier"].to_list()[1] == canary
    assert cdrs["to_phone_country"].to_list() == ["DE", "DE", "DE"]
    assert cdrs["from_account_name"][1] != "Eve Customer"
    assert len(cdrs["from_account_name"][1]) == 64  # its token
    assert tables["cdr_sms"]["message"].to_list() == [None]
    assert tables["cdr_sms"]["segments_count"].to_list() == [2]
    for name, table in tables.items():  # every value of every column, as JSON text
        assert "4915199988877" not in table.write_ndjson(), name


def test_a_forgotten_token_becomes_null_and_flags_its_rows() -> None:
    from warehouse.decode import decode_page_counted
    from warehouse.normalize import normalize_decoded

    record = (
        '{{"id":"{i}","type":"call","subtype":"inbound","disposition":"answered",'
        '"from":{{"type":"phone_number","phone_number":"{n}"}},'
        '"to":{{"type":"phone_number","phone_number":"4930123456"}},"user":null,"cost":0,'
        '"tags":[],"started_at":"2026-11-20T10:00:00.000Z","ended_at":"2026-11-20T10:01:00.000Z",'
        '"data":{{}}}}'
    )
    body = ",".join(record.format(i=i, n=n) for i, n in (("k", "4915199988877"), ("o", "4989777")))
    page = f'{{"cdrs":[{body}],"metadata":{{"total":2}}}}'.encode()
    gone = expected_token(KEY, 49, "15199988877")
    pz = Pseudonymizer(PrivacyPolicy("token", KEY), forgotten=frozenset({gone}))
    frame = pz.page(decode_page_counted(page).frame)
    assert frame["pii_forgotten"].to_list() == [True, False]
    assert gone not in frame["record"][0]
    assert '"phone_number":null' in frame["record"][0]
    erased = frame.filter(pl.col("pii_forgotten"))["id"].to_list()
    cdrs = pz.tables(normalize_decoded(frame).tables(), erased)["cdrs"].sort("id")
    assert cdrs["from_phone_number"].to_list() == [None, phone_token(KEY, "4989777")]
    assert cdrs["pii_forgotten"].to_list() == [True, False]


def test_a_number_written_otherwise_than_its_json_string_is_still_replaced() -> None:
    """A broken server: the number as a JSON integer, and a page whose records keep their
    spaces (an odd page is split byte for byte). The literal replacement misses both; the
    check after it sends them by path."""
    from warehouse.decode import decode_page_counted
    from warehouse.normalize import normalize_decoded

    as_int = (
        '{"id":"i1","type":"call","subtype":"inbound","disposition":"answered",'
        '"from":{"type":"phone_number","phone_number":4915199988877},'
        '"to":{"type":"phone_number","phone_number":"4930123456"},"user":null,"cost":0,'
        '"tags":[],"started_at":"2026-11-20T10:00:00.000Z","ended_at":"2026-11-20T10:01:00.000Z",'
        '"data":{}}'
    )
    spaced = (
        '{ "id" : "i2", "type" : "call", "subtype" : "inbound", "disposition" : "answered", '
        '"from" : { "type" : "phone_number", "phone_number" : "4915199988877" }, '
        '"to" : { "type" : "phone_number", "phone_number" : "4930123456" }, "user" : null, '
        '"cost" : 0, "tags" : [ ], "started_at" : "2026-11-20T11:00:00.000Z", '
        '"ended_at" : "2026-11-20T11:01:00.000Z", "data" : { } }'
    )
    canary = expected_token(KEY, 49, "15199988877")
    for record in (as_int, spaced):
        page = f'{{ "cdrs" : [ {record} ], "metadata" : {{ "total" : 1 }} }}'.encode()
        pz = Pseudonymizer(PrivacyPolicy("token", KEY))
        frame = pz.page(decode_page_counted(page).frame)
        text = frame["record"][0]
        assert "4915199988877" not in text, text
        assert "4930123456" not in text, text
        assert canary in text, text
        cdrs = pz.tables(normalize_decoded(frame).tables())["cdrs"]
        assert cdrs["from_phone_number"].to_list() in ([canary], []), cdrs  # [] if quarantined
        for name, table in pz.tables(normalize_decoded(frame).tables()).items():
            assert "4915199988877" not in table.write_ndjson(), name


def test_records_the_typed_decode_cannot_read_lose_numbers_and_names_too() -> None:
    """Quarantined records keep their bytes, but not a customer's number or name: one whose
    `data` is an array (no typed values: rewritten by path), one that is not UTF-8 (kept as
    base64 of its bytes: its digit runs are replaced inside them)."""
    from warehouse.decode import decode_page_counted
    from warehouse.normalize import normalize_decoded

    bad_shape = (
        b'{"id":"q1","type":"conversation","subtype":"whatsapp","disposition":"archived",'
        b'"from":{"type":"channel_account","channel_account":{"id":"a1","channel":"whatsapp",'
        b'"identifier":"4915199988877","data":{"name":"Eve Customer","username":"eve_c"},'
        b'"name_snapshot":"Eve C.","deleted":false}},'
        b'"to":{"type":"phone_number","phone_number":"4930123456"},"user":null,"cost":0,'
        b'"tags":[],"started_at":"2026-11-20T11:00:00.000Z","ended_at":"2026-11-20T11:05:00.000Z",'
        b'"data":[1,2]}'
    )
    not_utf8 = (
        b'{"id":"q2","type":"call","subtype":"inbound","disposition":"answered",'
        b'"from":{"type":"phone_number","phone_number":"4915199988877"},'
        b'"to":{"type":"phone_number","phone_number":"4930123456"},"user":null,"cost":0,'
        b'"tags":["\xff\xfe"],"started_at":"2026-11-20T10:00:00.000Z",'
        b'"ended_at":"2026-11-20T10:01:00.000Z","data":{}}'
    )
    page = b'{"cdrs":[' + bad_shape + b"," + not_utf8 + b'],"metadata":{"total":2}}'
    pz = Pseudonymizer(PrivacyPolicy("token", KEY))
    frame = pz.page(decode_page_counted(page).frame)
    tables = pz.tables(normalize_decoded(frame).tables())
    assert sorted(tables["cdr_quarantine"]["id"].to_list()) == ["q1", "q2"]
    records = frame["record"].to_list()
    import base64

    assert records[1].startswith("base64:")
    raw = base64.b64decode(records[1][len("base64:") :])
    assert b"4915199988877" not in raw
    assert expected_token(KEY, 49, "15199988877").encode() in raw
    assert b"\xff\xfe" in raw  # the bytes that made it odd are kept
    for secret in ("4915199988877", "Eve Customer", "eve_c", "Eve C."):
        assert secret not in records[0], secret
        for name, table in tables.items():
            assert secret not in table.write_ndjson(), (secret, name)


def test_a_customer_value_that_looks_like_a_token_is_still_replaced() -> None:
    """A hostile or odd customer: a WhatsApp display name of 64 hex characters. From the API
    it is a value like any other (only values read back from the lake are tokens already)."""
    from warehouse.decode import decode_page_counted
    from warehouse.normalize import normalize_decoded

    hexname = "ab" * 32
    chat = (
        '{"id":"h1","type":"conversation","subtype":"whatsapp","disposition":"archived",'
        '"from":{"type":"channel_account","channel_account":{"id":"a1","channel":"whatsapp",'
        f'"identifier":"eve-wa","data":{{"name":"{hexname}","username":"eve_c"}},'
        '"name_snapshot":"Eve C.","deleted":false}},'
        '"to":{"type":"phone_number","phone_number":"4930123456"},"user":null,"cost":0,'
        '"tags":[],"started_at":"2026-11-20T11:00:00.000Z","ended_at":"2026-11-20T11:05:00.000Z",'
        '"data":{"channel":"whatsapp"}}'
    )
    page = f'{{"cdrs":[{chat}],"metadata":{{"total":1}}}}'.encode()
    pz = Pseudonymizer(PrivacyPolicy("token", KEY))
    frame = pz.page(decode_page_counted(page).frame)
    assert hexname not in frame["record"][0]
    tables = pz.tables(normalize_decoded(frame).tables())
    name_token = hmac.new(KEY, f"text:{hexname}".encode(), hashlib.sha256).hexdigest()
    assert tables["cdrs"]["from_account_name"].to_list() == [name_token]
    for name, table in tables.items():
        assert hexname not in table.write_ndjson(), name


def test_a_customer_named_like_an_agent_of_another_record_leaves_the_agent_named() -> None:
    """A group's names are replaced in one pass over all its records: a customer who shares
    an agent's name (the agent of another record) must not rename that agent."""
    from warehouse.decode import decode_page_counted

    # Sam Lee is the agent of the first conversation and the customer of the second.
    agent = (
        '{"id":"a1","type":"conversation","subtype":"whatsapp","disposition":"archived",'
        '"from":{"type":"channel_account","channel_account":{"id":"c0","channel":"whatsapp",'
        '"identifier":"eve-wa","data":{"name":"Eve","username":"eve"},'
        '"name_snapshot":"Eve","deleted":false}},'
        '"to":{"type":"phone_number","phone_number":"4930123456"},'
        '"user":{"id":"u1","name":"Sam Lee","email":"sam@cc.example","name_snapshot":"Sam Lee",'
        '"deleted":false},"cost":0,"tags":[],"started_at":"2026-11-20T10:00:00.000Z",'
        '"ended_at":"2026-11-20T10:01:00.000Z","data":{"channel":"whatsapp"}}'
    )
    chat = (
        '{"id":"a2","type":"conversation","subtype":"whatsapp","disposition":"archived",'
        '"from":{"type":"channel_account","channel_account":{"id":"c1","channel":"whatsapp",'
        '"identifier":"sam-wa","data":{"name":"Sam Lee","username":"Sam Lee"},'
        '"name_snapshot":"Sam Lee","deleted":false}},'
        '"to":{"type":"phone_number","phone_number":"4930123456"},"user":null,"cost":0,'
        '"tags":[],"started_at":"2026-11-20T11:00:00.000Z","ended_at":"2026-11-20T11:05:00.000Z",'
        '"data":{"channel":"whatsapp"}}'
    )
    page = f'{{"cdrs":[{agent},{chat}],"metadata":{{"total":2}}}}'.encode()
    pz = Pseudonymizer(PrivacyPolicy("token", KEY))
    records = pz.page(decode_page_counted(page).frame)["record"].to_list()
    token = hmac.new(KEY, b"text:Sam Lee", hashlib.sha256).hexdigest()
    assert '"name":"Sam Lee","email":"sam@cc.example","name_snapshot":"Sam Lee"' in records[0]
    assert "Sam Lee" not in records[1]
    assert records[1].count(f'"{token}"') == 3  # name, username and name snapshot


def test_a_record_rewritten_by_path_starts_from_the_record_as_the_api_sent_it() -> None:
    """A record that goes by path (here: an escaped quote in its summary) is rewritten from
    its original text, not from the half-replaced one of the vectorized pass: its number
    gets the number's token and country, not the token of a token."""
    from warehouse.decode import decode_page_counted
    from warehouse.normalize import normalize_decoded

    call = (
        '{"id":"p1","type":"call","subtype":"inbound","disposition":"answered",'
        '"from":{"type":"phone_number","phone_number":"4915199988877"},'
        '"to":{"type":"phone_number","phone_number":"4930123456"},"user":null,"cost":0,'
        '"tags":[],"started_at":"2026-11-20T10:00:00.000Z","ended_at":"2026-11-20T10:01:00.000Z",'
        '"data":{"summary":"said \\"hi\\"","durations":{"overall":60}}}'
    )
    chat = (  # a record without a number, so the number pass touches only some rows
        '{"id":"p2","type":"conversation","subtype":"whatsapp","disposition":"archived",'
        '"from":{"type":"channel_account","channel_account":{"id":"c1","channel":"whatsapp",'
        '"identifier":"eve-wa","data":{"name":"Eve","username":"eve"},'
        '"name_snapshot":"Eve","deleted":false}},'
        '"to":{"type":"channel_account","channel_account":{"id":"c2","channel":"whatsapp",'
        '"identifier":"cc-wa","data":{"name":"Sales","username":"sales"},'
        '"name_snapshot":"Sales","deleted":false}},"user":null,"cost":0,'
        '"tags":[],"started_at":"2026-11-20T11:00:00.000Z","ended_at":"2026-11-20T11:05:00.000Z",'
        '"data":{"channel":"whatsapp"}}'
    )
    page = f'{{"cdrs":[{call},{chat}],"metadata":{{"total":2}}}}'.encode()
    pz = Pseudonymizer(PrivacyPolicy("token", KEY))
    frame = pz.page(decode_page_counted(page).frame)
    canary = expected_token(KEY, 49, "15199988877")
    record = frame["record"][0]
    assert f'"phone_number":"{canary}","phone_country":"DE","phone_calling_code":49' in record
    assert '"summary":"said \\"hi\\""' in record
    cdrs = pz.tables(normalize_decoded(frame).tables())["cdrs"].sort("id")
    assert cdrs["from_phone_number"].to_list() == [canary, None]


def test_numbers_are_replaced_whatever_the_order_of_from_and_to() -> None:
    """The usual record names `from` before `to`; one that names `to` first (or the same
    number on both sides) gets each side's own token all the same."""
    from warehouse.decode import decode_page_counted

    def call(cdr_id: str, first: str, second: str) -> str:
        return (
            f'{{"id":"{cdr_id}","type":"call","subtype":"inbound","disposition":"answered",'
            f"{first},{second},"
            '"user":null,"cost":0,"tags":[],"started_at":"2026-11-20T10:00:00.000Z",'
            '"ended_at":"2026-11-20T10:01:00.000Z","data":{"durations":{"overall":60}}}'
        )

    caller = '"from":{"type":"phone_number","phone_number":"4915199988877"}'
    center = '"to":{"type":"phone_number","phone_number":"4930123456"}'
    same = '"to":{"type":"phone_number","phone_number":"4915199988877"}'
    records = [call("o1", caller, center), call("o2", center, caller), call("o3", caller, same)]
    page = f'{{"cdrs":[{",".join(records)}],"metadata":{{"total":3}}}}'.encode()
    pz = Pseudonymizer(PrivacyPolicy("token", KEY))
    out = pz.page(decode_page_counted(page).frame)["record"].to_list()
    mobile = expected_token(KEY, 49, "15199988877")
    office = expected_token(KEY, 49, "30123456")
    for record in out:
        assert "4915199988877" not in record
        assert "4930123456" not in record
    assert out[0].index(mobile) < out[0].index(office)
    assert out[1].index(office) < out[1].index(mobile)
    assert out[2].count(f'"phone_number":"{mobile}","phone_country":"DE"') == 2


def test_a_number_sent_as_an_integer_in_a_field_the_spec_does_not_name_is_replaced() -> None:
    """An API that sends `"callback": 4915199988877` (or a list of them) in a field of its own:
    the integer is a valid number with its calling code, so its token replaces it, in
    `raw_cdrs` and in `cdrs.extra`. Integers that are no phone number (an epoch time in ms or
    s, a count) stay, and so does a known numeric field."""
    from warehouse.decode import decode_page_counted
    from warehouse.normalize import normalize_decoded

    record = (
        '{"id":"x1","type":"call","subtype":"inbound","disposition":"answered",'
        '"from":{"type":"phone_number","phone_number":"4930123456"},'
        '"to":{"type":"phone_number","phone_number":"4930123457"},"user":null,"cost":0,'
        '"tags":[],"started_at":"2026-11-20T10:00:00.000Z","ended_at":"2026-11-20T10:01:00.000Z",'
        '"data":{"duration":60},"callback":4915199988877,"alternates":[4915199988878, 12],'
        '"epoch_ms":1732752000123,"epoch_s":1732752000,"attempts":12345678}'
    )
    page = f'{{"cdrs":[{record}],"metadata":{{"total":1}}}}'.encode()
    pz = Pseudonymizer(PrivacyPolicy("token", KEY))
    frame = pz.page(decode_page_counted(page).frame)
    text = frame["record"][0]
    tables = pz.tables(normalize_decoded(frame).tables())
    extra = tables["cdrs"]["extra"][0]
    for place in (text, extra):
        assert "4915199988877" not in place, place
        assert "4915199988878" not in place, place
        assert f'"callback":"{expected_token(KEY, 49, "15199988877")}"' in place, place
        assert f'"alternates":["{expected_token(KEY, 49, "15199988878")}",12]' in place, place
        for kept in ('"epoch_ms":1732752000123', '"epoch_s":1732752000', '"attempts":12345678'):
            assert kept in place, place
    assert '"duration":60' in text


def test_records_with_multibyte_text_are_spliced_as_the_path_rewrites_them() -> None:
    """The records are rewritten at byte offsets of each value: text of several bytes per
    character before and around the values (a tag, the customer's names, an agent's name)
    must not shift a cut. Each record comes out as the by-path rewrite reads it, with every
    other byte kept."""
    import json

    from warehouse.decode import decode_page_counted

    head = '"type":"call","subtype":"inbound","disposition":"answered"'
    times = '"started_at":"2026-11-20T10:00:00.000Z","ended_at":"2026-11-20T10:01:00.000Z"'
    call = (
        f'{{"id":"m1",{head},"tags":["größe","日本語"],'
        '"from":{"type":"phone_number","phone_number":"4915199988877"},'
        '"to":{"type":"phone_number","phone_number":"4930123456"},'
        '"user":{"id":"u1","name":"Zoë Agent","email":"z@cc.example","name_snapshot":"Zoë",'
        f'"deleted":false}},"cost":0.5,{times},"data":{{"summary":"café"}}}}'
    )
    chat = (
        '{"id":"m2","type":"conversation","subtype":"whatsapp","disposition":"archived",'
        '"tags":["ü"],"from":{"type":"channel_account","channel_account":{"id":"a1",'
        '"channel":"whatsapp","identifier":"4915199988877","data":{"name":"Zoë Müller",'
        '"username":"zoë_m"},"name_snapshot":"Zoë M.","deleted":false}},'
        '"to":{"type":"channel_account","channel_account":{"id":"a2","channel":"whatsapp",'
        '"identifier":"Café Ünïcode ☎","data":{"name":"Café Ünïcode ☎","username":"cafe"},'
        '"name_snapshot":"Café","deleted":false}},"user":null,"cost":0,"tags2":"—",'
        f'{times},"data":{{"channel":"whatsapp"}}}}'
    )
    sms = (
        f'{{"id":"m3","type":"sms","subtype":"outbound_sms","disposition":"sent","tags":[],'
        '"from":{"type":"phone_number","phone_number":"4930123456"},'
        '"to":{"type":"phone_number","phone_number":"4915199988877"},"user":null,"cost":0.07,'
        f'{times},"data":{{"sent":true,"segments_count":1,"message":"Grüße, bis später ☺"}}}}'
    )
    page = f'{{"cdrs":[{call},{chat},{sms}],"metadata":{{"total":3}}}}'.encode()
    pz = Pseudonymizer(PrivacyPolicy("token", KEY))
    out = pz.page(decode_page_counted(page).frame)["record"].to_list()
    by_path = [pz.record(r)[0] for r in (call, chat, sms)]
    for got, want in zip(out, by_path, strict=True):
        assert got is not None
        assert want is not None
        assert json.loads(got) == json.loads(want), got
    for secret in ("4915199988877", "Zoë Müller", "zoë_m", "Zoë M.", "Café Ünïcode", "Grüße"):
        assert not any(secret in r for r in out), secret
    assert '"tags":["größe","日本語"]' in out[0]
    assert '"name":"Zoë Agent"' in out[0]
    assert '"summary":"café"' in out[0]
    assert '"tags2":"—"' in out[1]
    assert '"message":null' in out[2]


def test_numbers_written_in_other_digits_or_with_spaces_are_spliced_as_the_path_rewrites_them() -> (
    None
):
    """A server that sends a number in Arabic-Indic or full-width digits, with spaces, or
    beside a value with multi-byte text: the byte-offset splice cuts only at ASCII quotes, so
    each record comes out valid and equal to the by-path rewrite, no number left in it."""
    import json

    from warehouse.decode import decode_page_counted

    times = '"started_at":"2026-11-20T10:00:00.000Z","ended_at":"2026-11-20T10:01:00.000Z"'

    def call(cdr_id: str, a: str, b: str) -> str:
        return (
            f'{{"id":"{cdr_id}","type":"call","subtype":"inbound","disposition":"answered",'
            f'"from":{{"type":"phone_number","phone_number":"{a}"}},'
            f'"to":{{"type":"phone_number","phone_number":"{b}"}},"user":null,"cost":0,'
            f'"tags":[],{times},"data":{{"durations":{{"overall":1}}}}}}'
        )

    def digits(zero: int) -> str:  # 4915112345678 in the digits starting at `zero`
        return "".join(chr(zero + int(d)) for d in "4915112345678")

    sent = [
        ("n1", digits(0x0660), "4930123456"),  # Arabic-Indic
        ("n2", "4930123456", "+49 151 1234 5678"),
        ("n3", digits(0xFF10), "é4930123456"),  # full-width
    ]
    records = [call(*s) for s in sent]
    page = f'{{"cdrs":[{",".join(records)}],"metadata":{{"total":3}}}}'.encode()
    pz = Pseudonymizer(PrivacyPolicy("token", KEY))
    out = pz.page(decode_page_counted(page).frame)["record"].to_list()
    for got, record, (_, a, b) in zip(out, records, sent, strict=True):
        assert got is not None
        assert json.loads(got) == json.loads(pz.record(record)[0] or ""), got
        assert a not in got
        assert b not in got
