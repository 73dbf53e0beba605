"""Mutable sandbox state: the clock, counters, balance, campaigns and dynamic records."""

from __future__ import annotations

import copy
import threading
from collections import Counter
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import TYPE_CHECKING, Any

import orjson

from connectors.sandbox import campaigns

if TYPE_CHECKING:
    from connectors.sandbox.generator import Dataset


class Clock:
    """UTC clock. Real time by default; once `set`, it is frozen there until `advance`d."""

    def __init__(self, fixed: datetime | None = None) -> None:
        self._lock = threading.Lock()
        self._fixed = fixed

    def now(self) -> datetime:
        with self._lock:
            fixed = self._fixed
        return fixed if fixed is not None else datetime.now(UTC)

    def set(self, dt: datetime | None) -> None:
        """Freeze the clock at `dt` (aware; converted to UTC). None returns to real time."""
        if dt is not None and dt.tzinfo is None:
            raise ValueError("clock time must be timezone-aware")
        with self._lock:
            self._fixed = dt.astimezone(UTC) if dt is not None else None

    def advance(self, delta: timedelta) -> None:
        """Move a frozen clock forward (freezing it at real now first if it was live)."""
        with self._lock:
            base = self._fixed if self._fixed is not None else datetime.now(UTC)
            self._fixed = base + delta

    @property
    def frozen(self) -> bool:
        with self._lock:
            return self._fixed is not None


class SandboxState:
    """Everything the API can change. Mutations take `lock` (uvicorn thread + test thread)."""

    def __init__(self, dataset: Dataset, clock: Clock | None = None) -> None:
        self.lock = threading.RLock()
        self.clock = clock or Clock()
        self.counters: Counter[str] = Counter()
        self.balance = Decimal(dataset.balance)
        # Generated campaigns in the same response shape as created and PATCHed ones (every
        # config field, the PATCH-only booleans included), so each reads back alike.
        voice_messages = {vm["id"]: vm for vm in dataset.voice_messages}
        self.campaigns: dict[int, dict[str, Any]] = {
            c["id"]: campaigns.render(c, voice_messages) for c in dataset.campaigns
        }
        # Free-form stores for the write endpoints (keyed by id).
        self.active_calls: dict[str, dict[str, Any]] = {}
        self.ended_calls: dict[str, dict[str, Any]] = {}
        self.sms: dict[str, dict[str, Any]] = {}
        self.leads: dict[int, list[dict[str, Any]]] = {}
        self.callbacks: dict[str, dict[str, Any]] = {}
        self.conversations_created: dict[str, dict[str, Any]] = {}
        self.conversations: dict[str, list[dict[str, Any]]] = copy.deepcopy(dataset.conversations)
        self.webhook_failures: dict[str, dict[str, Any]] = {
            w["id"]: copy.deepcopy(w) for w in dataset.webhook_failures
        }
        # CDRs created at run time (ended calls, sent SMS): id -> record dict.
        self.dynamic_cdrs: dict[str, dict[str, Any]] = {}
        self.dynamic_accounts: dict[str, str] = {}  # CDR id -> source.account_id (filterable)
        self.dynamic_version = 0

    def next_campaign_id(self) -> int:
        with self.lock:
            return max(self.campaigns, default=0) + 1

    def add_cdr(self, record: dict[str, Any], account_id: str | None = None) -> None:
        """Add a CDR made at run time; it then shows in the CDR list, detail and truth.

        `record` is a JSON-ready CDR in the spec's shape; `cost` may be a number, a decimal
        string or a Decimal (served as a JSON number, at most 4 decimals). `account_id` is the
        external account (the `source.account_id` of the request) for the account_id filter.
        """
        record = dict(record)
        record["cost"] = str(record["cost"])
        orjson.dumps(record)  # fail early on a record that cannot be served
        with self.lock:
            self.dynamic_cdrs[record["id"]] = record
            if account_id is not None:
                self.dynamic_accounts[record["id"]] = account_id
            self.dynamic_version += 1

    def charge(self, amount: Decimal) -> None:
        """Take `amount` off the balance (exact decimal arithmetic)."""
        with self.lock:
            self.balance -= amount

    def count(self, key: str, n: int = 1) -> None:
        with self.lock:
            self.counters[key] += n
