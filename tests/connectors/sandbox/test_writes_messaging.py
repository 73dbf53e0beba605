"""Messaging writes over HTTP: every SMS rule, the sms CDR and its cost, conversations."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import pytest

from connectors.sandbox import Sandbox
from connectors.sandbox.config import ALL_SCOPES
from tests.connectors.sandbox.conftest import V4, Api, make_write_sandbox, v4_api

NO_SMS_KEY = "no-sms"
CONTACT = "447700900123"
NOW = datetime(2026, 11, 1, 12, 30, tzinfo=UTC)


@pytest.fixture
def sandbox() -> Sandbox:
    return make_write_sandbox({NO_SMS_KEY: ALL_SCOPES - {"messaging.sms.send"}}, NOW)


@pytest.fixture
def api(sandbox: Sandbox) -> Iterator[Api]:
    yield from v4_api(sandbox)


def text_sms(body: str = "Your parcel arrives today.", **extra: Any) -> dict[str, Any]:
    message = {"content_type": "text", "content_data": {"body": body}}
    return {"phone_number": CONTACT, "message": message, **extra}


def send(api: Api, body: dict[str, Any]) -> dict[str, Any]:
    response = api.post("/messaging/sms", body)
    assert response.status_code == 201, response.text
    sms_id = response.json()["sms"]["id"]
    cdr: dict[str, Any] = api.get(f"/reporting/cdrs/{sms_id}").json()["cdr"]
    return cdr


def balance(api: Api) -> Decimal:
    return Decimal(api.get("/billing/balance").json()["balance"]["amount"])


# --- SMS success ------------------------------------------------------------------------------


def test_text_sms_answers_201_and_leaves_an_sms_cdr(api: Api, sandbox: Sandbox) -> None:
    before = balance(api)
    response = api.post("/messaging/sms", text_sms())
    assert response.status_code == 201
    assert set(response.json()) == {"sms"}
    sms_id = response.json()["sms"]["id"]
    uuid.UUID(sms_id)
    assert sandbox.counters["sms_received"] == 1

    cdr = api.get(f"/reporting/cdrs/{sms_id}").json()["cdr"]
    assert (cdr["type"], cdr["subtype"], cdr["disposition"]) == ("sms", "outbound_sms", "sent")
    assert cdr["from"] == {"type": "phone_number", "phone_number": sandbox.dataset.cc_phones[0]}
    assert cdr["to"] == {"type": "phone_number", "phone_number": CONTACT}
    assert cdr["started_at"] == "2026-11-01T12:30:00.000Z"
    assert cdr["data"] == {
        "sent": True,
        "segments_count": 1,
        "message": "Your parcel arrives today.",
        "canned_message": None,
        "related_call": None,
    }
    assert Decimal(str(cdr["cost"])) == Decimal("0.065")
    assert before - balance(api) == Decimal("0.065")
    listed = api.get("/reporting/cdrs", params={"type": "sms", "to_phone_number": CONTACT}).json()[
        "cdrs"
    ]
    assert [c["id"] for c in listed] == [sms_id]


def test_canned_sms_fills_its_params(api: Api) -> None:
    content = {"canned_message_id": 1, "params": {"first_name": "Ada", "date": "Monday"}}
    body = {
        "phone_number": CONTACT,
        "message": {"content_type": "canned_message", "content_data": content},
    }
    cdr = send(api, body)
    assert cdr["data"]["message"] == "Hi Ada, see you on Monday."
    assert cdr["data"]["canned_message"] == {
        "id": 1,
        "name": "Appointment reminder",
        "name_snapshot": "Appointment reminder",
        "deleted": False,
    }


@pytest.mark.parametrize(
    ("text", "segments"),
    [("a" * 160, 1), ("a" * 161, 2), ("a" * 306, 2), ("a" * 307, 3), ("ü" * 70, 1), ("ж" * 71, 2)],
    ids=["gsm-160", "gsm-161", "gsm-306", "gsm-307", "gsm-umlaut-70", "ucs2-71"],
)
def test_segments_and_cost(api: Api, text: str, segments: int) -> None:
    before = balance(api)
    cdr = send(api, text_sms(text))
    assert cdr["data"]["segments_count"] == segments
    assert before - balance(api) == Decimal("0.0650") * segments


@pytest.mark.parametrize("sender", ["CDRHOUSE", "Support"])
def test_alphanumeric_sender_id_of_the_contact_center(api: Api, sender: str) -> None:
    # An alphanumeric sender is no phone number (digits only): the spec's other endpoint shape,
    # a channel account of channel sms, carries it.
    origin = send(api, text_sms(sender_id=sender))["from"]
    assert origin["type"] == "channel_account"
    assert "phone_number" not in origin
    account = origin["channel_account"]
    assert (account["channel"], account["identifier"], account["deleted"]) == ("sms", sender, False)
    assert set(account) == {"id", "channel", "identifier", "data", "name_snapshot", "deleted"}
    assert set(account["data"]) == {"name", "username"}


def test_numeric_sender_id_is_a_purchased_number(api: Api, sandbox: Sandbox) -> None:
    number = sandbox.dataset.cc_phones[2]
    assert send(api, text_sms(sender_id=number))["from"]["phone_number"] == number


def test_source_is_kept_as_the_account_id(api: Api) -> None:
    cdr = send(api, text_sms(source={"system": "crm", "account_id": "ACC-SMS-9"}))
    listed = api.get("/reporting/cdrs", params={"account_id": "ACC-SMS-9"}).json()["cdrs"]
    assert [c["id"] for c in listed] == [cdr["id"]]


# --- SMS rules --------------------------------------------------------------------------------


def canned(content_data: Any) -> dict[str, Any]:
    return {"content_type": "canned_message", "content_data": content_data}


SMS_CASES: list[tuple[str, dict[str, Any], str, str]] = [
    ("phone-missing", {"phone_number": None}, "phone_number", "is required"),
    ("phone-plus", {"phone_number": "+447700900123"}, "phone_number", "E.164"),
    ("phone-leading-zero", {"phone_number": "07700900123"}, "phone_number", "E.164"),
    ("phone-too-long", {"phone_number": "1" * 16}, "phone_number", "E.164"),
    ("message-missing", {"message": None}, "message", "is required"),
    ("message-type", {"message": "hi"}, "message", "must be an object"),
    (
        "content-type-missing",
        {"message": {"content_data": {"body": "x"}}},
        "message.content_type",
        "is required",
    ),
    (
        "content-type-case",
        {"message": {"content_type": "TEXT", "content_data": {"body": "x"}}},
        "message.content_type",
        "must be one of",
    ),
    (
        "content-type-not-allowed",
        {"message": {"content_type": "image", "content_data": {"url": "x"}}},
        "message.content_type",
        "must be one of",
    ),
    (
        "content-data-missing",
        {"message": {"content_type": "text"}},
        "message.content_data",
        "is required",
    ),
    (
        "text-without-body",
        {"message": {"content_type": "text", "content_data": {"canned_message_id": 1}}},
        "message.content_data.body",
        "is required",
    ),
    (
        "text-body-type",
        {"message": {"content_type": "text", "content_data": {"body": 5}}},
        "message.content_data.body",
        "must be a string",
    ),
    (
        "canned-without-id",
        {"message": canned({"body": "x"})},
        "message.content_data.canned_message_id",
        "is required",
    ),
    (
        "canned-unknown",
        {"message": canned({"canned_message_id": 99})},
        "message.content_data.canned_message_id",
        "does not exist",
    ),
    (
        "canned-id-type",
        {"message": canned({"canned_message_id": "1"})},
        "message.content_data.canned_message_id",
        "must be an integer",
    ),
    (
        "canned-param-missing",
        {"message": canned({"canned_message_id": 3, "params": {}})},
        "message.content_data.params.code",
        "is required",
    ),
    (
        "canned-params-type",
        {"message": canned({"canned_message_id": 2, "params": ["a"]})},
        "message.content_data.params",
        "must be an object",
    ),
    ("sender-not-assigned", {"sender_id": "OTHERCO"}, "sender_id", "not a sender ID"),
    ("sender-31-chars", {"sender_id": "A" * 31}, "sender_id", "1 to 30"),
    ("sender-symbols", {"sender_id": "ACME-INFO"}, "sender_id", "1 to 30"),
    ("sender-unknown-number", {"sender_id": "4930999999"}, "sender_id", "not a sender ID"),
    ("source-no-account", {"source": {"system": "crm"}}, "source.account_id", "is required"),
    ("source-no-system", {"source": {"account_id": "A"}}, "source.system", "is required"),
    ("source-type", {"source": "crm"}, "source", "must be an object"),
    ("unknown-field", {"priority": "high"}, "priority", "not a known field"),
]


@pytest.mark.parametrize(
    ("change", "field", "message"), [c[1:] for c in SMS_CASES], ids=[c[0] for c in SMS_CASES]
)
def test_sms_rejects(
    api: Api, sandbox: Sandbox, change: dict[str, Any], field: str, message: str
) -> None:
    before = balance(api)
    body = text_sms()
    for key, value in change.items():
        if value is None:
            del body[key]
        else:
            body[key] = value
    response = api.post("/messaging/sms", body)
    assert response.status_code == 422, response.text
    errors = response.json()["errors"]
    assert any(message in text for text in errors[field]), errors
    assert sandbox.counters.get("sms_received", 0) == 0  # only accepted SMS are counted
    assert balance(api) == before


def test_sms_auth_and_malformed_body(sandbox: Sandbox) -> None:
    with (
        Api(sandbox, key=None, prefix=V4) as anonymous,
        Api(sandbox, key=NO_SMS_KEY, prefix=V4) as scoped_out,
        Api(sandbox, prefix=V4) as ok,
    ):
        unauthorized = anonymous.post("/messaging/sms", text_sms())
        assert (unauthorized.status_code, unauthorized.json()) == (401, {"error": "Unauthorized"})
        assert scoped_out.post("/messaging/sms", text_sms()).status_code == 403
        broken = ok.request("POST", "/messaging/sms", content=b'{"phone_number": "4')
        assert (broken.status_code, broken.json()) == (400, {"error": "Bad Request"})
        assert sandbox.counters.get("sms_received", 0) == 0


# --- conversations ----------------------------------------------------------------------------


def test_create_conversation_and_post_messages(api: Api, sandbox: Sandbox) -> None:
    agent = sandbox.dataset.users[3]
    opening = {"content_type": "text", "content_data": {"text": "Hello from ACME"}}
    response = api.post(
        "/messaging/conversations",
        {
            "phone_number": CONTACT,
            "channel": "whatsapp",
            "user_id": agent["id"],
            "message": opening,
        },
    )
    assert response.status_code == 201, response.text
    conversation = response.json()["conversation"]
    assert conversation["channel"] == "whatsapp"
    assert conversation["phone_number"] == CONTACT
    assert conversation["user"] == {
        "id": agent["id"],
        "name": agent["name"],
        "email": agent["email"],
    }
    path = f"/messaging/conversations/{conversation['id']}/messages"

    document = {
        "content_type": "document",
        "content_data": {"url": "https://files.example.net/a.pdf", "filename": "a.pdf", "size": 10},
    }
    posted = api.post(path, document)
    assert posted.status_code == 201
    message = posted.json()["message"]
    assert set(message) == {
        "id", "conversation", "direction", "user", "target_user", "content_type",
        "content_data", "status", "status_reason", "created_at", "updated_at",
    }  # fmt: skip
    assert message["conversation"] == {"id": conversation["id"]}
    assert (message["direction"], message["status"], message["user"]) == ("outbound", "sent", None)
    assert message["content_data"] == document["content_data"]
    assert message["created_at"] == "2026-11-01T12:30:00.000Z"

    listed = api.get(path).json()
    assert listed["metadata"]["total"] == 2
    assert [m["content_type"] for m in listed["messages"]] == ["text", "document"]
    assert listed["messages"][0]["user"]["id"] == agent["id"]


def test_post_message_to_a_generated_conversation(api: Api, sandbox: Sandbox) -> None:
    conversation_id = next(iter(sandbox.dataset.conversations))
    path = f"/messaging/conversations/{conversation_id}/messages"
    total = api.get(path).json()["metadata"]["total"]
    text = {"content_type": "text", "content_data": {"text": "Following up"}}
    assert api.post(path, text).status_code == 201
    assert api.get(path).json()["metadata"]["total"] == total + 1


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"channel": "whatsapp"}, "phone_number"),
        ({"phone_number": CONTACT}, "channel"),
        ({"phone_number": CONTACT, "channel": "WhatsApp"}, "channel"),
        (
            {"phone_number": CONTACT, "channel": "whatsapp", "user_id": str(uuid.UUID(int=5))},
            "user_id",
        ),
        (
            {
                "phone_number": CONTACT,
                "channel": "whatsapp",
                "message": {"content_type": "image", "content_data": {"url": "x"}},
            },
            "message.content_type",
        ),
    ],
    ids=["phone-missing", "channel-missing", "channel-case", "user-unknown", "opening-not-text"],
)
def test_create_conversation_rejects(api: Api, body: dict[str, Any], field: str) -> None:
    response = api.post("/messaging/conversations", body)
    assert response.status_code == 422
    assert field in response.json()["errors"]


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"content_data": {"text": "x"}}, "content_type"),
        ({"content_type": "sticker", "content_data": {}}, "content_type"),
        ({"content_type": "text", "content_data": {"body": "x"}}, "content_data.text"),
        ({"content_type": "image", "content_data": {"caption": "x"}}, "content_data.url"),
        ({"content_type": "video", "content_data": {"url": "u", "size": -1}}, "content_data.size"),
    ],
    ids=["type-missing", "type-enum", "text-missing", "url-missing", "size-negative"],
)
def test_post_message_rejects(api: Api, sandbox: Sandbox, body: dict[str, Any], field: str) -> None:
    conversation_id = next(iter(sandbox.dataset.conversations))
    response = api.post(f"/messaging/conversations/{conversation_id}/messages", body)
    assert response.status_code == 422
    assert field in response.json()["errors"]


def test_post_message_to_unknown_conversation_is_404(api: Api) -> None:
    text = {"content_type": "text", "content_data": {"text": "x"}}
    response = api.post(f"/messaging/conversations/{uuid.uuid4()}/messages", text)
    assert (response.status_code, response.json()) == (404, {"error": "Not found"})
