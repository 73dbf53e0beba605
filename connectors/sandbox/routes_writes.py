"""Write endpoints of the sandbox: calls, campaigns and leads, SMS, conversations, tasks.

Each handler: scope check, JSON body (400 when malformed, 422 when not an object), validation
in the pure modules (422 field errors), then one locked mutation of ``SandboxState``. Run-time
ids are uuid5 of the seed and a per-kind sequence, so a replayed test sees the same ids.
"""

from __future__ import annotations

import copy
import uuid
from collections import Counter
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Final

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from connectors.sandbox import campaigns, messaging, tasks, voice
from connectors.sandbox.fieldcheck import (
    FieldErrors,
    check_phone,
    check_type,
    check_unknown,
    join,
    require,
)
from connectors.sandbox.http import (
    ApiError,
    check_query,
    fail,
    get_sandbox,
    json_response,
    read_json_body,
    require_scope,
)
from connectors.sandbox.state import SandboxState
from models.timestamps import iso_ms

V4: Final = "/api/v4"
CONFLICT: Final = {"state": ["conflict"]}
MAX_LEADS_PER_REQUEST: Final = 1000
_ID_NAMESPACE: Final = uuid.UUID("6f1d3c2e-8a7b-4c1d-9e2f-3a4b5c6d7e8f")

Handler = Callable[[Request], Awaitable[Response]]


# --- shared plumbing --------------------------------------------------------------------------


async def _body(request: Request, scope: str) -> dict[str, Any]:
    require_scope(request, scope)
    body = await read_json_body(request)
    if not isinstance(body, dict):
        raise fail({"body": ["must be a JSON object"]})
    return body


def _state(request: Request) -> SandboxState:
    state: SandboxState = get_sandbox(request).state
    return state


def _dataset(request: Request) -> Any:
    return get_sandbox(request).dataset


def _new_id(request: Request, kind: str, sequence: int) -> str:
    seed = get_sandbox(request).config.seed
    return str(uuid.uuid5(_ID_NAMESPACE, f"{seed}:{kind}:{sequence}"))


def _int_path(request: Request, name: str) -> int:
    try:
        return int(request.path_params[name])
    except ValueError:
        raise ApiError(404) from None


def _by_id(items: Any) -> dict[Any, Mapping[str, Any]]:
    return {item["id"]: item for item in items}


def _active_users(request: Request) -> dict[str, Mapping[str, Any]]:
    return _by_id(_dataset(request).users)


# --- voice ------------------------------------------------------------------------------------


async def start_call(request: Request) -> Response:
    body = await _body(request, "voice.call.manage")
    users = _active_users(request)
    errors = voice.validate_start(body, active_user_ids=users.keys())
    if errors:
        raise fail(errors)
    state = _state(request)
    with state.lock:
        call_id = _new_id(request, "call", len(state.active_calls) + len(state.ended_calls))
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


async def hangup_call(request: Request) -> Response:
    body = await _body(request, "voice.call.manage")
    call_id = request.path_params["call_id"]
    errors = voice.validate_hangup(body)
    state = _state(request)
    with state.lock:
        call = state.active_calls.get(call_id)
        if call is None:
            if call_id in state.ended_calls:
                raise fail(CONFLICT, 409)  # the call already finished
            raise ApiError(404)
        if errors:
            raise fail(errors)
        if body["user_id"] != call["user_id"]:
            raise fail({"user_id": ["is not the agent handling this call"]})
        ended_at = state.clock.now()
        overall = max(0, int((ended_at - call["started_at"]).total_seconds()))
        cost = voice.call_cost(overall)
        user = _active_users(request)[call["user_id"]]
        record = voice.call_cdr(
            call, user=user, started_at=call["started_at"], ended_at=ended_at, cost=cost
        )
        del state.active_calls[call_id]
        state.ended_calls[call_id] = {**call, "ended_at": ended_at, "cdr_id": record["id"]}
        source = call.get("source") or {}
        state.add_cdr(record, account_id=source.get("account_id"))
        state.charge(cost)
    return json_response({"call": {"id": call_id}})


