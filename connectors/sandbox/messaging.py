"""SMS sending and outbound conversations: validation and the records they leave behind.

Pure functions: the routes pass in the contact center's reference data and store the results.

Choices for what the spec leaves "not shown" (see docs/sandbox.md):
- POST /messaging/sms answers **201** ``{"sms": {"id": UUID}}``.
- POST /messaging/conversations takes ``{phone_number, channel: "whatsapp", user_id?,
  message: {content_type: "text", content_data: {text}}}`` and answers 201
  ``{"conversation": {id, channel, status: "open", phone_number, user, created_at}}``.
- POST /messaging/conversations/{id}/messages takes ``{content_type, content_data, user_id?}``
  and answers 201 ``{"message": Message}`` (the spec's Message table, direction outbound,
  status sent); it then shows in GET .../messages.
"""

from __future__ import annotations

import math
import re
import uuid
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Any, Final

from connectors.sandbox.fieldcheck import (
    ALNUM_RE,
    MISSING_REF,
    PHONE_RE,
    FieldErrors,
    body_errors,
    check_enum,
    check_string_fields,
    check_type,
    check_unknown,
    check_uuid,
    is_int,
    join,
    require,
    require_all,
    require_phone,
)
from models.timestamps import iso_ms

SMS_CONTENT_TYPES: Final = ("text", "canned_message")
MESSAGE_CONTENT_TYPES: Final = ("text", "audio", "document", "image", "video", "voice")
CONVERSATION_CHANNELS: Final = ("whatsapp",)
SMS_PRICE_PER_SEGMENT: Final = Decimal("0.0650")

# GSM 03.38 basic set (one septet each) and its extension table (two septets each).
_GSM_BASIC: Final = frozenset(
    "@£$¥èéùìòÇ\nØø\rÅåΔ_ΦΓΛΩΠΨΣΘΞÆæßÉ !\"#¤%&'()*+,-./0123456789:;<=>?"
    "¡ABCDEFGHIJKLMNOPQRSTUVWXYZÄÖÑÜ§¿abcdefghijklmnopqrstuvwxyzäöñüà"
)
_GSM_EXTENDED: Final = frozenset("^{}\\[~]|€\f")
_PLACEHOLDER_RE: Final = re.compile(r"\{\{\s*([A-Za-z0-9_]+)\s*\}\}")


@dataclass(frozen=True)
class SmsRequest:
    """A validated SMS: the text to send and what it references."""

    phone_number: str
    text: str
    sender_id: str | None
    canned_message: Mapping[str, Any] | None
    source: Mapping[str, str] | None


def validate_sms(
    body: Mapping[str, Any],
    *,
    canned_messages: Mapping[int, Mapping[str, Any]],
    sender_ids: Collection[str],
) -> tuple[SmsRequest | None, dict[str, list[str]]]:
    """Every rule of the spec's SMS table; returns the request or field errors."""
    errs = body_errors(body, ("phone_number", "message", "sender_id", "source"))
    require_phone(errs, body)
    text, canned = "", None
    if require(errs, "", body, "message"):
        text, canned = _sms_message(errs, body["message"], canned_messages)
    # Optional means absent: an explicit null is not a string (or an object) either.
    sender = body.get("sender_id")
    if "sender_id" in body:
        _sender_id(errs, sender, sender_ids)
    source = body.get("source")
    if "source" in body:
        check_string_fields(errs, "source", source, ("system", "account_id"), required=True)
    if errs:
        return None, errs.errors
    return SmsRequest(body["phone_number"], text, sender, canned, source), {}


def _sms_message(
    errs: FieldErrors, message: Any, canned_messages: Mapping[int, Mapping[str, Any]]
) -> tuple[str, Mapping[str, Any] | None]:
    if not check_type(errs, "message", message, "object"):
        return "", None
    check_unknown(errs, "message", message, ("content_type", "content_data"))
    if not require_all(errs, "message", message, ("content_type", "content_data")):
        return "", None
    kind = message["content_type"]
    if not check_enum(errs, "message.content_type", kind, SMS_CONTENT_TYPES):
        return "", None
    data = message["content_data"]
    path = "message.content_data"
    if not check_type(errs, path, data, "object"):
        return "", None
    if kind == "text":
        check_unknown(errs, path, data, ("body",))
        if require(errs, path, data, "body") and check_type(
            errs, join(path, "body"), data["body"], "string"
        ):
            if not data["body"]:
                errs.add(join(path, "body"), "can't be blank")
            return str(data["body"]), None
        return "", None
    check_unknown(errs, path, data, ("canned_message_id", "params"))
    params = data.get("params", {})
    params_ok = check_type(errs, join(path, "params"), params, "object")
    if params_ok:
        for key, value in params.items():
            check_type(errs, join(path, f"params.{key}"), value, "string")
    if not require(errs, path, data, "canned_message_id"):
        return "", None
    ref = data["canned_message_id"]
    if not check_type(errs, join(path, "canned_message_id"), ref, "integer"):
        return "", None
    canned = canned_messages.get(ref)
    if canned is None:
        errs.add(join(path, "canned_message_id"), MISSING_REF)
        return "", None
    if params_ok:
        for key in canned.get("params") or ():
            if key not in params:
                errs.add(join(path, f"params.{key}"), "is required")
    template = str(canned.get("body") or "")
    return render_template(template, params if params_ok else {}), canned


