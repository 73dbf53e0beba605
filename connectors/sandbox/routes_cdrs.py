"""The CDR endpoints over HTTP: request parsing (filters, limit, offset, cursor), the
invalid-cursor fault, and the Starlette handlers. The query itself is `query.py`."""

from __future__ import annotations

import re
import uuid
from typing import Any

import orjson
from starlette.requests import Request
from starlette.responses import Response

from connectors.sandbox.cursors import make_cursor, read_cursor
from connectors.sandbox.datafaults import (
    current_cost,
    data_faults_on,
    render,
    visible_at,
)
from connectors.sandbox.generator import CDR_TYPES, cost_json, encode_page
from connectors.sandbox.http import ApiError, fail, get_sandbox, json_response, raw_json
from connectors.sandbox.params import INT64_MAX, INT64_MIN, instant_ms, parse_int, parse_uuid
from connectors.sandbox.query import (
    OFFSET_WINDOW,
    CdrFilter,
    Page,
    locate,
    now_ms,
    select_page,
)
from connectors.sandbox.reads import ReadRoutes, uuid_id
from models.timestamps import iso_ms_from_epoch

MAX_LIMIT = 1000
SUBTYPES = frozenset({"outbound", "inbound", "whatsapp", "hlr_lookup", "outbound_sms"})
DISPOSITIONS = frozenset(
    {"answered", "no_answer", "busy", "failed", "archived", "available", "unavailable", "sent"}
)
FALLBACK_HEADER = "X-Sandbox-Cursor-Fallback"
_PHONE = re.compile(r"[0-9]{1,15}")


# Filters the spec shows as "single or array" (written `x[]=`); every other one takes one value.
ARRAY_FILTERS = ("type", "subtype", "disposition", "account_id")
SINGLE_FILTERS = (
    "user_id",
    "team_id",
    "queue_id",
    "campaign_id",
    "from_phone_number",
    "to_phone_number",
    "from_phone_number_like",
    "to_phone_number_like",
    "tag",
)
TIME_BOUNDS = tuple(
    f"{f}[{op}]" for f in ("started_at", "ended_at") for op in ("gte", "gt", "lte", "lt")
)
# Every query parameter of the CDR list (and the events list); anything else is a 422.
QUERY: frozenset[str] = frozenset(
    {"limit", "offset", "cursor", *TIME_BOUNDS, *SINGLE_FILTERS, *ARRAY_FILTERS}
    | {f"{name}[]" for name in ARRAY_FILTERS}
)


def _values(request: Request, name: str) -> list[str]:
    values = request.query_params.getlist(name)
    if name in ARRAY_FILTERS:
        values += request.query_params.getlist(name + "[]")
    return values


