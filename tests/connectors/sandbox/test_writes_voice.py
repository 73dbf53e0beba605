"""Voice writes over HTTP: start a call, hang it up, and find the call CDR it leaves."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

import pytest

from connectors.sandbox import Sandbox
from connectors.sandbox.config import ALL_SCOPES
from tests.connectors.sandbox.conftest import V4, Api, make_write_sandbox, v4_api

NO_VOICE_KEY = "no-voice"
CONFLICT = {"errors": {"state": ["conflict"]}}
CONTACT = "4915112345678"
NOW = datetime(2026, 11, 2, 10, 0, tzinfo=UTC)


@pytest.fixture
def sandbox() -> Sandbox:
    return make_write_sandbox({NO_VOICE_KEY: ALL_SCOPES - {"voice.call.manage"}}, NOW)


@pytest.fixture
def api(sandbox: Sandbox) -> Iterator[Api]:
    yield from v4_api(sandbox)


@pytest.fixture
def agent(sandbox: Sandbox) -> dict[str, Any]:
    user: dict[str, Any] = sandbox.dataset.users[0]
    return user


def start(api: Api, agent: dict[str, Any], **extra: Any) -> str:
    response = api.post("/voice/calls", {"phone_number": CONTACT, "user_id": agent["id"], **extra})
    assert response.status_code == 201, response.text
    call_id: str = response.json()["call"]["id"]
    return call_id


def balance(api: Api) -> Decimal:
    return Decimal(api.get("/billing/balance").json()["balance"]["amount"])


def test_start_call_answers_201_and_counts(
    api: Api, sandbox: Sandbox, agent: dict[str, Any]
) -> None:
    before = sandbox.counters.get("calls_started", 0)
    response = api.post("/voice/calls", {"phone_number": CONTACT, "user_id": agent["id"]})
    assert response.status_code == 201
    body = response.json()
    assert set(body) == {"call"}
    assert set(body["call"]) == {"id"}
    uuid.UUID(body["call"]["id"])
    second = start(api, agent, caller_id="4930123456", source={"account_id": "A1", "name": "CRM"})
    assert second != body["call"]["id"]
    assert sandbox.counters["calls_started"] == before + 2


def test_hangup_makes_a_call_cdr_and_charges_the_balance(
    api: Api, sandbox: Sandbox, agent: dict[str, Any]
) -> None:
    call_id = start(api, agent, source={"account_id": "ACC-CALL-1", "name": "CRM"})
    assert api.get(f"/reporting/cdrs/{call_id}").status_code == 404  # still active
    before = balance(api)
    sandbox.clock.advance(timedelta(seconds=95))
    response = api.post(f"/voice/calls/{call_id}/hangup", {"user_id": agent["id"]})
    assert (response.status_code, response.json()) == (200, {"call": {"id": call_id}})

    cdr = api.get(f"/reporting/cdrs/{call_id}").json()["cdr"]
    assert (cdr["type"], cdr["subtype"], cdr["disposition"]) == ("call", "outbound", "answered")
    assert cdr["from"] == {"type": "phone_number", "phone_number": agent["caller_id"]}
    assert cdr["to"] == {"type": "phone_number", "phone_number": CONTACT}
    assert cdr["user"] == {
        "id": agent["id"],
        "name": agent["name"],
        "email": agent["email"],
        "name_snapshot": agent["name"],
        "deleted": False,
    }
    assert (cdr["started_at"], cdr["ended_at"]) == (
        "2026-11-02T10:00:00.000Z",
        "2026-11-02T10:01:35.000Z",
    )
    data = cdr["data"]
    assert set(data) == {
        "queue", "campaign", "destination_country", "durations", "end_reason", "wrapup_code",
        "summary", "conversation_score", "mos", "mos_tc",
    }  # fmt: skip
    assert data["durations"] == {
        "overall": 95, "dialing": 4, "ivr": 0, "queue": 0, "talk": 91, "hold": 0
    }  # fmt: skip
    assert data["destination_country"] == "DE"
    assert data["end_reason"] == "agent_hangup"
    # Two started minutes at 0.0200: the balance drops by exactly the CDR's cost.
    assert Decimal(str(cdr["cost"])) == Decimal("0.04")
    assert before - balance(api) == Decimal("0.04")

    listed = api.get(
        "/reporting/cdrs", params={"type[]": "call", "user_id": agent["id"], "limit": 1000}
    ).json()["cdrs"]
    assert call_id in {c["id"] for c in listed}
    by_account = api.get("/reporting/cdrs", params={"account_id": "ACC-CALL-1"}).json()["cdrs"]
    assert [c["id"] for c in by_account] == [call_id]


def test_hangup_requires_an_active_call(api: Api, agent: dict[str, Any]) -> None:
    call_id = start(api, agent)
    path = f"/voice/calls/{call_id}/hangup"
    assert api.post(path, {"user_id": agent["id"]}).status_code == 200
    again = api.post(path, {"user_id": agent["id"]})
    assert (again.status_code, again.json()) == (409, CONFLICT)
    unknown = api.post(f"/voice/calls/{uuid.uuid4()}/hangup", {"user_id": agent["id"]})
    assert (unknown.status_code, unknown.json()) == (404, {"error": "Not found"})


def test_only_the_calls_agent_can_hang_up(
    api: Api, sandbox: Sandbox, agent: dict[str, Any]
) -> None:
    call_id = start(api, agent)
    path = f"/voice/calls/{call_id}/hangup"
    other = sandbox.dataset.users[1]["id"]
    wrong = api.post(path, {"user_id": other})
    assert wrong.status_code == 422
    assert wrong.json()["errors"] == {"user_id": ["is not the agent handling this call"]}
    assert api.post(path, {}).json()["errors"] == {"user_id": ["is required"]}
    # The spec also types the agent id as an integer: a valid type, but no agent of this call.
    as_int = api.post(path, {"user_id": 17}).json()["errors"]
    assert as_int == {"user_id": ["is not the agent handling this call"]}
    assert api.post(path, {"user_id": True}).json()["errors"] == {"user_id": ["must be a string"]}
    assert api.post(path, {"user_id": agent["id"]}).status_code == 200  # still active after


START_CASES = [
    ("phone-missing", {"phone_number": None}, "phone_number", "is required"),
    ("phone-plus", {"phone_number": "+4915112345678"}, "phone_number", "E.164"),
    ("phone-letters", {"phone_number": "49151abc"}, "phone_number", "E.164"),
    ("phone-type", {"phone_number": 4915112345678}, "phone_number", "must be a string"),
    ("user-missing", {"user_id": None}, "user_id", "is required"),
    ("user-not-uuid", {"user_id": "42"}, "user_id", "must be a UUID"),
    ("user-unknown", {"user_id": str(uuid.UUID(int=1))}, "user_id", "does not exist"),
    ("caller-id-invalid", {"caller_id": "0301234"}, "caller_id", "E.164"),
    ("source-type", {"source": "crm"}, "source", "must be an object"),
    ("source-name-type", {"source": {"name": 3}}, "source.name", "must be a string"),
    ("unknown-field", {"queue_id": 1}, "queue_id", "not a known field"),
]


@pytest.mark.parametrize(
    ("change", "field", "message"), [c[1:] for c in START_CASES], ids=[c[0] for c in START_CASES]
)
def test_start_call_rejects(
    api: Api,
    sandbox: Sandbox,
    agent: dict[str, Any],
    change: dict[str, Any],
    field: str,
    message: str,
) -> None:
    body: dict[str, Any] = {"phone_number": CONTACT, "user_id": agent["id"]}
    for key, value in change.items():
        if value is None:
            del body[key]
        else:
            body[key] = value
    response = api.post("/voice/calls", body)
    assert response.status_code == 422
    assert any(message in text for text in response.json()["errors"][field])
    assert sandbox.counters.get("calls_started", 0) == 0  # refused calls are not counted


def test_deleted_user_cannot_start_a_call(api: Api, sandbox: Sandbox) -> None:
    gone = sandbox.dataset.deleted_users[0]["id"]
    response = api.post("/voice/calls", {"phone_number": CONTACT, "user_id": gone})
    assert response.json()["errors"] == {"user_id": ["does not exist"]}


def test_voice_auth_and_malformed_body(sandbox: Sandbox, agent: dict[str, Any]) -> None:
    with (
        Api(sandbox, key=None, prefix=V4) as anonymous,
        Api(sandbox, key=NO_VOICE_KEY, prefix=V4) as scoped_out,
        Api(sandbox, prefix=V4) as authorized,
    ):
        body = {"phone_number": CONTACT, "user_id": agent["id"]}
        assert anonymous.post("/voice/calls", body).status_code == 401
        denied = scoped_out.post("/voice/calls", body)
        assert (denied.status_code, denied.json()) == (403, {"error": "Forbidden"})
        hangup = scoped_out.post(f"/voice/calls/{uuid.uuid4()}/hangup", {"user_id": agent["id"]})
        assert hangup.status_code == 403
        broken = authorized.request("POST", "/voice/calls", content=b"{oops")
        assert (broken.status_code, broken.json()) == (400, {"error": "Bad Request"})
