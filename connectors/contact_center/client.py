"""`ContactCenterClient`: one async method per v4 endpoint, plus the parallel CDR fetch.

Every request goes through `_send`: shared rate limiter, one attempt, `map_response`, body
parsing, and the retry policy (retry.py). Logs (logger `connectors.contact_center`) carry the
method, the path (ids but never the key or the query), the status, the attempt and the elapsed
milliseconds.

The CDR hot path (`fetch_cdr_pages`) never builds a Python object per CDR: it yields the raw
page bytes with metadata read lazily by simdjson.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from importlib.metadata import PackageNotFoundError, version
from types import TracebackType
from typing import Any, Generic, Self, TypeVar

import httpx
import orjson
from pydantic import BaseModel, ValidationError

from connectors.contact_center.auth import BearerAuth, Redactor
from connectors.contact_center.endpoints import ENDPOINTS, Endpoint
from connectors.contact_center.errors import (
    BadRequestError,
    ContactCenterError,
    InvalidBodyError,
    PaginationError,
    RateLimitedError,
    ResponseShapeError,
    RetriableAPIError,
    map_response,
    transport_failure,
)
from connectors.contact_center.paginators import (
    OFFSET_WINDOW,
    CursorPaginator,
    OffsetPaginator,
    PageInfo,
    read_page_info,
)
from connectors.contact_center.ratelimit import TokenBucket
from connectors.contact_center.retry import RetryPolicy
from connectors.contact_center.settings import ClientSettings
from models.resources import (
    Balance,
    CallerIdGroup,
    CallRef,
    Campaign,
    CampaignCreate,
    CampaignPatch,
    CannedMessage,
    Cdr,
    Conversation,
    CreateConversation,
    Hangup,
    Lead,
    LeadsRequest,
    LeadsUpdateRequest,
    Message,
    NewMessage,
    Number,
    Queue,
    ScheduleCallback,
    ScheduledCallback,
    SendSms,
    Skill,
    SmsRef,
    StartCall,
    Team,
    User,
    WebhookFailure,
    WhatsappTemplate,
    WrapupCode,
    WriteModel,
    iso_ms,
)

logger = logging.getLogger("connectors.contact_center")
_DRAINED = httpx.ByteStream(b"")

# The sandbox's documented signal of an invalid-cursor fallback (docs/sandbox.md); a real
# server gives none, so the paginator also checks for page overlap.
FALLBACK_HEADER = "X-Sandbox-Cursor-Fallback"

M = TypeVar("M", bound=BaseModel)
T = TypeVar("T")
Filters = Mapping[str, str | int | Sequence[str]]


def user_agent() -> str:
    """`cdrhouse/<version>` from the installed distribution."""
    try:
        return f"cdrhouse/{version('cdrhouse')}"
    except PackageNotFoundError:
        return "cdrhouse/0+unknown"


@dataclass(frozen=True)
class CdrPage:
    """One raw CDR page of one sub-window [window_start, window_end)."""

    window_start: datetime
    window_end: datetime
    body: bytes  # the page JSON exactly as received
    count: int  # records in this page
    total: int  # the sub-window's metadata.total
    page_index: int  # 0-based within the sub-window
    last: bool  # no further page in this sub-window


@dataclass(frozen=True)
class WriteResult(Generic[T]):
    """What a write answered. Any 2xx is success: the server has acted, so nothing here is an
    error and nothing invites a retry.

    `resource` is the expected object (e.g. the `campaign` of `{"campaign": {...}}`) when the
    body has that shape; otherwise None, and `body` holds what came back as it was: the parsed
    JSON, the text when it is not JSON, or None when the body is empty. Most write responses
    are "not shown" by the spec, so a server whose shape differs from the sandbox's loses
    nothing."""

    status: int
    body: Any
    resource: T | None

    @property
    def id(self) -> Any:
        """The `id` of the resource (or of the body's single object), when there is one."""
        found = getattr(self.resource, "id", None)
        if found is None and isinstance(self.body, dict) and len(self.body) == 1:
            inner = next(iter(self.body.values()))
            found = inner.get("id") if isinstance(inner, dict) else None
        return found


@dataclass(frozen=True)
class ListPage(Generic[M]):
    """One page of a list endpoint, parsed."""

    items: list[M]
    total: int | None


def split_window(
    start: datetime, end: datetime, step: timedelta
) -> list[tuple[datetime, datetime]]:
    """Half-open sub-windows [a, b) covering [start, end) exactly: adjacent ones share a bound,
    so a record on a boundary belongs to exactly one of them."""
    for moment in (start, end):
        if moment.tzinfo is None:
            raise ValueError("start and end must be timezone-aware (UTC)")
        if moment.microsecond % 1000:
            raise ValueError("start and end must have millisecond precision (the API's)")
    start, end = start.astimezone(UTC), end.astimezone(UTC)
    out: list[tuple[datetime, datetime]] = []
    cursor = start
    while cursor < end:
        nxt = min(cursor + step, end)
        out.append((cursor, nxt))
        cursor = nxt
    return out


# The CDR filters the spec shows as "single or array"; an array is written `key[]=v` repeated.
ARRAY_FILTERS = frozenset({"type", "subtype", "disposition", "account_id"})


def cdr_filter_params(filters: Filters | None) -> list[tuple[str, str]]:
    """Query pairs for CDR filters in the spec's form: a sequence is sent as `key[]=v` repeated
    for the four array filters only; every other filter (tag, user_id, ...) takes one value, so
    a one-element sequence is sent as `key=v` and a longer one is refused before sending."""
    pairs: list[tuple[str, str]] = []
    for key, value in (filters or {}).items():
        if key.startswith("started_at") or key in ("cursor", "offset", "limit"):
            raise ValueError(f"{key} is set by fetch_cdr_pages itself")
        if isinstance(value, str | int):
            pairs.append((key, str(value)))
        elif key in ARRAY_FILTERS:
            pairs.extend((f"{key}[]", str(v)) for v in value)
        else:
            values = list(value)
            if len(values) != 1:
                raise ValueError(
                    f"the CDR filter {key!r} takes one value (only "
                    f"{', '.join(sorted(ARRAY_FILTERS))} take several); got {len(values)}"
                )
            pairs.append((key, str(values[0])))
    return pairs


def _json_object(response: httpx.Response) -> dict[str, Any]:
    try:
        obj = orjson.loads(response.content)
    except orjson.JSONDecodeError as exc:
        raise InvalidBodyError(f"response body is not valid JSON ({exc.msg})") from None
    if not isinstance(obj, dict):
        raise InvalidBodyError("response body is not a JSON object")
    return obj


def _keyed(key: str) -> Callable[[httpx.Response], Any]:
    def parse(response: httpx.Response) -> Any:
        obj = _json_object(response)
        if key not in obj:
            raise InvalidBodyError(f"response has no {key!r} object; retry later")
        return obj[key]

    return parse


def _list_body(list_key: str) -> Callable[[httpx.Response], tuple[list[Any], PageInfo]]:
    def parse(response: httpx.Response) -> tuple[list[Any], PageInfo]:
        obj = _json_object(response)
        items = obj.get(list_key)
        if not isinstance(items, list):
            raise InvalidBodyError(f"200 list body has no {list_key!r} array; retry later")
        meta = obj.get("metadata")
        total = meta.get("total") if isinstance(meta, dict) else None
        if total is not None and (not isinstance(total, int) or isinstance(total, bool)):
            raise InvalidBodyError(f"metadata.total is not an integer: {total!r}")
        return items, PageInfo(count=len(items), total=total)

    return parse


def _write_result(
    key: str, model: type[M], *, many: bool = False
) -> Callable[[httpx.Response], WriteResult[Any]]:
    """Parse a write's 2xx without ever failing: the typed `{key: ...}` object when the body
    has it, and in every case the body as received."""

    def parse(response: httpx.Response) -> WriteResult[Any]:
        raw: Any = None
        if response.content.strip():
            try:
                raw = orjson.loads(response.content)
            except orjson.JSONDecodeError:
                raw = response.text
        resource: Any = None
        if isinstance(raw, dict) and key in raw:
            try:
                if many and isinstance(raw[key], list):
                    resource = [model.model_validate(item) for item in raw[key]]
                elif not many:
                    resource = model.model_validate(raw[key])
            except ValidationError:
                resource = None
        if resource is None:
            logger.warning(
                "%s %s -> %s: body is not the expected {%s: ...}; returned as received",
                response.request.method,
                response.request.url.path,
                response.status_code,
                key,
            )
        return WriteResult(response.status_code, raw, resource)

    return parse


def _model(model: type[M], raw: Any, what: str) -> M:
    try:
        return model.model_validate(raw)
    except ValidationError as exc:
        # Field paths and messages only: pydantic's input values could be long or sensitive.
        where = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors()[:5])
        raise ResponseShapeError(
            f"{what}: response does not match {model.__name__} ({where})"
        ) from None