def parse_filter(request: Request) -> CdrFilter:
    """Parse every documented filter; collect problems into one 422 field-error body."""
    errors: dict[str, list[str]] = {}
    bounds: dict[str, int | None] = {}
    for field_name in ("started_at", "ended_at"):
        gte: int | None = None
        lt: int | None = None
        for op in ("gte", "gt", "lte", "lt"):
            raw = request.query_params.get(f"{field_name}[{op}]")
            if raw is None:
                continue
            try:
                # Any ISO 8601 value bounds, however far: a bound past every record gives an
                # empty page or all of them (docs/sandbox.md), never an out-of-range error.
                ms = instant_ms(raw)
            except ValueError:
                errors.setdefault(f"{field_name}[{op}]", []).append("must be an ISO 8601 date-time")
                continue
            # Millisecond precision makes every bound a half-open [gte, lt) bound.
            if op in ("gte", "gt"):
                low = ms if op == "gte" else ms + 1
                gte = low if gte is None else max(gte, low)
            else:
                high = ms + 1 if op == "lte" else ms
                lt = high if lt is None else min(lt, high)
        bounds[field_name + "_gte"], bounds[field_name + "_lt"] = gte, lt

    def enum(name: str, allowed: frozenset[str] | tuple[str, ...]) -> frozenset[str] | None:
        vals = _values(request, name)
        bad = [v for v in vals if v not in allowed]
        if bad:
            errors.setdefault(name, []).append(
                f"is not included in the list: {', '.join(sorted(set(bad)))}"
            )
        return frozenset(vals) if vals else None

    def ints(name: str) -> frozenset[int] | None:
        vals = [parse_int(v) for v in _values(request, name)]
        if None in vals:
            errors.setdefault(name, []).append("must be an integer")
            return None
        # An id past 64 bits is an integer no record has: it matches nothing, so it is left
        # out of the set (the cursor's filter hash encodes 64-bit integers only).
        if not vals:
            return None
        return frozenset(v for v in vals if v is not None and INT64_MIN <= v <= INT64_MAX)

    def uuids(name: str) -> frozenset[str] | None:
        vals = [parse_uuid(v) for v in _values(request, name)]
        if None in vals:
            errors.setdefault(name, []).append("must be a UUID")
            return None
        return frozenset(v for v in vals if v is not None) if vals else None

    def phone(name: str) -> str | None:
        raw = request.query_params.get(name)
        if raw is not None and not _PHONE.fullmatch(raw):
            errors.setdefault(name, []).append("must be digits only (E.164 without plus)")
        return raw

    def text(name: str) -> frozenset[str] | None:
        vals = _values(request, name)
        if any(not v for v in vals):
            errors.setdefault(name, []).append("must not be blank")
        return frozenset(vals) if vals else None

    tag = request.query_params.get("tag")
    if tag is not None and not tag:
        errors.setdefault("tag", []).append("must not be blank")
    result = CdrFilter(
        started_gte=bounds["started_at_gte"],
        started_lt=bounds["started_at_lt"],
        ended_gte=bounds["ended_at_gte"],
        ended_lt=bounds["ended_at_lt"],
        types=enum("type", CDR_TYPES),
        subtypes=enum("subtype", SUBTYPES),
        dispositions=enum("disposition", DISPOSITIONS),
        user_ids=uuids("user_id"),
        team_ids=ints("team_id"),
        queue_ids=ints("queue_id"),
        campaign_ids=ints("campaign_id"),
        account_ids=text("account_id"),
        from_phone=phone("from_phone_number"),
        to_phone=phone("to_phone_number"),
        from_like=phone("from_phone_number_like"),
        to_like=phone("to_phone_number_like"),
        tag=tag,
    )
    if errors:
        raise fail(errors)
    return result


def _limit(request: Request) -> int:
    raw = request.query_params.get("limit")
    if raw is None:
        return 100
    limit = parse_int(raw)
    if limit is None or not 1 <= limit <= MAX_LIMIT:
        raise fail({"limit": [f"must be an integer between 1 and {MAX_LIMIT}"]})
    return limit


def _offset(raw: str | None, *, fallback: bool) -> int:
    if raw is None:
        return 0
    offset = parse_int(raw)
    if offset is None or offset < 0:
        # A bad offset alone is a field error; as the fallback of a bad cursor it is 400.
        raise ApiError(400) if fallback else fail({"offset": ["must be an integer >= 0"]})
    return offset


def query_page(request: Request) -> tuple[Page, CdrFilter, bool]:
    """Parse the request and select one page (cursor keyset or offset window); the flag is
    True when the cursor was taken as invalid and the offset was used instead."""
    sandbox = get_sandbox(request)
    flt = parse_filter(request)
    limit = _limit(request)
    faults = sandbox.faults
    cursor_raw = request.query_params.get("cursor")
    if cursor_raw == "":
        raise fail({"cursor": ["must not be blank"]})
    key = read_cursor(sandbox.config.seed, cursor_raw, flt.key()) if cursor_raw else None
    active = request.scope.get("state", {}).get("faults_active", False)
    hit = key is not None and active and faults.cursor_invalid_rate > 0
    if hit and sandbox.fault_state.draw() < faults.cursor_invalid_rate:
        key = None
    fallback = bool(cursor_raw) and key is None
    offset = 0
    if key is None:
        offset = _offset(request.query_params.get("offset"), fallback=fallback)
        if offset >= OFFSET_WINDOW:
            raise ApiError(400)
    return select_page(sandbox, flt, limit, key, offset), flt, fallback


