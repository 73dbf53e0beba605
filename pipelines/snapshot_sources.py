"""What each snapshot asset reads from the API, and the lake frames it makes of it.

Every `SnapshotSource` holds its own typed fetch function, so a renamed client method breaks in
mypy, not at run time.
"""

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import dagster as dg
import polars as pl

from connectors.contact_center.client import ContactCenterClient
from connectors.contact_center.errors import ListingChangedError, NotFoundError
from models.resources import User
from pipelines.progress import progress_lines
from pipelines.resources import ContactCenterResource
from warehouse import snapshots


@dataclass
class Fetched:
    """What a snapshot read returned: records per kind, and how many records/requests."""

    data: dict[str, Any] = field(default_factory=dict)
    records: int = 0
    requests: int = 0

    def put(self, name: str, value: Any, requests: int = 1) -> None:
        self.data[name] = value
        self.records += len(value) if isinstance(value, list) else 1
        self.requests += requests


Fetch = Callable[[ContactCenterClient], Awaitable[Fetched]]
Members = Callable[[ContactCenterClient, int], Awaitable[list[User]]]


def _rows(models: Sequence[Any]) -> list[dict[str, Any]]:
    """API models back to records as the API sent them (unknown fields kept)."""
    return [m.model_dump(mode="json", by_alias=True, exclude_unset=True) for m in models]


async def _per_group(
    client: ContactCenterClient,
    ids: Sequence[int],
    call: Members,
    fetched: Fetched,
    name: str,
    family: str,
) -> None:
    """Members (or supervisors) of every queue/team; the client bounds its own concurrency.

    A group the list named that is gone by the time its members are read (a 404: a queue
    deleted during the walk) makes the family be read again (`ListingChangedError`, retried by
    the step) instead of failing it until the next night; a 404 for every group is a wrong
    path, and fails as any 404 does."""
    results = await asyncio.gather(*(call(client, gid) for gid in ids), return_exceptions=True)
    errors = [r for r in results if isinstance(r, BaseException)]
    if other := [e for e in errors if not isinstance(e, NotFoundError)]:
        raise other[0]
    if errors and len(errors) == len(ids):
        raise errors[0]
    if errors:
        first = errors[0]
        assert isinstance(first, NotFoundError)
        raise ListingChangedError(
            f"{first.method} {first.path}: 404 for {len(errors)} of the {len(ids)} {family} "
            "listed (deleted during the walk?); read them again",
            method=first.method,
            path=first.path,
        )
    found = [r for r in results if not isinstance(r, BaseException)]
    fetched.data[name] = {gid: _rows(r) for gid, r in zip(ids, found, strict=True)}
    fetched.records += sum(len(r) for r in found)
    fetched.requests += len(ids)


async def _users(client: ContactCenterClient) -> Fetched:
    fetched = Fetched()
    fetched.put("active", _rows(await client.list_all_users()))
    fetched.put("deleted", _rows(await client.list_all_deleted_users()))
    return fetched


def _groups(
    name: str,
    groups: Callable[[ContactCenterClient], Awaitable[Sequence[Any]]],
    members: Members,
    supervisors: Members,
) -> Fetch:
    """Queues or teams, with the members and supervisors of each."""

    async def fetch(client: ContactCenterClient) -> Fetched:
        fetched = Fetched()
        rows = _rows(await groups(client))
        fetched.put(name, rows)
        ids = [int(g["id"]) for g in rows]
        await _per_group(client, ids, members, fetched, "members", name)
        await _per_group(client, ids, supervisors, fetched, "supervisors", name)
        return fetched

    return fetch


def _listed(
    name: str, list_all: Callable[[ContactCenterClient], Awaitable[Sequence[Any]]]
) -> Fetch:
    async def fetch(client: ContactCenterClient) -> Fetched:
        fetched = Fetched()
        fetched.put(name, _rows(await list_all(client)))
        return fetched

    return fetch


async def _balance(client: ContactCenterClient) -> Fetched:
    fetched = Fetched()
    balance = await client.get_balance()
    fetched.put("balance", balance.model_dump(mode="json", by_alias=True))
    return fetched


C = ContactCenterClient


@dataclass(frozen=True)
class SnapshotSource:
    """One snapshot asset group: the API reads it makes and the tables it writes."""

    name: str
    tables: tuple[str, ...]
    description: str
    fetch: Fetch


SNAPSHOT_SOURCES: tuple[SnapshotSource, ...] = (
    SnapshotSource(
        "users",
        (
            "users",
            "user_teams",
            "user_supervised_teams",
            "user_queues",
            "user_supervised_queues",
            "user_skills",
        ),
        "Users, active and deleted together, and the memberships their records carry.",
        _users,
    ),
    SnapshotSource(
        "queues",
        ("queues", "queue_members", "queue_supervisors"),
        "Routing queues with their members and supervisors.",
        _groups("queues", C.list_all_queues, C.list_all_queue_users, C.list_all_queue_supervisors),
    ),
    SnapshotSource("skills", ("skills",), "Routing skills.", _listed("skills", C.list_all_skills)),
    SnapshotSource(
        "teams",
        ("teams", "team_members", "team_supervisors"),
        "Teams, members, supervisors.",
        _groups("teams", C.list_all_teams, C.list_all_team_users, C.list_all_team_supervisors),
    ),
    SnapshotSource(
        "campaigns",
        ("campaigns",),
        "Outbound dialer campaigns.",
        _listed("campaigns", C.list_all_campaigns),
    ),
    SnapshotSource(
        "numbers",
        ("numbers",),
        "Purchased phone numbers with exact pricing.",
        _listed("numbers", C.list_all_numbers),
    ),
    SnapshotSource(
        "caller_id_groups",
        ("caller_id_groups",),
        "Caller ID groups.",
        _listed("caller_id_groups", C.list_all_caller_id_groups),
    ),
    SnapshotSource(
        "balance", ("balance_snapshots",), "The account balance, exact decimal.", _balance
    ),
)


async def fetch_snapshot(
    source: SnapshotSource, contact_center: ContactCenterResource, log: dg.DagsterLogManager
) -> Fetched:
    """Read one resource family from the API, whole (its progress in the run's log: the
    members of a thousand queues are two thousand requests)."""
    async with contact_center.client(log) as client:

        def line(elapsed: float) -> str:
            sent, retried = client.stats["requests"], client.stats["retries"]
            return (
                f"{source.name}: requests sent {sent:,} ({retried:,} retried) in {elapsed:,.0f} s"
            )

        async with progress_lines(log, contact_center.progress_every_s, line):
            return await source.fetch(client)


def build_snapshot_frames(
    name: str, fetched: Fetched, taken_at: datetime
) -> dict[str, pl.DataFrame]:
    """Lake frames of one snapshot family, stamped with `taken_at`."""
    d = fetched.data
    if name == "users":
        return snapshots.users_frames(d["active"], d["deleted"], taken_at)
    if name == "queues":
        return snapshots.queues_frames(d["queues"], d["members"], d["supervisors"], taken_at)
    if name == "teams":
        return snapshots.teams_frames(d["teams"], d["members"], d["supervisors"], taken_at)
    if name == "balance":
        balance = d["balance"]  # the Balance model's JSON (`_balance`): its amount, and extras
        return {
            "balance_snapshots": snapshots.balance_frame(str(balance["amount"]), taken_at, balance)
        }
    builders = {
        "skills": snapshots.skills_frame,
        "campaigns": snapshots.campaigns_frame,
        "numbers": snapshots.numbers_frame,
        "caller_id_groups": snapshots.caller_id_groups_frame,
    }
    return {name: builders[name](d[name], taken_at)}
