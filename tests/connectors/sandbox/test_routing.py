"""Routing: queues (+ detail, users, supervisors) and skills."""

from __future__ import annotations

from tests.connectors.sandbox.conftest import Api


def test_queues_list_and_detail(api: Api) -> None:
    body = api.json("/api/v4/routing/queues")
    assert body["metadata"] == {"total": len(body["queues"])}
    for q in body["queues"]:
        assert set(q) == {"id", "name"}
        assert isinstance(q["id"], int)
    q = body["queues"][2]
    assert api.json(f"/api/v4/routing/queues/{q['id']}") == {"queue": q}
    assert api.get("/api/v4/routing/queues/11").status_code == 404  # deleted queue
    assert api.get("/api/v4/routing/queues/abc").json() == {"error": "Not found"}


def test_queue_users_and_supervisors(api: Api) -> None:
    users = api.json("/api/v4/routing/queues/1/users")["users"]
    assert users
    assert all(1 in [q["id"] for q in u["queues"]] for u in users)
    sups = api.json("/api/v4/routing/queues/1/supervisors")["users"]
    assert all(1 in [q["id"] for q in u["supervised_queues"]] for u in sups)
    assert api.get("/api/v4/routing/queues/99/users").status_code == 404
    assert api.get("/api/v4/routing/queues/99/supervisors").status_code == 404


def test_skills(api: Api) -> None:
    body = api.json("/api/v4/routing/skills", params={"limit": 3, "offset": 1})
    assert len(body["skills"]) == 3
    assert body["metadata"]["total"] == 8
    skill = body["skills"][0]
    assert set(skill) == {"id", "name"}
    assert api.json(f"/api/v4/routing/skills/{skill['id']}") == {"skill": skill}
    assert api.get("/api/v4/routing/skills/99").status_code == 404
    assert api.get("/api/v4/routing/skills", params={"limit": 5000}).status_code == 422
