"""Read models keep what they do not know; write models refuse what the API would refuse."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import pytest
from pydantic import ValidationError

from models.resources import (
    Balance,
    CallData,
    CampaignCreate,
    CampaignPatch,
    Cdr,
    Number,
    ScheduleCallback,
    SendSms,
    SmsData,
    StartCall,
    User,
)

PHONE = "31612345678"
UUID = "0b6e7a52-2a9f-4c43-9a4e-1a2b3c4d5e6f"


def test_user_keeps_unknown_fields_and_enum_values() -> None:
    user = User.model_validate(
        {
            "id": UUID,
            "status": "on_break",  # not in the spec's values
            "channels": ["voice", "telepathy"],
            "skills": [{"skill": {"id": 1, "name": "Dutch"}, "value": 5}],
            "teams": [{"id": 3, "name": "A"}],
            "favourite_colour": "teal",
        }
    )
    assert user.status == "on_break"
    assert user.channels == ["voice", "telepathy"]
    assert user.skills[0].skill is not None
    assert user.skills[0].skill.name == "Dutch"
    assert user.model_extra == {"favourite_colour": "teal"}


def test_cdr_data_is_typed_by_type_and_unknown_types_stay_raw() -> None:
    call = Cdr.model_validate(
        {
            "id": "a",
            "type": "call",
            "cost": 0.045,
            "from": {"type": "phone_number", "phone_number": PHONE},
            "data": {"queue": {"id": 4, "name": "Sales"}, "mos": 4.2},
        }
    )
    assert isinstance(call.data, CallData)
    assert call.data.queue is not None
    assert call.data.queue.id == 4
    assert call.cost == Decimal("0.045")  # not 0.04499999...
    assert call.from_ is not None
    assert call.from_.phone_number == PHONE
    sms = Cdr.model_validate({"id": "b", "type": "sms", "data": {"segments_count": 2}})
    assert isinstance(sms.data, SmsData)
    fax = Cdr.model_validate({"id": "c", "type": "fax", "data": {"pages": 3}})
    assert fax.type == "fax"
    assert fax.data == {"pages": 3}


def test_money_is_decimal_from_strings() -> None:
    number = Number.model_validate(
        {
            "id": 1,
            "pricing": {
                "activation_fee": "0.10",
                "monthly_fee": "1.2345",
                "partial_month_fee": "0.6",
                "price_per_min": "0.0075",
            },
        }
    )
    assert number.pricing is not None
    assert number.pricing.monthly_fee == Decimal("1.2345")
    assert Balance.model_validate({"amount": "1234.5600"}).amount == Decimal("1234.5600")


def _campaign(**over: Any) -> dict[str, Any]:
    return {"name": "Spring", "caller_id_sets": [{"phone_numbers": [PHONE]}], **over}


def test_campaign_create_sends_only_what_was_set() -> None:
    body = CampaignCreate.model_validate(_campaign(dial_level=2.5)).to_body()
    assert body == {
        "name": "Spring",
        "caller_id_sets": [{"phone_numbers": [PHONE]}],
        "dial_level": 2.5,
    }


@pytest.mark.parametrize(
    ("over", "field"),
    [
        ({"name": "x" * 101}, "name"),
        ({"caller_id_sets": []}, "caller_id_sets"),
        ({"caller_id_sets": [{"phone_numbers": [PHONE]}] * 21}, "caller_id_sets"),
        ({"caller_id_sets": [{"phone_numbers": ["+31612345678"]}]}, "caller_id_sets"),
        ({"dial_level": 6.5}, "dial_level"),
        ({"dial_level": 0.5}, "dial_level"),
        ({"max_dial_time": 601}, "max_dial_time"),
        ({"max_wait_time": -1}, "max_wait_time"),
        ({"max_dial_attempts": 100}, "max_dial_attempts"),
        ({"strategy": "Simple"}, "strategy"),  # enum mismatch including case
        ({"follow_up_mode": "random"}, "follow_up_mode"),
        ({"dial_level_override": {"enabled": True, "value": 0}}, "dial_level_override"),
        ({"dial_level_override": {"value": 2}}, "dial_level_override"),
        ({"live": {"enabled": False, "dialing_order": "fifo"}}, "live"),
        (
            {
                "contact_local_time": {
                    "start_time": "07:00",
                    "end_time": "12:00",
                    "days_of_week": [1],
                }
            },
            "contact_local_time",
        ),
        (
            {
                "contact_local_time": {
                    "start_time": "12:00",
                    "end_time": "10:00",
                    "days_of_week": [1],
                }
            },
            "contact_local_time",
        ),
        (
            {
                "contact_local_time": {
                    "start_time": "09:00",
                    "end_time": "10:00",
                    "days_of_week": [8],
                }
            },
            "contact_local_time",
        ),
        (
            {"follow_up_rules": {"busy": [{"wait_time": 0, "wait_time_unit": "minutes"}]}},
            "follow_up_rules",
        ),
        (
            {"follow_up_rules": {"busy": [{"wait_time": 1, "wait_time_unit": "days"}]}},
            "follow_up_rules",
        ),
        (
            {"follow_up_rules": {"busy": [{"wait_time": 1, "wait_time_unit": "hours"}] * 21}},
            "follow_up_rules",
        ),
        ({"colour": "red"}, "colour"),  # unknown field
        ({"amd_comfort_noise_enabled": True}, "amd_comfort_noise_enabled"),  # PATCH only
    ],
)
def test_campaign_create_refuses_with_the_spec_field_name(over: dict[str, Any], field: str) -> None:
    with pytest.raises(ValidationError) as info:
        CampaignCreate.model_validate(_campaign(**over))
    assert info.value.errors()[0]["loc"][0] == field


def test_switch_caller_id_set_needs_two_sets() -> None:
    rules = {"busy": [{"wait_time": 1, "wait_time_unit": "hours", "switch_caller_id_set": True}]}
    with pytest.raises(ValidationError, match="switch_caller_id_set"):
        CampaignCreate.model_validate(_campaign(follow_up_rules=rules))
    two = [{"phone_numbers": [PHONE]}, {"phone_numbers": ["31612345679"]}]
    CampaignCreate.model_validate(_campaign(follow_up_rules=rules, caller_id_sets=two))


def test_campaign_patch_tells_absent_from_null() -> None:
    patch = CampaignPatch.model_validate({"contact_local_time": None, "dial_level": 3})
    assert patch.to_body() == {"contact_local_time": None, "dial_level": 3.0}
    assert CampaignPatch().to_body() == {}
    with pytest.raises(ValidationError) as info:
        CampaignPatch.model_validate({"name": None})
    assert info.value.errors()[0]["loc"] == ("name",)
    with pytest.raises(ValidationError):
        CampaignPatch.model_validate({"amd_voicemail_message": {"voice_message_id": 3}})
    ok = CampaignPatch.model_validate({"amd_comfort_noise_enabled": True})
    assert ok.to_body() == {"amd_comfort_noise_enabled": True}


def test_sms_and_call_write_models() -> None:
    body = SendSms.text(PHONE, "hello", sender_id="ACME").to_body()
    assert body == {
        "phone_number": PHONE,
        "sender_id": "ACME",
        "message": {"content_type": "text", "content_data": {"body": "hello"}},
    }
    with pytest.raises(ValidationError):  # content_data does not match content_type
        SendSms.model_validate(
            {
                "phone_number": PHONE,
                "message": {"content_type": "canned_message", "content_data": {"body": "x"}},
            }
        )
    with pytest.raises(ValidationError):  # source needs both fields
        SendSms.text(PHONE, "x", source={"system": "crm"})
    with pytest.raises(ValidationError):
        SendSms.text(PHONE, "x", sender_id="x" * 31)
    with pytest.raises(ValidationError):
        StartCall.model_validate({"phone_number": PHONE, "user_id": "42"})
    when = datetime(2030, 1, 2, 3, 4, 5, 678000, tzinfo=UTC)
    cb = ScheduleCallback(phone_number=PHONE, scheduled_at=when).to_body()
    assert cb["scheduled_at"] == "2030-01-02T03:04:05.678Z"


# --- a known field of another type than the spec's -------------------------------------------


def test_an_optional_field_of_another_type_is_kept_as_received_and_left_unset() -> None:
    user = User.model_validate(
        {
            "id": "u-1",
            "name": "Ada",
            "created_at": "yesterday",
            "teams": "sales",
            "security_access_group": {"id": 3, "name": 5},
            "color": "red",
        }
    )
    assert user.created_at is None
    assert user.teams == []
    assert user.security_access_group is not None
    assert user.security_access_group.id == 3
    assert user.security_access_group.name is None
    assert user.unreadable_fields() == ["created_at", "teams", "security_access_group.name"]
    assert user.model_dump(mode="json", by_alias=True, exclude_unset=True) == {
        "id": "u-1",
        "name": "Ada",
        "security_access_group": {"id": 3, "_unreadable": {"name": 5}},
        "color": "red",
        "_unreadable": {"created_at": "yesterday", "teams": "sales"},
    }
    # A field named by its alias keeps that name; a readable record has nothing to say.
    cdr = Cdr.model_validate({"id": "c-1", "from": "somewhere", "cost": "a lot"})
    assert cdr.model_extra == {"_unreadable": {"from": "somewhere", "cost": "a lot"}}
    assert User.model_validate({"id": "u-2", "teams": [{"id": 1}]}).unreadable_fields() == []


@pytest.mark.parametrize(
    "record",
    [{"id": 42}, {"name": "no id"}, {"id": "u-1", "created_at": "x", "_unreadable": {}}],
    ids=["id-of-another-type", "id-missing", "server-sends-the-key"],
)
def test_a_required_field_that_cannot_be_read_still_fails_the_record(
    record: dict[str, Any],
) -> None:
    with pytest.raises(ValidationError):
        User.model_validate(record)
