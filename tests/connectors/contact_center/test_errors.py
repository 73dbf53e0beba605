"""The one response-mapping function, tested as a table."""

from __future__ import annotations

import httpx
import pytest

from connectors.contact_center import errors as E
from connectors.contact_center.errors import map_response, parse_retry_after, transport_failure

URL = "http://127.0.0.1/api/v4/reporting/cdrs"
SCOPE = "reporting.cdrs.read"


def _response(status: int, body: bytes = b"", **headers: str) -> httpx.Response:
    return httpx.Response(status, content=body, headers=headers, request=httpx.Request("GET", URL))


ERRORS_422 = b'{"errors": {"name": ["is required"], "dial_level": ["must be at most 6"]}}'

CASES = [
    # (status, body, headers, expected class or None)
    (200, b'{"cdrs": [], "metadata": {"total": 0}}', {}, None),
    (201, b'  {"sms": {"id": "x"}}', {}, None),
    (200, b"", {}, E.InvalidBodyError),
    (
        200,
        b"<html><body>Please wait</body></html>",
        {"content-type": "text/html"},
        E.InvalidBodyError,
    ),
    (200, b"[1, 2]", {}, E.InvalidBodyError),
    (429, b'{"error": "Too many requests"}', {}, E.RateLimitedError),
    (429, b'{"error": "Too many requests"}', {"retry-after": "1.5"}, E.RateLimitedError),
    (500, b'{"error": "Internal server error"}', {}, E.ServerError),
    (502, b"<html>Bad gateway</html>", {}, E.ServerError),
    (503, b"", {}, E.ServerError),
    (400, b'{"error": "Bad Request"}', {}, E.BadRequestError),
    (401, b'{"error": "Unauthorized"}', {}, E.AuthenticationError),
    (403, b'{"error": "Forbidden"}', {}, E.PermissionDeniedError),
    (404, b'{"error": "Not found"}', {}, E.NotFoundError),
    (
        406,
        b'{"errors": {"format": ["must be one of json, vtt, srt, text"]}}',
        {},
        E.NotAcceptableError,
    ),
    (409, b'{"errors": {"state": ["conflict"]}}', {}, E.ConflictError),
    (422, ERRORS_422, {}, E.ValidationFailedError),
    (418, b"", {}, E.FatalAPIError),
]
IDS = [
    "200-ok",
    "201-ok",
    "200-empty",
    "200-html",
    "200-array",
    "429",
    "429-retry-after",
    "500-json",
    "502-html",
    "503-empty",
    "400",
    "401",
    "403",
    "404",
    "406",
    "409",
    "422",
    "418",
]


@pytest.mark.parametrize(("status", "body", "headers", "expected"), CASES, ids=IDS)
def test_map_response_table(
    status: int,
    body: bytes,
    headers: dict[str, str],
    expected: type[E.ContactCenterError] | None,
) -> None:
    response = _response(status, body, **headers)
    if expected is None:
        map_response(response, SCOPE)  # a usable 2xx: no exception (and None, by its type)
        return
    with pytest.raises(expected) as info:
        map_response(response, SCOPE)
    assert type(info.value) is expected  # the exact class, not just a parent
    assert info.value.status == status
    assert info.value.path == "/api/v4/reporting/cdrs"
    retriable = status == 429 or status >= 500 or 200 <= status < 300
    assert isinstance(info.value, E.RetriableAPIError) is retriable
    assert isinstance(info.value, E.FatalAPIError) is not retriable


def test_403_names_the_scope_and_the_fix() -> None:
    with pytest.raises(E.PermissionDeniedError) as info:
        map_response(_response(403, b'{"error": "Forbidden"}'), SCOPE)
    assert info.value.scope == SCOPE
    assert "lacks scope reporting.cdrs.read" in str(info.value)
    assert "ask an administrator" in str(info.value)


def test_422_carries_the_errors_map() -> None:
    with pytest.raises(E.ValidationFailedError) as info:
        map_response(_response(422, ERRORS_422), SCOPE)
    assert info.value.errors == {"name": ["is required"], "dial_level": ["must be at most 6"]}
    assert "dial_level: must be at most 6" in str(info.value)


def test_429_carries_retry_after() -> None:
    with pytest.raises(E.RateLimitedError) as info:
        map_response(_response(429, b"{}", **{"retry-after": "2"}), SCOPE)
    assert info.value.retry_after == 2.0


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (None, None),
        ("", None),
        ("3", 3.0),
        ("0.25", 0.25),
        ("-1", 0.0),
        ("soon", None),
        ("Infinity", None),
        ("1e999", None),
        ("nan", None),
    ],
    ids=["absent", "empty", "int", "float", "negative", "garbage", "inf", "overflow", "nan"],
)
def test_parse_retry_after_seconds(value: str | None, expected: float | None) -> None:
    assert parse_retry_after(value) == expected


def test_parse_retry_after_http_date() -> None:
    # Fixed "now" one second before the date: 1 s to wait.
    when = "Wed, 21 Oct 2015 07:28:00 GMT"
    assert parse_retry_after(when, now=1445412479.0) == pytest.approx(1.0)


@pytest.mark.parametrize(
    ("exc", "never_sent"),
    [
        (httpx.ConnectError("refused"), True),
        (httpx.ConnectTimeout("slow"), True),
        (httpx.PoolTimeout("busy"), True),
        (httpx.ReadError("reset"), False),
        (httpx.ReadTimeout("slow"), False),
        (httpx.WriteError("broken"), False),
        (httpx.RemoteProtocolError("incomplete"), False),
    ],
    ids=["connect", "connect-timeout", "pool-timeout", "read", "read-timeout", "write", "protocol"],
)
def test_transport_failure_knows_what_never_left(exc: httpx.RequestError, never_sent: bool) -> None:
    err = transport_failure(exc, method="POST", path="/api/v4/messaging/sms")
    assert isinstance(err, E.RetriableAPIError)
    assert err.never_sent is never_sent
