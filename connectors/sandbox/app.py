"""The HTTP layer: one Starlette route per read endpoint, admin routes, OpenAPI, errors.

Write endpoints come from `routes_writes.routes()`; CDR endpoints from `routes_cdrs`.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Awaitable, Callable
from datetime import timedelta
from importlib import resources
from typing import TYPE_CHECKING, Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from connectors.sandbox import messaging, query, routes_cdrs, routes_writes
from connectors.sandbox.faults import ASGIApp, FaultConfig, FaultMiddleware, Receive, Scope, Send
from connectors.sandbox.http import (
    ApiError,
    authenticated,
    check_query,
    error_response,
    fail,
    get_sandbox,
    json_response,
    paginate,
    raw_json,
    read_json_body,
    require_scope,
)

if TYPE_CHECKING:
    from connectors.sandbox.emulator import Sandbox

Handler = Callable[[Request], Awaitable[Response]]
Json = dict[str, Any]

# (method, path, scope, tag, summary, handler) - the single route table; OpenAPI is built from it.
READ_ROUTES: list[tuple[str, str, str, str, str, Handler]] = []


PAGING: frozenset[str] = frozenset({"limit", "offset"})
NO_QUERY: frozenset[str] = frozenset()
USER_FILTERS: frozenset[str] = PAGING | {
    "name",
    "email",
    "sip_account",
    "security_access_group_id",
    "extension",
    "caller_id",
    "timezone",
}


def _read(
    path: str, scope: str, tag: str, summary: str, query: frozenset[str] | None = None
) -> Callable[[Handler], Handler]:
    """Register a GET route: scope first, then the query parameters it takes (others: 422).
    By default a list path takes limit and offset, a detail path (ending in an id) nothing."""
    allowed = query if query is not None else (NO_QUERY if path.endswith("}") else PAGING)

    def register(fn: Handler) -> Handler:
        async def guarded(request: Request) -> Response:
            require_scope(request, scope)
            check_query(request, allowed)
            return await fn(request)

        READ_ROUTES.append(("GET", path, scope, tag, summary, guarded))
        return fn

    return register


def _int_id(request: Request, name: str) -> int:
    raw = request.path_params[name]
    if not raw.isdigit():
        raise ApiError(404)  # not an integer id: no such resource
    return int(raw)


def _uuid_id(request: Request, name: str) -> str:
    raw = str(request.path_params[name])
    try:
        uuid.UUID(raw)
    except ValueError:
        raise ApiError(404) from None
    return raw.lower()


def _one(key: str, items: list[Json], match: Callable[[Json], bool]) -> Response:
    for item in items:
        if match(item):
            return json_response({key: item})
    raise ApiError(404)


def _sbx(request: Request) -> Sandbox:
    return get_sandbox(request)


# ------------------------------------------------------------------ users and teams

_EMAIL = re.compile(r"[^@\s]+@[^@\s]+")
_USER_FILTERS = ("name", "email", "sip_account", "extension", "caller_id", "timezone")


def _filter_users(request: Request, users: list[Json], *, extension: bool) -> list[Json]:
    q = request.query_params
    out = users
    for name in _USER_FILTERS:
        if name == "extension" and not extension:
            continue
        value = q.get(name)
        if value is None:
            continue
        if name == "name":  # a name filter matches a case-insensitive substring
            out = [u for u in out if value.lower() in u["name"].lower()]
        else:
            out = [u for u in out if u[name] == value]
    email = q.get("email")
    if email is not None and not _EMAIL.fullmatch(email):
        raise fail({"email": ["must be an email address"]})
    group = q.get("security_access_group_id")
    if group is not None:
        if not group.lstrip("-").isdigit():
            raise fail({"security_access_group_id": ["must be an integer"]})
        out = [u for u in out if u["security_access_group"]["id"] == int(group)]
    return out


@_read("/api/v4/users", "users.read", "Users", "List users", USER_FILTERS)
async def users_list(request: Request) -> Response:
    users = _filter_users(request, _sbx(request).dataset.users, extension=True)
    return paginate(request, "users", users)


@_read(
    "/api/v4/users/deleted",
    "users.read",
    "Users",
    "List deleted users",
    USER_FILTERS - {"extension"},
)
async def users_deleted(request: Request) -> Response:
    users = _filter_users(request, _sbx(request).dataset.deleted_users, extension=False)
    return paginate(request, "users", users)


@_read("/api/v4/users/deleted/{user_id}", "users.read", "Users", "Get a deleted user")
async def users_deleted_one(request: Request) -> Response:
    user = _sbx(request).dataset.deleted_by_id.get(_uuid_id(request, "user_id"))
    if user is None:
        raise ApiError(404)
    return json_response({"user": user})


@_read("/api/v4/users/teams", "users.teams.read", "Users", "List teams")
async def teams_list(request: Request) -> Response:
    return paginate(request, "teams", _sbx(request).dataset.teams)


@_read("/api/v4/users/teams/{team_id}", "users.teams.read", "Users", "Get a team")
async def teams_one(request: Request) -> Response:
    team_id = _int_id(request, "team_id")
    return _one("team", _sbx(request).dataset.teams, lambda t: t["id"] == team_id)


def _users_of(request: Request, ids: list[str]) -> list[Json]:
    by_id = _sbx(request).dataset.users_by_id
    return [by_id[i] for i in ids]


async def _team_users(request: Request, supervisors: bool) -> Response:
    ds = _sbx(request).dataset
    team_id = _int_id(request, "team_id")
    table = ds.team_supervisors if supervisors else ds.team_members
    if team_id not in table:
        raise ApiError(404)
    # Team users: the text says max 100 (the parameter range says 0..1000); the text wins.
    return paginate(
        request, "users", _users_of(request, table[team_id]), max_limit=100, min_limit=0
    )


for _prefix in ("/api/v4/teams", "/api/v4/users/teams"):

    @_read(_prefix + "/{team_id}/users", "users.teams.read", "Users", "List team users")
    async def team_users(request: Request) -> Response:
        return await _team_users(request, supervisors=False)

    @_read(_prefix + "/{team_id}/supervisors", "users.teams.read", "Users", "Team supervisors")
    async def team_supervisors(request: Request) -> Response:
        return await _team_users(request, supervisors=True)


@_read("/api/v4/users/skills", "users.skills.read", "Users", "List user skills")
async def user_skills(request: Request) -> Response:
    ds = _sbx(request).dataset
    items = [{"skill": s, "users": [{"id": u} for u in ds.skill_users[s["id"]]]} for s in ds.skills]
    return paginate(request, "skills", items)


@_read("/api/v4/users/skills/{skill_id}", "users.skills.read", "Users", "Users of a skill")
async def user_skills_one(request: Request) -> Response:
    ds = _sbx(request).dataset
    skill_id = _int_id(request, "skill_id")
    for s in ds.skills:
        if s["id"] == skill_id:
            users = [{"id": u} for u in ds.skill_users[skill_id]]
            return json_response({"skill": {**s, "users": users}})
    raise ApiError(404)


@_read("/api/v4/users/{user_id}", "users.read", "Users", "Get a user")
async def users_one(request: Request) -> Response:
    user = _sbx(request).dataset.users_by_id.get(_uuid_id(request, "user_id"))
    if user is None:
        raise ApiError(404)
    return json_response({"user": user})


# ------------------------------------------------------------------ routing


@_read("/api/v4/routing/queues", "routing.queues.read", "Routing", "List queues")
async def queues_list(request: Request) -> Response:
    return paginate(request, "queues", _sbx(request).dataset.queues)


@_read("/api/v4/routing/queues/{queue_id}", "routing.queues.read", "Routing", "Get a queue")
async def queues_one(request: Request) -> Response:
    queue_id = _int_id(request, "queue_id")
    return _one("queue", _sbx(request).dataset.queues, lambda q: q["id"] == queue_id)


async def _queue_users(request: Request, supervisors: bool) -> Response:
    ds = _sbx(request).dataset
    queue_id = _int_id(request, "queue_id")
    table = ds.queue_supervisors if supervisors else ds.queue_members
    if queue_id not in table:
        raise ApiError(404)
    return paginate(request, "users", _users_of(request, table[queue_id]))


@_read("/api/v4/routing/queues/{queue_id}/users", "routing.queues.read", "Routing", "Queue users")
async def queue_users(request: Request) -> Response:
    return await _queue_users(request, supervisors=False)


@_read(
    "/api/v4/routing/queues/{queue_id}/supervisors",
    "routing.queues.read",
    "Routing",
    "Queue supervisors",
)
async def queue_supervisors(request: Request) -> Response:
    return await _queue_users(request, supervisors=True)


@_read("/api/v4/routing/skills", "routing.skills.read", "Routing", "List skills")
async def skills_list(request: Request) -> Response:
    return paginate(request, "skills", _sbx(request).dataset.skills)


@_read("/api/v4/routing/skills/{skill_id}", "routing.skills.read", "Routing", "Get a skill")
async def skills_one(request: Request) -> Response:
    skill_id = _int_id(request, "skill_id")
    return _one("skill", _sbx(request).dataset.skills, lambda s: s["id"] == skill_id)


# ------------------------------------------------------------------ campaigns


def _campaign(request: Request) -> Json:
    state = _sbx(request).state
    with state.lock:
        campaign = state.campaigns.get(_int_id(request, "campaign_id"))
    if campaign is None:
        raise ApiError(404)
    return campaign


@_read("/api/v4/campaigns", "campaigns.read", "Campaigns", "List campaigns")
async def campaigns_list(request: Request) -> Response:
    state = _sbx(request).state
    with state.lock:
        items = [state.campaigns[k] for k in sorted(state.campaigns)]
    return paginate(request, "campaigns", items)


@_read("/api/v4/campaigns/{campaign_id}", "campaigns.read", "Campaigns", "Get a campaign")
async def campaigns_one(request: Request) -> Response:
    return json_response({"campaign": _campaign(request)})


@_read("/api/v4/campaigns/{campaign_id}/users", "campaigns.read", "Campaigns", "Campaign users")
async def campaign_users(request: Request) -> Response:
    ds = _sbx(request).dataset
    ids = ds.campaign_users.get(_campaign(request)["id"], [])
    return paginate(request, "users", _users_of(request, ids))


@_read("/api/v4/campaigns/{campaign_id}/teams", "campaigns.read", "Campaigns", "Campaign teams")
async def campaign_teams(request: Request) -> Response:
    ds = _sbx(request).dataset
    return paginate(request, "teams", ds.campaign_teams.get(_campaign(request)["id"], []))


# ------------------------------------------------------------------ numbers and billing


@_read("/api/v4/numbers", "numbers.read", "Numbers", "List purchased numbers")
async def numbers_list(request: Request) -> Response:
    return paginate(request, "numbers", _sbx(request).dataset.numbers, max_limit=100, min_limit=0)


@_read("/api/v4/numbers/caller-id-groups", "numbers.read", "Numbers", "List caller ID groups")
async def caller_id_groups(request: Request) -> Response:
    groups = _sbx(request).dataset.caller_id_groups
    # The text says max 100 (the parameter range says 0..1000); the text wins.
    return paginate(request, "caller_id_groups", groups, max_limit=100, min_limit=0)


@_read("/api/v4/numbers/{number_id}", "numbers.read", "Numbers", "Get a number")
async def numbers_one(request: Request) -> Response:
    number_id = _int_id(request, "number_id")
    return _one("number", _sbx(request).dataset.numbers, lambda n: n["id"] == number_id)


@_read("/api/v4/billing/balance", "billing.balance.read", "Billing", "Account balance", NO_QUERY)
async def balance(request: Request) -> Response:
    state = _sbx(request).state
    with state.lock:
        amount = state.balance
    return json_response({"balance": {"amount": f"{amount:f}"}})


# ------------------------------------------------------------------ messaging


def _conversation(request: Request) -> tuple[str, list[Json]]:
    state = _sbx(request).state
    conv_id = _uuid_id(request, "conversation_id")
    with state.lock:
        msgs = state.conversations.get(conv_id)
        msgs = list(msgs) if msgs is not None else None
    if msgs is None:
        raise ApiError(404)
    return conv_id, msgs


@_read(
    "/api/v4/messaging/conversations/{conversation_id}/messages",
    "messaging.conversations.read",
    "Messaging",
    "List conversation messages",
)
async def conversation_messages(request: Request) -> Response:
    _, msgs = _conversation(request)
    return paginate(request, "messages", msgs, max_limit=100, min_limit=0)


@_read(
    "/api/v4/messaging/conversations/{conversation_id}",
    "messaging.conversations.read",
    "Messaging",
    "Get a conversation",
)
async def conversation_one(request: Request) -> Response:
    conv_id, msgs = _conversation(request)
    state = _sbx(request).state
    with state.lock:
        created = state.conversations_created.get(conv_id)
    return json_response({"conversation": messaging.conversation_view(conv_id, msgs, created)})


@_read(
    "/api/v4/messaging/conversations/{conversation_id}/messages/{message_id}",
    "messaging.conversations.read",
    "Messaging",
    "Get a conversation message",
)
async def conversation_message(request: Request) -> Response:
    _, msgs = _conversation(request)
    message_id = _uuid_id(request, "message_id")
    return _one("message", msgs, lambda m: m["id"] == message_id)


def _simple_resource(path: str, scope: str, tag: str, key: str, singular: str, attr: str) -> None:
    async def list_items(request: Request) -> Response:
        return paginate(request, key, getattr(_sbx(request).dataset, attr))

    async def one_item(request: Request) -> Response:
        item_id = _int_id(request, "item_id")
        items = getattr(_sbx(request).dataset, attr)
        return _one(singular, items, lambda i: i["id"] == item_id)

    _read(path, scope, tag, f"List {key}")(list_items)
    _read(path + "/{item_id}", scope, tag, f"Get one of {key}")(one_item)


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

# ------------------------------------------------------------------ tasks


def _state_items(request: Request, attr: str) -> list[Json]:
    state = _sbx(request).state
    with state.lock:
        return list(getattr(state, attr).values())


for _path in ("/api/v4/tasks/webhook_failures", "/api/v4/tasks/webhooks/failures"):

    @_read(_path, "tasks.webhooks.read", "Tasks", "List webhook failures")
    async def webhook_failures(request: Request) -> Response:
        return paginate(request, "webhook_failures", _state_items(request, "webhook_failures"))


for _path in ("/api/v4/tasks/schedule_callbacks", "/api/v4/tasks/scheduled_callbacks"):

    @_read(_path, "tasks.scheduled_callbacks.read", "Tasks", "List scheduled callbacks")
    async def callbacks_list(request: Request) -> Response:
        return paginate(request, "scheduled_callbacks", _state_items(request, "callbacks"))

    @_read(
        _path + "/{callback_id}",
        "tasks.scheduled_callbacks.read",
        "Tasks",
        "Get a scheduled callback",
    )
    async def callbacks_one(request: Request) -> Response:
        state = _sbx(request).state
        with state.lock:
            item = state.callbacks.get(str(request.path_params["callback_id"]))
        if item is None:
            raise ApiError(404)
        return json_response({"scheduled_callback": item})


# ------------------------------------------------------------------ reporting

_read("/api/v4/reporting/cdrs", "reporting.cdrs.read", "Reporting", "List CDRs", routes_cdrs.QUERY)(
    routes_cdrs.list_cdrs
)
_read(
    "/api/v4/reporting/cdrs/events",
    "reporting.cdrs.read",
    "Reporting",
    "List CDR events",
    routes_cdrs.QUERY,
)(routes_cdrs.list_events)
_read("/api/v4/reporting/cdrs/{cdr_id}", "reporting.cdrs.read", "Reporting", "Get a CDR")(
    routes_cdrs.get_cdr
)

# ------------------------------------------------------------------ admin (no auth)


async def admin_faults(request: Request) -> Response:
    sandbox = _sbx(request)
    if request.method == "PUT":
        body = await read_json_body(request)
        if not isinstance(body, dict):
            raise fail({"body": ["must be an object"]})
        try:
            sandbox.faults = FaultConfig.from_json(body)
        except (TypeError, ValueError) as exc:
            raise fail({"faults": [str(exc)]}) from None
    return json_response(sandbox.faults.to_json())


async def admin_clock(request: Request) -> Response:
    clock = _sbx(request).clock
    if request.method == "PUT":
        body = await read_json_body(request)
        if not isinstance(body, dict):
            raise fail({"body": ["must be an object"]})
        try:
            if "now" in body:
                now = body["now"]
                clock.set(None if now is None else query.parse_time(str(now)))
            if "advance_s" in body:
                clock.advance(timedelta(seconds=float(body["advance_s"])))
        except ValueError as exc:
            raise fail({"now": [str(exc)]}) from None
    return json_response({"now": query.iso(clock.now()), "frozen": clock.frozen})


async def admin_counters(request: Request) -> Response:
    return json_response(_sbx(request).counters)


async def admin_truth(request: Request) -> Response:
    try:
        start = query.parse_time(request.query_params["start"])
        end = query.parse_time(request.query_params["end"])
    except (KeyError, ValueError):
        raise fail({"start": ["start and end must be ISO 8601 times"]}) from None
    return json_response({"cdrs": _sbx(request).truth_cdrs(start, end)})


# ------------------------------------------------------------------ OpenAPI

OPENAPI_FILE = "openapi.json"


def openapi_bytes() -> bytes:
    """The checked-in OpenAPI 3.1 document (package data), byte for byte: written from the
    spec, not from these routes, so the sandbox is held to it rather than describing itself."""
    return resources.files("connectors.sandbox").joinpath(OPENAPI_FILE).read_bytes()


# ------------------------------------------------------------------ app assembly


async def _api_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, ApiError)
    return json_response(exc.body, exc.status)


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    status = exc.status_code
    if status in (404, 405):
        # Unknown paths (a trailing slash too) and wrong methods are both "path invalid" in the
        # spec: 404 Not found, but like every API request only after authentication.
        if request.url.path.startswith("/api/") and not authenticated(request):
            return error_response(401)
        return error_response(404)
    return error_response(status)


class _CountRequests:
    """Outermost: counts every request per path (faulted ones included)."""

    def __init__(self, app: ASGIApp, sandbox: Sandbox) -> None:
        self.app = app
        self.sandbox = sandbox

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"].startswith("/api/"):
            self.sandbox.state.count(scope["path"])
        await self.app(scope, receive, send)


class SandboxApp:
    """The ASGI callable: counting -> faults -> Starlette routes."""

    def __init__(self, starlette: Starlette, sandbox: Sandbox) -> None:
        self.starlette = starlette
        self.state = starlette.state
        self.routes = starlette.routes
        inner: ASGIApp = starlette
        self._stack: ASGIApp = _CountRequests(FaultMiddleware(inner, sandbox.fault_state), sandbox)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self._stack(scope, receive, send)


def create_app(sandbox: Sandbox) -> SandboxApp:
    """The sandbox's ASGI app (routes + admin + OpenAPI, wrapped in the fault layer)."""
    routes: list[BaseRoute] = list(routes_writes.routes())
    routes += [Route(p, h, methods=[m]) for m, p, _s, _t, _summ, h in READ_ROUTES]
    routes += [
        Route("/_sandbox/faults", admin_faults, methods=["GET", "PUT"]),
        Route("/_sandbox/clock", admin_clock, methods=["GET", "PUT"]),
        Route("/_sandbox/counters", admin_counters, methods=["GET"]),
        Route("/_sandbox/truth/cdrs", admin_truth, methods=["GET"]),
    ]
    document = openapi_bytes()

    async def openapi(request: Request) -> Response:
        return raw_json(document)

    routes.append(Route("/api/v4/openapi.json", openapi, methods=["GET"]))
    app = Starlette(
        routes=routes,
        exception_handlers={ApiError: _api_error, HTTPException: _http_error},
    )
    app.router.redirect_slashes = False  # /api/v4/users/ is an unknown path, not a 307
    app.state.sandbox = sandbox
    return SandboxApp(app, sandbox)
