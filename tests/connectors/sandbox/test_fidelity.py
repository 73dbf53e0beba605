"""Review gaps of issue 14: query parameters, paths, SMS senders, conversations, campaigns, keys.

Each test failed against the sandbox before its fix.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from datetime import UTC, datetime

import httpx
import pytest

from connectors.sandbox import Sandbox
from tests.connectors.sandbox.conftest import Api, make_write_sandbox
from tests.support.ports import free_port
from tests.support.processes import served_process

CONTACT = "4915112345678"


@pytest.fixture
def sandbox() -> Sandbox:
    return make_write_sandbox({}, now=datetime(2026, 11, 3, 12, tzinfo=UTC))


@pytest.fixture
def api(sandbox: Sandbox) -> Iterator[Api]:
    with Api(sandbox, prefix="/api/v4") as client:
        yield client


# --- query parameters -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "params", "named"),
    [
        ("/users", {"limt": "5"}, "limt"),
        ("/users/deleted", {"extension": "1001"}, "extension"),  # the spec: no extension filter
        ("/routing/queues", {"name": "Sales"}, "name"),
        ("/billing/balance", {"limit": "1"}, "limit"),
        ("/reporting/cdrs", {"started_at[after]": "2026-11-01"}, "started_at[after]"),
        ("/reporting/cdrs", {"user": "x"}, "user"),
    ],
)
def test_an_unknown_query_parameter_is_a_422_naming_it(
    api: Api, path: str, params: dict[str, str], named: str
) -> None:
    response = api.get(path, params=params)
    assert response.status_code == 422, response.text
    assert response.json() == {"errors": {named: ["is not a known parameter"]}}


def test_a_write_takes_no_query_parameter(api: Api) -> None:
    body = {
        "phone_number": CONTACT,
        "message": {"content_type": "text", "content_data": {"body": "x"}},
    }
    response = api.post("/messaging/sms", body, params={"dry_run": "1"})
    assert response.status_code == 422
    assert response.json() == {"errors": {"dry_run": ["is not a known parameter"]}}


def test_unknown_parameters_are_checked_after_authentication(sandbox: Sandbox) -> None:
    with Api(sandbox, key=None, prefix="/api/v4") as anonymous:
        assert anonymous.get("/users", params={"limt": "5"}).status_code == 401


@pytest.mark.parametrize("name", ["tag[]", "user_id[]", "queue_id[]", "team_id[]"])
def test_arrays_only_where_the_spec_shows_them(api: Api, name: str) -> None:
    # tag[]= used to be dropped silently: every CDR came back, unfiltered.
    response = api.get("/reporting/cdrs", params={name: "1"})
    assert response.status_code == 422
    assert name in response.json()["errors"]


def test_a_single_value_filter_given_twice_is_a_422(api: Api) -> None:
    response = api.get("/reporting/cdrs", params=[("tag", "conference"), ("tag", "whisper")])
    assert response.status_code == 422
    assert "tag" in response.json()["errors"]


@pytest.mark.parametrize("name", ["type", "subtype", "disposition", "account_id"])
def test_the_spec_arrays_accept_one_value_or_x_brackets(api: Api, name: str) -> None:
    values = {
        "type": ["call", "sms"],
        "subtype": ["outbound", "outbound_sms"],
        "disposition": ["answered", "sent"],
        "account_id": ["ACC-00001", "ACC-00002"],
    }[name]
    every = api.get("/reporting/cdrs", params={"limit": 1}).json()["metadata"]["total"]
    one = api.get("/reporting/cdrs", params={name: values[0], "limit": 1})
    both = api.get("/reporting/cdrs", params=[(f"{name}[]", v) for v in values] + [("limit", 1)])
    assert (one.status_code, both.status_code) == (200, 200)
    n_one = one.json()["metadata"]["total"]
    n_both = both.json()["metadata"]["total"]
    assert n_one <= n_both < every


# --- paths ------------------------------------------------------------------------------------


def test_a_trailing_slash_is_a_404_after_authentication(sandbox: Sandbox, api: Api) -> None:
    response = api.get("/users/")
    assert response.status_code == 404
    assert response.json() == {"error": "Not found"}
    with Api(sandbox, key=None, prefix="/api/v4") as anonymous:
        for path in ("/users/", "/no/such/path", "/users/teams/1/nothing"):
            refused = anonymous.get(path)
            assert refused.status_code == 401, path
            assert refused.json() == {"error": "Unauthorized"}


# --- conversations and campaigns --------------------------------------------------------------


def test_a_created_conversation_reads_back_as_it_was_created(api: Api, sandbox: Sandbox) -> None:
    agent = sandbox.dataset.users[0]["id"]
    body = {
        "phone_number": CONTACT,
        "channel": "whatsapp",
        "user_id": agent,
        "message": {"content_type": "text", "content_data": {"text": "Hello"}},
    }
    created = api.post("/messaging/conversations", body)
    assert created.status_code == 201, created.text
    made = created.json()["conversation"]
    read = api.get(f"/messaging/conversations/{made['id']}").json()["conversation"]
    assert read == made
    assert read["status"] == "open"
    assert read["created_at"] == "2026-11-03T12:00:00.000Z"
    assert read["messages_count"] == 1
    assert read["phone_number"] == CONTACT
    assert read["user"]["id"] == agent


def test_generated_campaigns_carry_the_fields_of_patched_ones(api: Api) -> None:
    generated = api.get("/campaigns", params={"limit": 100}).json()["campaigns"]
    draft = next(c for c in generated if c["status"] == "draft")
    before = api.get(f"/campaigns/{draft['id']}").json()["campaign"]
    patched = api.patch(f"/campaigns/{draft['id']}", {"max_dial_attempts": 4})
    assert patched.status_code == 200, patched.text
    after = patched.json()["campaign"]
    assert set(before) == set(after)
    assert {"amd_comfort_noise_enabled", "allow_duplicate_phone_numbers"} <= set(before)
    for campaign in generated:
        assert set(campaign) == set(after), campaign["id"]
        for key in ("dial_level_override", "post_call_rating"):
            assert set(campaign[key]) == set(after[key]), (campaign["id"], key)
    assert {k: v for k, v in after.items() if k not in ("max_dial_attempts", "updated_at")} == {
        k: v for k, v in before.items() if k not in ("max_dial_attempts", "updated_at")
    }


# --- scoped keys over HTTP --------------------------------------------------------------------


def test_cli_serves_scoped_keys_so_a_403_can_be_seen() -> None:
    port = free_port()
    cmd = [
        sys.executable, "-m", "connectors.sandbox.serve", "--port", str(port),
        "--start-date", "2026-11-01", "--days", "1", "--cdrs-per-day", "50",
        "--key", "billing-only=billing.balance.read",
        "--key", "reader=users.read,routing.queues.read",
    ]  # fmt: skip
    base = f"http://127.0.0.1:{port}/api/v4"
    with served_process(cmd, f"{base}/billing/balance"):
        response = httpx.get(f"{base}/billing/balance", headers=_bearer("billing-only"))
        assert response.status_code == 200
        denied = httpx.get(f"{base}/users", headers=_bearer("billing-only"))
        assert (denied.status_code, denied.json()) == (403, {"error": "Forbidden"})
        assert httpx.get(f"{base}/users", headers=_bearer("reader")).status_code == 200
        assert httpx.get(f"{base}/routing/queues", headers=_bearer("reader")).status_code == 200
        assert httpx.get(f"{base}/billing/balance", headers=_bearer("reader")).status_code == 403
        full = _bearer("sbx-full-access-key")
        assert httpx.get(f"{base}/users", headers=full).status_code == 200


def _bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


@pytest.mark.parametrize("bad", ["nokey", "=users.read", "k=", "k=no.such.scope"])
def test_cli_refuses_a_malformed_scoped_key(bad: str) -> None:
    from connectors.sandbox.cli import main

    with pytest.raises(SystemExit) as info:
        main(["--key", bad])
    assert info.value.code == 2
