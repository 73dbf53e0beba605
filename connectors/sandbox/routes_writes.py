"""Write routes for calls, SMS, conversations and tasks, and the table of every write route.

Each handler: JSON body, validation in the pure modules (`voice.py`, `messaging.py`,
`tasks.py`; 422 field errors), then one locked mutation of `SandboxState`. Campaign and lead
writes are in `routes_campaign_writes.py`; the shared plumbing is in `writes.py`.
"""

from __future__ import annotations

from typing import Any, Final

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute

from connectors.sandbox import messaging, routes_campaign_writes, tasks, voice
from connectors.sandbox.http import ApiError, fail, json_object, json_response
from connectors.sandbox.writes import (
    CONFLICT,
    V4,
    WriteRoutes,
    active_users,
    by_id,
    dataset,
    locked_state,
    new_id,
    reject,
    starlette_routes,
)
from models.timestamps import iso_ms

WRITES = WriteRoutes()
_CALLS: Final = "voice.call.manage"
_CONVERSATIONS: Final = "messaging.conversations.manage"
_SCHEDULED: Final = "tasks.scheduled_callbacks.manage"
_RETRIGGER: Final = "tasks.webhooks.manage"


# --- voice ------------------------------------------------------------------------------------


@WRITES.route("POST", f"{V4}/voice/calls", _CALLS, "Voice", "Start a call")
async def start_call(request: Request) -> Response:
    body = await json_object(request)
    users = active_users(request)
    reject(voice.validate_start(body, active_user_ids=users.keys()))
    with locked_state(request) as state:
        call_id = new_id(request, "call", len(state.active_calls) + len(state.ended_calls))
        state.active_calls[call_id] = {
            "id": call_id,
            "user_id": body["user_id"],
            "phone_number": body["phone_number"],
            "caller_id": body.get("caller_id"),
            "source": body.get("source"),
            "started_at": state.clock.now(),
        }
        state.count("calls_started")
    return json_response({"call": {"id": call_id}}, 201)


@WRITES.route(
    "POST", f"{V4}/voice/calls/{{call_id}}/hangup", _CALLS, "Voice", "Hang up an active call"
)
async def hangup_call(request: Request) -> Response:
    body = await json_object(request)
    call_id = request.path_params["call_id"]
    errors = voice.validate_hangup(body)
    with locked_state(request) as state:
        call = state.active_calls.get(call_id)
        if call is None:
            if call_id in state.ended_calls:
                raise fail(CONFLICT, 409)  # the call already finished
            raise ApiError(404)
        reject(errors)
        if body["user_id"] != call["user_id"]:
            raise fail({"user_id": ["is not the agent handling this call"]})
        ended_at = state.clock.now()
        overall = max(0, int((ended_at - call["started_at"]).total_seconds()))
        cost = voice.call_cost(overall)
        user = active_users(request)[call["user_id"]]
        record = voice.call_cdr(
            call, user=user, started_at=call["started_at"], ended_at=ended_at, cost=cost
        )
        del state.active_calls[call_id]
        state.ended_calls[call_id] = {**call, "ended_at": ended_at, "cdr_id": record["id"]}
        source = call.get("source") or {}
        state.add_cdr(record, account_id=source.get("account_id"))
        state.charge(cost)
    return json_response({"call": {"id": call_id}})


# --- messaging --------------------------------------------------------------------------------


def _sender_ids(data: Any) -> list[str]:
    """Alphanumeric sender IDs plus the purchased numbers (numeric sender IDs)."""
    return [str(s) for s in data.sender_ids] + [str(n) for n in data.cc_phones]


@WRITES.route("POST", f"{V4}/messaging/sms", "messaging.sms.send", "Messaging", "Send an SMS")
async def send_sms(request: Request) -> Response:
    body = await json_object(request)
    data = dataset(request)
    sms, errors = messaging.validate_sms(
        body, canned_messages=by_id(data.canned_messages), sender_ids=_sender_ids(data)
    )
    if sms is None:
        raise fail(errors)
    with locked_state(request) as state:
        state.count("sms_received")
        sms_id = new_id(request, "sms", len(state.sms))
        now = state.clock.now()
        cost = messaging.sms_cost(messaging.segments_count(sms.text))
        # Without a sender_id the SMS goes out from the first purchased number.
        sender = sms.sender_id or data.cc_phones[0]
        record = messaging.sms_cdr(sms, sms_id=sms_id, sender=sender, sent_at=now, cost=cost)
        state.sms[sms_id] = {"id": sms_id, "source": sms.source, "cdr_id": record["id"]}
        state.add_cdr(record, account_id=(sms.source or {}).get("account_id"))
        state.charge(cost)
    return json_response({"sms": {"id": sms_id}}, 201)


