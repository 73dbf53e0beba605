"""The per-day CDR store: encoded records plus columnar arrays for filtering."""

from __future__ import annotations

from array import array
from dataclasses import dataclass, field
from datetime import date
from typing import Any

import orjson

Json = dict[str, Any]
# (record, started_ms, ended_ms, cost in ten-thousandths, team ids, account id)
Generated = tuple[Json, int, int, int, tuple[int, ...], str | None]


@dataclass
class DayCdrs:
    """One day of CDRs sorted by (started_at, id): encoded records plus filter columns."""

    day: date
    records: list[bytes] = field(default_factory=list)
    ids: list[str] = field(default_factory=list)
    started_ms: array[int] = field(default_factory=lambda: array("q"))
    ended_ms: array[int] = field(default_factory=lambda: array("q"))
    costs: array[int] = field(default_factory=lambda: array("q"))  # ten-thousandths
    types: list[str] = field(default_factory=list)
    subtypes: list[str] = field(default_factory=list)
    dispositions: list[str] = field(default_factory=list)
    user_ids: list[str | None] = field(default_factory=list)
    team_ids: list[tuple[int, ...]] = field(default_factory=list)
    queue_ids: list[int | None] = field(default_factory=list)
    campaign_ids: list[int | None] = field(default_factory=list)
    from_phones: list[str | None] = field(default_factory=list)
    to_phones: list[str | None] = field(default_factory=list)
    tags: list[tuple[str, ...]] = field(default_factory=list)
    account_ids: list[str | None] = field(default_factory=list)
    _index: dict[str, int] | None = None

    def __len__(self) -> int:
        return len(self.records)

    def position(self, cdr_id: str) -> int | None:
        if self._index is None:
            self._index = {cid: i for i, cid in enumerate(self.ids)}
        return self._index.get(cdr_id)

    def append(
        self,
        rec: Json,
        start: int,
        end: int,
        cost: int,
        teams: tuple[int, ...],
        account_id: str | None,
    ) -> None:
        """Encode and index one record; `rec["cost"]` must already be the encoded cost."""
        data = rec["data"]
        self.records.append(orjson.dumps(rec))
        self.ids.append(rec["id"])
        self.started_ms.append(start)
        self.ended_ms.append(end)
        self.costs.append(cost)
        self.types.append(rec["type"])
        self.subtypes.append(rec["subtype"])
        self.dispositions.append(rec["disposition"])
        user = rec["user"]
        self.user_ids.append(user["id"] if user else None)
        self.team_ids.append(teams)
        queue = data.get("queue") if isinstance(data, dict) else None
        self.queue_ids.append(queue["id"] if queue else None)
        campaign = data.get("campaign") if isinstance(data, dict) else None
        self.campaign_ids.append(campaign["id"] if campaign else None)
        self.from_phones.append(rec["from"].get("phone_number"))
        self.to_phones.append(rec["to"].get("phone_number"))
        self.tags.append(tuple(rec["tags"]))
        self.account_ids.append(account_id)

    def sorted(self) -> DayCdrs:
        """Self if already in (started_at, id) order, else a sorted copy."""
        st, ids = self.started_ms, self.ids
        if all(
            st[i] < st[i + 1] or (st[i] == st[i + 1] and ids[i] < ids[i + 1])
            for i in range(len(ids) - 1)
        ):
            return self
        order = sorted(range(len(self.ids)), key=lambda i: (self.started_ms[i], self.ids[i]))
        out = DayCdrs(self.day)
        for name in _COLUMNS:
            column = getattr(self, name)
            picked = [column[i] for i in order]
            setattr(out, name, array("q", picked) if isinstance(column, array) else picked)
        return out

    def merged(self, other: DayCdrs) -> DayCdrs:
        """Self plus `other` (dynamic CDRs), re-sorted."""
        out = DayCdrs(self.day)
        for name in _COLUMNS:
            setattr(out, name, getattr(self, name) + getattr(other, name))
        return out.sorted()


_COLUMNS = (
    "records",
    "ids",
    "started_ms",
    "ended_ms",
    "costs",
    "types",
    "subtypes",
    "dispositions",
    "user_ids",
    "team_ids",
    "queue_ids",
    "campaign_ids",
    "from_phones",
    "to_phones",
    "tags",
    "account_ids",
)