# --- campaigns --------------------------------------------------------------------------------


def _campaign_context(request: Request, exclude: int | None = None) -> campaigns.CampaignContext:
    sandbox = get_sandbox(request)
    cfg = sandbox.config
    names = frozenset(
        str(c.get("name")) for cid, c in sandbox.state.campaigns.items() if cid != exclude
    )
    return campaigns.CampaignContext(
        voice_message_ids=frozenset(vm["id"] for vm in sandbox.dataset.voice_messages),
        taken_names=names,
        dialer_ai=cfg.dialer_ai,
        dialing_order=cfg.dialing_order,
        contact_local_time=cfg.contact_local_time,
    )


def _render(request: Request, campaign: Mapping[str, Any]) -> dict[str, Any]:
    return campaigns.render(campaign, _by_id(_dataset(request).voice_messages))


def _campaign(state: SandboxState, campaign_id: int) -> dict[str, Any]:
    found = state.campaigns.get(campaign_id)
    if found is None:
        raise ApiError(404)
    return found


async def create_campaign(request: Request) -> Response:
    body = await _body(request, "campaigns.manage")
    state = _state(request)
    with state.lock:
        config, errors = campaigns.validate_create(body, _campaign_context(request))
        if config is None:
            raise fail(errors)
        campaign_id = state.next_campaign_id()
        stamp = iso_ms(state.clock.now())
        record = {"id": campaign_id, "status": "draft", **config}
        record.update(created_at=stamp, updated_at=stamp)
        # Stored in response shape (voice message resolved), like the generated campaigns,
        # so every reader of state.campaigns serves the same thing.
        out = _render(request, record)
        state.campaigns[campaign_id] = copy.deepcopy(out)
    return json_response({"campaign": out}, 201)


async def patch_campaign(request: Request) -> Response:
    body = await _body(request, "campaigns.manage")  # auth before revealing what exists
    campaign_id = _int_path(request, "campaign_id")
    state = _state(request)
    with state.lock:
        current = _campaign(state, campaign_id)
        try:
            config, errors = campaigns.validate_patch(
                body, current, _campaign_context(request, exclude=campaign_id)
            )
        except campaigns.CampaignConflict:
            raise fail(CONFLICT, 409) from None
        if config is None:
            raise fail(errors)
        current.update(config)
        current["updated_at"] = iso_ms(state.clock.now())
        out = _render(request, current)
        current.clear()
        current.update(copy.deepcopy(out))
    return json_response({"campaign": out})


def _operation(operation: campaigns.Operation) -> Handler:
    async def handler(request: Request) -> Response:
        require_scope(request, "campaigns.manage")
        campaign_id = _int_path(request, "campaign_id")
        state = _state(request)
        with state.lock:
            current = _campaign(state, campaign_id)
            try:
                current["status"] = campaigns.transition(str(current.get("status")), operation)
            except campaigns.CampaignConflict:
                raise fail(CONFLICT, 409) from None
            current["updated_at"] = iso_ms(state.clock.now())
            out = _render(request, current)
        return json_response({"campaign": out})

    handler.__name__ = f"{operation}_campaign"
    return handler


# --- leads ------------------------------------------------------------------------------------

_LEAD_FIELDS: Final = ("phone_number", "name", "email", "data")


def _leads_list(errs: FieldErrors, body: Mapping[str, Any]) -> list[Any]:
    check_unknown(errs, "", body, ("leads",))
    if not require(errs, "", body, "leads") or not check_type(
        errs, "leads", body["leads"], "array"
    ):
        return []
    leads: list[Any] = body["leads"]
    if not 1 <= len(leads) <= MAX_LEADS_PER_REQUEST:
        errs.add("leads", f"must contain between 1 and {MAX_LEADS_PER_REQUEST} leads")
    return leads


