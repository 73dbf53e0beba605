"""Review gaps of issue 14 on the client side: filters in the spec's form, writes that never
fail after the server acted, open write models, and the hangup agent id as given.

Each test failed against the client before its fix. A "different server" is an
`httpx.MockTransport` handler standing in for a real API whose not-shown shapes differ from the
sandbox's; everything else runs against the sandbox in-process.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import httpx
import orjson
import pytest
from pydantic import ValidationError

from connectors.contact_center import ContactCenterClient, WriteResult, cdr_filter_params
from models.resources import Campaign, SendSms
from tests.connectors.contact_center.conftest import day, make_client, make_sandbox
from tests.support.transports import Recording

PHONE = "4915112345678"
AGENT = "0b6e7a52-2a9f-4c43-9a4e-1a2b3c4d5e6f"


def run_with(
    transport: httpx.AsyncBaseTransport, body: Callable[[ContactCenterClient], Awaitable[Any]]
) -> Any:
    async def main() -> Any:
        async with make_client(make_sandbox(cdrs_per_day=50, days=1), transport=transport) as c:
            return await body(c)

    return asyncio.run(main())


# --- filters ----------------------------------------------------------------------------------


def test_filters_are_sent_in_the_spec_form() -> None:
    pairs = cdr_filter_params(
        {"type": ["call", "sms"], "account_id": ["A1"], "tag": ["conference"], "queue_id": 3}
    )
    assert pairs == [
        ("type[]", "call"),
        ("type[]", "sms"),
        ("account_id[]", "A1"),
        ("tag", "conference"),  # one value, as the spec shows it: never tag[]=
        ("queue_id", "3"),
    ]
    with pytest.raises(ValueError, match="'tag' takes one value"):
        cdr_filter_params({"tag": ["conference", "whisper"]})


def test_a_tag_filter_given_as_a_list_really_filters() -> None:
    sandbox = make_sandbox()
    start, end = day()

    async def body(c: ContactCenterClient) -> tuple[set[str], int, int]:
        tagged = [page async for page in c.fetch_cdr_pages(start, end, {"tag": ["conference"]})]
        every = [page async for page in c.fetch_cdr_pages(start, end)]
        ids: set[str] = set()
        for page in tagged:
            for cdr in orjson.loads(page.body)["cdrs"]:
                assert "conference" in cdr["tags"]
                ids.add(cdr["id"])
        return ids, sum(p.count for p in tagged), sum(p.count for p in every)

    async def main() -> tuple[set[str], int, int]:
        async with make_client(sandbox) as c:
            return await body(c)

    ids, tagged, every = asyncio.run(main())
    assert 0 < len(ids) == tagged < every


# --- writes: any 2xx is success ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "content", "expected_body"),
    [
        (202, b'{"accepted": true, "message_id": "m-1"}', {"accepted": True, "message_id": "m-1"}),
        (200, b'{"sms": "queued"}', {"sms": "queued"}),
        (204, b"", None),
        (200, b"<html>OK</html>", "<html>OK</html>"),
        (201, b'{"sms": {"id": "5e1d0', '{"sms": {"id": "5e1d0'),  # cut short: still sent
    ],
    ids=["other-shape", "wrong-type", "no-content", "html", "truncated"],
)
def test_an_unexpected_2xx_body_is_returned_raw_never_an_error(
    status: int, content: bytes, expected_body: Any
) -> None:
    calls: list[httpx.Request] = []

    def server(request: httpx.Request) -> httpx.Response:
        calls.append(request)
        return httpx.Response(status, content=content)

    async def body(c: ContactCenterClient) -> Any:
        return await c.send_sms(SendSms.text(PHONE, "hi"))

    result = run_with(httpx.MockTransport(server), body)
    assert isinstance(result, WriteResult)
    assert (result.status, result.body, result.resource) == (status, expected_body, None)
    assert len(calls) == 1  # the SMS went out once: nothing invited a retry


def test_not_shown_write_shapes_of_another_server_lose_nothing() -> None:
    answers = {
        "/api/v4/campaigns/7/start": (200, {"status": "running"}),
        "/api/v4/campaigns/7/leads": (201, {"created": 2, "ids": [11, 12]}),
        "/api/v4/messaging/conversations": (201, {"id": "c-1", "state": "new"}),
        "/api/v4/tasks/webhook_failures/3/retrigger": (202, {}),
    }

    def server(request: httpx.Request) -> httpx.Response:
        status, payload = answers[request.url.path]
        return httpx.Response(status, json=payload)

    async def body(c: ContactCenterClient) -> list[WriteResult[Any]]:
        return [
            await c.start_campaign(7),
            await c.add_leads(7, {"leads": [{"phone_number": PHONE}, {"phone_number": PHONE}]}),
            await c.create_conversation(
                {"phone_number": PHONE, "message": {"content_data": {"text": "hi"}}}
            ),
            await c.retrigger_webhook_failure(3),
        ]

    results = run_with(httpx.MockTransport(server), body)
    assert [r.body for r in results] == [payload for _, payload in answers.values()]
    assert [r.status for r in results] == [200, 201, 201, 202]
    assert all(r.resource is None for r in results)
    assert results[2].id is None  # no single {key: {...}} object to take an id from


def test_the_expected_shape_is_typed() -> None:
    campaign = {"id": 7, "name": "Spring", "status": "running", "dial_level": 2}

    def server(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json={"campaign": campaign})

    async def body(c: ContactCenterClient) -> WriteResult[Campaign]:
        return await c.start_campaign(7)

    result = run_with(httpx.MockTransport(server), body)
    assert isinstance(result.resource, Campaign)
    assert (result.resource.status, result.id) == ("running", 7)


# --- write models: open where the spec shows no shape ------------------------------------------


def test_write_models_pass_extra_fields_where_the_spec_shows_no_shape() -> None:
    recording = Recording(httpx.MockTransport(lambda request: httpx.Response(201, json={})))

    async def body(c: ContactCenterClient) -> None:
        await c.add_leads(1, {"leads": [{"phone_number": PHONE, "priority": 2}], "dedupe": True})
        await c.schedule_callback(
            {"phone_number": PHONE, "scheduled_at": "2030-01-01T10:00:00Z", "channel": "voice"}
        )
        await c.post_message("c-1", {"content_data": {"text": "hi"}, "reply_to": "m-9"})

    run_with(recording, body)
    sent = [orjson.loads(r.content) for r in recording.requests]
    assert sent[0] == {"leads": [{"phone_number": PHONE, "priority": 2}], "dedupe": True}
    assert sent[1]["channel"] == "voice"
    assert sent[2]["reply_to"] == "m-9"


def test_spec_shaped_write_models_still_refuse_typos() -> None:
    with pytest.raises(ValidationError):
        SendSms.model_validate(
            {
                "phone_number": PHONE,
                "mesage": {"content_type": "text", "content_data": {"body": "x"}},
            }
        )


# --- hangup: the agent id as given ------------------------------------------------------------


@pytest.mark.parametrize("user_id", [AGENT, 4711], ids=["uuid-string", "integer"])
def test_hangup_sends_the_agent_id_as_given(user_id: str | int) -> None:
    recording = Recording(
        httpx.MockTransport(lambda r: httpx.Response(200, json={"call": {"id": "c"}}))
    )

    async def body(c: ContactCenterClient) -> WriteResult[Any]:
        return await c.hangup_call("2f9d7c1e-1111-4a2b-9c3d-4e5f6a7b8c9d", user_id)

    result = run_with(recording, body)
    assert result.id == "c"
    (request,) = recording.requests
    assert orjson.loads(request.content) == {"user_id": user_id}


@pytest.mark.parametrize("user_id", ["4711", True, "not-a-uuid"])
def test_hangup_refuses_what_is_neither_before_sending(user_id: Any) -> None:
    recording = Recording(httpx.MockTransport(lambda r: httpx.Response(200, json={})))

    async def body(c: ContactCenterClient) -> Any:
        return await c.hangup_call("2f9d7c1e-1111-4a2b-9c3d-4e5f6a7b8c9d", user_id)

    with pytest.raises(ValidationError):
        run_with(recording, body)
    assert recording.requests == []


# --- a known field of another type than the spec's, read through the typed list -------------


def test_a_typed_cdr_page_reads_an_odd_field_and_says_so(caplog: pytest.LogCaptureFixture) -> None:
    page = {
        "cdrs": [
            {"id": "c-1", "type": "call", "cost": "0.05"},
            {"id": "c-2", "type": "call", "cost": "a lot", "started_at": "yesterday"},
        ],
        "metadata": {"total": 2},
    }
    recording = Recording(httpx.MockTransport(lambda r: httpx.Response(200, json=page)))

    async def body(c: ContactCenterClient) -> Any:
        return await c.list_cdrs(*day(), limit=10)

    with caplog.at_level("WARNING", logger="connectors.contact_center"):
        cdrs, total, _ = run_with(recording, body)
    assert total == 2
    assert [c.unreadable_fields() for c in cdrs] == [[], ["cost", "started_at"]]
    assert cdrs[1].model_extra == {"_unreadable": {"cost": "a lot", "started_at": "yesterday"}}
    (warning,) = [r.getMessage() for r in caplog.records]
    assert warning.startswith("GET /api/v4/reporting/cdrs: 1 of 2 records had fields")
    assert "(cost, started_at)" in warning
    assert "a lot" not in warning
