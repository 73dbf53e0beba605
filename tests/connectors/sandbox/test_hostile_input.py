"""Careless and hostile input never gets a 500, and every error body is the document's JSON.

Unicode digits and odd integers in ids and parameters, date-times at the ends of the range,
cursors that decode to any JSON, a broken record in the state (the last-resort handler), and the
document's own declarations (5xx, `Retry-After`, reference id types). The client here answers an
app exception with a 500, as a socket does, instead of raising it into the test.
"""

from __future__ import annotations

import base64
import copy
import hashlib
import json
import logging
import re
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime
from typing import Any

import httpx
import orjson
import pytest
from jsonschema import Draft202012Validator

from connectors.sandbox import Sandbox
from connectors.sandbox.config import DEFAULT_API_KEY
from connectors.sandbox.faults import FaultConfig
from connectors.sandbox.routes_cdrs import FALLBACK_HEADER
from tests.connectors.sandbox.conftest import Api, make_write_sandbox
from tests.connectors.sandbox.test_openapi_contract import DOC, Checked, check

CONTACT = "4915112345678"
NOT_FOUND = {"error": "Not found"}


def _socket_like(sandbox: Sandbox) -> httpx.AsyncBaseTransport:
    # An exception the app lets escape becomes a 500 here, as uvicorn would answer it.
    return httpx.ASGITransport(app=sandbox.app, raise_app_exceptions=False)


@pytest.fixture(scope="module")
def sandbox() -> Sandbox:
    return make_write_sandbox({}, now=datetime(2026, 11, 3, 12, tzinfo=UTC))


@pytest.fixture(scope="module")
def checked(sandbox: Sandbox) -> Iterator[Checked]:
    with Checked(sandbox, prefix="/api/v4", transport=_socket_like(sandbox)) as client:
        yield client


def _assert_json_error(response: httpx.Response, status: int) -> None:
    where = (response.request.method, str(response.request.url))
    assert response.status_code == status, (*where, response.status_code, response.text[:200])
    assert response.headers["content-type"] == "application/json", where
    check(response)  # listed for the operation, body valid against its schema


# --- integers: ASCII digits only, everywhere ----------------------------------------------------

INT_ID_PATHS = [
    ("GET", "/routing/queues/{}"), ("GET", "/routing/queues/{}/users"),
    ("GET", "/routing/queues/{}/supervisors"), ("GET", "/routing/skills/{}"),
    ("GET", "/users/teams/{}"), ("GET", "/teams/{}/users"), ("GET", "/users/teams/{}/supervisors"),
    ("GET", "/users/skills/{}"), ("GET", "/campaigns/{}"), ("GET", "/campaigns/{}/users"),
    ("GET", "/campaigns/{}/teams"), ("GET", "/numbers/{}"),
    ("GET", "/messaging/canned_messages/{}"), ("GET", "/messaging/whatsapp_templates/{}"),
    ("GET", "/messaging/channel_profiles/{}"), ("GET", "/contact_center/wrapup_codes/{}"),
    ("GET", "/contact_center/wrapup_code_groups/{}"), ("PATCH", "/campaigns/{}"),
    ("POST", "/campaigns/{}/start"), ("POST", "/campaigns/{}/leads"),
    ("PATCH", "/campaigns/{}/leads"),
]  # fmt: skip
# Superscript two, Arabic-Indic one, fullwidth one, then what Python's int() would also take
# (underscores, a sign, spaces, a newline), a hex literal, a doubled minus, and numbers too long
# for any id (int() refuses more than 4300 digits with a ValueError).
NOT_ASCII_INTEGERS = [
    "%C2%B2", "%D9%A1", "%EF%BC%91", "1_0", "+1", "%201", "1%0A", "0x1", "--1", "-1",
    "9" * 30, "9" * 5000,
]  # fmt: skip


def test_an_integer_path_id_is_ascii_digits_or_404(checked: Checked) -> None:
    body = {"leads": [{"id": 1, "phone_number": CONTACT}]}
    for method, template in INT_ID_PATHS:
        for raw in NOT_ASCII_INTEGERS:
            kwargs: dict[str, Any] = {"json": body} if method != "GET" else {}
            response = checked.request(method, template.format(raw), **kwargs)
            _assert_json_error(response, 404)
            assert response.json() == NOT_FOUND
    # The ASCII form still finds its queue: the Arabic-Indic one above is no alias of it.
    assert checked.get("/routing/queues/1").json()["queue"]["id"] == 1