def _lead_fields(errs: FieldErrors, path: str, lead: Mapping[str, Any], *, create: bool) -> None:
    if (not create or require(errs, path, lead, "phone_number")) and "phone_number" in lead:
        check_phone(errs, join(path, "phone_number"), lead["phone_number"])
    for key in ("name", "email"):
        if lead.get(key) is not None:
            check_type(errs, join(path, key), lead[key], "string")
    data = lead.get("data")
    if data is not None and check_type(errs, join(path, "data"), data, "object"):
        for key, value in data.items():
            check_type(errs, join(path, f"data.{key}"), value, "string")


def _check_duplicates(
    errs: FieldErrors, campaign: Mapping[str, Any], existing: list[dict[str, Any]], leads: list[Any]
) -> None:
    """Each phone number at most once per campaign, unless the campaign allows duplicates."""
    if campaign.get("allow_duplicate_phone_numbers") is True:
        return
    final: dict[object, str] = {lead["id"]: lead["phone_number"] for lead in existing}
    changed: dict[int, object] = {}
    for i, lead in enumerate(leads):
        if "phone_number" in lead:
            key = lead.get("id", ("new", i))
            final[key] = lead["phone_number"]
            changed[i] = key
    counts = Counter(final.values())
    for i, key in changed.items():
        if counts[final[key]] > 1:
            errs.add(f"leads.{i}.phone_number", "has already been added to this campaign")


def _writable_campaign(state: SandboxState, campaign_id: int) -> dict[str, Any]:
    campaign = _campaign(state, campaign_id)
    if campaign.get("status") == "completed":
        raise fail(CONFLICT, 409)  # a completed campaign dials no more
    return campaign


async def add_leads(request: Request) -> Response:
    body = await _body(request, "campaigns.manage")  # auth before revealing what exists
    campaign_id = _int_path(request, "campaign_id")
    state = _state(request)
    errs = FieldErrors()
    leads = _leads_list(errs, body)
    for i, lead in enumerate(leads):
        if check_type(errs, f"leads.{i}", lead, "object"):
            check_unknown(errs, f"leads.{i}", lead, _LEAD_FIELDS)
            _lead_fields(errs, f"leads.{i}", lead, create=True)
    with state.lock:
        campaign = _writable_campaign(state, campaign_id)
        existing = state.leads.setdefault(campaign_id, [])
        if not errs:
            _check_duplicates(errs, campaign, existing, leads)
        if errs:
            raise fail(errs.errors)
        stamp = iso_ms(state.clock.now())
        next_id = sum(len(items) for items in state.leads.values()) + 1
        created = []
        for offset, lead in enumerate(leads):
            record = {"id": next_id + offset, "campaign": {"id": campaign_id}, "status": "pending"}
            record.update({key: lead.get(key) for key in _LEAD_FIELDS})
            record["data"] = dict(lead.get("data") or {})
            record.update(created_at=stamp, updated_at=stamp)
            created.append(record)
        existing.extend(created)
    return json_response({"leads": created}, 201)


async def update_leads(request: Request) -> Response:
    body = await _body(request, "campaigns.manage")  # auth before revealing what exists
    campaign_id = _int_path(request, "campaign_id")
    state = _state(request)
    errs = FieldErrors()
    leads = _leads_list(errs, body)
    for i, lead in enumerate(leads):
        path = f"leads.{i}"
        if check_type(errs, path, lead, "object"):
            check_unknown(errs, path, lead, ("id", *_LEAD_FIELDS))
            if require(errs, path, lead, "id"):
                check_type(errs, join(path, "id"), lead["id"], "integer")
            _lead_fields(errs, path, lead, create=False)
    with state.lock:
        campaign = _writable_campaign(state, campaign_id)
        existing = state.leads.setdefault(campaign_id, [])
        by_id = {lead["id"]: lead for lead in existing}
        if not errs:
            for i, lead in enumerate(leads):
                if lead["id"] not in by_id:
                    errs.add(f"leads.{i}.id", "does not exist")
        if not errs:
            _check_duplicates(errs, campaign, existing, leads)
        if errs:
            raise fail(errs.errors)
        stamp = iso_ms(state.clock.now())
        updated = []
        for lead in leads:
            record = by_id[lead["id"]]
            record.update({key: lead[key] for key in _LEAD_FIELDS if key in lead})
            record["updated_at"] = stamp
            updated.append(record)
    return json_response({"leads": updated})


