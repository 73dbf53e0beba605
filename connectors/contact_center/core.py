"""The client's core: one connection pool, one rate limiter, one request path.

Every request goes through `ClientCore._send`: shared rate limiter, one attempt, `map_response`,
body parsing, and the one retry loop, whose decisions are the policy's (retry.py), including a
caller's shared budget (the CDR fetch's rejected cursors). Logs (logger
`connectors.contact_center`) carry the method, the path (ids but never the key or the query),
the status, the attempt and the elapsed milliseconds.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import ssl
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from importlib.metadata import PackageNotFoundError, version
from types import TracebackType
from typing import Any, Self, TypeVar

import httpx
import orjson
from pydantic import BaseModel

from connectors.contact_center.auth import REDACTED, BearerAuth, Redactor
from connectors.contact_center.budget import ByteBudget
from connectors.contact_center.endpoints import ENDPOINTS, Endpoint
from connectors.contact_center.errors import (
    ContactCenterError,
    DeadlineExceeded,
    ListingChangedError,
    RateLimitedError,
    ResponseTooLargeError,
    RetriableAPIError,
    map_response,
    transport_failure,
)
from connectors.contact_center.paginators import OffsetPaginator
from connectors.contact_center.ratelimit import TokenBucket
from connectors.contact_center.responses import (
    ListPage,
    WriteResult,
    keyed,
    list_body,
    note_unreadable,
    to_model,
    to_models,
    write_result,
)
from connectors.contact_center.retry import RequestRetries, RetryPolicy, SharedBudget
from connectors.contact_center.settings import ClientSettings

logger = logging.getLogger("connectors.contact_center")
_DRAINED = httpx.ByteStream(b"")

M = TypeVar("M", bound=BaseModel)
T = TypeVar("T")


@functools.cache
def user_agent() -> str:
    """`cdrhouse/<version>` from the installed distribution (read once: the lookup scans every
    installed distribution's metadata, ~1.5 ms, and every client opening asked again)."""
    try:
        return f"cdrhouse/{version('cdrhouse')}"
    except PackageNotFoundError:
        return "cdrhouse/0+unknown"


@functools.cache
def tls_context() -> ssl.SSLContext:
    """httpx's default TLS settings (certifi's CAs, or `SSL_CERT_FILE` / `SSL_CERT_DIR`), made
    once per process: each client made its own, ~33 ms of loading the CA bundle, ten times in
    a `cdrhouse ingest` of two days. One context serves any number of connections."""
    return httpx.create_ssl_context()


def _too_large(limit: int, method: str, path: str) -> ResponseTooLargeError:
    return ResponseTooLargeError(
        f"{method} {path}: the response body passed max_response_bytes ({limit:,} bytes, "
        "decoded); the client stopped reading it. Raise max_response_bytes if the server's "
        "pages are really this big",
        method=method,
        path=path,
    )


class ClientCore:
    """Connection, limiter, retry policy and the one request path (`_send`), plus the generic
    endpoint shapes (get one, list a page, list all, write) the facade's methods call.

    `transport` replaces the network (e.g. the sandbox's in-process ASGI transport).
    """

    def __init__(
        self, settings: ClientSettings, *, transport: httpx.AsyncBaseTransport | None = None
    ) -> None:
        self.settings = settings
        self._transport = transport
        self._http: httpx.AsyncClient | None = None
        self._redact = Redactor(settings.api_key)
        self.limiter = TokenBucket(settings.rate_limit_rps, settings.rate_limit_burst)
        self.retry_policy = RetryPolicy(
            max_attempts=settings.max_attempts,
            max_total_s=settings.max_retry_s,
            base_s=settings.backoff_base_s,
            cap_s=settings.backoff_max_s,
        )
        # In-flight requests of this client, whoever calls: CDR workers or gathered list calls.
        self._inflight = asyncio.Semaphore(settings.concurrency)
        self.stats: dict[str, int] = {"requests": 0, "retries": 0, "cursor_fallbacks": 0}

    def __repr__(self) -> str:
        return f"{type(self).__name__}(base_url={self.settings.base_url!r})"

    async def __aenter__(self) -> Self:
        s = self.settings
        self._http = httpx.AsyncClient(
            base_url=s.base_url,
            transport=self._transport,
            auth=BearerAuth(s.api_key),
            headers={"Accept": "application/json", "User-Agent": user_agent()},
            timeout=httpx.Timeout(s.timeout_s, connect=s.connect_timeout_s),
            limits=httpx.Limits(
                max_connections=s.concurrency + 4, max_keepalive_connections=s.concurrency + 4
            ),
            verify=tls_context(),
            follow_redirects=False,  # a redirect must not carry the key to another host
        )
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc is not None:
            # Whatever leaves the client's block (a response that does not fit its model, a
            # paging error, the caller's own) leaves without the key.
            self._redact.exception(exc)
        if self._http is not None:
            await self._http.aclose()
            self._http = None

    # --- the single request path -------------------------------------------------------------

    async def _send(
        self,
        endpoint: Endpoint,
        parse: Callable[[httpx.Response], T],
        *,
        ids: Mapping[str, object] | None = None,
        params: Sequence[tuple[str, str | int]] | Mapping[str, str | int] | None = None,
        body: dict[str, Any] | None = None,
        require_json: bool = True,
        shared: SharedBudget | None = None,
        budget: ByteBudget | None = None,
    ) -> T:
        """Send until `parse` accepts a response or the retry policy gives up (then raise).

        `shared` adds the caller's budget for a failure the policy alone would not retry.
        With `budget`, the body is read only once its length fits in it (`_receive`); when
        `parse` accepts the response, its body's bytes stay held for the caller to release."""
        if self._http is None:
            raise RuntimeError("use the client as `async with ContactCenterClient(...)`")
        path = endpoint.url(**(ids or {}))
        pairs = params.items() if isinstance(params, Mapping) else (params or ())
        query = tuple((key, str(value)) for key, value in pairs)
        content = orjson.dumps(body) if body is not None else None
        headers = {"Content-Type": "application/json"} if content is not None else None
        retries = RequestRetries(self.retry_policy, endpoint.safety, shared)
        while True:
            attempt = retries.attempt
            await self.limiter.acquire()
            sent = time.monotonic()
            status: int | None = None
            cause: BaseException | None = None
            self.stats["requests"] += 1
            try:
                async with self._inflight:
                    response = await self._receive(
                        budget, endpoint.method, path, query, content, headers
                    )
                held = len(response.content) if budget is not None else 0
                try:
                    status = response.status_code
                    map_response(
                        response,
                        endpoint.scope,
                        path=path,
                        require_json=require_json,
                        redact=self._redact,
                    )
                    result = parse(response)
                except BaseException:
                    if budget is not None:
                        budget.release(held)  # this response is not the caller's
                    raise
                # httpx's Response and its BoundAsyncStream point at each other: unlink them so
                # the body (~1 MB for a CDR page) is freed at once, not at some later full GC.
                response.stream = _DRAINED
            except httpx.RequestError as exc:
                error: ContactCenterError = transport_failure(
                    exc, method=endpoint.method, path=path
                )
                cause = exc
            except ContactCenterError as exc:
                error = exc
                error.method, error.path, error.status = endpoint.method, path, status
            else:
                logger.debug(
                    "%s %s -> %s attempt=%d elapsed_ms=%.1f",
                    endpoint.method,
                    path,
                    status,
                    attempt,
                    (time.monotonic() - sent) * 1000,
                )
                return result
            elapsed_ms = (time.monotonic() - sent) * 1000
            outcome = retries.after(error)
            wait = None if isinstance(outcome, ContactCenterError) else outcome
            if isinstance(error, RateLimitedError) and error.retry_after and wait is not None:
                # Every request of the client holds off too, but only for a wait this one
                # takes: a Retry-After past the retry budget fails this request and would have
                # held every other one that long (a day, say), in silence.
                self.limiter.pause(wait)
            # ERROR only for a retriable failure we gave up on; a fatal 4xx is the caller's call.
            exhausted = wait is None and isinstance(error, RetriableAPIError)
            logger.log(
                logging.ERROR if exhausted else logging.WARNING,
                "%s %s -> %s attempt=%d elapsed_ms=%.1f error=%s %s",
                endpoint.method,
                path,
                status if status is not None else "-",
                attempt,
                elapsed_ms,
                type(error).__name__,
                f"retry_in_s={wait:.3f}" if wait is not None else "giving up",
            )
            if isinstance(outcome, ContactCenterError):
                # Second line of defence: the key out of the error, its field errors and the
                # transport exception chained to it, whatever the server echoed.
                for link in (outcome, cause):
                    if link is not None:
                        self._redact.exception(link)
                raise outcome from cause
            self.stats["retries"] += 1
            await asyncio.sleep(outcome)

    async def _receive(
        self,
        budget: ByteBudget | None,
        method: str,
        path: str,
        params: tuple[tuple[str, str], ...],
        content: bytes | None,
        headers: dict[str, str] | None,
    ) -> httpx.Response:
        """One response, its body read (`_read`: up to `max_response_bytes`) only after its
        length is admitted by `budget`, if given (then held). A body without a Content-Length,
        or compressed, is admitted by what is held before it is read and counted at its real
        length after."""
        assert self._http is not None
        request = self._http.build_request(
            method, path, params=params, content=content, headers=headers
        )
        began = time.monotonic()
        response = await self._within(self._http.send(request, stream=True), request)
        spent = time.monotonic() - began  # the wait for the budget below is not the server's
        declared = 0
        if "content-encoding" not in response.headers:
            try:
                declared = max(0, int(response.headers.get("content-length", "0")))
            except ValueError:
                declared = 0
        if budget is not None:
            try:
                await budget.acquire(declared)
            except BaseException:
                await response.aclose()
                raise
        try:
            left = self.settings.request_deadline_s - spent
            await self._within(self._read(response, declared, method, path), request, left)
        except BaseException:
            if budget is not None:
                budget.release(declared)
            await response.aclose()
            raise
        if budget is not None:
            budget.grow(len(response.content) - declared)
        return response

    async def _read(self, response: httpx.Response, declared: int, method: str, path: str) -> None:
        """The body, decoded, read up to `max_response_bytes` (`response.aread()` has no
        bound: a body that never ends, or a small compressed one that decodes to gigabytes,
        would fill the memory). `declared`: its plain Content-Length (0 if none or encoded)."""
        limit = self.settings.max_response_bytes
        if declared > limit:
            raise _too_large(limit, method, path)  # refused before a byte is read
        parts: list[bytes] = []
        size = 0
        async for part in response.aiter_bytes():
            size += len(part)
            if size > limit:
                raise _too_large(limit, method, path)
            parts.append(part)
        # What `aread()` leaves: the body for `.content`, `.json()` and the parsers. A UTF-8
        # byte order mark, which JSON readers may ignore (RFC 8259) but simdjson and msgspec
        # refuse, is dropped: every page of such a server failed as "non-JSON".
        body = b"".join(parts)
        # A server that echoes the key in what it answers (a debug field of each record):
        # replaced before any reader sees the body, so it never lands, whatever the status.
        body, echoed = self._redact.body(body)
        if echoed:
            self.stats["key_echoed"] = self.stats.get("key_echoed", 0) + echoed
            logger.warning(
                "%s %s: the answer held the API key %d time(s), replaced by %s",
                method,
                path,
                echoed,
                REDACTED,
            )
        response._content = body[3:] if body[:3] == b"\xef\xbb\xbf" else body

    async def _within(
        self, call: Awaitable[T], request: httpx.Request, seconds: float | None = None
    ) -> T:
        """`call` (sending `request`, or reading its body) stopped after `seconds` (default
        `request_deadline_s`): httpx's read timeout counts from one read to the next, so a
        server that sends a few bytes now and then would hold the request forever."""
        limit = self.settings.request_deadline_s if seconds is None else max(0.0, seconds)
        try:
            async with asyncio.timeout(limit):
                return await call
        except TimeoutError:
            raise DeadlineExceeded(self.settings.request_deadline_s, request=request) from None

    async def _get_one(self, name: str, key: str, model: type[M], **ids: object) -> M:
        endpoint = ENDPOINTS[name]
        raw = await self._send(endpoint, keyed(key), ids=ids)
        return to_models(model, [raw], endpoint.method, endpoint.path)[0]

    async def _write(
        self, name: str, key: str, model: type[M], body: dict[str, Any] | None, **ids: object
    ) -> WriteResult[M]:
        endpoint = ENDPOINTS[name]
        result: WriteResult[M] = await self._send(
            endpoint, write_result(key, model), ids=ids, body=body, require_json=False
        )
        return result

    async def _write_many(
        self, name: str, key: str, model: type[M], body: dict[str, Any] | None, **ids: object
    ) -> WriteResult[list[M]]:
        endpoint = ENDPOINTS[name]
        result: WriteResult[list[M]] = await self._send(
            endpoint, write_result(key, model, many=True), ids=ids, body=body, require_json=False
        )
        return result

    async def _list_page(
        self,
        name: str,
        model: type[M],
        *,
        limit: int | None = None,
        offset: int = 0,
        filters: Mapping[str, str | int | None] | None = None,
        **ids: object,
    ) -> ListPage[M]:
        endpoint = ENDPOINTS[name]
        assert endpoint.list_key is not None
        assert endpoint.max_limit is not None
        pager = OffsetPaginator(limit, endpoint.max_limit, offset=offset)
        items, info = await self._send(
            endpoint, list_body(endpoint.list_key), ids=ids, params=self._params(pager, filters)
        )
        return ListPage(to_models(model, items, endpoint.method, endpoint.path), info.total)

    async def _list_all(
        self,
        name: str,
        model: type[M],
        *,
        filters: Mapping[str, str | int | None] | None = None,
        **ids: object,
    ) -> list[M]:
        endpoint = ENDPOINTS[name]
        assert endpoint.list_key is not None
        assert endpoint.max_limit is not None
        pager = OffsetPaginator(None, endpoint.max_limit)
        what = f"{endpoint.method} {endpoint.path}"
        out: list[M] = []
        seen: set[object] = set()
        while pager.has_next:
            at = pager.offset + pager.received
            for attempt in range(2):
                items, info = await self._send(
                    endpoint,
                    list_body(endpoint.list_key),
                    ids=ids,
                    params=self._params(pager, filters),
                )
                # A page empty before metadata.total is reached ends the walk: asked once
                # more first (a page the server lost for a moment), then said.
                short = not items and info.total is not None and at < info.total
                if not short:
                    break
                if attempt:
                    # A server whose total over-counts (deleted items, say) looks the same.
                    logger.warning(
                        "%s: the page at offset %d came back empty twice while metadata.total "
                        "says %d; the list is read as the %d received",
                        what,
                        at,
                        info.total,
                        at,
                    )
            pager.validate(info)
            pager.update(info)
            for item in items:
                parsed = to_model(model, item, endpoint.method, endpoint.path)
                key = getattr(parsed, "id", None)
                if key is not None and key in seen:
                    # A duplicate means another item was skipped, or the server ignores offset
                    # (a cache keyed without the query): never a snapshot with both flaws.
                    raise ListingChangedError(
                        f"{what}: id {str(key)[:40]} came twice while paging by offset (page at "
                        f"offset {at}): the list changed during the walk, or the server "
                        "ignores offset; read it again",
                        method=endpoint.method,
                        path=endpoint.path,
                    )
                seen.add(key)
                out.append(parsed)
        note_unreadable(out, what)
        return out

    @staticmethod
    def _params(
        pager: OffsetPaginator, filters: Mapping[str, str | int | None] | None
    ) -> dict[str, str | int]:
        extra = {k: v for k, v in (filters or {}).items() if v is not None}
        return {**extra, **pager.params()}
