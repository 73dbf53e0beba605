"""Every endpoint method against its sandbox route (in-process transport)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from datetime import timedelta
from decimal import Decimal
from typing import Any, TypeVar

import pytest
from pydantic import ValidationError

from connectors.contact_center import (
    AuthenticationError,
    ConflictError,
    ContactCenterClient,
    NotFoundError,
    PermissionDeniedError,
    ValidationFailedError,
    WriteResult,
)
from connectors.sandbox import Sandbox
from models.resources import CallData, CampaignPatch, SendSms
from tests.support.transports import Recording

from .conftest import NARROW_KEY, NOW, day, make_client, make_sandbox

T = TypeVar("T")
PHONE = "31612345678"


def run(sandbox: Sandbox, body: Callable[[ContactCenterClient], Awaitable[T]], **kw: Any) -> T:
    async def main() -> T:
        async with make_client(sandbox, **kw) as client:
            return await body(client)

    return asyncio.run(main())


def test_dimension_reads(shared: Sandbox) -> None:
    ds = shared.dataset

    async def body(c: ContactCenterClient) -> dict[str, Any]:
        queue_id, team_id = ds.queues[0]["id"], ds.teams[0]["id"]
        return {
            "users": await c.list_all_users(),
            "user": await c.get_user(ds.users[0]["id"]),
            "deleted": await c.list_all_deleted_users(),
            "deleted_one": await c.get_deleted_user(ds.deleted_users[0]["id"]),
            "queues": await c.list_all_queues(),
            "queue": await c.get_queue(queue_id),
            "queue_users": await c.list_all_queue_users(queue_id),
            "queue_sups": await c.list_all_queue_supervisors(queue_id),
            "skills": await c.list_all_skills(),
            "skill": await c.get_skill(ds.skills[0]["id"]),
            "teams": await c.list_all_teams(),
            "team": await c.get_team(team_id),
            "team_users": await c.list_all_team_users(team_id),
            "team_sups": await c.list_all_team_supervisors(team_id),
            "campaigns": await c.list_all_campaigns(),
            "campaign": await c.get_campaign(ds.campaigns[0]["id"]),
            "numbers": await c.list_all_numbers(),
            "groups": await c.list_all_caller_id_groups(),
            "balance": await c.get_balance(),
            "messages": await c.list_all_messages(next(iter(ds.conversations))),
            "templates": await c.list_all_whatsapp_templates(),
            "canned": await c.list_all_canned_messages(),
            "wrapup": await c.list_all_wrapup_codes(),
            "hooks": await c.list_all_webhook_failures(),
            "users_page": await c.list_users(limit=7, offset=7),
        }

    got = run(shared, body)
    assert {u.id for u in got["users"]} == {u["id"] for u in ds.users}
    assert got["user"].id == ds.users[0]["id"]
    assert {u.id for u in got["deleted"]} == {u["id"] for u in ds.deleted_users}
    assert got["deleted_one"].id == ds.deleted_users[0]["id"]
    assert [q.id for q in got["queues"]] == [q["id"] for q in ds.queues]
    assert {u.id for u in got["queue_users"]} == set(ds.queue_members[ds.queues[0]["id"]])
    assert {u.id for u in got["queue_sups"]} == set(ds.queue_supervisors[ds.queues[0]["id"]])
    assert len(got["skills"]) == len(ds.skills)
    assert got["skill"].id == ds.skills[0]["id"]
    assert got["team"].id == ds.teams[0]["id"]
    assert {u.id for u in got["team_users"]} == set(ds.team_members[ds.teams[0]["id"]])
    assert {u.id for u in got["team_sups"]} == set(ds.team_supervisors[ds.teams[0]["id"]])
    assert len(got["campaigns"]) == len(ds.campaigns)
    assert len(got["numbers"]) == len(ds.numbers)
    assert got["numbers"][0].pricing.monthly_fee == Decimal(ds.numbers[0]["pricing"]["monthly_fee"])
    assert len(got["groups"]) == len(ds.caller_id_groups)
    assert got["balance"].amount == Decimal(f"{shared.state.balance:f}")
    assert len(got["messages"]) == len(next(iter(ds.conversations.values())))
    assert len(got["templates"]) == len(ds.whatsapp_templates)
    assert len(got["canned"]) == len(ds.canned_messages)
    assert len(got["wrapup"]) == len(ds.wrapup_codes)
    assert len(got["hooks"]) == len(ds.webhook_failures)
    assert [u.id for u in got["users_page"].items] == [u["id"] for u in ds.users[7:14]]
    assert got["users_page"].total == len(ds.users)


def test_cdr_reads(shared: Sandbox) -> None:
    start, end = day()

    async def body(c: ContactCenterClient) -> Any:
        cdrs, total, cursor = await c.list_cdrs(start, end, limit=50, filters={"type": ["call"]})
        one = await c.get_cdr(cdrs[0].id)
        return cdrs, total, cursor, one

    cdrs, total, cursor, one = run(shared, body)
    assert len(cdrs) == 50
    assert total is not None
    assert total > 50
    assert cursor
    assert all(c.type == "call" and isinstance(c.data, CallData) for c in cdrs)
    assert one.id == cdrs[0].id


def test_writes_round_trip() -> None:
    sandbox = make_sandbox(cdrs_per_day=50, days=1)
    ds = sandbox.dataset
    agent = ds.users[0]["id"]

    async def body(c: ContactCenterClient) -> dict[str, Any]:
        out: dict[str, Any] = {}
        call = await c.start_call({"phone_number": PHONE, "user_id": agent})
        out["hangup"] = await c.hangup_call(call.id, agent)
        with pytest.raises(ConflictError):  # the sandbox's choice for an ended call
            await c.hangup_call(call.id, agent)
        sets = [{"phone_numbers": [PHONE]}]
        created = await c.create_campaign({"name": "Spring drive", "caller_id_sets": sets})
        out["created"] = created
        out["patched"] = await c.update_campaign(
            created.id, CampaignPatch(dial_level=2.0, contact_local_time=None)
        )
        out["started"] = await c.start_campaign(created.id)
        out["paused"] = await c.pause_campaign(created.id)
        out["leads"] = await c.add_leads(created.id, {"leads": [{"phone_number": PHONE}]})
        lead_id = out["leads"].resource[0].id
        out["leads2"] = await c.update_leads(
            created.id, {"leads": [{"id": lead_id, "name": "Ada"}]}
        )
        out["stopped"] = await c.stop_campaign(created.id)
        with pytest.raises(ConflictError):  # stopped campaigns cannot be patched
            await c.update_campaign(created.id, {"dial_level": 3})
        out["sms"] = await c.send_sms(SendSms.text(PHONE, "hello"))
        conv = await c.create_conversation(
            {"phone_number": PHONE, "message": {"content_data": {"text": "hi"}}}
        )
        out["message"] = await c.post_message(conv.id, {"content_data": {"text": "again"}})
        out["callback"] = await c.schedule_callback(
            {"phone_number": PHONE, "scheduled_at": NOW + timedelta(hours=2)}
        )
        out["retrigger"] = await c.retrigger_webhook_failure(ds.webhook_failures[0]["id"])
        return out

    out = run(sandbox, body)
    assert all(isinstance(result, WriteResult) for result in out.values())
    got = {name: result.resource for name, result in out.items()}
    assert all(resource is not None for resource in got.values())
    assert (out["created"].status, out["sms"].status, out["patched"].status) == (201, 201, 200)
    assert got["created"].status == "draft"
    assert got["patched"].dial_level == 2.0
    assert (got["started"].status, got["paused"].status, got["stopped"].status) == (
        "running",
        "paused",
        "stopped",
    )
    assert got["leads2"][0].name == "Ada"
    assert out["sms"].id == got["sms"].id
    assert got["message"].id
    assert got["callback"].status == "scheduled"
    assert got["retrigger"].retriggered_at is not None
    assert sandbox.counters["sms_received"] == 1
    assert sandbox.counters["calls_started"] == 1


def test_bad_campaign_fails_before_sending() -> None:
    sandbox = make_sandbox(cdrs_per_day=50, days=1)

    async def body(c: ContactCenterClient) -> None:
        await c.create_campaign({"name": "x", "caller_id_sets": [], "max_dial_time": 601})

    with pytest.raises(ValidationError) as info:
        run(sandbox, body)
    assert {e["loc"][0] for e in info.value.errors()} == {"caller_id_sets", "max_dial_time"}
    assert not any("campaigns" in path for path in sandbox.counters)


def test_server_side_422_carries_field_errors() -> None:
    sandbox = make_sandbox(cdrs_per_day=50, days=1)

    async def body(c: ContactCenterClient) -> None:
        # Valid client-side, refused by the server: an unknown voice message.
        await c.create_campaign(
            {"name": "x", "caller_id_sets": [{"phone_numbers": [PHONE]}], "voice_message_id": 999}
        )

    with pytest.raises(ValidationFailedError) as info:
        run(sandbox, body)
    assert "voice_message_id" in info.value.errors


def test_auth_errors_name_the_fix(shared: Sandbox) -> None:
    async def users(c: ContactCenterClient) -> Any:
        return await c.list_all_users()

    with pytest.raises(PermissionDeniedError) as denied:
        run(shared, users, key=NARROW_KEY)
    assert denied.value.scope == "users.read"
    assert "lacks scope users.read" in str(denied.value)
    with pytest.raises(AuthenticationError):
        run(shared, users, key="not-a-key")

    async def missing(c: ContactCenterClient) -> Any:
        return await c.get_queue(999_999)

    with pytest.raises(NotFoundError):
        run(shared, missing)


def test_headers_on_the_wire(shared: Sandbox) -> None:
    recording = Recording(shared.transport())

    async def body(c: ContactCenterClient) -> Any:
        return await c.get_balance()

    run(shared, body, transport=recording)
    (request,) = recording.requests
    assert request.headers["accept"] == "application/json"
    assert request.headers["user-agent"].startswith("cdrhouse/")
    assert request.headers["authorization"].startswith("Bearer ")
    key = request.headers["authorization"].removeprefix("Bearer ")
    assert key not in str(request.url)
