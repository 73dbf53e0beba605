"""The connector's exceptions, grouped by what the caller should do.

    ContactCenterError                  anything this connector raises
    ├── RetriableAPIError               transient: try again later (the client already retried
    │   │                               idempotent requests within its budget)
    │   ├── RateLimitedError            429; carries retry_after (s) when the server sent one
    │   ├── ServerError                 5xx
    │   ├── TransportFailure            timeout, connect error, reset; never_sent tells whether
    │   │                               the request provably did not reach the server
    │   ├── InvalidBodyError            2xx body that is not the JSON it should be (HTML, empty,
    │   │                               truncated, missing list key)
    │   └── ListingChangedError         an id twice in one offset-paged list (read it again)
    └── FatalAPIError                   fix the request or the configuration; do not retry
        ├── BadRequestError             400
        ├── AuthenticationError         401: the key is missing, wrong or not a v4 key
        ├── PermissionDeniedError       403: names the scope the endpoint needs
        ├── NotFoundError               404
        ├── NotAcceptableError          406 (carries the errors map)
        ├── ConflictError               409 (carries the errors map)
        ├── ValidationFailedError       422 (carries the errors map)
        ├── PaginationError             the server's paging metadata is inconsistent
        ├── ResponseShapeError          valid JSON that does not match the resource model
        └── ResponseTooLargeError       a body past max_response_bytes (decoded)

`map_response()` is the single place that turns an `httpx.Response` into this tree;
`transport_failure()` does the same for httpx's own exceptions. Messages never contain the API
key: they are built from the method, the path template, the status and the server's error text
and field errors, which pass through the caller's `redact` before they are cut to length or
kept (a server may echo the key in them).
"""

from __future__ import annotations

import email.utils
import math
import time
from collections.abc import Callable, Mapping
from datetime import UTC
from typing import TypedDict, Unpack

import httpx
import orjson

_MAX_DETAIL = 300


class Where(TypedDict, total=False):
    """Where an error happened: method, path template, HTTP status."""

    method: str
    path: str
    status: int | None


class ContactCenterError(Exception):
    """Base of every error raised by the connector."""

    def __init__(self, message: str, **where: Unpack[Where]) -> None:
        super().__init__(message)
        self.method: str = where.get("method", "")
        self.path: str = where.get("path", "")
        self.status: int | None = where.get("status")


class RetriableAPIError(ContactCenterError):
    """Transient failure: the same request may succeed later."""


class RateLimitedError(RetriableAPIError):
    """429 Too many requests."""

    def __init__(
        self, message: str, *, retry_after: float | None = None, **kw: Unpack[Where]
    ) -> None:
        super().__init__(message, **kw)
        self.retry_after = retry_after


class ServerError(RetriableAPIError):
    """5xx: the server failed; the request may or may not have been processed."""


class TransportFailure(RetriableAPIError):
    """No (complete) response: timeout, connection refused or reset, protocol error."""

    def __init__(self, message: str, *, never_sent: bool = False, **kw: Unpack[Where]) -> None:
        super().__init__(message, **kw)
        self.never_sent = never_sent


class InvalidBodyError(RetriableAPIError):
    """A success status with a body that is not valid JSON of the expected shape."""


class ListingChangedError(RetriableAPIError):
    """An id came twice while a list was paged by offset: the listing changed under the walk
    (an item added before the offset shifts the rest), or the server ignores `offset`."""


class FatalAPIError(ContactCenterError):
    """Permanent failure: retrying the same request gives the same answer."""


class BadRequestError(FatalAPIError):
    """400: malformed request (bad JSON, invalid fallback offset)."""


class AuthenticationError(FatalAPIError):
    """401: missing or invalid API key."""


class PermissionDeniedError(FatalAPIError):
    """403: the key lacks the endpoint's scope, or access to the resource."""

    def __init__(self, message: str, *, scope: str | None = None, **kw: Unpack[Where]) -> None:
        super().__init__(message, **kw)
        self.scope = scope