INT_QUERY = [
    ("/users", "limit"), ("/users", "offset"), ("/users", "security_access_group_id"),
    ("/users/deleted", "security_access_group_id"), ("/routing/queues", "limit"),
    ("/numbers", "offset"), ("/reporting/cdrs", "limit"), ("/reporting/cdrs", "offset"),
    ("/reporting/cdrs", "team_id"), ("/reporting/cdrs", "queue_id"),
    ("/reporting/cdrs", "campaign_id"), ("/reporting/cdrs/events", "queue_id"),
]  # fmt: skip


INTEGERS_NOTHING_HAS = ["-1", "9" * 30, "9" * 5000]


def test_an_integer_query_parameter_is_ascii_digits_or_422(checked: Checked) -> None:
    for path, name in INT_QUERY:
        paging = name in ("limit", "offset")
        for raw in [*NOT_ASCII_INTEGERS, "", "5.0", "1e3"]:
            past_the_end = name == "offset" and raw != "-1"
            if raw in INTEGERS_NOTHING_HAS and (not paging or past_the_end):
                continue  # an integer, just no group's id, or an offset past the end: below
            response = checked.get(f"{path}?{name}={raw}")
            _assert_json_error(response, 422)  # paging: not an integer, or out of bounds
            assert list(response.json()["errors"]) == [name], (path, name, raw)
        if not paging:
            for raw in INTEGERS_NOTHING_HAS:
                page = checked.get(f"{path}?{name}={raw}")
                assert page.status_code == 200, (path, name, raw[:40], page.text[:200])
                assert page.json()["metadata"]["total"] == 0
    for raw in INTEGERS_NOTHING_HAS[1:]:
        assert checked.get(f"/users?offset={raw}").json()["users"] == []
        # Past the CDR offset window: the spec's "use cursor beyond" (docs/sandbox.md: 400).
        _assert_json_error(checked.get(f"/reporting/cdrs?offset={raw}"), 400)


# --- date-times at the ends of the range --------------------------------------------------------

# Bounds no record can meet, and bounds every record meets; the offsets move a few of them past
# 9999-12-31 or before 0001-01-01 in UTC, which no datetime can hold.
EMPTY = [
    "started_at[lt]=0001-01-01T00:00:00Z", "started_at[lte]=0001-01-01",
    "ended_at[lt]=0001-01-01T00:00:00.000Z", "started_at[gte]=9999-12-31T23:59:59.999Z",
    "started_at[gt]=9999-12-31T23:59:59.999Z", "ended_at[gte]=9999-12-31T23:59:59.999-23:59",
    "started_at[lt]=0001-01-01T00:00:00%2B23:59", "ended_at[lte]=0001-01-01T05:00:00%2B06:00",
]  # fmt: skip
EVERYTHING = [
    "ended_at[lte]=9999-12-31T23:59:59.999Z", "started_at[gte]=0001-01-01T00:00:00Z",
    "started_at[lt]=9999-12-31T23:59:59.999-23:59", "ended_at[gt]=0001-01-01T00:00:00%2B23:59",
    "started_at[gte]=0001-01-01&ended_at[lte]=9999-12-31T23:59:59.999Z",
    "ended_at[gte]=0001-01-01T00:00:00Z&started_at[lte]=9999-12-31",
]  # fmt: skip


def test_far_date_bounds_give_an_empty_page_or_every_record(checked: Checked) -> None:
    for path in ("/reporting/cdrs", "/reporting/cdrs/events"):
        total = checked.get(f"{path}?limit=5").json()["metadata"]["total"]
        assert total > 0
        for query in EMPTY:
            response = checked.get(f"{path}?limit=5&{query}")
            assert response.status_code == 200, (path, query, response.text[:200])
            assert response.json()["metadata"] == {"total": 0, "next_cursor": None}, query
        for query in EVERYTHING:
            response = checked.get(f"{path}?limit=5&{query}")
            assert response.status_code == 200, (path, query, response.text[:200])
            assert response.json()["metadata"]["total"] == total, query


