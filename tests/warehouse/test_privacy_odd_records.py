"""Customers' values in records a broken or unusual server sends, under `token`: a record no
JSON reader takes (`NaN`), text that is not JSON, numbers written for people in fields the
spec does not name (or as keys), a second `message` key, a number quoted by a quarantine
reason, and one number written in forms beyond `+49…`/`0049…`/`49…`. Nothing of them may be
left in clear in what lands (`raw_cdrs`/`cdr_quarantine` are the records `page` returns)."""

from __future__ import annotations

import json
from typing import Any

import polars as pl
import pytest

from warehouse.decode import decode_page_typed
from warehouse.privacy import PrivacyPolicy, Pseudonymizer, country, e164_digits, phone_token

KEY = b"test-key-for-odd-records-000001"
TIMES = {"started_at": "2026-11-20T10:00:00.000Z", "ended_at": "2026-11-20T10:01:00.000Z"}
BODY = "SECRETBODY please call me"
NAME = "Zelda Canaryname"


def _sms(cdr_id: str, **fields: Any) -> dict[str, Any]:
    rec: dict[str, Any] = {
        "id": cdr_id,
        "type": "sms",
        "subtype": "outbound_sms",
        "disposition": "answered",
        "from": {"type": "phone_number", "phone_number": "4930123456"},
        "to": {"type": "phone_number", "phone_number": "4915199900005"},
        "user": None,
        "cost": 0.5,
        "tags": [],
        **TIMES,
        "data": {"sent": True, "segments_count": 1, "message": BODY},
    }
    return rec | fields


def _conversation(cdr_id: str) -> dict[str, Any]:
    return {
        "id": cdr_id,
        "type": "conversation",
        "subtype": "whatsapp",
        "disposition": "answered",
        "from": {
            "type": "channel_account",
            "channel_account": {
                "id": "a1",
                "channel": "whatsapp",
                "identifier": "+49 151 99900020",
                "data": {"name": NAME, "username": "zeldacanary04"},
                "name_snapshot": NAME,
                "deleted": False,
            },
        },
        "to": {"type": "phone_number", "phone_number": "4930123456"},
        "user": None,
        "cost": 0.5,
        "tags": [],
        **TIMES,
        "data": {"channel": "whatsapp"},
    }


def _landed(texts: list[str]) -> tuple[Pseudonymizer, pl.DataFrame]:
    page = f'{{"cdrs":[{",".join(texts)}],"metadata":{{"total":{len(texts)}}}}}'.encode()
    pz = Pseudonymizer(PrivacyPolicy("token", KEY))
    return pz, pz.page(decode_page_typed(page))


def _text(rec: dict[str, Any]) -> str:
    return json.dumps(rec, separators=(",", ":"))


def _clear(out: pl.DataFrame, *values: str) -> list[str]:
    """The values found in clear anywhere in the landed rows (records, reasons, typed)."""
    dump = out.drop("r").write_ndjson() + out.select("r").write_ndjson()
    return [v for v in values if v in dump]


def test_a_record_no_json_reader_takes_loses_its_customers_values_and_keeps_the_odd_one() -> None:
    """A `NaN` cost quarantines the record; its SMS body, its callee's number and a
    conversation's identity in the same kind of record were kept in clear (only bare digit
    strings were replaced)."""
    sms = _text(_sms("s1")).replace('"cost":0.5', '"cost":NaN')
    conversation = _text(_conversation("c1")).replace('"cost":0.5', '"cost":NaN')
    pz, out = _landed([sms, conversation, _text(_sms("ok"))])
    assert out["struct_reason"].to_list()[:2] == ["cost is not a JSON number"] * 2
    assert _clear(out, BODY, NAME, "zeldacanary04", "99900005", "99900020") == []
    first, second = out["record"].to_list()[:2]
    assert '"cost":NaN' in first
    assert '"message":null' in first
    assert f'"phone_number":"{pz.phone("4915199900005")}"' in first
    assert f'"identifier":"{pz.phone("4915199900020")}"' in second
    assert f'"name_snapshot":"{pz.text(NAME)}"' in second