class _FieldErrors(FatalAPIError):
    def __init__(
        self, message: str, *, errors: Mapping[str, list[str]] | None = None, **kw: Unpack[Where]
    ) -> None:
        super().__init__(message, **kw)
        self.errors: dict[str, list[str]] = dict(errors or {})


class NotFoundError(FatalAPIError):
    """404: the resource does not exist, or the path is wrong."""


class NotAcceptableError(_FieldErrors):
    """406: the requested response format is unsupported."""


class ConflictError(_FieldErrors):
    """409: conflict with the resource's current state (e.g. a stopped campaign)."""


class ValidationFailedError(_FieldErrors):
    """422: field validation failed; `errors` maps field name to messages."""


class PaginationError(FatalAPIError):
    """The paging metadata contradicts itself (repeated cursor, wrong totals, overlap)."""


class ResponseShapeError(FatalAPIError):
    """A 2xx JSON body that does not fit the resource model (not transient)."""


class ResponseTooLargeError(FatalAPIError):
    """A body past `max_response_bytes` once decoded (an endless stream, a compression bomb):
    the same request would bring it again."""


def parse_retry_after(value: str | None, *, now: float | None = None) -> float | None:
    """Seconds to wait from a Retry-After header (delta-seconds or HTTP date); None if absent
    or not a finite number (`Infinity`, `1e999`, `nan`: no wait can honour it)."""
    if not value:
        return None
    try:
        seconds = float(value)
    except ValueError:
        pass
    else:
        return max(0.0, seconds) if math.isfinite(seconds) else None
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


def _unchanged(text: str) -> str:
    return text


def _body_detail(
    body: bytes, redact: Callable[[str], str] = _unchanged
) -> tuple[str, dict[str, list[str]]]:
    """The server's `error` string and `errors` map, if the body has them, redacted."""
    try:
        obj = orjson.loads(body) if body else None
    except orjson.JSONDecodeError:
        return "", {}
    if not isinstance(obj, dict):
        return "", {}
    detail = obj.get("error")
    errors_raw = obj.get("errors")
    errors: dict[str, list[str]] = {}
    if isinstance(errors_raw, dict):
        for key, msgs in errors_raw.items():
            items = msgs if isinstance(msgs, list) else [msgs]
            errors[redact(str(key))] = [redact(str(m)) for m in items]
    # Redacted before the cut: a key cut in two would not be found afterwards.
    return (redact(str(detail))[:_MAX_DETAIL] if detail is not None else ""), errors


def _fmt_errors(errors: Mapping[str, list[str]]) -> str:
    return "; ".join(f"{k}: {', '.join(v)}" for k, v in errors.items())[:_MAX_DETAIL]


def looks_like_json_object(body: bytes) -> bool:
    """Cheap pre-check of a 2xx body: HTML pages and empty bodies fail it."""
    stripped = body.lstrip()
    return stripped[:1] == b"{"