# --- messaging --------------------------------------------------------------------------------


def _sender_ids(dataset: Any) -> list[str]:
    """Alphanumeric sender IDs plus the purchased numbers (numeric sender IDs)."""
    return [str(s) for s in dataset.sender_ids] + [str(n) for n in dataset.cc_phones]


async def send_sms(request: Request) -> Response:
    body = await _body(request, "messaging.sms.send")
    dataset = _dataset(request)
    senders = _sender_ids(dataset)
    sms, errors = messaging.validate_sms(
        body, canned_messages=_by_id(dataset.canned_messages), sender_ids=senders
    )
    if sms is None:
        raise fail(errors)
    state = _state(request)
    with state.lock:
        state.count("sms_received")
        sms_id = _new_id(request, "sms", len(state.sms))
        now = state.clock.now()
        cost = messaging.sms_cost(messaging.segments_count(sms.text))
        # Without a sender_id the SMS goes out from the first purchased number.
        sender = sms.sender_id or _dataset(request).cc_phones[0]
        record = messaging.sms_cdr(sms, sms_id=sms_id, sender=sender, sent_at=now, cost=cost)
        state.sms[sms_id] = {"id": sms_id, "source": sms.source, "cdr_id": record["id"]}
        state.add_cdr(record, account_id=(sms.source or {}).get("account_id"))
        state.charge(cost)
    return json_response({"sms": {"id": sms_id}}, 201)


async def create_conversation(request: Request) -> Response:
    body = await _body(request, "messaging.conversations.manage")
    users = _active_users(request)
    errors = messaging.validate_conversation(body, user_ids=users.keys())
    if errors:
        raise fail(errors)
    state = _state(request)
    with state.lock:
        conversation_id = _new_id(request, "conversation", len(state.conversations_created))
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
                    message_id=_new_id(request, f"message:{conversation_id}", 0),
                    content_type=body["message"]["content_type"],
                    content_data=body["message"]["content_data"],
                    user=user,
                    now=now,
                )
            )
        out = messaging.conversation_view(conversation_id, thread, conversation)
    return json_response({"conversation": out}, 201)


async def post_message(request: Request) -> Response:
    body = await _body(request, "messaging.conversations.manage")
    conversation_id = request.path_params["conversation_id"]
    state = _state(request)
    users = _active_users(request)
    with state.lock:
        thread = state.conversations.get(conversation_id)
        if thread is None:
            raise ApiError(404)
        errors = messaging.validate_message(body, user_ids=users.keys())
        if errors:
            raise fail(errors)
        message = messaging.new_message(
            conversation_id,
            message_id=_new_id(request, f"message:{conversation_id}", len(thread)),
            content_type=body["content_type"],
            content_data=body["content_data"],
            user=users.get(body.get("user_id", "")),
            now=state.clock.now(),
        )
        thread.append(message)
    return json_response({"message": message}, 201)


# --- tasks ------------------------------------------------------------------------------------


async def schedule_callback(request: Request) -> Response:
    body = await _body(request, "tasks.scheduled_callbacks.manage")
    dataset = _dataset(request)
    users = _active_users(request)
    queues = _by_id(dataset.queues)
    state = _state(request)
    with state.lock:
        now = state.clock.now()
        when, errors = tasks.validate_callback(
            body, now=now, user_ids=users.keys(), queue_ids=queues.keys()
        )
        if when is None:
            raise fail(errors)
        callback_id = _new_id(request, "callback", len(state.callbacks))
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


