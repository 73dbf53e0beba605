"""GET routes of messaging (conversations, messages) and of the simple dataset lists
(WhatsApp templates, canned messages, channel profiles, wrap-up codes and their groups)."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response

from connectors.sandbox import messaging
from connectors.sandbox.http import ApiError, get_sandbox, json_response, paginate
from connectors.sandbox.reads import Json, ReadRoutes, one, uuid_id

READS = ReadRoutes()
_CONVERSATION = "/api/v4/messaging/conversations/{conversation_id}"
_READ = "messaging.conversations.read"


# ------------------------------------------------------------------ messaging


def _conversation(request: Request) -> tuple[str, list[Json]]:
    state = get_sandbox(request).state
    conv_id = uuid_id(request, "conversation_id")
    with state.lock:
        msgs = state.conversations.get(conv_id)
        msgs = list(msgs) if msgs is not None else None
    if msgs is None:
        raise ApiError(404)
    return conv_id, msgs


@READS.get(f"{_CONVERSATION}/messages", _READ, "Messaging", "List conversation messages")
async def conversation_messages(request: Request) -> Response:
    _, msgs = _conversation(request)
    return paginate(request, "messages", msgs, max_limit=100, min_limit=0)


@READS.get(_CONVERSATION, _READ, "Messaging", "Get a conversation")
async def conversation_one(request: Request) -> Response:
    conv_id, msgs = _conversation(request)
    state = get_sandbox(request).state
    with state.lock:
        created = state.conversations_created.get(conv_id)
    return json_response({"conversation": messaging.conversation_view(conv_id, msgs, created)})


@READS.get(
    f"{_CONVERSATION}/messages/{{message_id}}", _READ, "Messaging", "Get a conversation message"
)
async def conversation_message(request: Request) -> Response:
    _, msgs = _conversation(request)
    message_id = uuid_id(request, "message_id")
    return one("message", msgs, lambda m: m["id"] == message_id)


# Dataset lists with an integer-id detail route: (tag, path, scope).
_SIMPLE_RESOURCES: tuple[tuple[str, str, str], ...] = (
    ("Messaging", "/api/v4/messaging/whatsapp_templates", "messaging.whatsapp_templates.read"),
    ("Messaging", "/api/v4/messaging/canned_messages", "messaging.canned_messages.read"),
    ("Messaging", "/api/v4/messaging/channel_profiles", "messaging.channel_profiles.read"),
    ("Contact Center", "/api/v4/contact_center/wrapup_codes", "contact_center.wrapup_codes.read"),
    (
        "Contact Center",
        "/api/v4/contact_center/wrapup_code_groups",
        "contact_center.wrapup_code_groups.read",
    ),
)
for _tag, _path, _scope in _SIMPLE_RESOURCES:
    _key = _path.rsplit("/", 1)[1]
    READS.list_and_get(
        _path, _scope, _tag, (f"List {_key}", f"Get one of {_key}"), id_name="item_id"
    )
