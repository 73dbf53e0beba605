"""CDR listing: filters, visibility at the clock's now, data faults, cursor and offset paging.

Fast path: with only `started_at` bounds and no data faults, a day's matches are one contiguous
index range (binary search on `started_ms`) and a page is a slice of pre-encoded bytes.
Any other filter builds a per-day index list once (cached) and pages through it.
"""

from __future__ import annotations

import base64
import hashlib
import re
import uuid
from bisect import bisect_left, bisect_right
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, fields
from datetime import UTC, date, datetime, timedelta
from typing import TYPE_CHECKING, Any

import orjson
from starlette.requests import Request
from starlette.responses import Response

from connectors.sandbox.faults import FaultConfig, unit_hash
from connectors.sandbox.generator import (
    CDR_TYPES,
    DAY_MS,
    MAX_DURATION_MS,
    DayCdrs,
    cost_json,
    cost_str,
    date_of_ms,
    encode_page,
    ms_of,
)
from connectors.sandbox.http import ApiError, fail, get_sandbox, json_response, raw_json

if TYPE_CHECKING:
    from connectors.sandbox.emulator import Sandbox

OFFSET_WINDOW = 10_000
MAX_LIMIT = 1000
SUBTYPES = frozenset({"outbound", "inbound", "whatsapp", "hlr_lookup", "outbound_sms"})
DISPOSITIONS = frozenset(
    {"answered", "no_answer", "busy", "failed", "archived", "available", "unavailable", "sent"}
)
DRIFT_TYPE = "video_call"  # the unknown CDR type served under schema drift
FALLBACK_HEADER = "X-Sandbox-Cursor-Fallback"
_PHONE = re.compile(r"^[0-9]{1,15}$")
_INT = re.compile(r"^-?[0-9]+$")


