"""Small HTTP helpers shared by the route modules: errors, auth, JSON in and out, paging."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import orjson
from starlette.requests import Request
from starlette.responses import Response

from connectors.sandbox.params import parse_int

if TYPE_CHECKING:
    from connectors.sandbox.emulator import Sandbox

SIMPLE_ERRORS: dict[int, str] = {
    400: "Bad Request",
    401: "Unauthorized",
    403: "Forbidden",
    404: "Not found",
    429: "Too many requests",
    500: "Internal server error",  # the sandbox's 5xx body (the spec shows none)
}


class ApiError(Exception):
    """Raised by route code; the app-level handler turns it into the response."""

    def __init__(self, status: int, body: object | None = None) -> None:
        super().__init__(status)
        self.status = status
        self.body = body if body is not None else {"error": SIMPLE_ERRORS.get(status, "Error")}


def json_response(
    obj: object, status: int = 200, headers: dict[str, str] | None = None
) -> Response:
    """Compact JSON via orjson."""
    return raw_json(orjson.dumps(obj), status, headers)


def raw_json(body: bytes, status: int = 200, headers: dict[str, str] | None = None) -> Response:
    """A response from already-encoded JSON bytes."""
    return Response(body, status_code=status, media_type="application/json", headers=headers)


def error_response(status: int) -> Response:
    """The spec's simple body: {"error": "..."}."""
    return json_response({"error": SIMPLE_ERRORS.get(status, "Error")}, status)


def field_errors(status: int, errors: dict[str, list[str]]) -> Response:
    """The spec's field-error body: {"errors": {field: [messages]}} (422, 406, 409)."""
    return json_response({"errors": errors}, status)


def fail(errors: dict[str, list[str]], status: int = 422) -> ApiError:
    """An ApiError with a field-error body, for `raise fail({...})`."""
    return ApiError(status, {"errors": errors})


async def read_json_body(request: Request) -> object:
    """The parsed JSON body; malformed JSON (or an empty body) is 400 Bad Request."""
    raw = await request.body()
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        raise ApiError(400) from None


async def json_object(request: Request) -> dict[str, Any]:
    """The JSON body, which must be an object (422 naming `body` otherwise)."""
    body = await read_json_body(request)
    if not isinstance(body, dict):
        raise fail({"body": ["must be a JSON object"]})
    return body


def get_sandbox(request: Request) -> Sandbox:
    sandbox: Sandbox = request.app.state.sandbox
    return sandbox


def bearer_key(request: Request) -> str | None:
    header = request.headers.get("authorization", "")
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        return None
    return token.strip()


def require_scope(request: Request, scope: str) -> None:
    """401 for a missing/unknown key, 403 for a known key without `scope`."""
    key = bearer_key(request)
    scopes = get_sandbox(request).config.api_keys.get(key) if key is not None else None
    if scopes is None:
        raise ApiError(401)
    if scope not in scopes:
        raise ApiError(403)


UNKNOWN_PARAMETER = "is not a known parameter"
REPEATED_PARAMETER = (
    "must be given once (only type[], subtype[], disposition[], account_id[] repeat)"
)


def check_query(request: Request, allowed: frozenset[str]) -> None:
    """422 naming every query parameter the endpoint does not take (catches client typos), and
    every parameter given more than once unless it is an array (`x[]`) the spec allows."""
    errors: dict[str, list[str]] = {}
    params = request.query_params
    for name in dict.fromkeys(params.keys()):
        if name not in allowed:
            errors.setdefault(name, []).append(UNKNOWN_PARAMETER)
        elif not name.endswith("[]") and len(params.getlist(name)) > 1:
            errors.setdefault(name, []).append(REPEATED_PARAMETER)
    if errors:
        raise fail(errors)


def authenticated(request: Request) -> bool:
    """True when the request carries a key the sandbox knows (whatever its scopes)."""
    key = bearer_key(request)
    return key is not None and key in get_sandbox(request).config.api_keys


def int_param(
    request: Request,
    name: str,
    default: int,
    *,
    minimum: int = 0,
    maximum: int | None = None,
    errors: dict[str, list[str]] | None = None,
) -> int:
    """An integer query parameter (ASCII digits, `parse_int`) within bounds; problems go to
    `errors` (422) or raise."""
    raw = request.query_params.get(name)
    if raw is None:
        return default
    value = parse_int(raw)
    if value is None:
        problem = "must be an integer"
    elif value < minimum:
        problem = f"must be greater than or equal to {minimum}"
    elif maximum is not None and value > maximum:
        problem = f"must be less than or equal to {maximum}"
    else:
        return value
    if errors is None:
        raise fail({name: [problem]})
    errors.setdefault(name, []).append(problem)
    return default


def paginate(
    request: Request,
    key: str,
    items: list[dict[str, Any]],
    *,
    max_limit: int = 1000,
    default_limit: int = 100,
    min_limit: int = 0,
) -> Response:
    """A `{key: [...], "metadata": {"total": n}}` page with limit/offset validated (422)."""
    errors: dict[str, list[str]] = {}
    limit = int_param(
        request, "limit", default_limit, minimum=min_limit, maximum=max_limit, errors=errors
    )
    offset = int_param(request, "offset", 0, minimum=0, errors=errors)
    if errors:
        raise fail(errors)
    total = len(items) + get_sandbox(request).faults.total_mismatch
    return json_response({key: items[offset : offset + limit], "metadata": {"total": total}})
