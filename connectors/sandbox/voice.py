"""Agent calls started through the API: validation, and the call CDR a hangup produces.

Choices for what the spec leaves open (see docs/sandbox.md):
- An agent may have several active calls at once (the spec lists no 409 for POST voice/calls).
- Hanging up a call that already ended answers **409** ``{"errors": {"state": ["conflict"]}}``;
  an unknown call id answers 404; a ``user_id`` other than the call's agent answers 422.
- Cost: ``CALL_PRICE_PER_MINUTE`` per started minute, at least one minute.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping
from datetime import datetime
from decimal import Decimal
from typing import Any, Final

from connectors.sandbox.fieldcheck import (
    MISSING_REF,
    body_errors,
    check_phone,
    check_string_fields,
    check_uuid,
    is_int,
    require,
    require_phone,
)
from models.timestamps import iso_ms

CALL_PRICE_PER_MINUTE: Final = Decimal("0.0200")
DIALING_SECONDS: Final = 4  # ring time before the contact answers

# Longest prefixes first is not needed: E.164 country codes are prefix-free.
_COUNTRY_BY_PREFIX: Final = {
    "1": "US",
    "31": "NL",
    "32": "BE",
    "33": "FR",
    "34": "ES",
    "39": "IT",
    "44": "GB",
    "46": "SE",
    "48": "PL",
    "49": "DE",
    "351": "PT",
    "353": "IE",
    "370": "LT",
    "371": "LV",
    "372": "EE",
}


def validate_start(
    body: Mapping[str, Any], *, active_user_ids: Collection[str]
) -> dict[str, list[str]]:
    errs = body_errors(body, ("phone_number", "user_id", "caller_id", "source"))
    require_phone(errs, body)
    if (
        require(errs, "", body, "user_id")
        and check_uuid(errs, "user_id", body["user_id"])
        and body["user_id"] not in active_user_ids
    ):
        errs.add("user_id", MISSING_REF)
    if "caller_id" in body:  # optional means absent: null is no phone number
        check_phone(errs, "caller_id", body["caller_id"])
    if "source" in body:
        check_string_fields(errs, "source", body["source"], ("account_id", "name"), required=False)
    return errs.errors


def validate_hangup(body: Mapping[str, Any]) -> dict[str, list[str]]:
    """user_id is the agent's id: the spec types it as a UUID string and as an integer, so
    both types pass here; only the Users resource's UUID of the call's agent then matches."""
    errs = body_errors(body, ("user_id",))
    if require(errs, "", body, "user_id") and not is_int(body["user_id"]):
        check_uuid(errs, "user_id", body["user_id"])
    return errs.errors


def destination_country(phone_number: str) -> str | None:
    for size in (1, 2, 3):
        country = _COUNTRY_BY_PREFIX.get(phone_number[:size])
        if country is not None:
            return country
    return None


def call_cost(overall_seconds: int) -> Decimal:
    return CALL_PRICE_PER_MINUTE * max(1, math.ceil(overall_seconds / 60))


def user_ref(user: Mapping[str, Any], *, deleted: bool = False) -> dict[str, Any]:
    """The CDR's user object: id, name, email, name_snapshot, deleted."""
    name = user.get("name")
    return {
        "id": user["id"],
        "name": name,
        "email": user.get("email"),
        "name_snapshot": name,
        "deleted": deleted,
    }


def call_cdr(
    call: Mapping[str, Any],
    *,
    user: Mapping[str, Any],
    started_at: datetime,
    ended_at: datetime,
    cost: Decimal,
) -> dict[str, Any]:
    """The ``call`` CDR an ended API call leaves (subtype outbound, disposition answered)."""
    overall = max(0, int((ended_at - started_at).total_seconds()))
    dialing = min(overall, DIALING_SECONDS)
    caller = call.get("caller_id") or user.get("caller_id")
    return {
        "id": call["id"],
        "type": "call",
        "subtype": "outbound",
        "disposition": "answered",
        "from": {"type": "phone_number", "phone_number": caller},
        "to": {"type": "phone_number", "phone_number": call["phone_number"]},
        "user": user_ref(user),
        "cost": cost,  # a Decimal: state.add_cdr serves it as an exact JSON number
        "tags": [],
        "started_at": iso_ms(started_at),
        "ended_at": iso_ms(ended_at),
        "data": {
            "queue": None,  # a direct agent call: no queue and no campaign
            "campaign": None,
            "destination_country": destination_country(call["phone_number"]),
            "durations": {
                "overall": overall,
                "dialing": dialing,
                "ivr": 0,
                "queue": 0,
                "talk": overall - dialing,
                "hold": 0,
            },
            "end_reason": "agent_hangup",
            "wrapup_code": None,
            "summary": None,
            "conversation_score": None,
            "mos": 4.3,
            "mos_tc": 4.1,
        },
    }