def _body(payload: WriteModel | Mapping[str, Any], model: type[WriteModel]) -> dict[str, Any]:
    """Validate a write body client-side (a mapping goes through the strict model first)."""
    checked = payload if isinstance(payload, WriteModel) else model.model_validate(payload)
    if not isinstance(checked, model):
        raise TypeError(f"expected {model.__name__}, got {type(checked).__name__}")
    return checked.to_body()


class ContactCenterClient:
    """Async client of the Contact Center API v4. Use as `async with ContactCenterClient(...)`.

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
        return f"ContactCenterClient(base_url={self.settings.base_url!r})"

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
            verify=True,
            follow_redirects=False,  # a redirect must not carry the key to another host
        )
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
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
    ) -> T:
        if self._http is None:
            raise RuntimeError("use the client as `async with ContactCenterClient(...)`")
        path = endpoint.url(**(ids or {}))
        pairs = params.items() if isinstance(params, Mapping) else (params or ())
        query = tuple((key, str(value)) for key, value in pairs)
        content = orjson.dumps(body) if body is not None else None
        headers = {"Content-Type": "application/json"} if content is not None else None
        began = time.monotonic()
        attempt = 0
        while True:
            attempt += 1
            await self.limiter.acquire()
            sent = time.monotonic()
            status: int | None = None
            cause: BaseException | None = None
            self.stats["requests"] += 1
            try:
                async with self._inflight:
                    response = await self._http.request(
                        endpoint.method, path, params=query, content=content, headers=headers
                    )
                status = response.status_code
                map_response(response, endpoint.scope, path=path, require_json=require_json)
                result = parse(response)
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
            if isinstance(error, RateLimitedError) and error.retry_after:
                self.limiter.pause(error.retry_after)
            wait = self.retry_policy.next_delay(
                attempt, time.monotonic() - began, error, endpoint.safety
            )
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
            if wait is None:
                # Second line of defence: scrub the key from anything the server echoed.
                error.args = (self._redact(str(error)),)
                raise error from cause
            self.stats["retries"] += 1
            await asyncio.sleep(wait)

    async def _get_one(self, name: str, key: str, model: type[M], **ids: object) -> M:
        endpoint = ENDPOINTS[name]
        raw = await self._send(endpoint, _keyed(key), ids=ids)
        return _model(model, raw, f"{endpoint.method} {endpoint.path}")

    async def _write(
        self, name: str, key: str, model: type[M], body: dict[str, Any] | None, **ids: object
    ) -> WriteResult[M]:
        endpoint = ENDPOINTS[name]
        result: WriteResult[M] = await self._send(
            endpoint, _write_result(key, model), ids=ids, body=body, require_json=False
        )
        return result

    async def _write_many(
        self, name: str, key: str, model: type[M], body: dict[str, Any] | None, **ids: object
    ) -> WriteResult[list[M]]:
        endpoint = ENDPOINTS[name]
        result: WriteResult[list[M]] = await self._send(
            endpoint, _write_result(key, model, many=True), ids=ids, body=body, require_json=False
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
            endpoint, _list_body(endpoint.list_key), ids=ids, params=self._params(pager, filters)
        )
        what = f"{endpoint.method} {endpoint.path}"
        return ListPage([_model(model, item, what) for item in items], info.total)

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
        while pager.has_next:
            items, info = await self._send(
                endpoint,
                _list_body(endpoint.list_key),
                ids=ids,
                params=self._params(pager, filters),
            )
            pager.validate(info)
            pager.update(info)
            out.extend(_model(model, item, what) for item in items)
        return out

    @staticmethod
    def _params(
        pager: OffsetPaginator, filters: Mapping[str, str | int | None] | None
    ) -> dict[str, str | int]:
        extra = {k: v for k, v in (filters or {}).items() if v is not None}
        return {**extra, **pager.params()}

    # --- voice -------------------------------------------------------------------------------

    async def start_call(self, request: StartCall | Mapping[str, Any]) -> WriteResult[CallRef]:
        """POST /voice/calls (201 {call: {id}}). Never retried unless provably unsent."""
        return await self._write("start_call", "call", CallRef, _body(request, StartCall))

    async def hangup_call(self, call_id: str, user_id: str | int) -> WriteResult[CallRef]:
        """POST /voice/calls/{call_id}/hangup. The spec types the agent's `user_id` both as a
        UUID string and as an integer, so either is accepted and sent exactly as given (a UUID
        string stays a string, an integer an integer). The sandbox answers 409 (ConflictError)
        when the call already ended."""
        body = _body(Hangup(user_id=user_id), Hangup)
        return await self._write("hangup_call", "call", CallRef, body, call_id=call_id)

    # --- routing -----------------------------------------------------------------------------

    async def list_queues(self, *, limit: int | None = None, offset: int = 0) -> ListPage[Queue]:
        """GET /routing/queues (one page)."""
        return await self._list_page("list_queues", Queue, limit=limit, offset=offset)

    async def list_all_queues(self) -> list[Queue]:
        """Every queue."""
        return await self._list_all("list_queues", Queue)

    async def get_queue(self, queue_id: int) -> Queue:
        """GET /routing/queues/{queue_id}."""
        return await self._get_one("get_queue", "queue", Queue, queue_id=queue_id)

    async def list_queue_users(
        self, queue_id: int, *, limit: int | None = None, offset: int = 0
    ) -> ListPage[User]:
        """GET /routing/queues/{queue_id}/users (one page)."""
        return await self._list_page(
            "list_queue_users", User, limit=limit, offset=offset, queue_id=queue_id
        )

    async def list_all_queue_users(self, queue_id: int) -> list[User]:
        """Every member of a queue."""
        return await self._list_all("list_queue_users", User, queue_id=queue_id)

    async def list_queue_supervisors(
        self, queue_id: int, *, limit: int | None = None, offset: int = 0
    ) -> ListPage[User]:
        """GET /routing/queues/{queue_id}/supervisors (one page)."""
        return await self._list_page(
            "list_queue_supervisors", User, limit=limit, offset=offset, queue_id=queue_id
        )

    async def list_all_queue_supervisors(self, queue_id: int) -> list[User]:
        """Every supervisor of a queue."""
        return await self._list_all("list_queue_supervisors", User, queue_id=queue_id)

    async def list_skills(self, *, limit: int | None = None, offset: int = 0) -> ListPage[Skill]:
        """GET /routing/skills (one page)."""
        return await self._list_page("list_skills", Skill, limit=limit, offset=offset)

    async def list_all_skills(self) -> list[Skill]:
        """Every skill."""
        return await self._list_all("list_skills", Skill)

    async def get_skill(self, skill_id: int) -> Skill:
        """GET /routing/skills/{skill_id}."""
        return await self._get_one("get_skill", "skill", Skill, skill_id=skill_id)

    # --- users and teams ---------------------------------------------------------------------

    async def list_users(
        self,
        *,
        limit: int | None = None,
        offset: int = 0,
        name: str | None = None,
        email: str | None = None,
        sip_account: str | None = None,
        security_access_group_id: int | None = None,
        extension: str | None = None,
        caller_id: str | None = None,
        timezone: str | None = None,
    ) -> ListPage[User]:
        """GET /users (one page), with the spec's filters."""
        filters = {
            "name": name,
            "email": email,
            "sip_account": sip_account,
            "security_access_group_id": security_access_group_id,
            "extension": extension,
            "caller_id": caller_id,
            "timezone": timezone,
        }
        return await self._list_page(
            "list_users", User, limit=limit, offset=offset, filters=filters
        )

    async def list_all_users(self, **filters: str | int | None) -> list[User]:
        """Every active user (filters as in `list_users`)."""
        return await self._list_all("list_users", User, filters=filters)

    async def get_user(self, user_id: str) -> User:
        """GET /users/{user_id}."""
        return await self._get_one("get_user", "user", User, user_id=user_id)

    async def list_deleted_users(
        self, *, limit: int | None = None, offset: int = 0, **filters: str | int | None
    ) -> ListPage[User]:
        """GET /users/deleted (one page); same filters as users except `extension`."""
        if "extension" in filters:
            raise ValueError("the deleted-users list has no extension filter")
        return await self._list_page(
            "list_deleted_users", User, limit=limit, offset=offset, filters=filters
        )

    async def list_all_deleted_users(self) -> list[User]:
        """Every deleted user."""
        return await self._list_all("list_deleted_users", User)

    async def get_deleted_user(self, user_id: str) -> User:
        """GET /users/deleted/{user_id}."""
        return await self._get_one("get_deleted_user", "user", User, user_id=user_id)

    async def list_teams(self, *, limit: int | None = None, offset: int = 0) -> ListPage[Team]:
        """GET /users/teams (one page)."""
        return await self._list_page("list_teams", Team, limit=limit, offset=offset)

    async def list_all_teams(self) -> list[Team]:
        """Every team."""
        return await self._list_all("list_teams", Team)

    async def get_team(self, team_id: int) -> Team:
        """GET /users/teams/{team_id}."""
        return await self._get_one("get_team", "team", Team, team_id=team_id)

    async def list_team_users(
        self, team_id: int, *, limit: int | None = None, offset: int = 0
    ) -> ListPage[User]:
        """GET /teams/{team_id}/users (one page; limit capped at 100). The spec also names
        /users/teams/{team_id}/users; the sandbox serves both, we use the endpoint section's."""
        return await self._list_page(
            "list_team_users", User, limit=limit, offset=offset, team_id=team_id
        )

    async def list_all_team_users(self, team_id: int) -> list[User]:
        """Every member of a team."""
        return await self._list_all("list_team_users", User, team_id=team_id)

    async def list_team_supervisors(
        self, team_id: int, *, limit: int | None = None, offset: int = 0
    ) -> ListPage[User]:
        """GET /teams/{team_id}/supervisors (one page); "exists likewise" per the spec."""
        return await self._list_page(
            "list_team_supervisors", User, limit=limit, offset=offset, team_id=team_id
        )

    async def list_all_team_supervisors(self, team_id: int) -> list[User]:
        """Every supervisor of a team."""
        return await self._list_all("list_team_supervisors", User, team_id=team_id)

    # --- campaigns ---------------------------------------------------------------------------

    async def list_campaigns(
        self, *, limit: int | None = None, offset: int = 0
    ) -> ListPage[Campaign]:
        """GET /campaigns (one page)."""
        return await self._list_page("list_campaigns", Campaign, limit=limit, offset=offset)

    async def list_all_campaigns(self) -> list[Campaign]:
        """Every campaign."""
        return await self._list_all("list_campaigns", Campaign)

    async def get_campaign(self, campaign_id: int) -> Campaign:
        """GET /campaigns/{campaign_id}."""
        return await self._get_one("get_campaign", "campaign", Campaign, campaign_id=campaign_id)

    async def create_campaign(
        self, request: CampaignCreate | Mapping[str, Any]
    ) -> WriteResult[Campaign]:
        """POST /campaigns; validated client-side first (pydantic ValidationError, with the
        spec's field names, before anything is sent). Not retried unless provably unsent."""
        return await self._write(
            "create_campaign", "campaign", Campaign, _body(request, CampaignCreate)
        )

    async def update_campaign(
        self, campaign_id: int, patch: CampaignPatch | Mapping[str, Any]
    ) -> WriteResult[Campaign]:
        """PATCH /campaigns/{campaign_id}: only the fields set are sent; an explicit None
        clears a nullable field. Retried: the same PATCH twice gives the same campaign.
        A stopped/completed campaign answers 409 in the sandbox (status "not shown")."""
        body = _body(patch, CampaignPatch)
        return await self._write(
            "update_campaign", "campaign", Campaign, body, campaign_id=campaign_id
        )

    async def start_campaign(self, campaign_id: int) -> WriteResult[Campaign]:
        """POST /campaigns/{id}/start. A transition: not retried after it may have arrived
        (a second start could hit a 409). Response {campaign} is the sandbox's choice."""
        return await self._write(
            "start_campaign", "campaign", Campaign, None, campaign_id=campaign_id
        )

    async def stop_campaign(self, campaign_id: int) -> WriteResult[Campaign]:
        """POST /campaigns/{id}/stop (a transition; see `start_campaign`)."""
        return await self._write(
            "stop_campaign", "campaign", Campaign, None, campaign_id=campaign_id
        )

    async def pause_campaign(self, campaign_id: int) -> WriteResult[Campaign]:
        """POST /campaigns/{id}/pause (a transition; see `start_campaign`)."""
        return await self._write(
            "pause_campaign", "campaign", Campaign, None, campaign_id=campaign_id
        )

    async def add_leads(
        self, campaign_id: int, request: LeadsRequest | Mapping[str, Any]
    ) -> WriteResult[list[Lead]]:
        """POST /campaigns/{id}/leads; body {leads: [...]} (1-1000) is the sandbox's shape
        (the spec shows none: extra fields are passed through)."""
        body = _body(request, LeadsRequest)
        return await self._write_many("add_leads", "leads", Lead, body, campaign_id=campaign_id)

    async def update_leads(
        self, campaign_id: int, request: LeadsUpdateRequest | Mapping[str, Any]
    ) -> WriteResult[list[Lead]]:
        """PATCH /campaigns/{id}/leads; leads by id (the sandbox's shape). Not retried:
        its semantics are not shown, so we do not assume it is idempotent."""
        body = _body(request, LeadsUpdateRequest)
        return await self._write_many("update_leads", "leads", Lead, body, campaign_id=campaign_id)

    # --- reporting ---------------------------------------------------------------------------

    async def list_cdrs(
        self,
        start: datetime,
        end: datetime,
        *,
        filters: Filters | None = None,
        limit: int = 100,
        cursor: str | None = None,
    ) -> tuple[list[Cdr], int | None, str | None]:
        """GET /reporting/cdrs, one page as models: (cdrs, total, next_cursor). For bulk
        reads use `fetch_cdr_pages`, which builds no object per CDR."""
        endpoint = ENDPOINTS["list_cdrs"]
        params: list[tuple[str, str | int]] = [
            ("started_at[gte]", iso_ms(start)),
            ("started_at[lt]", iso_ms(end)),
            ("limit", min(limit, endpoint.max_limit or limit)),
            *cdr_filter_params(filters),
        ]
        if cursor is not None:
            params.append(("cursor", cursor))

        def parse(response: httpx.Response) -> tuple[list[Any], int | None, str | None]:
            obj = _json_object(response)
            items = obj.get("cdrs")
            if not isinstance(items, list):
                raise InvalidBodyError("200 CDR page has no 'cdrs' array; retry later")
            meta = obj.get("metadata")
            meta = meta if isinstance(meta, dict) else {}
            return items, meta.get("total"), meta.get("next_cursor")

        items, total, next_cursor = await self._send(endpoint, parse, params=params)
        return [_model(Cdr, item, endpoint.path) for item in items], total, next_cursor

    async def get_cdr(self, cdr_id: str) -> Cdr:
        """GET /reporting/cdrs/{cdr_id}; the body is {cdr} (the spec's singular convention)."""
        return await self._get_one("get_cdr", "cdr", Cdr, cdr_id=cdr_id)

    async def fetch_cdr_pages(
        self, start: datetime, end: datetime, filters: Filters | None = None
    ) -> AsyncIterator[CdrPage]:
        """Every CDR with started_at in [start, end), as raw pages.

        The window is split into `settings.sub_window` pieces fetched by up to
        `settings.concurrency` workers under the client's shared rate limiter; pages of one
        sub-window arrive in order, sub-windows interleave. Each sub-window yields at least one
        page (an empty one if it has no CDRs); its last page has `last=True`.
        """
        windows = deque(split_window(start, end, self.settings.sub_window))
        if not windows:
            return
        base = cdr_filter_params(filters)
        workers = min(self.settings.concurrency, len(windows))
        # Unbounded queue + a semaphore for back-pressure: the end marker never blocks.
        queue: asyncio.Queue[CdrPage | None] = asyncio.Queue()
        slots = asyncio.Semaphore(2 * workers)
        failures: list[BaseException] = []

        async def worker() -> None:
            while windows:
                ws, we = windows.popleft()
                async for page in self._window_pages(ws, we, base):
                    await slots.acquire()
                    queue.put_nowait(page)

        async def run() -> None:
            try:
                async with asyncio.TaskGroup() as group:
                    for _ in range(workers):
                        group.create_task(worker())
            except BaseExceptionGroup as eg:
                failures.append(_first_leaf(eg))
            finally:
                queue.put_nowait(None)

        producer = asyncio.create_task(run())
        try:
            while (page := await queue.get()) is not None:
                slots.release()
                yield page
            await producer
            if failures:
                raise failures[0]
        finally:
            if not producer.done():
                producer.cancel()
                await asyncio.gather(producer, return_exceptions=True)

    async def _window_pages(
        self, ws: datetime, we: datetime, base: Sequence[tuple[str, str]]
    ) -> AsyncIterator[CdrPage]:
        endpoint = ENDPOINTS["list_cdrs"]
        pager = CursorPaginator(self.settings.page_size, verify_totals=self.settings.verify_totals)
        window = [("started_at[gte]", iso_ms(ws)), ("started_at[lt]", iso_ms(we)), *base]

        def parse(response: httpx.Response) -> tuple[bytes, PageInfo]:
            if response.headers.get(FALLBACK_HEADER):
                # The server took our cursor as invalid and paged by our offset instead:
                # harmless (offset = records received), but worth counting.
                self.stats["cursor_fallbacks"] += 1
                logger.info("cursor fallback to offset=%d in %s", pager.received, iso_ms(ws))
            body = response.content
            info = read_page_info(body, "cdrs", keys=True)
            if info.total is None:
                raise InvalidBodyError("CDR page has no metadata.total; retry later")
            pager.validate(info)  # inside the retry loop: an overlapping page is re-requested
            return body, info

        rejected = 0
        while pager.has_next:
            params = [*window, *pager.params().items()]
            try:
                body, info = await self._send(endpoint, parse, params=params)
            except BadRequestError:
                # A cursor the server took as invalid, past the offset window: the fallback
                # offset is invalid too (400). The cursor itself is fine; ask again.
                if pager.cursor is None or pager.received < OFFSET_WINDOW:
                    raise
                rejected += 1
                if rejected >= self.retry_policy.max_attempts:
                    raise PaginationError(
                        f"cursor rejected {rejected} times after {pager.received} records; the "
                        "offset fallback cannot go past 10,000 - use a smaller sub_window"
                    ) from None
                await asyncio.sleep(self.retry_policy.delay(rejected))
                continue
            index = pager.pages
            pager.update(info)
            assert info.total is not None
            yield CdrPage(ws, we, body, info.count, info.total, index, not pager.has_next)

    # --- messaging ---------------------------------------------------------------------------

    async def list_messages(
        self, conversation_id: str, *, limit: int | None = None, offset: int = 0
    ) -> ListPage[Message]:
        """GET /messaging/conversations/{id}/messages (one page; limit max 100)."""
        return await self._list_page(
            "list_messages", Message, limit=limit, offset=offset, conversation_id=conversation_id
        )

    async def list_all_messages(self, conversation_id: str) -> list[Message]:
        """Every message of a conversation."""
        return await self._list_all("list_messages", Message, conversation_id=conversation_id)

    async def send_sms(self, request: SendSms | Mapping[str, Any]) -> WriteResult[SmsRef]:
        """POST /messaging/sms ({sms: {id}}; the sandbox answers 201, the spec says only
        "200-class"). Retried only after a 429 (a refusal) or when the request provably never
        left (connect errors): a 5xx or a reset raise, because the SMS may already be sent."""
        return await self._write("send_sms", "sms", SmsRef, _body(request, SendSms))

    async def create_conversation(
        self, request: CreateConversation | Mapping[str, Any]
    ) -> WriteResult[Conversation]:
        """POST /messaging/conversations (shape not shown; the sandbox's: an outbound
        WhatsApp text, answering 201 {conversation})."""
        body = _body(request, CreateConversation)
        return await self._write("create_conversation", "conversation", Conversation, body)

    async def post_message(
        self, conversation_id: str, request: NewMessage | Mapping[str, Any]
    ) -> WriteResult[Message]:
        """POST /messaging/conversations/{id}/messages (the sandbox's shape; 201 {message})."""
        body = _body(request, NewMessage)
        return await self._write(
            "post_message", "message", Message, body, conversation_id=conversation_id
        )

    async def list_all_whatsapp_templates(self) -> list[WhatsappTemplate]:
        """GET /messaging/whatsapp_templates, every page (record fields not shown)."""
        return await self._list_all("list_whatsapp_templates", WhatsappTemplate)

    async def list_all_canned_messages(self) -> list[CannedMessage]:
        """GET /messaging/canned_messages, every page (record fields not shown)."""
        return await self._list_all("list_canned_messages", CannedMessage)

    async def list_all_wrapup_codes(self) -> list[WrapupCode]:
        """GET /contact_center/wrapup_codes, every page (record fields not shown)."""
        return await self._list_all("list_wrapup_codes", WrapupCode)

    # --- numbers and billing -----------------------------------------------------------------

    async def list_numbers(self, *, limit: int | None = None, offset: int = 0) -> ListPage[Number]:
        """GET /numbers (one page; limit max 100). Purchased numbers only."""
        return await self._list_page("list_numbers", Number, limit=limit, offset=offset)

    async def list_all_numbers(self) -> list[Number]:
        """Every purchased number."""
        return await self._list_all("list_numbers", Number)

    async def list_caller_id_groups(
        self, *, limit: int | None = None, offset: int = 0
    ) -> ListPage[CallerIdGroup]:
        """GET /numbers/caller-id-groups (one page; limit capped at 100)."""
        return await self._list_page(
            "list_caller_id_groups", CallerIdGroup, limit=limit, offset=offset
        )

    async def list_all_caller_id_groups(self) -> list[CallerIdGroup]:
        """Every caller ID group."""
        return await self._list_all("list_caller_id_groups", CallerIdGroup)

    async def get_balance(self) -> Balance:
        """GET /billing/balance; the amount is an exact Decimal."""
        return await self._get_one("get_balance", "balance", Balance)

    # --- tasks -------------------------------------------------------------------------------

    async def schedule_callback(
        self, request: ScheduleCallback | Mapping[str, Any]
    ) -> WriteResult[ScheduledCallback]:
        """POST /tasks/scheduled_callbacks (the scope table's spelling; the sandbox also serves
        /tasks/schedule_callbacks). Body and {scheduled_callback} answer: the sandbox's."""
        body = _body(request, ScheduleCallback)
        return await self._write("schedule_callback", "scheduled_callback", ScheduledCallback, body)

    async def list_webhook_failures(
        self, *, limit: int | None = None, offset: int = 0
    ) -> ListPage[WebhookFailure]:
        """GET /tasks/webhook_failures (the scope table's spelling; one page)."""
        return await self._list_page(
            "list_webhook_failures", WebhookFailure, limit=limit, offset=offset
        )

    async def list_all_webhook_failures(self) -> list[WebhookFailure]:
        """Every webhook failure."""
        return await self._list_all("list_webhook_failures", WebhookFailure)

    async def retrigger_webhook_failure(
        self, webhook_failure_id: str | int
    ) -> WriteResult[WebhookFailure]:
        """POST /tasks/webhook_failures/{id}/retrigger (the scope table's method and spelling;
        the migration mapping says GET /tasks/webhooks/failures/...). Not retried: a retrigger
        sends the hook again."""
        return await self._write(
            "retrigger_webhook_failure",
            "webhook_failure",
            WebhookFailure,
            None,
            webhook_failure_id=webhook_failure_id,
        )


def _first_leaf(group: BaseExceptionGroup[BaseException]) -> BaseException:
    """The first real error inside a (nested) exception group."""
    for exc in group.exceptions:
        if isinstance(exc, BaseExceptionGroup):
            return _first_leaf(exc)
        if not isinstance(exc, asyncio.CancelledError):
            return exc
    return group.exceptions[0]
