"""Tasks writes over HTTP: scheduled callbacks (both path spellings) and webhook retriggers."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest

from connectors.sandbox import Sandbox
from tests.connectors.sandbox.conftest import V4, Api, make_write_sandbox, v4_api

READ_TASKS_KEY = "tasks-reader"
CONTACT = "14155550123"
NOW = datetime(2026, 11, 1, 8, 0, tzinfo=UTC)
CALLBACK_PATHS = ["/tasks/scheduled_callbacks", "/tasks/schedule_callbacks"]


@pytest.fixture
def sandbox() -> Sandbox:
    reader = frozenset({"tasks.webhooks.read", "tasks.scheduled_callbacks.read"})
    return make_write_sandbox({READ_TASKS_KEY: reader}, NOW)


@pytest.fixture
def api(sandbox: Sandbox) -> Iterator[Api]:
    yield from v4_api(sandbox)


@pytest.mark.parametrize("path", CALLBACK_PATHS, ids=["scheduled", "schedule"])
def test_schedule_callback(api: Api, sandbox: Sandbox, path: str) -> None:
    agent, queue = sandbox.dataset.users[2], sandbox.dataset.queues[0]
    body = {
        "phone_number": CONTACT,
        "scheduled_at": "2026-11-01T15:30:00+01:00",
        "user_id": agent["id"],
        "queue_id": queue["id"],
        "note": "Asked for a call after lunch",
    }
    response = api.post(path, body)
    assert response.status_code == 201, response.text
    callback = response.json()["scheduled_callback"]
    uuid.UUID(callback["id"])
    assert callback["phone_number"] == CONTACT
    assert callback["scheduled_at"] == "2026-11-01T14:30:00.000Z"  # normalized to UTC, ms
    assert callback["user"] == {"id": agent["id"], "name": agent["name"], "email": agent["email"]}
    assert callback["queue"] == {"id": queue["id"], "name": queue["name"]}
    assert (callback["status"], callback["created_at"]) == ("scheduled", "2026-11-01T08:00:00.000Z")
    for read_path in CALLBACK_PATHS:  # readable under both spellings
        listed = api.get(read_path).json()["scheduled_callbacks"]
        assert [c["id"] for c in listed] == [callback["id"]]
        assert api.get(f"{read_path}/{callback['id']}").json()["scheduled_callback"] == callback


CALLBACK_CASES = [
    ("phone-missing", {"phone_number": None}, "phone_number", "is required"),
    ("phone-invalid", {"phone_number": "+1415"}, "phone_number", "E.164"),
    ("time-missing", {"scheduled_at": None}, "scheduled_at", "is required"),
    ("time-not-iso", {"scheduled_at": "tomorrow 3pm"}, "scheduled_at", "ISO 8601"),
    ("time-in-past", {"scheduled_at": "2026-11-01T07:59:59Z"}, "scheduled_at", "in the future"),
    ("user-unknown", {"user_id": str(uuid.UUID(int=9))}, "user_id", "does not exist"),
    ("queue-unknown", {"queue_id": 999}, "queue_id", "does not exist"),
    ("queue-type", {"queue_id": "1"}, "queue_id", "must be an integer"),
    ("note-too-long", {"note": "x" * 1001}, "note", "at most 1000"),
]


@pytest.mark.parametrize(
    ("change", "field", "message"),
    [c[1:] for c in CALLBACK_CASES],
    ids=[c[0] for c in CALLBACK_CASES],
)
def test_schedule_callback_rejects(
    api: Api, change: dict[str, Any], field: str, message: str
) -> None:
    body: dict[str, Any] = {"phone_number": CONTACT, "scheduled_at": "2026-11-02T09:00:00Z"}
    for key, value in change.items():
        if value is None:
            del body[key]
        else:
            body[key] = value
    response = api.post(CALLBACK_PATHS[0], body)
    assert response.status_code == 422
    assert any(message in text for text in response.json()["errors"][field])
    assert api.get(CALLBACK_PATHS[0]).json()["scheduled_callbacks"] == []


RETRIGGER_ROUTES = [
    ("POST", "/tasks/webhook_failures/{id}/retrigger"),
    ("GET", "/tasks/webhooks/failures/{id}/retrigger"),
    ("POST", "/tasks/webhooks/failures/{id}/retrigger"),
]


@pytest.mark.parametrize(
    ("method", "template"), RETRIGGER_ROUTES, ids=["post", "get-mapping", "post-mapping"]
)
def test_retrigger_webhook_failure(api: Api, method: str, template: str) -> None:
    failure = api.get("/tasks/webhook_failures").json()["webhook_failures"][0]
    assert failure["retriggered_at"] is None
    response = api.request(method, template.format(id=failure["id"]))
    assert response.status_code == 200, response.text
    after = response.json()["webhook_failure"]
    assert after["retriggered_at"] == "2026-11-01T08:00:00.000Z"
    assert after["attempts"] == failure["attempts"] + 1
    assert {k: v for k, v in after.items() if k not in ("retriggered_at", "attempts")} == {
        k: v for k, v in failure.items() if k not in ("retriggered_at", "attempts")
    }
    again = api.request(method, template.format(id=failure["id"])).json()["webhook_failure"]
    assert again["attempts"] == failure["attempts"] + 2  # each retrigger sends again
    listed = api.get("/tasks/webhook_failures").json()["webhook_failures"]
    assert next(f for f in listed if f["id"] == failure["id"]) == again


def test_retrigger_unknown_failure_is_404(api: Api) -> None:
    response = api.post(f"/tasks/webhook_failures/{uuid.uuid4()}/retrigger")
    assert (response.status_code, response.json()) == (404, {"error": "Not found"})


def test_tasks_writes_need_their_scopes(sandbox: Sandbox) -> None:
    with (
        Api(sandbox, key=READ_TASKS_KEY, prefix=V4) as reader,
        Api(sandbox, key=None, prefix=V4) as anonymous,
    ):
        failure_id = reader.get("/tasks/webhook_failures").json()["webhook_failures"][0]["id"]
        denied = reader.post(f"/tasks/webhook_failures/{failure_id}/retrigger")
        assert (denied.status_code, denied.json()) == (403, {"error": "Forbidden"})
        body = {"phone_number": CONTACT, "scheduled_at": "2026-11-02T09:00:00Z"}
        assert reader.post(CALLBACK_PATHS[0], body).status_code == 403
        assert anonymous.post(CALLBACK_PATHS[1], body).status_code == 401