def parse_time(text: str) -> datetime:
    """ISO 8601 date-time (or date) to an aware UTC datetime; naive values are taken as UTC."""
    if not re.match(r"^\d{4}-\d{2}-\d{2}", text):
        raise ValueError(f"not an ISO 8601 date-time: {text!r}")
    value = datetime.fromisoformat(text.replace("z", "Z").replace("Z", "+00:00"))
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def iso(dt: datetime) -> str:
    return dt.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.") + f"{dt.microsecond // 1000:03d}Z"


# ------------------------------------------------------------------ filters


@dataclass(frozen=True)
class CdrFilter:
    """Parsed filters; time bounds are half-open epoch-ms ranges [gte, lt)."""

    started_gte: int | None = None
    started_lt: int | None = None
    ended_gte: int | None = None
    ended_lt: int | None = None
    types: frozenset[str] | None = None
    subtypes: frozenset[str] | None = None
    dispositions: frozenset[str] | None = None
    user_ids: frozenset[str] | None = None
    team_ids: frozenset[int] | None = None
    queue_ids: frozenset[int] | None = None
    campaign_ids: frozenset[int] | None = None
    account_ids: frozenset[str] | None = None
    from_phone: str | None = None
    to_phone: str | None = None
    from_like: str | None = None
    to_like: str | None = None
    tag: str | None = None

    def key(self) -> str:
        """A short hash of the filters, stored in cursors (a cursor is bound to its query)."""
        parts = []
        for f in fields(self):
            value = getattr(self, f.name)
            parts.append(sorted(value) if isinstance(value, frozenset) else value)
        return hashlib.blake2b(orjson.dumps(parts), digest_size=6).hexdigest()

    @property
    def by_columns(self) -> bool:
        """True when something other than `started_at` bounds restricts the result."""
        return any(
            getattr(self, f.name) is not None
            for f in fields(self)
            if f.name not in ("started_gte", "started_lt")
        )


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
                ms = ms_of(parse_time(raw))
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
        vals = _values(request, name)
        if any(not _INT.match(v) for v in vals):
            errors.setdefault(name, []).append("must be an integer")
            return None
        return frozenset(int(v) for v in vals) if vals else None

    def uuids(name: str) -> frozenset[str] | None:
        vals = _values(request, name)
        try:
            return frozenset(str(uuid.UUID(v)) for v in vals) if vals else None
        except ValueError:
            errors.setdefault(name, []).append("must be a UUID")
            return None

    def phone(name: str) -> str | None:
        raw = request.query_params.get(name)
        if raw is not None and not _PHONE.match(raw):
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


# ------------------------------------------------------------------ per-record data faults


def _chosen(seed: int, salt: str, cdr_id: str, rate: float) -> bool:
    return rate > 0 and unit_hash(seed, salt, cdr_id) < rate


def visible_at(seed: int, faults: FaultConfig, cdr_id: str, ended_ms: int) -> int:
    """A CDR exists once it ended; a late one only `delay` after that."""
    if _chosen(seed, "late", cdr_id, faults.late_rate):
        delay = 1 + int(unit_hash(seed, "late-delay", cdr_id) * faults.late_max_minutes)
        return ended_ms + delay * 60_000
    return ended_ms


def current_cost(seed: int, faults: FaultConfig, cdr_id: str, cost: int, vis: int, now: int) -> int:
    """The cost as of `now`: revised CDRs change `revise_after_minutes` after appearing."""
    revised = now >= vis + faults.revise_after_minutes * 60_000
    if revised and _chosen(seed, "revise", cdr_id, faults.revise_rate):
        return cost + 1 + cost // 10  # +10% and a ten-thousandth: never equal to before
    return cost


def _is_drifted(seed: int, faults: FaultConfig, cdr_id: str) -> bool:
    return _chosen(seed, "drift-type", cdr_id, faults.drift_unknown_type_rate)


def _data_faults_on(faults: FaultConfig) -> bool:
    return bool(
        faults.late_rate
        or faults.revise_rate
        or faults.drift_extra_field
        or faults.drift_unknown_type_rate
        or faults.corrupt_rate
    )


def render(sandbox: Sandbox, day: DayCdrs, i: int, now: int) -> bytes:
    """Record `i` as served at `now`, with the data faults applied."""
    rec = day.records[i]
    faults = sandbox.faults
    if not _data_faults_on(faults):
        return rec
    seed = sandbox.config.seed
    cdr_id = day.ids[i]
    base = day.costs[i]
    cost = current_cost(
        seed, faults, cdr_id, base, visible_at(seed, faults, cdr_id, day.ended_ms[i]), now
    )
    old_cost = b'"cost":' + cost_json(base)
    if cost != base:
        rec = rec.replace(old_cost, b'"cost":' + cost_json(cost), 1)
    if _is_drifted(seed, faults, cdr_id):
        head = f'"type":"{day.types[i]}","subtype":"{day.subtypes[i]}"'.encode()
        rec = rec.replace(head, f'"type":"{DRIFT_TYPE}","subtype":"{DRIFT_TYPE}"'.encode(), 1)
    if _chosen(seed, "corrupt", cdr_id, faults.corrupt_rate):
        if unit_hash(seed, "corrupt-kind", cdr_id) < 0.5:
            encoded = cost_json(cost)
            rec = rec.replace(b'"cost":' + encoded, b'"cost":"' + encoded + b'"', 1)
        else:
            rec = re.sub(rb'"started_at":"[^"]*"', b'"started_at":"31/02/2026 25:61"', rec, count=1)
    if faults.drift_extra_field:
        rec = rec[:-1] + b',"sentiment_v2":{"label":"neutral","score":0.5}}'
    return rec


# ------------------------------------------------------------------ query evaluation


@dataclass
class Segment:
    day: DayCdrs
    idx: Sequence[int]  # a range (fast path) or a list of positions


class QueryCache:
    """Per-sandbox caches: merged days (with dynamic CDRs) and per-filter index lists."""

    def __init__(self) -> None:
        self.merged: dict[date, tuple[int, int, DayCdrs]] = {}
        self.lists: OrderedDict[tuple[Any, ...], list[int]] = OrderedDict()


def _dynamic_days(sandbox: Sandbox) -> dict[date, DayCdrs]:
    from connectors.sandbox.generator import DayCdrs as Day

    state = sandbox.state
    with state.lock:
        records = list(state.dynamic_cdrs.values())
        accounts = dict(state.dynamic_accounts)
    out: dict[date, DayCdrs] = {}
    teams_of = {ref["id"]: teams for ref, teams in sandbox.dataset.user_refs}
    for rec in records:
        start = ms_of(parse_time(rec["started_at"]))
        end = ms_of(parse_time(rec["ended_at"]))
        cost_e4 = int((_decimal(rec["cost"]) * 10_000).to_integral_value())
        encoded = dict(rec)
        encoded["cost"] = orjson.Fragment(cost_json(cost_e4))
        user = rec.get("user")
        teams = teams_of.get(user["id"], ()) if user else ()
        day = out.setdefault(date_of_ms(start), Day(date_of_ms(start)))
        day.append(encoded, start, end, cost_e4, teams, accounts.get(rec["id"]))
    return {d: v.sorted() for d, v in out.items()}


def _decimal(value: object) -> Any:
    from decimal import Decimal

    return Decimal(str(value))


def day_view(sandbox: Sandbox, d: date) -> DayCdrs:
    """The day's generated CDRs merged with any created at run time (cached per version)."""
    base = sandbox.dataset.day(d)
    version = sandbox.state.dynamic_version
    if version == 0:
        return base
    cache = sandbox.query_cache
    hit = cache.merged.get(d)
    if hit is not None and hit[0] == version and hit[1] == id(base):
        return hit[2]
    extra = _dynamic_days(sandbox).get(d)
    view = base.merged(extra) if extra is not None else base
    cache.merged[d] = (version, id(base), view)
    return view


def _days(sandbox: Sandbox, flt: CdrFilter) -> Iterator[date]:
    ds = sandbox.dataset
    lo = ds.start_date
    hi = ds.end_date
    with sandbox.state.lock:
        dynamic = [parse_time(r["started_at"]).date() for r in sandbox.state.dynamic_cdrs.values()]
    if dynamic:
        lo, hi = min(lo, min(dynamic)), max(hi, max(dynamic) + timedelta(days=1))
    low_ms = flt.started_gte
    if flt.ended_gte is not None:
        low_ms = max(low_ms or 0, flt.ended_gte - MAX_DURATION_MS)
    high_ms = (
        flt.started_lt
        if flt.ended_lt is None
        else min(flt.started_lt or flt.ended_lt, flt.ended_lt)
    )
    if low_ms is not None:
        lo = max(lo, date_of_ms(low_ms))
    if high_ms is not None:
        hi = min(hi, date_of_ms(high_ms - 1) + timedelta(days=1))
    d = lo
    while d < hi:
        yield d
        d += timedelta(days=1)


def _match(sandbox: Sandbox, day: DayCdrs, i: int, flt: CdrFilter, drift: bool) -> bool:
    if flt.ended_gte is not None and day.ended_ms[i] < flt.ended_gte:
        return False
    if flt.ended_lt is not None and day.ended_ms[i] >= flt.ended_lt:
        return False
    if (
        drift
        and (flt.types or flt.subtypes)
        and _is_drifted(sandbox.config.seed, sandbox.faults, day.ids[i])
    ):
        return False
    for wanted, column in (
        (flt.types, day.types),
        (flt.subtypes, day.subtypes),
        (flt.dispositions, day.dispositions),
        (flt.user_ids, day.user_ids),
        (flt.queue_ids, day.queue_ids),
        (flt.campaign_ids, day.campaign_ids),
        (flt.account_ids, day.account_ids),
    ):
        if wanted is not None and column[i] not in wanted:
            return False
    if flt.team_ids is not None and not flt.team_ids.intersection(day.team_ids[i]):
        return False
    if flt.tag is not None and flt.tag not in day.tags[i]:
        return False
    fp, tp = day.from_phones[i], day.to_phones[i]
    if flt.from_phone is not None and fp != flt.from_phone:
        return False
    if flt.to_phone is not None and tp != flt.to_phone:
        return False
    if flt.from_like is not None and (fp is None or flt.from_like not in fp):
        return False
    return not (flt.to_like is not None and (tp is None or flt.to_like not in tp))


def segments(sandbox: Sandbox, flt: CdrFilter, now: int) -> list[Segment]:
    """The matching records visible at `now`, day by day, in (started_at, id) order."""
    faults = sandbox.faults
    seed = sandbox.config.seed
    drift = faults.drift_unknown_type_rate > 0
    late = faults.late_rate > 0
    cache = sandbox.query_cache
    out: list[Segment] = []
    for d in _days(sandbox, flt):
        day = day_view(sandbox, d)
        if not len(day):
            continue
        i0 = 0 if flt.started_gte is None else bisect_left(day.started_ms, flt.started_gte)
        i1 = len(day) if flt.started_lt is None else bisect_left(day.started_ms, flt.started_lt)
        if i0 >= i1:
            continue
        idx: Sequence[int] = range(i0, i1)
        if flt.by_columns:
            version = sandbox.state.dynamic_version
            key = (flt.key(), d, id(day), version, i0, i1, drift and faults.drift_unknown_type_rate)
            hit = cache.lists.get(key)
            if hit is None:
                hit = [i for i in idx if _match(sandbox, day, i, flt, drift)]
                cache.lists[key] = hit
                if len(cache.lists) > 256:
                    cache.lists.popitem(last=False)
            idx = hit
        # Visibility: skip the per-record check when the whole day ended before now.
        # Days end at most MAX_DURATION_MS (+late delay) after midnight of the next day.
        slack = MAX_DURATION_MS + (faults.late_max_minutes * 60_000 + 60_000 if late else 0)
        if now < (d.toordinal() - date(1970, 1, 1).toordinal() + 1) * DAY_MS + slack:
            ended = day.ended_ms
            ids = day.ids
            idx = [i for i in idx if visible_at(seed, faults, ids[i], ended[i]) <= now]
        if idx:
            out.append(Segment(day, idx))
    return out


def _position(seg: Segment, start_ms: int, cdr_id: str) -> int:
    """Index into seg.idx of the first record strictly after the key (start_ms, cdr_id)."""
    day = seg.day
    return bisect_right(seg.idx, (start_ms, cdr_id), key=lambda i: (day.started_ms[i], day.ids[i]))


# ------------------------------------------------------------------ cursors


def _sign(payload: bytes, seed: int) -> str:
    return hashlib.blake2b(payload, key=str(seed).encode(), digest_size=6).hexdigest()


def make_cursor(seed: int, start_ms: int, cdr_id: str, flt_key: str) -> str:
    payload = orjson.dumps([1, start_ms, cdr_id, flt_key])
    token = orjson.dumps([payload.decode(), _sign(payload, seed)])
    return base64.urlsafe_b64encode(token).decode().rstrip("=")


def read_cursor(seed: int, cursor: str, flt_key: str) -> tuple[int, str] | None:
    """(started_ms, id) of a valid cursor for this query; None when invalid."""
    try:
        token = orjson.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
        payload, sig = token[0].encode(), token[1]
        if _sign(payload, seed) != sig:
            return None
        version, start_ms, cdr_id, key = orjson.loads(payload)
    except (ValueError, TypeError, IndexError, AttributeError, orjson.JSONDecodeError):
        return None
    if version != 1 or key != flt_key or not isinstance(start_ms, int):
        return None
    return start_ms, str(cdr_id)


# ------------------------------------------------------------------ endpoints


def _now_ms(sandbox: Sandbox) -> int:
    return ms_of(sandbox.clock.now())


def _limit(request: Request) -> int:
    raw = request.query_params.get("limit")
    if raw is None:
        return 100
    if not _INT.match(raw) or not 1 <= int(raw) <= MAX_LIMIT:
        raise fail({"limit": [f"must be an integer between 1 and {MAX_LIMIT}"]})
    return int(raw)


def _offset(raw: str | None, *, fallback: bool) -> int:
    if raw is None:
        return 0
    if not _INT.match(raw) or int(raw) < 0:
        # A bad offset alone is a field error; as the fallback of a bad cursor it is 400.
        raise ApiError(400) if fallback else fail({"offset": ["must be an integer >= 0"]})
    return int(raw)


@dataclass
class Page:
    items: list[tuple[DayCdrs, int]]
    total: int
    next_key: tuple[int, str] | None
    fallback: bool


def query_page(request: Request) -> tuple[Page, CdrFilter]:
    """Parse the request and select one page (cursor keyset or offset window)."""
    sandbox = get_sandbox(request)
    flt = parse_filter(request)
    limit = _limit(request)
    seed = sandbox.config.seed
    faults = sandbox.faults
    cursor_raw = request.query_params.get("cursor")
    if cursor_raw == "":
        raise fail({"cursor": ["must not be blank"]})
    key = read_cursor(seed, cursor_raw, flt.key()) if cursor_raw else None
    active = request.scope.get("state", {}).get("faults_active", False)
    hit = key is not None and active and faults.cursor_invalid_rate > 0
    if hit and sandbox.fault_state.draw() < faults.cursor_invalid_rate:
        key = None
    fallback = bool(cursor_raw) and key is None
    segs = segments(sandbox, flt, _now_ms(sandbox))
    total = sum(len(s.idx) for s in segs)
    items: list[tuple[DayCdrs, int]] = []
    has_more = False
    if key is not None:
        for seg in segs:
            if len(items) > limit:
                break
            last = seg.idx[-1]
            if (seg.day.started_ms[last], seg.day.ids[last]) <= key:
                continue
            pos = _position(seg, *key)
            items.extend((seg.day, i) for i in seg.idx[pos : pos + limit + 1 - len(items)])
        has_more = len(items) > limit
        del items[limit:]
    else:
        offset = _offset(request.query_params.get("offset"), fallback=fallback)
        if offset >= OFFSET_WINDOW:
            raise ApiError(400)
        end = min(offset + limit, OFFSET_WINDOW)  # pages are cut at the window's end
        skipped = 0
        for seg in segs:
            n = len(seg.idx)
            if skipped + n <= offset:
                skipped += n
                continue
            lo = max(0, offset - skipped)
            hi = min(n, end - skipped)
            items.extend((seg.day, i) for i in seg.idx[lo:hi])
            skipped += n
            if skipped >= end:
                break
        has_more = offset + len(items) < total
    next_key = None
    if items and has_more:
        day, i = items[-1]
        next_key = (day.started_ms[i], day.ids[i])
    return Page(items, total, next_key, fallback), flt


async def list_cdrs(request: Request) -> Response:
    sandbox = get_sandbox(request)
    page, flt = query_page(request)
    now = _now_ms(sandbox)
    if _data_faults_on(sandbox.faults):
        records = [render(sandbox, day, i, now) for day, i in page.items]
    else:
        records = [day.records[i] for day, i in page.items]
    cursor = None
    if page.next_key is not None:
        cursor = make_cursor(sandbox.config.seed, *page.next_key, flt.key())
    body = encode_page(records, page.total + sandbox.faults.total_mismatch, cursor)
    headers = {FALLBACK_HEADER: "offset"} if page.fallback else None
    return raw_json(body, headers=headers)


async def list_events(request: Request) -> Response:
    """CDR events (shape chosen, see docs/sandbox.md): one `cdr.created` per visible CDR and a
    `cdr.updated` once a revised CDR's cost changed; paged like the CDR list."""
    sandbox = get_sandbox(request)
    page, flt = query_page(request)
    now = _now_ms(sandbox)
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
    return json_response({"events": events, "metadata": meta})


def _event(kind: str, cdr_id: str, at_ms: int, cost: int) -> dict[str, Any]:
    from connectors.sandbox.generator import iso_ms

    return {
        "id": str(uuid.uuid5(uuid.NAMESPACE_URL, f"{kind}:{cdr_id}")),
        "type": kind,
        "cdr": {"id": cdr_id, "cost": orjson.Fragment(cost_json(cost))},
        "occurred_at": iso_ms(at_ms),
    }


def _locate(sandbox: Sandbox, cdr_id: str) -> tuple[DayCdrs, int] | None:
    with sandbox.state.lock:
        dynamic = sandbox.state.dynamic_cdrs.get(cdr_id)
    if dynamic is not None:
        d = parse_time(dynamic["started_at"]).date()
    else:
        d_opt = sandbox.dataset.day_of_id(cdr_id)
        if d_opt is None:
            return None
        d = d_opt
    day = day_view(sandbox, d)
    i = day.position(cdr_id)
    return None if i is None else (day, i)


async def get_cdr(request: Request) -> Response:
    sandbox = get_sandbox(request)
    cdr_id = str(request.path_params["cdr_id"]).lower()
    found = _locate(sandbox, cdr_id)
    now = _now_ms(sandbox)
    if found is None:
        raise ApiError(404)
    day, i = found
    if visible_at(sandbox.config.seed, sandbox.faults, cdr_id, day.ended_ms[i]) > now:
        raise ApiError(404)  # not arrived yet
    return raw_json(b'{"cdr":' + render(sandbox, day, i, now) + b"}")


def truth(sandbox: Sandbox, start: datetime, end: datetime) -> dict[str, str]:
    """id -> cost string of every CDR started in [start, end) and visible now."""
    now = _now_ms(sandbox)
    flt = CdrFilter(started_gte=ms_of(start), started_lt=ms_of(end))
    faults, seed = sandbox.faults, sandbox.config.seed
    out: dict[str, str] = {}
    for seg in segments(sandbox, flt, now):
        day = seg.day
        for i in seg.idx:
            cdr_id = day.ids[i]
            vis = visible_at(seed, faults, cdr_id, day.ended_ms[i])
            out[cdr_id] = cost_str(current_cost(seed, faults, cdr_id, day.costs[i], vis, now))
    return out