async def retrigger_webhook(request: Request) -> Response:
    require_scope(request, "tasks.webhooks.manage")
    failure_id = request.path_params["webhook_failure_id"]
    state = _state(request)
    with state.lock:
        failure = state.webhook_failures.get(failure_id)
        if failure is None:
            raise ApiError(404)
        out = dict(tasks.retrigger(failure, now=state.clock.now()))
    return json_response({"webhook_failure": out})


_CAMPAIGN: Final = f"{V4}/campaigns/{{campaign_id}}"
_SCHEDULED: Final = "tasks.scheduled_callbacks.manage"
_RETRIGGER: Final = "tasks.webhooks.manage"

# (method, path, handler, scope, tag, summary): one row per write operation. The scope and
# summary are also what an OpenAPI document should show for the operation.
WRITE_OPERATIONS: Final[tuple[tuple[str, str, Handler, str, str, str], ...]] = (
    ("POST", f"{V4}/voice/calls", start_call, "voice.call.manage", "Voice", "Start a call"),
    (
        "POST",
        f"{V4}/voice/calls/{{call_id}}/hangup",
        hangup_call,
        "voice.call.manage",
        "Voice",
        "Hang up an active call",
    ),
    ("POST", f"{V4}/campaigns", create_campaign, "campaigns.manage", "Campaigns", "Create"),
    ("PATCH", _CAMPAIGN, patch_campaign, "campaigns.manage", "Campaigns", "Update a campaign"),
    ("POST", f"{_CAMPAIGN}/start", _operation("start"), "campaigns.manage", "Campaigns", "Start"),
    ("POST", f"{_CAMPAIGN}/pause", _operation("pause"), "campaigns.manage", "Campaigns", "Pause"),
    ("POST", f"{_CAMPAIGN}/stop", _operation("stop"), "campaigns.manage", "Campaigns", "Stop"),
    ("POST", f"{_CAMPAIGN}/leads", add_leads, "campaigns.manage", "Campaigns", "Add leads"),
    ("PATCH", f"{_CAMPAIGN}/leads", update_leads, "campaigns.manage", "Campaigns", "Update leads"),
    ("POST", f"{V4}/messaging/sms", send_sms, "messaging.sms.send", "Messaging", "Send an SMS"),
    (
        "POST",
        f"{V4}/messaging/conversations",
        create_conversation,
        "messaging.conversations.manage",
        "Messaging",
        "Start a conversation",
    ),
    (
        "POST",
        f"{V4}/messaging/conversations/{{conversation_id}}/messages",
        post_message,
        "messaging.conversations.manage",
        "Messaging",
        "Send a conversation message",
    ),
    ("POST", f"{V4}/tasks/scheduled_callbacks", schedule_callback, _SCHEDULED, "Tasks", "Schedule"),
    # The migration mapping's spelling of the same resource.
    ("POST", f"{V4}/tasks/schedule_callbacks", schedule_callback, _SCHEDULED, "Tasks", "Schedule"),
    (
        "POST",
        f"{V4}/tasks/webhook_failures/{{webhook_failure_id}}/retrigger",
        retrigger_webhook,
        _RETRIGGER,
        "Tasks",
        "Retrigger a failed webhook",
    ),
    # The mapping's spelling and method (GET) for the same action; POST accepted there too.
    *(
        (
            method,
            f"{V4}/tasks/webhooks/failures/{{webhook_failure_id}}/retrigger",
            retrigger_webhook,
            _RETRIGGER,
            "Tasks",
            "Retrigger a failed webhook",
        )
        for method in ("GET", "POST")
    ),
)


def _no_query(handler: Handler, scope: str) -> Handler:
    """Auth first, then refuse any query parameter: no write endpoint takes one."""

    async def guarded(request: Request) -> Response:
        require_scope(request, scope)
        check_query(request, frozenset())
        return await handler(request)

    return guarded


def routes() -> list[BaseRoute]:
    return [
        Route(path, _no_query(handler, scope), methods=[method], name=summary)
        for method, path, handler, scope, _tag, summary in WRITE_OPERATIONS
    ]
