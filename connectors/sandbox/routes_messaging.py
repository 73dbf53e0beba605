"""GET routes of messaging (conversations, messages) and of the simple dataset lists
(WhatsApp templates, canned messages, channel profiles, wrap-up codes and their groups)."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response

from connectors.sandbox import messaging
from connectors.sandbox.http import (
    ApiError,
    get_sandbox,
    json_response,
    paginate,
)
from connectors.sandbox.reads import (
    Json,
    ReadRoutes,
    int_id,
    one,
    uuid_id,
)

READS = ReadRoutes()


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


@READS.get(
    "/api/v4/messaging/conversations/{conversation_id}/messages",
    "messaging.conversations.read",
    "Messaging",
    "List conversation messages",
)
async def conversation_messages(request: Request) -> Response:
    _, msgs = _conversation(request)
    return paginate(request, "messages", msgs, max_limit=100, min_limit=0)


@READS.get(
    "/api/v4/messaging/conversations/{conversation_id}",
    "messaging.conversations.read",
    "Messaging",
    "Get a conversation",
)
async def conversation_one(request: Request) -> Response:
    conv_id, msgs = _conversation(request)
    state = get_sandbox(request).state
    with state.lock:
        created = state.conversations_created.get(conv_id)
    return json_response({"conversation": messaging.conversation_view(conv_id, msgs, created)})


@READS.get(
    "/api/v4/messaging/conversations/{conversation_id}/messages/{message_id}",
    "messaging.conversations.read",
    "Messaging",
    "Get a conversation message",
)
async def conversation_message(request: Request) -> Response:
    _, msgs = _conversation(request)
    message_id = uuid_id(request, "message_id")
    return one("message", msgs, lambda m: m["id"] == message_id)


def _simple_resource(path: str, scope: str, tag: str, key: str, singular: str, attr: str) -> None:
    async def list_items(request: Request) -> Response:
        return paginate(request, key, getattr(get_sandbox(request).dataset, attr))

    async def one_item(request: Request) -> Response:
        item_id = int_id(request, "item_id")
        items = getattr(get_sandbox(request).dataset, attr)
        return one(singular, items, lambda i: i["id"] == item_id)

    READS.get(path, scope, tag, f"List {key}")(list_items)
    READS.get(path + "/{item_id}", scope, tag, f"Get one of {key}")(one_item)


_simple_resource(
    "/api/v4/messaging/whatsapp_templates",
    "messaging.whatsapp_templates.read",
    "Messaging",
    "whatsapp_templates",
    "whatsapp_template",
    "whatsapp_templates",
)
_simple_resource(
    "/api/v4/messaging/canned_messages",
    "messaging.canned_messages.read",
    "Messaging",
    "canned_messages",
    "canned_message",
    "canned_messages",
)
_simple_resource(
    "/api/v4/messaging/channel_profiles",
    "messaging.channel_profiles.read",
    "Messaging",
    "channel_profiles",
    "channel_profile",
    "channel_profiles",
)
_simple_resource(
    "/api/v4/contact_center/wrapup_codes",
    "contact_center.wrapup_codes.read",
    "Contact Center",
    "wrapup_codes",
    "wrapup_code",
    "wrapup_codes",
)
_simple_resource(
    "/api/v4/contact_center/wrapup_code_groups",
    "contact_center.wrapup_code_groups.read",
    "Contact Center",
    "wrapup_code_groups",
    "wrapup_code_group",
    "wrapup_code_groups",
)