def test_a_scheduled_at_outside_the_utc_range_is_422_and_year_9999_is_kept(
    checked: Checked,
) -> None:
    for when in ("9999-12-31T23:59:59-01:00", "9999-12-31T23:00:00-23:59"):
        body = {"phone_number": CONTACT, "scheduled_at": when}
        response = checked.post("/tasks/scheduled_callbacks", body)
        _assert_json_error(response, 422)
        assert list(response.json()["errors"]) == ["scheduled_at"]
    made = checked.post(
        "/tasks/schedule_callbacks",
        {"phone_number": CONTACT, "scheduled_at": "9999-12-31T23:59:59.999Z"},
    )
    assert made.status_code == 201, made.text
    callback = made.json()["scheduled_callback"]
    assert callback["scheduled_at"] == "9999-12-31T23:59:59.999Z"
    assert checked.get(f"/tasks/scheduled_callbacks/{callback['id']}").json() == made.json()


# --- cursors: any JSON, or none, is an invalid cursor -------------------------------------------


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _forged(raw: bytes, seed: int = 7) -> str:
    """A cursor signed with the sandbox's seed (as a client who knows it could) around any
    payload; the signature recipe is the one `connectors/sandbox/cursors.py` uses."""
    sig = hashlib.blake2b(raw, key=str(seed).encode(), digest_size=6).hexdigest()
    return _b64(orjson.dumps([raw.decode(), sig]))


BAD_CURSORS = [
    "e30", "W10", _b64(b"null"), _b64(b"1"), _b64(b'""'), _b64(b'["a","b"]'), _b64(b"[1,2]"),
    _b64(b"[{},{}]"), _b64(b'["x",{}]'), _b64(b"[[],[]]"), _b64(b'{"0":"a","1":"b"}'),
    _b64(b"\xff\xfe"), "!!!", "%C3%A9", "e30" * 3000,
    _forged(b"{}"), _forged(b"[]"), _forged(b"[1]"), _forged(b'{"0":1}'),
    _forged(b'[1,"x","y","z"]'), _forged(b'[1,1.5,"id","k"]'),
    _forged(b'[1,1000000000000000000000000000000,"id","k"]'), _forged(b"[1,2,3,4,5]"),
]  # fmt: skip


def test_a_cursor_that_decodes_to_anything_else_falls_back_to_the_offset(
    checked: Checked,
) -> None:
    for path in ("/reporting/cdrs", "/reporting/cdrs/events"):
        by_offset = checked.get(f"{path}?limit=3&offset=2").json()
        for cursor in BAD_CURSORS:
            response = checked.get(f"{path}?limit=3&offset=2&cursor={cursor}")
            assert response.status_code == 200, (path, cursor[:40], response.text[:200])
            assert response.headers[FALLBACK_HEADER] == "offset", path
            page = response.json()
            assert page[path.rsplit("/", 1)[1]] == by_offset[path.rsplit("/", 1)[1]], cursor
            # Then the offset decides: an invalid one is the spec's 400.
            bad_offset = checked.get(f"{path}?limit=3&offset=-1&cursor={cursor}")
            _assert_json_error(bad_offset, 400)


# --- the last resort ----------------------------------------------------------------------------


def test_an_unexpected_exception_is_a_json_500_in_process_and_over_a_socket() -> None:
    sandbox = make_write_sandbox({}, now=datetime(2026, 11, 3, 12, tzinfo=UTC))
    # A broken server: a stored campaign holding a value JSON cannot encode.
    sandbox.state.campaigns[999] = {"id": 999, "name": "broken", "tags": {"not", "json"}}
    expected = {"error": "Internal server error"}
    with Api(sandbox, transport=_socket_like(sandbox)) as client:
        response = client.get("/api/v4/campaigns/999")
    _assert_json_error(response, 500)
    assert response.json() == expected
    with Api(sandbox) as own:  # the sandbox's own transport: an answer, not an exception
        assert own.get("/api/v4/campaigns/999").json() == expected
    with sandbox.serve() as server:
        served = httpx.get(
            server.base_url + "/api/v4/campaigns/999",
            headers={"Authorization": f"Bearer {DEFAULT_API_KEY}"},
        )
        assert (served.status_code, served.headers["content-type"]) == (500, "application/json")
        assert served.json() == expected
        # The server still answers the next request.
        assert httpx.get(server.base_url + "/api/v4/openapi.json").status_code == 200


# --- what the document declares -----------------------------------------------------------------


def test_every_operation_declares_a_json_500_and_the_429_its_retry_after() -> None:
    responses = DOC["components"]["responses"]
    for path, ops in DOC["paths"].items():
        for method, op in ops.items():
            declared = op["responses"].get("500")
            assert declared == {"$ref": "#/components/responses/ServerError"}, (method, path)
            assert op["responses"]["429"] == {"$ref": "#/components/responses/TooManyRequests"}
    server_error = responses["ServerError"]["content"]["application/json"]["schema"]
    assert server_error == {"$ref": "#/components/schemas/SimpleError"}
    assert "Retry-After" in responses["TooManyRequests"]["headers"]