def _sender_id(errs: FieldErrors, sender: Any, sender_ids: Collection[str]) -> None:
    if not check_type(errs, "sender_id", sender, "string"):
        return
    if not (PHONE_RE.fullmatch(sender) or ALNUM_RE.fullmatch(sender)):
        errs.add(
            "sender_id",
            "must be an E.164 number without a leading plus or 1 to 30 letters and digits",
        )
    elif sender not in sender_ids:
        errs.add("sender_id", "is not a sender ID of this contact center")


def render_template(template: str, params: Mapping[str, Any]) -> str:
    """Fill ``{{key}}`` placeholders; unknown ones stay as written."""
    return _PLACEHOLDER_RE.sub(lambda m: str(params.get(m.group(1), m.group(0))), template)


def segments_count(text: str) -> int:
    """SMS segments: GSM-7 fits 160 septets (153 per part), anything else UCS-2 70 (67)."""
    if all(ch in _GSM_BASIC or ch in _GSM_EXTENDED for ch in text):
        units, single, part = sum(2 if ch in _GSM_EXTENDED else 1 for ch in text), 160, 153
    else:
        units, single, part = len(text.encode("utf-16-le")) // 2, 70, 67
    if units <= single:
        return 1
    return math.ceil(units / part)


def sms_cost(segments: int) -> Decimal:
    return SMS_PRICE_PER_SEGMENT * segments


_SENDER_NAMESPACE: Final = uuid.UUID("2c8f4e1a-6b3d-4f7a-9c2e-5d1b8a7f3e60")


def sender_endpoint(sender: str) -> dict[str, Any]:
    """The CDR's `from` for an SMS sender, within the spec's two endpoint shapes: a number
    sender is a `phone_number` endpoint; an alphanumeric sender ID (never a phone number) is a
    `channel_account` of channel `sms` whose identifier is the sender ID."""
    if PHONE_RE.fullmatch(sender):
        return {"type": "phone_number", "phone_number": sender}
    account = {
        "id": str(uuid.uuid5(_SENDER_NAMESPACE, sender)),
        "channel": "sms",
        "identifier": sender,
        "data": {"name": sender, "username": sender.lower()},
        "name_snapshot": sender,
        "deleted": False,
    }
    return {"type": "channel_account", "channel_account": account}


def sms_cdr(
    request: SmsRequest,
    *,
    sms_id: str,
    sender: str,
    sent_at: datetime,
    cost: Decimal,
) -> dict[str, Any]:
    """The ``sms`` CDR an accepted SMS leaves: subtype outbound_sms, disposition sent."""
    canned = request.canned_message
    ref = None
    if canned is not None:
        name = canned.get("name")
        ref = {"id": canned.get("id"), "name": name, "name_snapshot": name, "deleted": False}
    stamp = iso_ms(sent_at)
    return {
        "id": sms_id,
        "type": "sms",
        "subtype": "outbound_sms",
        "disposition": "sent",
        "from": sender_endpoint(sender),
        "to": {"type": "phone_number", "phone_number": request.phone_number},
        "user": None,  # sent through the API, not by an agent
        "cost": cost,  # a Decimal: state.add_cdr serves it as an exact JSON number
        "tags": [],
        "started_at": stamp,
        "ended_at": stamp,
        "data": {
            "sent": True,
            "segments_count": segments_count(request.text),
            "message": request.text,
            "canned_message": ref,
            "related_call": None,
        },
    }


# --- conversations ----------------------------------------------------------------------------