def map_response(
    response: httpx.Response,
    scope: str | None,
    *,
    path: str | None = None,
    require_json: bool = True,
    redact: Callable[[str], str] = _unchanged,
) -> None:
    """Raise the tree's error for a failed response; return None for a usable 2xx.

    `scope` is the endpoint's scope (named in the 403 message); `path` is the path template
    used in messages (defaults to the request path, which never carries the key); `redact`
    scrubs the key from the server's text and field errors (the client's `Redactor`).
    `require_json=False` (writes): any 2xx is success whatever its body, since the server has
    already acted; a read's 2xx must carry a JSON object (else InvalidBodyError, retried).
    """
    status = response.status_code
    method = response.request.method
    where = path or response.request.url.path
    ctx: Where = {"method": method, "path": where, "status": status}
    what = f"{method} {where}".strip()
    if 200 <= status < 300:
        if require_json and status != 204 and not looks_like_json_object(response.content):
            kind = "an empty body" if not response.content.strip() else "a non-JSON body"
            ctype = response.headers.get("content-type", "?")
            raise InvalidBodyError(
                f"{what} returned {status} with {kind} (content-type {ctype}); "
                "likely a proxy or truncated response, retry later",
                **ctx,
            )
        return
    detail, field_errors = _body_detail(response.content, redact)
    said = f" (server said: {detail})" if detail else ""
    if status == 429:
        retry_after = parse_retry_after(response.headers.get("retry-after"))
        hint = f"; server asks to wait {retry_after:g}s" if retry_after is not None else ""
        raise RateLimitedError(
            f"{what} was rate limited (429){hint}; lower rate_limit_rps or concurrency",
            retry_after=retry_after,
            **ctx,
        )
    if status >= 500:
        raise ServerError(f"{what} failed on the server ({status}){said}; retry later", **ctx)
    if status == 400:
        raise BadRequestError(
            f"{what} was rejected as malformed (400){said}; check parameters and body",
            **ctx,
        )
    if status == 401:
        raise AuthenticationError(
            f"{what} was refused (401): the API key is missing or invalid; "
            "use a v4 key from the API keys page (older contact-center keys are not accepted)",
            **ctx,
        )
    if status == 403:
        need = (
            f"the API key lacks scope {scope} (or access to this resource); "
            "ask an administrator to add it"
            if scope
            else "the API key lacks permission for this endpoint"
        )
        raise PermissionDeniedError(f"{what} was forbidden (403): {need}", scope=scope, **ctx)
    if status == 404:
        raise NotFoundError(
            f"{what} was not found (404){said}; check the id and the base URL", **ctx
        )
    if status in (406, 409, 422):
        cls: type[_FieldErrors] = {
            406: NotAcceptableError,
            409: ConflictError,
            422: ValidationFailedError,
        }[status]
        label = {
            406: "asked for an unsupported response format",
            409: "conflicts with the resource's current state",
            422: "failed field validation",
        }[status]
        listed = _fmt_errors(field_errors) or detail or "no details"
        raise cls(
            f"{what} {label} ({status}): {listed}; fix these fields",
            errors=field_errors,
            **ctx,
        )
    # Any other 4xx: not retriable, and not one the spec names.
    raise FatalAPIError(f"{what} failed with unexpected status {status}{said}", **ctx)


class DeadlineExceeded(httpx.ReadTimeout):
    """No complete response within `request_deadline_s`: the server kept the connection busy
    (bytes now and then, each within the read timeout) without finishing its answer."""

    def __init__(self, seconds: float, *, request: httpx.Request) -> None:
        super().__init__(f"no complete response within {seconds:g} s", request=request)
        self.seconds = seconds


# httpx exceptions raised before any byte of the request left this process.
_NEVER_SENT = (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout)


def transport_failure(exc: httpx.RequestError, *, method: str, path: str) -> TransportFailure:
    """Translate an httpx transport exception; records whether the request provably never left."""
    never_sent = isinstance(exc, _NEVER_SENT)
    kind = type(exc).__name__
    note = "the request never reached the server" if never_sent else "the outcome is unknown"
    origin = _origin(exc)
    if isinstance(exc, httpx.ConnectError):
        note += f"; check that the base URL {origin} is right and the host is reachable"
    elif isinstance(exc, DeadlineExceeded):
        note += (
            f"; {origin} did not send its whole response within request_deadline_s "
            f"({exc.seconds:g} s): it sent too slowly or never finished"
        )
    elif isinstance(exc, httpx.TimeoutException):
        note += f"; {origin} did not answer in time (raise timeout_s if it is just slow)"
    return TransportFailure(
        f"{method} {path} failed in transport ({kind}); {note}",
        never_sent=never_sent,
        method=method,
        path=path,
    )


def _origin(exc: httpx.RequestError) -> str:
    """scheme://host:port of the failed request (never a path, query or credentials)."""
    try:
        url = exc.request.url
    except RuntimeError:  # an exception built without its request
        return "(unknown host)"
    port = f":{url.port}" if url.port is not None else ""
    return f"{url.scheme}://{url.host}{port}"