async def list_cdrs(request: Request) -> Response:
    sandbox = get_sandbox(request)
    page, flt, fallback = query_page(request)
    now = now_ms(sandbox)
    if data_faults_on(sandbox.faults):
        records = [render(sandbox, day, i, now) for day, i in page.items]
    else:
        records = [day.records[i] for day, i in page.items]
    cursor = None
    if page.next_key is not None:
        cursor = make_cursor(sandbox.config.seed, *page.next_key, flt.key())
    body = encode_page(records, page.total + sandbox.faults.total_mismatch, cursor)
    headers = {FALLBACK_HEADER: "offset"} if fallback else None
    return raw_json(body, headers=headers)


async def list_events(request: Request) -> Response:
    """CDR events (shape chosen, see docs/sandbox.md): one `cdr.created` per visible CDR and a
    `cdr.updated` once a revised CDR's cost changed; paged like the CDR list."""
    sandbox = get_sandbox(request)
    page, flt, fallback = query_page(request)
    now = now_ms(sandbox)
    faults, seed = sandbox.faults, sandbox.config.seed
    events: list[dict[str, Any]] = []
    for day, i in page.items:
        cdr_id = day.ids[i]
        vis = visible_at(seed, faults, cdr_id, day.ended_ms[i])
        cost = current_cost(seed, faults, cdr_id, day.costs[i], vis, now)
        events.append(_event("cdr.created", cdr_id, vis, day.costs[i]))
        if cost != day.costs[i]:
            events.append(
                _event("cdr.updated", cdr_id, vis + faults.revise_after_minutes * 60_000, cost)
            )
    cursor = None
    if page.next_key is not None:
        cursor = make_cursor(seed, *page.next_key, flt.key())
    meta = {"total": page.total, "next_cursor": cursor}
    headers = {FALLBACK_HEADER: "offset"} if fallback else None  # as on the CDR list
    return json_response({"events": events, "metadata": meta}, headers=headers)


def _event(kind: str, cdr_id: str, at_ms: int, cost: int) -> dict[str, Any]:
    return {
        "id": str(uuid.uuid5(uuid.NAMESPACE_URL, f"{kind}:{cdr_id}")),
        "type": kind,
        "cdr": {"id": cdr_id, "cost": orjson.Fragment(cost_json(cost))},
        "occurred_at": iso_ms_from_epoch(at_ms),
    }


async def get_cdr(request: Request) -> Response:
    sandbox = get_sandbox(request)
    cdr_id = uuid_id(request, "cdr_id")
    found = locate(sandbox, cdr_id)
    now = now_ms(sandbox)
    if found is None:
        raise ApiError(404)
    day, i = found
    if visible_at(sandbox.config.seed, sandbox.faults, cdr_id, day.ended_ms[i]) > now:
        raise ApiError(404)  # not arrived yet
    return raw_json(b'{"cdr":' + render(sandbox, day, i, now) + b"}")


# ------------------------------------------------------------------ the route table

READS = ReadRoutes()

READS.get("/api/v4/reporting/cdrs", "reporting.cdrs.read", "Reporting", "List CDRs", QUERY)(
    list_cdrs
)
READS.get(
    "/api/v4/reporting/cdrs/events",
    "reporting.cdrs.read",
    "Reporting",
    "List CDR events",
    QUERY,
)(list_events)
READS.get("/api/v4/reporting/cdrs/{cdr_id}", "reporting.cdrs.read", "Reporting", "Get a CDR")(
    get_cdr
)