@WRITES.route(
    "POST", f"{V4}/messaging/conversations", _CONVERSATIONS, "Messaging", "Start a conversation"
)
async def create_conversation(request: Request) -> Response:
    body = await json_object(request)
    users = active_users(request)
    reject(messaging.validate_conversation(body, user_ids=users.keys()))
    with locked_state(request) as state:
        conversation_id = new_id(request, "conversation", len(state.conversations_created))
        now = state.clock.now()
        user = users.get(body.get("user_id", ""))
        conversation = {
            "id": conversation_id,
            "channel": body["channel"],
            "status": "open",
            "phone_number": body["phone_number"],
            "user": messaging.user_ref(user),
            "created_at": iso_ms(now),
        }
        state.conversations_created[conversation_id] = conversation
        thread = state.conversations.setdefault(conversation_id, [])
        if "message" in body:
            thread.append(
                messaging.new_message(
                    conversation_id,
                    message_id=new_id(request, f"message:{conversation_id}", 0),
                    content_type=body["message"]["content_type"],
                    content_data=body["message"]["content_data"],
                    user=user,
                    now=now,
                )
            )
        out = messaging.conversation_view(conversation_id, thread, conversation)
    return json_response({"conversation": out}, 201)


@WRITES.route(
    "POST",
    f"{V4}/messaging/conversations/{{conversation_id}}/messages",
    _CONVERSATIONS,
    "Messaging",
    "Send a conversation message",
)
async def post_message(request: Request) -> Response:
    body = await json_object(request)
    conversation_id = request.path_params["conversation_id"]
    users = active_users(request)
    with locked_state(request) as state:
        thread = state.conversations.get(conversation_id)
        if thread is None:
            raise ApiError(404)
        reject(messaging.validate_message(body, user_ids=users.keys()))
        message = messaging.new_message(
            conversation_id,
            message_id=new_id(request, f"message:{conversation_id}", len(thread)),
            content_type=body["content_type"],
            content_data=body["content_data"],
            user=users.get(body.get("user_id", "")),
            now=state.clock.now(),
        )
        thread.append(message)
    return json_response({"message": message}, 201)


# --- tasks ------------------------------------------------------------------------------------


@WRITES.route("POST", f"{V4}/tasks/scheduled_callbacks", _SCHEDULED, "Tasks", "Schedule")
# The migration mapping's spelling of the same resource.
@WRITES.route("POST", f"{V4}/tasks/schedule_callbacks", _SCHEDULED, "Tasks", "Schedule")
async def schedule_callback(request: Request) -> Response:
    body = await json_object(request)
    users = active_users(request)
    queues = by_id(dataset(request).queues)
    with locked_state(request) as state:
        now = state.clock.now()
        when, errors = tasks.validate_callback(
            body, now=now, user_ids=users.keys(), queue_ids=queues.keys()
        )
        if when is None:
            raise fail(errors)
        callback_id = new_id(request, "callback", len(state.callbacks))
        record = tasks.new_callback(
            callback_id,
            body,
            scheduled_at=when,
            user=users.get(body.get("user_id", "")),
            queue=queues.get(body.get("queue_id", -1)),
            now=now,
        )
        state.callbacks[callback_id] = record
    return json_response({"scheduled_callback": record}, 201)


_RETRIGGER_SUMMARY: Final = "Retrigger a failed webhook"


@WRITES.route(
    "POST",
    f"{V4}/tasks/webhook_failures/{{webhook_failure_id}}/retrigger",
    _RETRIGGER,
    "Tasks",
    _RETRIGGER_SUMMARY,
)
# The mapping's spelling and method (GET) for the same action; POST accepted there too.
@WRITES.route(
    "GET",
    f"{V4}/tasks/webhooks/failures/{{webhook_failure_id}}/retrigger",
    _RETRIGGER,
    "Tasks",
    _RETRIGGER_SUMMARY,
)
@WRITES.route(
    "POST",
    f"{V4}/tasks/webhooks/failures/{{webhook_failure_id}}/retrigger",
    _RETRIGGER,
    "Tasks",
    _RETRIGGER_SUMMARY,
)
async def retrigger_webhook(request: Request) -> Response:
    failure_id = request.path_params["webhook_failure_id"]
    with locked_state(request) as state:
        failure = state.webhook_failures.get(failure_id)
        if failure is None:
            raise ApiError(404)
        out = dict(tasks.retrigger(failure, now=state.clock.now()))
    return json_response({"webhook_failure": out})


def routes() -> list[BaseRoute]:
    """Every write route: these, then the campaign and lead writes."""
    return list(starlette_routes([*WRITES.table, *routes_campaign_writes.WRITES.table]))
