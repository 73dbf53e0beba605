"""GET routes of the directory: users, teams, queues, skills, campaigns, numbers, balance."""

from __future__ import annotations

import re
from collections.abc import Mapping

from starlette.requests import Request
from starlette.responses import Response

from connectors.sandbox.http import ApiError, fail, get_sandbox, json_response, paginate
from connectors.sandbox.params import parse_int
from connectors.sandbox.reads import NO_QUERY, PAGING, Json, ReadRoutes, int_id, one, uuid_id

READS = ReadRoutes()

# The user filters matched on the user's own field (name as a substring, the rest exactly);
# security_access_group_id matches the group's id.
_USER_FILTERS = ("name", "email", "sip_account", "extension", "caller_id", "timezone")
USER_FILTERS: frozenset[str] = PAGING | {*_USER_FILTERS, "security_access_group_id"}

# ------------------------------------------------------------------ users and teams

_EMAIL = re.compile(r"[^@\s]+@[^@\s]+")


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
    raw_group = q.get("security_access_group_id")
    if raw_group is not None:
        group = parse_int(raw_group)
        if group is None:
            raise fail({"security_access_group_id": ["must be an integer"]})
        out = [u for u in out if u["security_access_group"]["id"] == group]
    return out


@READS.get("/api/v4/users", "users.read", "Users", "List users", USER_FILTERS)
async def users_list(request: Request) -> Response:
    users = _filter_users(request, get_sandbox(request).dataset.users, extension=True)
    return paginate(request, "users", users)


@READS.get(
    "/api/v4/users/deleted",
    "users.read",
    "Users",
    "List deleted users",
    USER_FILTERS - {"extension"},
)
async def users_deleted(request: Request) -> Response:
    users = _filter_users(request, get_sandbox(request).dataset.deleted_users, extension=False)
    return paginate(request, "users", users)


def _user(request: Request, by_id: Mapping[str, Json]) -> Response:
    user = by_id.get(uuid_id(request, "user_id"))
    if user is None:
        raise ApiError(404)
    return json_response({"user": user})


@READS.get("/api/v4/users/deleted/{user_id}", "users.read", "Users", "Get a deleted user")
async def users_deleted_one(request: Request) -> Response:
    return _user(request, get_sandbox(request).dataset.deleted_by_id)


_TEAMS = ("List teams", "Get a team")
READS.list_and_get("/api/v4/users/teams", "users.teams.read", "Users", _TEAMS, id_name="team_id")


def _users_of(request: Request, ids: list[str]) -> list[Json]:
    by_id = get_sandbox(request).dataset.users_by_id
    return [by_id[i] for i in ids]


def _group_users(
    request: Request, id_name: str, table: Mapping[int, list[str]], max_limit: int = 1000
) -> Response:
    """A page of the users of a team or queue (members or supervisors, per ``table``)."""
    group_id = int_id(request, id_name)
    if group_id not in table:
        raise ApiError(404)
    return paginate(request, "users", _users_of(request, table[group_id]), max_limit=max_limit)


# Team users: the text says max 100 (the parameter range says 0..1000); the text wins.
_TEAM_USERS_MAX = 100


for _prefix in ("/api/v4/teams", "/api/v4/users/teams"):

    @READS.get(_prefix + "/{team_id}/users", "users.teams.read", "Users", "List team users")
    async def team_users(request: Request) -> Response:
        members = get_sandbox(request).dataset.team_members
        return _group_users(request, "team_id", members, _TEAM_USERS_MAX)

    @READS.get(_prefix + "/{team_id}/supervisors", "users.teams.read", "Users", "Team supervisors")
    async def team_supervisors(request: Request) -> Response:
        supervisors = get_sandbox(request).dataset.team_supervisors
        return _group_users(request, "team_id", supervisors, _TEAM_USERS_MAX)


@READS.get("/api/v4/users/skills", "users.skills.read", "Users", "List user skills")
async def user_skills(request: Request) -> Response:
    ds = get_sandbox(request).dataset
    items = [{"skill": s, "users": [{"id": u} for u in ds.skill_users[s["id"]]]} for s in ds.skills]
    return paginate(request, "skills", items)