def validate_conversation(
    body: Mapping[str, Any], *, user_ids: Collection[str]
) -> dict[str, list[str]]:
    errs = body_errors(body, ("phone_number", "channel", "user_id", "message"))
    require_phone(errs, body)
    if require(errs, "", body, "channel"):
        check_enum(errs, "channel", body["channel"], CONVERSATION_CHANNELS)
    _optional_user(errs, body, user_ids)
    if "message" in body and check_type(errs, "message", body["message"], "object"):
        _message_content(errs, "message", body["message"], text_only=True)
    return errs.errors


def validate_message(body: Mapping[str, Any], *, user_ids: Collection[str]) -> dict[str, list[str]]:
    errs = body_errors(body, ("content_type", "content_data", "user_id"))
    _optional_user(errs, body, user_ids)
    _message_content(errs, "", body, text_only=False)
    return errs.errors


def _optional_user(errs: FieldErrors, body: Mapping[str, Any], user_ids: Collection[str]) -> None:
    user_id = body.get("user_id")
    if "user_id" in body and check_uuid(errs, "user_id", user_id) and user_id not in user_ids:
        errs.add("user_id", MISSING_REF)


def _message_content(
    errs: FieldErrors, prefix: str, body: Mapping[str, Any], *, text_only: bool
) -> None:
    if prefix:
        check_unknown(errs, prefix, body, ("content_type", "content_data"))
    if not require_all(errs, prefix, body, ("content_type", "content_data")):
        return
    allowed = ("text",) if text_only else MESSAGE_CONTENT_TYPES
    kind = body["content_type"]
    data_path = join(prefix, "content_data")
    if not check_enum(errs, join(prefix, "content_type"), kind, allowed):
        return
    data = body["content_data"]
    if not check_type(errs, data_path, data, "object"):
        return
    if kind == "text":
        check_unknown(errs, data_path, data, ("text",))
        if require(errs, data_path, data, "text"):
            check_type(errs, join(data_path, "text"), data["text"], "string")
        return
    check_unknown(errs, data_path, data, ("url", "filename", "size", "caption"))
    if require(errs, data_path, data, "url"):
        check_type(errs, join(data_path, "url"), data["url"], "string")
    for key, kind_name in (("filename", "string"), ("caption", "string")):
        if key in data:
            check_type(errs, join(data_path, key), data[key], kind_name)  # type: ignore[arg-type]
    if "size" in data and not (is_int(data["size"]) and data["size"] >= 0):
        errs.add(join(data_path, "size"), "must be a non-negative integer")


def user_ref(user: Mapping[str, Any] | None) -> dict[str, Any] | None:
    if user is None:
        return None
    return {"id": user["id"], "name": user.get("name"), "email": user.get("email")}


def new_message(
    conversation_id: str,
    *,
    message_id: str,
    content_type: str,
    content_data: Mapping[str, Any],
    user: Mapping[str, Any] | None,
    now: datetime,
) -> dict[str, Any]:
    """An outbound message in the spec's Message shape."""
    stamp = iso_ms(now)
    return {
        "id": message_id,
        "conversation": {"id": conversation_id},
        "direction": "outbound",
        "user": user_ref(user),
        "target_user": None,
        "content_type": content_type,
        "content_data": dict(content_data),
        "status": "sent",
        "status_reason": None,
        "created_at": stamp,
        "updated_at": stamp,
    }


def conversation_view(
    conversation_id: str, messages: Sequence[Mapping[str, Any]], created: Mapping[str, Any] | None
) -> dict[str, Any]:
    """A conversation as POST answers it and GET reads it back: one shape for both.

    A conversation made through the API stays `open` (nothing closes it) and keeps its own
    `created_at`, phone number and agent; a generated one is `open` while its last message is
    inbound (awaiting an answer) and `closed` otherwise."""
    if created is not None:
        status = str(created.get("status", "open"))
        created_at = created.get("created_at")
        phone_number, user = created.get("phone_number"), created.get("user")
        channel = str(created.get("channel", "whatsapp"))
    else:
        status = "open" if messages and messages[-1].get("direction") == "inbound" else "closed"
        created_at = messages[0].get("created_at") if messages else None
        agents = [m["user"] for m in messages if m.get("direction") == "outbound" and m.get("user")]
        phone_number, user, channel = None, agents[0] if agents else None, "whatsapp"
    updated_at = messages[-1].get("updated_at") if messages else created_at
    return {
        "id": conversation_id,
        "channel": channel,
        "status": status,
        "phone_number": phone_number,
        "user": user,
        "messages_count": len(messages),
        "created_at": created_at,
        "updated_at": updated_at,
    }
