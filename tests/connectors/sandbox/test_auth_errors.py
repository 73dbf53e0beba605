"""Auth and errors: 401/403 with the simple bodies, 404 for unknown paths, 400 for bad JSON."""

from __future__ import annotations

import httpx
import pytest

from connectors.sandbox import Sandbox
from connectors.sandbox.app import READ_ROUTES
from tests.connectors.sandbox.conftest import NARROW_KEY, Api

# Every read endpoint with concrete ids substituted.
CONCRETE = {
    "{user_id}": "00000000-0000-4000-8000-000000000000",
    "{team_id}": "1", "{queue_id}": "1", "{skill_id}": "1", "{campaign_id}": "1",
    "{number_id}": "1", "{item_id}": "1", "{callback_id}": "x", "{cdr_id}": "x",
    "{conversation_id}": "00000000-0000-4000-8000-000000000000",
    "{message_id}": "00000000-0000-4000-8000-000000000000",
}  # fmt: skip


def concrete(path: str) -> str:
    for k, v in CONCRETE.items():
        path = path.replace(k, v)
    return path


def get_as(sandbox: Sandbox, key: str | None, path: str) -> httpx.Response:
    """One GET with ``key`` (None: no Authorization header) on a client of its own."""
    with Api(sandbox, key=key) as client:
        return client.get(path)


READ_PATHS = sorted({concrete(p) for _, p, *_ in READ_ROUTES})


@pytest.mark.parametrize("path", READ_PATHS)
def test_every_read_needs_a_key(shared: Sandbox, path: str) -> None:
    for key in (None, "wrong-key"):
        response = get_as(shared, key, path)
        assert response.status_code == 401
        assert response.json() == {"error": "Unauthorized"}


@pytest.mark.parametrize("path", [p for p in READ_PATHS if "billing" not in p])
def test_every_read_checks_its_scope(shared: Sandbox, path: str) -> None:
    response = get_as(shared, NARROW_KEY, path)
    assert response.status_code == 403
    assert response.json() == {"error": "Forbidden"}


def test_narrow_key_reaches_its_own_scope(shared: Sandbox) -> None:
    assert get_as(shared, NARROW_KEY, "/api/v4/billing/balance").status_code == 200


def test_bearer_scheme_required(api: Api) -> None:
    response = api.get("/api/v4/users", headers={"Authorization": "Token sbx-full-access-key"})
    assert response.status_code == 401


@pytest.mark.parametrize("path", ["/api/v4/nope", "/api/v4/users/1/2/3", "/api/v5/users"])
def test_unknown_path_is_404(api: Api, path: str) -> None:
    response = api.get(path)
    assert response.status_code == 404
    assert response.json() == {"error": "Not found"}


def test_wrong_method_is_404(api: Api) -> None:
    response = api.request("DELETE", "/api/v4/users")
    assert response.status_code == 404
    assert response.json() == {"error": "Not found"}


def test_malformed_json_is_400(api: Api) -> None:
    response = api.request(
        "POST",
        "/api/v4/messaging/sms",
        content=b'{"phone_number": ',
        headers={"Content-Type": "application/json"},
    )
    assert response.status_code == 400
    assert response.json() == {"error": "Bad Request"}


def test_key_never_in_repr(shared: Sandbox) -> None:
    assert "sbx-full-access-key" not in repr(shared)
    assert "sbx-full-access-key" not in repr(shared.config)