def test_a_429_retry_after_header_matches_the_document() -> None:
    header = DOC["components"]["responses"]["TooManyRequests"]["headers"]["Retry-After"]
    validator = Draft202012Validator(header["schema"])
    sandbox = make_write_sandbox({})
    with Api(sandbox) as client:
        for seconds in (7, 1.5, 0.02, 0.00001, 1e20):
            sandbox.faults = FaultConfig(error_429_rate=1.0, retry_after_s=seconds)
            response = client.get("/api/v4/users")
            _assert_json_error(response, 429)
            value = response.headers["retry-after"]
            assert not list(validator.iter_errors(value)), (seconds, value)
            assert float(value) == seconds


def _cdr_with(data: dict[str, Any]) -> httpx.Response:
    cdr_id = "6a6b0b76-4bac-4936-8745-ce7d647f99bb"
    request = httpx.Request("GET", f"http://127.0.0.1/api/v4/reporting/cdrs/{cdr_id}")
    cdr: dict[str, Any] = {
        "id": cdr_id, "type": "conversation", "subtype": "whatsapp", "disposition": "archived",
        "from": {"type": "phone_number", "phone_number": CONTACT},
        "to": {"type": "phone_number", "phone_number": "4930123456"}, "user": None,
        "cost": 0.01, "tags": [], "started_at": "2026-11-01T10:53:40.127Z",
        "ended_at": "2026-11-01T10:53:43.871Z", "data": data,
    }  # fmt: skip
    return httpx.Response(200, json={"cdr": cdr}, request=request)


def test_cdr_references_have_the_id_types_the_spec_gives() -> None:
    flow = "0b1c7a4e-3d1f-4c51-9d0e-2f7d1f3f6a11"

    def ref(ref_id: object) -> dict[str, Any]:
        return {"id": ref_id, "name": "x", "name_snapshot": "x", "deleted": False}

    check(_cdr_with({"channel": "whatsapp", "flow": ref(flow), "queue": ref(3)}))
    for bad in (
        {"queue": ref("3")},  # queue ids are integers
        {"queue": ref(flow)},
        {"flow": ref(7)},  # a flow id is a UUID
        {"flow": ref("seven")},
    ):
        with pytest.raises(AssertionError):
            check(_cdr_with({"channel": "whatsapp", **bad}))
    schemas = DOC["components"]["schemas"]
    call = schemas["CallData"]["properties"]
    sms = schemas["SmsData"]["properties"]
    for name, holder in (("queue", call), ("campaign", call), ("canned_message", sms)):
        target = holder[name]["anyOf"][0]["$ref"].rsplit("/", 1)[1]
        assert schemas[target]["properties"]["id"] == {"type": "integer"}, name
    flow_ref = schemas["ConversationData"]["properties"]["flow"]["anyOf"][0]["$ref"]
    assert schemas[flow_ref.rsplit("/", 1)[1]]["properties"]["id"] == {
        "type": "string",
        "format": "uuid",
    }


# --- leads ---------------------------------------------------------------------------------------


def test_patching_a_lead_with_data_null_clears_it_to_an_empty_object(checked: Checked) -> None:
    sets = [{"phone_numbers": [CONTACT]}, {"phone_numbers": ["4930123456789"]}]
    created = checked.post("/campaigns", {"name": "Null data", "caller_id_sets": sets})
    cid = created.json()["campaign"]["id"]
    leads = checked.post(
        f"/campaigns/{cid}/leads", {"leads": [{"phone_number": CONTACT, "data": {"k": "v"}}]}
    )
    lead_id = leads.json()["leads"][0]["id"]
    patched = checked.patch(f"/campaigns/{cid}/leads", {"leads": [{"id": lead_id, "data": None}]})
    assert patched.status_code == 200, patched.text  # and its body matched `Lead` (check)
    assert patched.json()["leads"][0]["data"] == {}
    again = checked.patch(f"/campaigns/{cid}/leads", {"leads": [{"id": lead_id, "name": "Ada"}]})
    assert again.json()["leads"][0]["data"] == {}
    assert json.loads(again.text)["leads"][0]["name"] == "Ada"


# --- a sweep of every operation -------------------------------------------------------------

