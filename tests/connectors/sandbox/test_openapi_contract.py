"""The checked-in OpenAPI document: served as is, in agreement with docs/sandbox.md, and every
sandbox response valid against the document's schema for its status."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest
from jsonschema import Draft202012Validator, FormatChecker
from referencing import Registry
from referencing.jsonschema import DRAFT202012

from connectors.sandbox import Sandbox
from connectors.sandbox.openapi import openapi_bytes
from tests.connectors.sandbox.conftest import Api, make_write_sandbox
from tests.support.paths import REPO_ROOT

DOC: dict[str, Any] = json.loads(openapi_bytes())
CHOICE = "x-sandbox-choice"


def test_the_sandbox_serves_the_checked_in_file_byte_for_byte(api: Api) -> None:
    served = api.get("/api/v4/openapi.json")
    assert served.status_code == 200
    assert served.content == (REPO_ROOT / "connectors/sandbox/openapi.json").read_bytes()
    assert DOC["openapi"] == "3.1.0"


def test_every_operation_has_its_scope_and_statuses() -> None:
    operations = [(m, p, o) for p, ops in DOC["paths"].items() for m, o in ops.items()]
    assert len(operations) == 65
    for method, path, op in operations:
        scopes = op["security"][0]["bearer"]
        assert len(scopes) == 1, (method, path)
        assert {"401", "403", "429"} <= set(op["responses"]), (method, path)
        assert any(s.startswith("2") for s in op["responses"]), (method, path)
    assert DOC["paths"]["/api/v4/users"]["get"]["security"] == [{"bearer": ["users.read"]}]
    post = DOC["paths"]["/api/v4/voice/calls"]["post"]
    assert post["security"] == [{"bearer": ["voice.call.manage"]}]
    assert set(post["responses"]) >= {"201", "401", "403", "422", "429"}


def _doc_choices() -> set[str]:
    found: set[str] = set()

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                if key.startswith(CHOICE):
                    found.update([value] if isinstance(value, str) else value)
                else:
                    walk(value)
        elif isinstance(node, list):
            for item in node:
                walk(item)

    walk(DOC)
    return found


def _table_items() -> set[str]:
    text = (REPO_ROOT / "docs/sandbox.md").read_text()
    table = text[text.index("## What the spec leaves") :]
    rows = [line for line in table.splitlines() if line.startswith("| ")][1:]
    return {row.split(" | ")[0].removeprefix("| ").strip() for row in rows}


def test_every_sandbox_choice_in_the_document_is_a_row_of_docs_sandbox_md_and_back() -> None:
    in_doc, in_table = _doc_choices(), _table_items()
    assert in_doc - in_table == set(), "x-sandbox-choice naming no row of docs/sandbox.md"
    assert in_table - in_doc == set(), "docs/sandbox.md rows the document never marks"


def test_documented_bounds_match_the_sandbox_choices() -> None:
    params = DOC["components"]["parameters"]
    assert params["limit"]["schema"] | {} == {
        "type": "integer", "minimum": 0, "maximum": 1000, "default": 100,
    }  # fmt: skip
    assert params["limit100text"]["schema"]["maximum"] == 100
    assert params["cdrLimit"]["schema"]["minimum"] == 1
    assert params["cdrOffset"]["schema"]["maximum"] == 9999
    arrays = {p["name"] for p in params.values() if p["name"].endswith("[]")}
    assert arrays == {"type[]", "subtype[]", "disposition[]", "account_id[]"}


# --- every response against the document --------------------------------------------------------

_REGISTRY = Registry().with_resource("urn:doc", DRAFT202012.create_resource(DOC))
_TEMPLATES = [
    (re.compile("^" + re.sub(r"\{[^/]+\}", "[^/]+", path) + "$"), path) for path in DOC["paths"]
]


def _template(path: str) -> str:
    # Literal segments win over parameters (/users/deleted before /users/{user_id}).
    matches = [t for rx, t in _TEMPLATES if rx.match(path)]
    assert matches, f"no path of the document matches {path}"
    return min(matches, key=lambda t: t.count("{"))


def check(response: httpx.Response) -> None:
    """Assert `response` is one the document lists for its operation, with a valid body."""
    method = response.request.method.lower()
    path = _template(response.request.url.path)
    op = DOC["paths"][path][method]
    status = str(response.status_code)
    assert status in op["responses"], (method, path, status, response.text[:300])
    spec = op["responses"][status]
    if "$ref" in spec:
        spec = DOC["components"]["responses"][spec["$ref"].rsplit("/", 1)[1]]
    schema = spec["content"]["application/json"]["schema"]
    validator = Draft202012Validator(
        {"$ref": "urn:doc#/" + _pointer(method, path, status, schema)},
        registry=_REGISTRY,
        format_checker=FormatChecker(),
    )
    errors = sorted(validator.iter_errors(response.json()), key=lambda e: list(e.path))
    assert not errors, (
        method,
        path,
        status,
        [f"{list(e.path)}: {e.message[:200]}" for e in errors[:5]],
    )


def _pointer(method: str, path: str, status: str, schema: dict[str, Any]) -> str:
    response = DOC["paths"][path][method]["responses"][status]
    if "$ref" in response:
        name = response["$ref"].rsplit("/", 1)[1]
        return f"components/responses/{name}/content/application~1json/schema"
    escaped = path.replace("~", "~0").replace("/", "~1")
    return f"paths/{escaped}/{method}/responses/{status}/content/application~1json/schema"


class Checked(Api):
    """The tests' client with every response checked against the document."""

    def request(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        response = super().request(method, path, **kwargs)
        if response.request.url.path.startswith("/api/v4/") and "openapi" not in path:
            check(response)
        return response


@pytest.fixture
def sandbox() -> Sandbox:
    return make_write_sandbox(
        {"narrow": frozenset({"billing.balance.read"})}, now=datetime(2026, 11, 3, 12, tzinfo=UTC)
    )


@pytest.fixture
def checked(sandbox: Sandbox) -> Iterator[Checked]:
    with Checked(sandbox, prefix="/api/v4") as client:
        yield client


CONTACT = "4915112345678"


def test_every_read_response_matches_the_document(checked: Checked, sandbox: Sandbox) -> None:
    ds = sandbox.dataset
    user, deleted = ds.users[0]["id"], ds.deleted_users[0]["id"]
    conv = next(iter(ds.conversations))
    message = ds.conversations[conv][0]["id"]
    reads = [
        "/routing/queues", "/routing/queues/1", "/routing/queues/1/users",
        "/routing/queues/1/supervisors", "/routing/skills", "/routing/skills/1",
        "/users?limit=5", f"/users/{user}", "/users/deleted", f"/users/deleted/{deleted}",
        "/users/teams", "/users/teams/1", "/teams/1/users", "/teams/1/supervisors",
        "/users/teams/1/users", "/users/teams/1/supervisors", "/users/skills", "/users/skills/1",
        "/campaigns", "/campaigns/1", "/campaigns/1/users", "/campaigns/1/teams",
        "/reporting/cdrs?limit=1000", "/reporting/cdrs?limit=1000&offset=300",
        "/reporting/cdrs/events?limit=50", f"/messaging/conversations/{conv}",
        f"/messaging/conversations/{conv}/messages",
        f"/messaging/conversations/{conv}/messages/{message}",
        "/messaging/whatsapp_templates", "/messaging/whatsapp_templates/1",
        "/messaging/canned_messages", "/messaging/canned_messages/1",
        "/messaging/channel_profiles", "/messaging/channel_profiles/1",
        "/contact_center/wrapup_codes", "/contact_center/wrapup_codes/1",
        "/contact_center/wrapup_code_groups", "/contact_center/wrapup_code_groups/1",
        "/numbers", "/numbers/1", "/numbers/caller-id-groups", "/billing/balance",
        "/tasks/webhook_failures", "/tasks/webhooks/failures", "/tasks/scheduled_callbacks",
        "/tasks/schedule_callbacks",
    ]  # fmt: skip
    for path in reads:
        assert checked.get(path).status_code == 200, path
    cdrs = checked.get("/reporting/cdrs?limit=1000").json()["cdrs"]
    assert {c["type"] for c in cdrs} == {"call", "conversation", "hlr_lookup", "sms"}
    checked.get(f"/reporting/cdrs/{cdrs[0]['id']}")
    # Errors too: 400, 401, 403, 404, 422 bodies.
    assert checked.get("/reporting/cdrs?cursor=bogus&offset=-1").status_code == 400
    assert checked.get("/users?limit=5000").status_code == 422
    assert checked.get("/users?limt=5").status_code == 422
    assert checked.get("/routing/queues/999").status_code == 404
    assert checked.get(f"/users/{deleted}").status_code == 404
    with (
        Checked(sandbox, key="narrow", prefix="/api/v4") as narrow,
        Checked(sandbox, key=None, prefix="/api/v4") as anonymous,
    ):
        assert narrow.get("/users").status_code == 403
        assert anonymous.get("/billing/balance").status_code == 401


def test_every_write_response_matches_the_document(checked: Checked, sandbox: Sandbox) -> None:
    ds = sandbox.dataset
    agent = ds.users[0]["id"]
    call = checked.post("/voice/calls", {"phone_number": CONTACT, "user_id": agent})
    assert call.status_code == 201
    call_id = call.json()["call"]["id"]
    assert checked.post(f"/voice/calls/{call_id}/hangup", {"user_id": agent}).status_code == 200
    assert checked.post(f"/voice/calls/{call_id}/hangup", {"user_id": agent}).status_code == 409
    sets = [{"phone_numbers": [CONTACT]}, {"phone_numbers": ["4930123456789"]}]
    created = checked.post("/campaigns", {"name": "Spring drive", "caller_id_sets": sets})
    assert created.status_code == 201
    cid = created.json()["campaign"]["id"]
    patch = {
        "amd_voicemail_message": {"enabled": True, "voice_message_id": 1},
        "follow_up_rules": {
            "busy": [{"wait_time": 5, "wait_time_unit": "minutes", "switch_caller_id_set": True}]
        },
        "amd_comfort_noise_enabled": True,
    }
    assert checked.patch(f"/campaigns/{cid}", patch).status_code == 200
    for action in ("start", "pause", "stop"):
        assert checked.post(f"/campaigns/{cid}/{action}").status_code == 200
    assert checked.post(f"/campaigns/{cid}/pause").status_code == 409
    leads = checked.post(
        f"/campaigns/{cid}/leads", {"leads": [{"phone_number": CONTACT, "data": {"k": "v"}}]}
    )
    assert leads.status_code == 201
    lead_id = leads.json()["leads"][0]["id"]
    assert (
        checked.patch(
            f"/campaigns/{cid}/leads", {"leads": [{"id": lead_id, "name": "Ada"}]}
        ).status_code
        == 200
    )
    assert checked.post("/campaigns", {"name": "x"}).status_code == 422
    for sender in ("CDRHOUSE", ds.cc_phones[1]):
        sms = checked.post(
            "/messaging/sms",
            {"phone_number": CONTACT, "sender_id": sender,
             "message": {"content_type": "text", "content_data": {"body": "Hello"}}},
        )  # fmt: skip
        assert sms.status_code == 201
        assert checked.get(f"/reporting/cdrs/{sms.json()['sms']['id']}").status_code == 200
    conv = checked.post(
        "/messaging/conversations",
        {"phone_number": CONTACT, "channel": "whatsapp", "user_id": agent,
         "message": {"content_type": "text", "content_data": {"text": "Hi"}}},
    )  # fmt: skip
    assert conv.status_code == 201
    conv_id = conv.json()["conversation"]["id"]
    assert checked.get(f"/messaging/conversations/{conv_id}").status_code == 200
    media = {
        "content_type": "image",
        "content_data": {"url": "https://x.example/a.jpg", "size": 10},
    }
    assert checked.post(f"/messaging/conversations/{conv_id}/messages", media).status_code == 201
    for path in ("/tasks/scheduled_callbacks", "/tasks/schedule_callbacks"):
        made = checked.post(
            path, {"phone_number": CONTACT, "scheduled_at": "2026-11-04T10:00:00Z", "queue_id": 1}
        )
        assert made.status_code == 201
        assert checked.get(f"{path}/{made.json()['scheduled_callback']['id']}").status_code == 200
    failure = ds.webhook_failures[0]["id"]
    assert checked.post(f"/tasks/webhook_failures/{failure}/retrigger").status_code == 200
    assert checked.get(f"/tasks/webhooks/failures/{failure}/retrigger").status_code == 200
    assert checked.get("/reporting/cdrs?limit=1000&account_id=ACC-00001").status_code == 200


def test_the_check_refuses_what_the_sandbox_used_to_serve(shared: Sandbox) -> None:
    cdr_id = "6a6b0b76-4bac-4936-8745-ce7d647f99bb"
    request = httpx.Request("GET", f"http://127.0.0.1/api/v4/reporting/cdrs/{cdr_id}")
    sms: dict[str, Any] = {
        "id": cdr_id, "type": "sms", "subtype": "outbound_sms", "disposition": "sent",
        "from": {"type": "phone_number", "phone_number": "CDRHOUSE"},
        "to": {"type": "phone_number", "phone_number": "4915112345678"},
        "user": None, "cost": 0.065, "tags": [], "started_at": "2026-11-01T10:53:40.127Z",
        "ended_at": "2026-11-01T10:53:43.871Z",
        "data": {"sent": True, "segments_count": 1, "message": "x", "canned_message": None,
                 "related_call": None},
    }  # fmt: skip
    with pytest.raises(AssertionError, match="phone_number"):
        check(httpx.Response(200, json={"cdr": sms}, request=request))
    sms["from"] = {"type": "phone_number", "phone_number": "4930123456"}
    check(httpx.Response(200, json={"cdr": sms}, request=request))
    slash = httpx.Request("GET", "http://127.0.0.1/api/v4/users/")
    with pytest.raises(AssertionError):
        check(httpx.Response(307, json={}, request=slash))
