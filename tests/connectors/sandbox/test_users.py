"""Users and teams over HTTP: User fields per the spec table, filters, detail, deleted, teams."""

from __future__ import annotations

import re
import uuid
from typing import Any

import pytest

from tests.connectors.sandbox.conftest import Api

TS = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$")
USER_FIELDS = {
    "id", "name", "email", "sip_account", "extension", "caller_id", "employee_id", "timezone",
    "security_access_group", "teams", "supervised_teams", "queues", "supervised_queues",
    "webrtc_ringtone", "channels", "channel_group_capacity", "channel_profiles",
    "speech_language", "skills", "status", "created_at", "updated_at", "deleted_at",
}  # fmt: skip


def check_user(u: dict[str, Any], deleted: bool) -> None:
    assert set(u) == USER_FIELDS
    uuid.UUID(u["id"])
    assert re.match(r"^[^@\s]+@[^@\s]+\.[a-z]+$", u["email"])
    assert re.match(r"^[^@\s]+@[^@\s]+$", u["sip_account"])
    assert u["caller_id"].isdigit()
    assert u["extension"]
    assert u["employee_id"]
    assert "/" in u["timezone"]
    assert set(u["security_access_group"]) == {"id", "name"}
    for key in ("teams", "supervised_teams", "queues", "supervised_queues"):
        assert all(set(x) == {"id", "name"} and isinstance(x["id"], int) for x in u[key])
    assert set(u["webrtc_ringtone"]) == {"type", "name"}
    assert set(u["channels"]) <= {"voice", "chat", "whatsapp"}
    assert set(u["channel_group_capacity"]) == {"chat", "instant"}
    for p in u["channel_profiles"]:
        assert set(p) == {"id", "channel", "identifier", "name"}
    assert re.match(r"^[a-z]{2}-[A-Z]{2}$", u["speech_language"])
    for s in u["skills"]:
        assert set(s) == {"skill", "value"}
        assert set(s["skill"]) == {"id", "name"}
        assert isinstance(s["value"], int)
    assert isinstance(u["status"], str)
    assert TS.match(u["created_at"])
    assert TS.match(u["updated_at"])
    if deleted:
        assert TS.match(u["deleted_at"])
    else:
        assert u["deleted_at"] is None


def test_users_list_shape(api: Api) -> None:
    body = api.json("/api/v4/users", params={"limit": 1000})
    assert set(body) == {"users", "metadata"}
    assert body["metadata"] == {"total": len(body["users"])}
    for u in body["users"]:
        check_user(u, deleted=False)
    assert {u["status"] for u in body["users"]} == {"available"}


def test_users_paging_and_bounds(api: Api) -> None:
    all_users = api.json("/api/v4/users", params={"limit": 1000})["users"]
    page = api.json("/api/v4/users", params={"limit": 5, "offset": 3})
    assert page["users"] == all_users[3:8]
    assert len(api.json("/api/v4/users")["users"]) == min(100, len(all_users))
    for bad in ({"limit": "1001"}, {"limit": "-1"}, {"offset": "-1"}, {"limit": "x"}):
        response = api.get("/api/v4/users", params=bad)
        assert response.status_code == 422
        assert set(response.json()["errors"]) == set(bad)


@pytest.mark.parametrize("field", ["email", "sip_account", "extension", "caller_id", "timezone"])
def test_users_exact_filters(api: Api, field: str) -> None:
    users = api.json("/api/v4/users", params={"limit": 1000})["users"]
    value = users[4][field]
    got = api.json("/api/v4/users", params={field: value, "limit": 1000})["users"]
    assert got == [u for u in users if u[field] == value]
    assert got


def test_users_name_and_group_filters(api: Api) -> None:
    users = api.json("/api/v4/users", params={"limit": 1000})["users"]
    part = users[0]["name"].split()[1][:3].lower()
    got = api.json("/api/v4/users", params={"name": part, "limit": 1000})["users"]
    assert got == [u for u in users if part in u["name"].lower()]
    got = api.json("/api/v4/users", params={"security_access_group_id": 2})["users"]
    assert got
    assert all(u["security_access_group"]["id"] == 2 for u in got)
    bad = api.get("/api/v4/users", params={"security_access_group_id": "two"})
    assert bad.status_code == 422


def test_user_detail_and_404(api: Api) -> None:
    user = api.json("/api/v4/users", params={"limit": 1})["users"][0]
    assert api.json(f"/api/v4/users/{user['id']}") == {"user": user}
    assert api.get(f"/api/v4/users/{uuid.uuid4()}").json() == {"error": "Not found"}
    assert api.get("/api/v4/users/123").status_code == 404


def test_deleted_users(api: Api) -> None:
    body = api.json("/api/v4/users/deleted")
    assert body["users"]
    for u in body["users"]:
        check_user(u, deleted=True)
    one = body["users"][0]
    assert api.json(f"/api/v4/users/deleted/{one['id']}") == {"user": one}
    assert api.get(f"/api/v4/users/{one['id']}").status_code == 404  # not an active user
    assert api.get(f"/api/v4/users/deleted/{uuid.uuid4()}").status_code == 404
    filtered = api.json("/api/v4/users/deleted", params={"email": one["email"]})["users"]
    assert filtered == [one]


def test_teams(api: Api) -> None:
    body = api.json("/api/v4/users/teams")
    assert body["metadata"]["total"] == len(body["teams"])
    assert all(set(t) == {"id", "name"} for t in body["teams"])
    team = body["teams"][0]
    assert api.json(f"/api/v4/users/teams/{team['id']}") == {"team": team}
    assert api.get("/api/v4/users/teams/999").status_code == 404


@pytest.mark.parametrize("prefix", ["/api/v4/teams", "/api/v4/users/teams"])
def test_team_users_and_supervisors(api: Api, prefix: str) -> None:
    members = api.json(f"{prefix}/1/users")
    assert members["users"]
    assert all(1 in [t["id"] for t in u["teams"]] for u in members["users"])
    assert members["metadata"] == {"total": len(members["users"])}
    sups = api.json(f"{prefix}/1/supervisors")["users"]
    assert all(1 in [t["id"] for t in u["supervised_teams"]] for u in sups)
    assert api.get(f"{prefix}/999/users").status_code == 404
    # Team users: max 100 (the spec's text), 0 allowed (the parameter range).
    assert api.get(f"{prefix}/1/users", params={"limit": 101}).status_code == 422
    assert api.json(f"{prefix}/1/users", params={"limit": 0})["users"] == []


def test_user_skills(api: Api) -> None:
    body = api.json("/api/v4/users/skills")
    assert body["skills"]
    first = body["skills"][0]
    assert set(first) == {"skill", "users"}
    one = api.json(f"/api/v4/users/skills/{first['skill']['id']}")["skill"]
    assert one["id"] == first["skill"]["id"]
    assert api.get("/api/v4/users/skills/999").status_code == 404