UUID = "6a6b0b76-4bac-4936-8745-ce7d647f99bb"
# A few values of each kind (the tests above take each kind in full): a Unicode digit, an
# integer past int()'s digit limit, a non-canonical UUID, a far date, a doubled minus; bodies get
# nulls, huge numbers, a Unicode digit string, objects where scalars go, a date past 9999 in UTC.
SWEEP_PATH = ["%D9%A1", "9" * 5000, "{" + UUID + "}"]
SWEEP_QUERY = ["%C2%B2", "--1", "9" * 5000, "0001-01-01T00:00:00%2B23:59"]
SWEEP_BODY: list[Any] = [None, 1e300, "\u0661", [{}], "9999-12-31T23:59:59-01:00"]


def _write_bodies(sandbox: Sandbox, client: Checked) -> tuple[dict[str, str], dict[Any, Any]]:
    """Path values that exist, and one valid body per write (each answered 2xx as is)."""
    ds = sandbox.dataset
    agent = ds.users[0]["id"]
    sets = [{"phone_numbers": [CONTACT]}, {"phone_numbers": ["4930123456789"]}]
    made = client.post("/campaigns", {"name": "Sweep target", "caller_id_sets": sets})
    campaign = made.json()["campaign"]["id"]
    lead = client.post(f"/campaigns/{campaign}/leads", {"leads": [{"phone_number": CONTACT}]})
    config = {
        "strategy": "simple", "dial_level": 2, "max_dial_time": 60, "max_wait_time": 5,
        "max_dial_attempts": 3, "voice_message_id": 1, "amd_enabled": True,
        "dial_level_override": {"enabled": True, "value": 1.5, "active_agents_threshold": 3},
        "amd_voicemail_message": {"enabled": True, "voice_message_id": 1},
        "live": {"enabled": True, "dialing_order": "fifo"}, "caller_id_sets": sets,
        "use_local_caller_id": False, "asr_optimization_enabled": True,
        "post_call_rating": {"enabled": True, "notification_voice_message_id": 1},
        "contact_local_time": {"start_time": "08:00", "end_time": "20:00", "days_of_week": [1, 7]},
        "follow_up_rules": {
            "busy": [{"wait_time": 5, "wait_time_unit": "minutes", "switch_caller_id_set": True}],
            "wrapup_code": [{"wait_time": 1, "wait_time_unit": "hours", "wrapup_code_id": 1}],
        },
        "follow_up_mode": "timer",
    }  # fmt: skip
    callback = {"phone_number": CONTACT, "scheduled_at": "2026-11-05T10:00:00Z",
                "user_id": agent, "queue_id": 1, "note": "n"}  # fmt: skip
    v4 = "/api/v4"
    bodies: dict[Any, Any] = {
        ("post", f"{v4}/voice/calls"): {"phone_number": CONTACT, "user_id": agent,
            "caller_id": CONTACT, "source": {"account_id": "A", "name": "n"}},
        ("post", f"{v4}/voice/calls/{{call_id}}/hangup"): {"user_id": agent},
        ("post", f"{v4}/campaigns"): {"name": "Sweep", **config},
        ("patch", f"{v4}/campaigns/{{campaign_id}}"): {**config, "allow_duplicate_phone_numbers":
            True, "amd_comfort_noise_enabled": True},
        ("post", f"{v4}/campaigns/{{campaign_id}}/leads"): {"leads": [{"phone_number":
            "4915112345670", "name": "a", "email": "a@b.c", "data": {"k": "v"}}]},
        ("patch", f"{v4}/campaigns/{{campaign_id}}/leads"): {"leads": [{"id":
            lead.json()["leads"][0]["id"], "name": "a", "email": "a@b.c", "data": {"k": "v"}}]},
        ("post", f"{v4}/messaging/sms"): {"phone_number": CONTACT, "sender_id": "CDRHOUSE",
            "message": {"content_type": "canned_message", "content_data": {
                "canned_message_id": 1, "params": {"first_name": "x", "date": "y"}}},
            "source": {"system": "s", "account_id": "a"}},
        ("post", f"{v4}/messaging/conversations"): {"phone_number": CONTACT, "channel":
            "whatsapp", "user_id": agent, "message": {"content_type": "text",
            "content_data": {"text": "Hi"}}},
        ("post", f"{v4}/messaging/conversations/{{conversation_id}}/messages"): {
            "content_type": "image", "user_id": agent, "content_data": {"url": "https://x/a.jpg",
            "filename": "a", "size": 1, "caption": "c"}},
        ("post", f"{v4}/tasks/scheduled_callbacks"): callback,
        ("post", f"{v4}/tasks/schedule_callbacks"): callback,
    }  # fmt: skip
    existing = {
        "campaign_id": str(campaign),
        "conversation_id": next(iter(ds.conversations)),
        "user_id": agent,
        "webhook_failure_id": ds.webhook_failures[0]["id"],
        "call_id": UUID,
        "cdr_id": UUID,
        "message_id": UUID,
        "callback_id": UUID,
    }  # every other path parameter is an integer id: 1 exists
    return existing, bodies