@READS.get("/api/v4/users/skills/{skill_id}", "users.skills.read", "Users", "Users of a skill")
async def user_skills_one(request: Request) -> Response:
    ds = get_sandbox(request).dataset
    skill_id = int_id(request, "skill_id")
    for s in ds.skills:
        if s["id"] == skill_id:
            users = [{"id": u} for u in ds.skill_users[skill_id]]
            return json_response({"skill": {**s, "users": users}})
    raise ApiError(404)


@READS.get("/api/v4/users/{user_id}", "users.read", "Users", "Get a user")
async def users_one(request: Request) -> Response:
    return _user(request, get_sandbox(request).dataset.users_by_id)


# ------------------------------------------------------------------ routing


_QUEUES = ("List queues", "Get a queue")
READS.list_and_get(
    "/api/v4/routing/queues", "routing.queues.read", "Routing", _QUEUES, id_name="queue_id"
)


@READS.get(
    "/api/v4/routing/queues/{queue_id}/users", "routing.queues.read", "Routing", "Queue users"
)
async def queue_users(request: Request) -> Response:
    return _group_users(request, "queue_id", get_sandbox(request).dataset.queue_members)


@READS.get(
    "/api/v4/routing/queues/{queue_id}/supervisors",
    "routing.queues.read",
    "Routing",
    "Queue supervisors",
)
async def queue_supervisors(request: Request) -> Response:
    return _group_users(request, "queue_id", get_sandbox(request).dataset.queue_supervisors)


_SKILLS = ("List skills", "Get a skill")
READS.list_and_get(
    "/api/v4/routing/skills", "routing.skills.read", "Routing", _SKILLS, id_name="skill_id"
)


# ------------------------------------------------------------------ campaigns


def _campaign(request: Request) -> Json:
    state = get_sandbox(request).state
    with state.lock:
        campaign = state.campaigns.get(int_id(request, "campaign_id"))
    if campaign is None:
        raise ApiError(404)
    return campaign


@READS.get("/api/v4/campaigns", "campaigns.read", "Campaigns", "List campaigns")
async def campaigns_list(request: Request) -> Response:
    state = get_sandbox(request).state
    with state.lock:
        items = [state.campaigns[k] for k in sorted(state.campaigns)]
    return paginate(request, "campaigns", items)


@READS.get("/api/v4/campaigns/{campaign_id}", "campaigns.read", "Campaigns", "Get a campaign")
async def campaigns_one(request: Request) -> Response:
    return json_response({"campaign": _campaign(request)})


@READS.get("/api/v4/campaigns/{campaign_id}/users", "campaigns.read", "Campaigns", "Campaign users")
async def campaign_users(request: Request) -> Response:
    ds = get_sandbox(request).dataset
    ids = ds.campaign_users.get(_campaign(request)["id"], [])
    return paginate(request, "users", _users_of(request, ids))


@READS.get("/api/v4/campaigns/{campaign_id}/teams", "campaigns.read", "Campaigns", "Campaign teams")
async def campaign_teams(request: Request) -> Response:
    ds = get_sandbox(request).dataset
    return paginate(request, "teams", ds.campaign_teams.get(_campaign(request)["id"], []))


# ------------------------------------------------------------------ numbers and billing


@READS.get("/api/v4/numbers", "numbers.read", "Numbers", "List purchased numbers")
async def numbers_list(request: Request) -> Response:
    return paginate(
        request, "numbers", get_sandbox(request).dataset.numbers, max_limit=100, min_limit=0
    )


@READS.get("/api/v4/numbers/caller-id-groups", "numbers.read", "Numbers", "List caller ID groups")
async def caller_id_groups(request: Request) -> Response:
    groups = get_sandbox(request).dataset.caller_id_groups
    # The text says max 100 (the parameter range says 0..1000); the text wins.
    return paginate(request, "caller_id_groups", groups, max_limit=100, min_limit=0)


@READS.get("/api/v4/numbers/{number_id}", "numbers.read", "Numbers", "Get a number")
async def numbers_one(request: Request) -> Response:
    number_id = int_id(request, "number_id")
    return one("number", get_sandbox(request).dataset.numbers, lambda n: n["id"] == number_id)


@READS.get(
    "/api/v4/billing/balance", "billing.balance.read", "Billing", "Account balance", NO_QUERY
)
async def balance(request: Request) -> Response:
    state = get_sandbox(request).state
    with state.lock:
        amount = state.balance
    return json_response({"balance": {"amount": f"{amount:f}"}})
