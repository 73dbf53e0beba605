"""The deterministic dataset: dimensions built at start, CDRs generated per day on first use.

Everything here is pure: the same `(seed, start_date, days, cdrs_per_day)` gives byte-identical
records. A day's CDRs are kept as pre-encoded compact JSON (one `bytes` per record, sorted by
`(started_at, id)`) plus columnar arrays for filtering, so serving a page is a slice and a join.
"""

from __future__ import annotations

import gc
import random
import threading
from collections import OrderedDict
from datetime import date, timedelta

from connectors.sandbox.generator import calls, conversations, hlr, sms
from connectors.sandbox.generator.daystore import DayCdrs, Generated
from connectors.sandbox.generator.dimensions import Dimensions
from connectors.sandbox.generator.times import HOUR_MS, day_start_ms
from models.timestamps import DAY_MS

# Relative traffic per hour of the day (UTC): quiet nights, a late-morning and afternoon peak.
HOURLY_WEIGHTS = (1, 1, 1, 1, 1, 2, 4, 8, 14, 18, 20, 19, 16, 17, 19, 18, 15, 11, 8, 6, 4, 3, 2, 1)
_MIX = 0x9E3779B1
_UNMIX = pow(_MIX, -1, 2**32)


class Dataset(Dimensions):
    """Dimensions (JSON-ready lists of dicts in the spec's shapes) and per-day CDRs."""

    def __init__(
        self,
        seed: int,
        start_date: date,
        days: int,
        cdrs_per_day: int,
        *,
        max_cached_records: int = 1_500_000,
    ) -> None:
        # No defaults: SandboxConfig owns them, and a dataset never reads the clock.
        super().__init__(seed, start_date, days)
        self.cdrs_per_day = cdrs_per_day
        self.max_cached_records = max_cached_records
        self._cache: OrderedDict[date, DayCdrs] = OrderedDict()
        self._lock = threading.Lock()
        self._day_locks: dict[date, threading.Lock] = {}

    @property
    def end_date(self) -> date:
        return self.start_date + timedelta(days=self.days)

    def in_range(self, d: date) -> bool:
        return self.start_date <= d < self.end_date

    # ------------------------------------------------------------ CDRs

    def day(self, d: date) -> DayCdrs:
        """The CDRs that started on `d` (empty outside the date range), cached LRU."""
        with self._lock:
            hit = self._cache.get(d)
            if hit is not None:
                self._cache.move_to_end(d)
                return hit
            day_lock = self._day_locks.setdefault(d, threading.Lock())
        with day_lock:  # one generation per day even under concurrent requests
            with self._lock:
                hit = self._cache.get(d)
            if hit is not None:
                return hit
            built = self._generate(d) if self.in_range(d) else DayCdrs(d)
            with self._lock:
                self._cache[d] = built
                self._evict()
            return built

    def _evict(self) -> None:
        total = sum(len(v) for v in self._cache.values())
        while len(self._cache) > 2 and total > self.max_cached_records:
            _, old = self._cache.popitem(last=False)
            total -= len(old)

    def _generate(self, d: date) -> DayCdrs:
        rng = random.Random(f"{self.seed}:cdrs:{d.isoformat()}")
        n = self.cdrs_per_day
        base = day_start_ms(d)
        hours = rng.choices(range(24), weights=HOURLY_WEIGHTS, k=n)
        starts = [base + h * HOUR_MS + int(rng.random() * HOUR_MS) for h in hours]
        # Boundary records for the day-edge tests: first and last millisecond of the day.
        if n >= 2:
            starts[0], starts[1] = base, base + DAY_MS - 1
        starts.sort()  # then only equal-millisecond ties can need reordering (by id)
        out = DayCdrs(d)
        # Hundreds of thousands of new objects: cyclic GC passes would dominate the run time.
        was_enabled = gc.isenabled()
        gc.disable()
        try:
            tag = self._day_tag(d)
            for s in starts:
                rec, start, end, cost, teams, account = self._cdr(rng, s)
                rec["id"] = tag + rec["id"][8:]  # the id names its day: O(1) detail lookups
                out.append(rec, start, end, cost, teams, account)
            return out.sorted()
        finally:
            if was_enabled:
                gc.enable()

    def _day_tag(self, d: date) -> str:
        # Invertible mix of (day, seed) -> 8 hex digits; `day_of_id` undoes it.
        return f"{((d.toordinal() ^ self.seed) * _MIX) & 0xFFFFFFFF:08x}"

    def day_of_id(self, cdr_id: str) -> date | None:
        """The day a generated CDR id belongs to (None when it cannot be one of ours)."""
        try:
            mixed = int(cdr_id[:8], 16)
        except ValueError:
            return None
        ordinal = ((mixed * _UNMIX) & 0xFFFFFFFF) ^ self.seed
        if not self.start_date.toordinal() <= ordinal < self.end_date.toordinal():
            return None
        return date.fromordinal(ordinal)

    def _cdr(self, rng: random.Random, start: int) -> Generated:
        r = rng.random()
        kind = "call" if r < 0.55 else "conversation" if r < 0.75 else "sms" if r < 0.9 else "hlr"
        if kind == "call":
            return calls.generate(self, rng, start)
        if kind == "conversation":
            return conversations.generate(self, rng, start)
        if kind == "sms":
            return sms.generate(self, rng, start)
        return hlr.generate(self, rng, start)