def _json_paths(node: Any, prefix: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    if prefix:
        yield prefix
    items: Iterable[tuple[Any, Any]] = ()
    if isinstance(node, dict):
        items = node.items()
    elif isinstance(node, list):
        items = enumerate(node)
    for key, value in items:
        yield from _json_paths(value, (*prefix, key))


def _replaced(body: Any, where: tuple[Any, ...], value: Any) -> Any:
    out = copy.deepcopy(body)
    target = out
    for key in where[:-1]:
        target = target[key]
    target[where[-1]] = value
    return out


def test_no_operation_answers_500_to_hostile_ids_parameters_or_bodies(
    caplog: pytest.LogCaptureFixture,
) -> None:
    sandbox = make_write_sandbox({}, now=datetime(2026, 11, 3, 12, tzinfo=UTC))
    sent = 0
    with Checked(sandbox, prefix="/api/v4") as v4:
        existing, bodies = _write_bodies(sandbox, v4)
    with Checked(sandbox, transport=_socket_like(sandbox)) as client:

        def fill(template: str, swap: str | None = None, value: str = "") -> str:
            def one(match: re.Match[str]) -> str:
                name = match.group(1)
                return value if name == swap else existing.get(name, "1")

            return re.sub(r"\{([^}]+)\}", one, template)

        def send(method: str, url: str, body: Any = None) -> None:
            nonlocal sent
            if url.endswith(f"{UUID}/hangup"):  # a live call, so the body is what is judged
                call = client.post("/api/v4/voice/calls", bodies[("post", "/api/v4/voice/calls")])
                url = url.replace(UUID, call.json()["call"]["id"])
            kwargs = {} if body is None else {"json": body}
            response = client.request(method.upper(), url, **kwargs)  # checked: listed, valid
            sent += 1
            assert response.status_code < 500, (method, url[:120], body, response.text[:200])

        for template, ops in DOC["paths"].items():
            names = re.findall(r"\{([^}]+)\}", template)
            for method, op in ops.items():
                body = bodies.get((method, template))
                for name in names:
                    for value in SWEEP_PATH:
                        send(method, fill(template, name, value), body)
                query = [
                    DOC["components"]["parameters"][p["$ref"].rsplit("/", 1)[1]]["name"]
                    for p in op.get("parameters", [])
                    if "$ref" in p
                ]
                for name in query:
                    for value in SWEEP_QUERY:
                        send(method, f"{fill(template)}?limit=2&{name}={value}", body)
                if body is None:
                    continue
                for where in _json_paths(body):
                    for value in SWEEP_BODY:
                        mutated = _replaced(body, where, value)
                        if (method, template) == ("post", "/api/v4/campaigns"):
                            mutated.setdefault("name", f"Sweep {sent}")  # names are unique
                        send(method, fill(template), mutated)
    assert sent > 1000, sent
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]


def test_days_of_week_1_and_1_0_are_one_day(checked: Checked) -> None:
    sets = [{"phone_numbers": [CONTACT]}, {"phone_numbers": ["4930123456789"]}]
    local = {"start_time": "08:00", "end_time": "20:00"}
    twice = checked.post(
        "/campaigns",
        {"name": "Twice", "caller_id_sets": sets,
         "contact_local_time": {**local, "days_of_week": [1, 1.0]}},
    )  # fmt: skip
    _assert_json_error(twice, 422)
    errors = twice.json()["errors"]
    assert errors == {"contact_local_time.days_of_week": ["must not contain duplicates"]}
    once = checked.post(
        "/campaigns",
        {"name": "Once", "caller_id_sets": sets,
         "contact_local_time": {**local, "days_of_week": [1.0, 7]}},
    )  # fmt: skip
    assert once.status_code == 201, once.text
    assert once.json()["campaign"]["contact_local_time"]["days_of_week"] == [1, 7]