def test_text_that_is_not_json_keeps_no_value_in_clear() -> None:
    """The by-path rewrite of a record text no JSON reader takes at all (a page splits into
    records before they are read: such a text is quarantined as it is)."""
    pz = Pseudonymizer(PrivacyPolicy("token", KEY))
    broken = _text(_sms("s2"))[:-2] + ',"n":4915199900006,"x":"+49 151 99900009"'
    record, _ = pz.record(broken)
    assert record is not None
    assert [v for v in (BODY, "99900005", "99900006", "99900009") if v in record] == []
    assert pz.phone("4915199900005") in record
    assert pz.phone("4915199900006") in record
    assert pz.phone("4915199900009") in record
    assert '"message":' in record


@pytest.mark.parametrize(
    ("extra", "number"),
    [
        ({"x_alt_phone": "+49 151 99900001"}, "4915199900001"),
        ({"x_calls": {"4915199900002": 3}}, "4915199900002"),
        ({"x_contact": "tel:+4915199900017"}, "4915199900017"),
        ({"x_contact2": "0049 151 99900018"}, "4915199900018"),
    ],
    ids=["spaces", "key", "tel", "00-spaces"],
)
def test_a_number_written_for_people_in_a_field_the_spec_does_not_name_is_its_token(
    extra: dict[str, Any], number: str
) -> None:
    pz, out = _landed([_text(_sms("s3") | extra)])
    record = out["record"].to_list()[0]
    assert number[-8:] not in record
    assert pz.phone(number) in record
    assert pz.phone(number) == phone_token(KEY, "+" + number)


def test_dates_times_and_ids_in_such_fields_stay() -> None:
    extra = {"x_day": "2026-12-01", "x_at": "12:30:45", "x_ref": "+1 (2)", "x_year": "2026"}
    _, out = _landed([_text(_sms("s4") | extra)])
    assert json.loads(out["record"].to_list()[0])["x_day"] == "2026-12-01"
    assert all(f'"{v}"' in out["record"].to_list()[0] for v in extra.values())


def test_a_second_message_key_loses_its_body_too() -> None:
    text = _text(_sms("s5")).replace(
        f'"message":"{BODY}"', '"message":"first body","message":"SECRETDUP second body"'
    )
    _, out = _landed([text])
    assert _clear(out, "first body", "SECRETDUP") == []


def test_a_number_a_quarantine_reason_quotes_is_its_token() -> None:
    """`x_cb.4915199900007 is not a JSON number`: the reason lands in the quarantine and in
    Dagster's check metadata."""
    text = _text(_sms("s6") | {"x_cb": {"4915199900007": "@"}}).replace('"@"', "NaN")
    pz, out = _landed([text])
    token = pz.phone("4915199900007")
    assert out["struct_reason"].to_list() == [f"x_cb.{token} is not a JSON number"]
    assert _clear(out, "99900007") == []


def test_a_tag_holding_the_callers_number_written_otherwise_is_its_token() -> None:
    pz, out = _landed([_text(_sms("s7", tags=["+4915199900005", "vip"]))])
    assert json.loads(out["record"].to_list()[0])["tags"] == [pz.phone("4915199900005"), "vip"]


@pytest.mark.parametrize(
    "written",
    [
        "tel:+4915199900008",
        "TEL:+49 151 99900008",
        "\uff0b\uff14\uff19\uff11\uff15\uff11\uff19\uff19\uff19\uff10\uff10\uff10\uff10\uff18",
        "+49\u202f151\u202f99900008",
        "+49 151 99900008\t",
        "+49\u2011151\u201199900008",
        "+49 151 99900008 ext. 12",
    ],
)
def test_one_number_in_more_forms_has_one_token(written: str) -> None:
    assert e164_digits(written) == "4915199900008"
    assert phone_token(KEY, written) == phone_token(KEY, "+4915199900008")


def test_letters_spell_the_number_they_dial() -> None:
    assert e164_digits("+1 800 FLOWERS") == e164_digits("+1 800 3569377")


def test_a_national_number_has_no_country() -> None:
    assert country(e164_digits("015199988877")) == (None, None)
    assert country(e164_digits("07911123456")) == (None, None)
    assert country("4915199988877") == ("DE", 49)
