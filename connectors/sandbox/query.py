"""The CDR query engine, free of HTTP: filters, visibility at the clock's now, page selection.

Fast path: with only `started_at` bounds and no data faults, a day's matches are one contiguous
index range (binary search on `started_ms`) and a page is a slice of pre-encoded bytes.
Any other filter builds a per-day index list once (cached in `QueryCache`) and pages through it.
"""

from __future__ import annotations

import hashlib
from bisect import bisect_left, bisect_right
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, fields
from datetime import date, datetime, timedelta
from decimal import Decimal
from typing import TYPE_CHECKING, Any

import orjson

from connectors.sandbox.datafaults import current_cost, is_drifted, visible_at
from connectors.sandbox.generator import (
    DAY_MS,
    MAX_DURATION_MS,
    DayCdrs,
    cost_json,
    cost_str,
    date_of_ms,
    day_start_ms,
    ms_of,
)
from models.timestamps import parse_ts

if TYPE_CHECKING:
    from connectors.sandbox.emulator import Sandbox

OFFSET_WINDOW = 10_000
_EPOCH = date(1970, 1, 1)


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


@dataclass
class Segment:
    day: DayCdrs
    idx: Sequence[int]  # a range (fast path) or a list of positions


class QueryCache:
    """Per-sandbox caches: merged days (with dynamic CDRs) and per-filter index lists."""

    def __init__(self) -> None:
        self.merged: dict[date, tuple[int, int, DayCdrs]] = {}
        self.lists: OrderedDict[tuple[Any, ...], list[int]] = OrderedDict()
        # The run-time CDRs by day, with the state's dynamic_version they were built at.
        self.dynamic: tuple[int, dict[date, DayCdrs]] = (0, {})


def _dynamic_days(sandbox: Sandbox) -> dict[date, DayCdrs]:
    state = sandbox.state
    with state.lock:
        records = list(state.dynamic_cdrs.values())
        accounts = dict(state.dynamic_accounts)
    out: dict[date, DayCdrs] = {}
    teams_of = {ref["id"]: teams for ref, teams in sandbox.dataset.user_refs}
    for rec in records:
        start = ms_of(parse_ts(rec["started_at"]))
        end = ms_of(parse_ts(rec["ended_at"]))
        cost_e4 = int((_decimal(rec["cost"]) * 10_000).to_integral_value())
        encoded = dict(rec)
        encoded["cost"] = orjson.Fragment(cost_json(cost_e4))
        user = rec.get("user")
        teams = teams_of.get(user["id"], ()) if user else ()
        day = out.setdefault(date_of_ms(start), DayCdrs(date_of_ms(start)))
        day.append(encoded, start, end, cost_e4, teams, accounts.get(rec["id"]))
    return {d: v.sorted() for d, v in out.items()}


def _dynamic(sandbox: Sandbox) -> dict[date, DayCdrs]:
    """The run-time CDRs by day, parsed once per change of the state (not per request or day).
    Read before the build, a version only ever labels data at least as new as itself."""
    cache = sandbox.query_cache
    version = sandbox.state.dynamic_version
    if cache.dynamic[0] != version:
        cache.dynamic = (version, _dynamic_days(sandbox))
    return cache.dynamic[1]


def _decimal(value: object) -> Decimal:
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
    extra = _dynamic(sandbox).get(d)
    view = base.merged(extra) if extra is not None else base
    cache.merged[d] = (version, id(base), view)
    return view


def _days(sandbox: Sandbox, flt: CdrFilter) -> Iterator[date]:
    """The days that can hold a match, in order. Bounds are epoch-ms integers of any size
    (`started_at[lt]=0001-01-01`, a bound past 9999-12-31 in UTC): they only narrow the days
    that hold data, counted as integers, so no date is built outside the data's own range."""
    ds = sandbox.dataset
    lo = _day_number(ds.start_date)
    hi = _day_number(ds.end_date)
    dynamic = _dynamic(sandbox)
    if dynamic:
        lo, hi = min(lo, _day_number(min(dynamic))), max(hi, _day_number(max(dynamic)) + 1)
    low_ms = flt.started_gte
    if flt.ended_gte is not None:  # nothing lasts longer than MAX_DURATION_MS
        earliest = flt.ended_gte - MAX_DURATION_MS
        low_ms = earliest if low_ms is None else max(low_ms, earliest)
    high_ms = flt.started_lt
    if flt.ended_lt is not None:  # a record starts before it ends
        high_ms = flt.ended_lt if high_ms is None else min(high_ms, flt.ended_lt)
    if low_ms is not None:
        lo = max(lo, low_ms // DAY_MS)
    if high_ms is not None:
        hi = min(hi, (high_ms - 1) // DAY_MS + 1)
    for n in range(lo, hi):
        yield _EPOCH + timedelta(days=n)


def _day_number(d: date) -> int:
    return (d - _EPOCH).days


def _match(sandbox: Sandbox, day: DayCdrs, i: int, flt: CdrFilter, drift: bool) -> bool:
    if flt.ended_gte is not None and day.ended_ms[i] < flt.ended_gte:
        return False
    if flt.ended_lt is not None and day.ended_ms[i] >= flt.ended_lt:
        return False
    if (
        drift
        and (flt.types or flt.subtypes)
        and is_drifted(sandbox.config.seed, sandbox.faults, day.ids[i])
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
    # Per request, not per day: whether the columns filter, the filter's hash, the late slack.
    by_columns = flt.by_columns
    flt_key = flt.key() if by_columns else ""
    # Days end at most MAX_DURATION_MS (+late delay) after midnight of the next day.
    slack = MAX_DURATION_MS + (faults.late_max_minutes * 60_000 + 60_000 if late else 0)
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
        if by_columns:
            version = sandbox.state.dynamic_version
            key = (flt_key, d, id(day), version, i0, i1, drift and faults.drift_unknown_type_rate)
            hit = cache.lists.get(key)
            if hit is None:
                hit = [i for i in idx if _match(sandbox, day, i, flt, drift)]
                cache.lists[key] = hit
                if len(cache.lists) > 256:
                    cache.lists.popitem(last=False)
            idx = hit
        # Visibility: skip the per-record check when the whole day ended before now.
        if now < day_start_ms(d) + DAY_MS + slack:
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


@dataclass
class Page:
    items: list[tuple[DayCdrs, int]]
    total: int
    next_key: tuple[int, str] | None


def select_page(
    sandbox: Sandbox, flt: CdrFilter, limit: int, key: tuple[int, str] | None, offset: int
) -> Page:
    """One page: after the keyset `key` when given, else at `offset` (< OFFSET_WINDOW)."""
    segs = segments(sandbox, flt, now_ms(sandbox))
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
    return Page(items, total, next_key)


def now_ms(sandbox: Sandbox) -> int:
    return ms_of(sandbox.clock.now())


def locate(sandbox: Sandbox, cdr_id: str) -> tuple[DayCdrs, int] | None:
    """The day and position of one CDR (generated or created at run time), if it exists."""
    with sandbox.state.lock:
        dynamic = sandbox.state.dynamic_cdrs.get(cdr_id)
    if dynamic is not None:
        d = parse_ts(dynamic["started_at"]).date()
    else:
        d_opt = sandbox.dataset.day_of_id(cdr_id)
        if d_opt is None:
            return None
        d = d_opt
    day = day_view(sandbox, d)
    i = day.position(cdr_id)
    return None if i is None else (day, i)


def truth(sandbox: Sandbox, start: datetime, end: datetime) -> dict[str, str]:
    """id -> cost string of every CDR started in [start, end) and visible now."""
    now = now_ms(sandbox)
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
