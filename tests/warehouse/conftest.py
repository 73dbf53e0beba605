"""A small known lake built from the sandbox generator (no HTTP), shared by the warehouse tests."""

from __future__ import annotations

import contextlib
import copy
import datetime as dt
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import polars as pl
import pytest

from connectors.sandbox.generator import Dataset, encode_page
from warehouse import snapshots
from warehouse.decode import decode_page
from warehouse.duck import build_warehouse, write_aggregates
from warehouse.lake import Lake, partition_key
from warehouse.normalize import NormalizedTables, normalize

START = dt.date(2026, 11, 1)
DAYS = 3
PER_DAY = 800
PAGE = 250


@dataclass
class SmallWarehouse:
    data_dir: Path
    lake: Lake
    dataset: Dataset
    tables: dict[str, pl.DataFrame]  # normalized CDR tables, all days concatenated
    moved_user: str  # user whose team changed between the snapshots
    old_team: int
    new_team: int
    balances: list[str]


def day_pages(ds: Dataset, day: dt.date) -> list[bytes]:
    recs = ds.day(day).records
    return [encode_page(recs[i : i + PAGE], len(recs), None) for i in range(0, len(recs), PAGE)]


def write_day(lake: Lake, ds: Dataset, day: dt.date) -> NormalizedTables:
    raw = pl.concat([decode_page(p) for p in day_pages(ds, day)])
    key = partition_key("date", day)
    lake.write("raw_cdrs", key, raw)
    norm = normalize(raw)
    for name, frame in norm.tables().items():
        lake.write(name, key, frame)
    return norm


def write_snapshots(
    lake: Lake, ds: Dataset, users: list[dict], at: dt.datetime, balance: str
) -> None:
    key = partition_key("snapshot_date", at.date())
    frames = snapshots.users_frames(users, ds.deleted_users, at)
    members = {q: [{"id": u, "name": None} for u in us] for q, us in ds.queue_members.items()}
    frames |= snapshots.queues_frames(ds.queues, members, {}, at)
    tmembers = {t: [{"id": u, "name": None} for u in us] for t, us in ds.team_members.items()}
    frames |= snapshots.teams_frames(ds.teams, tmembers, {}, at)
    frames["skills"] = snapshots.skills_frame(ds.skills, at)
    frames["campaigns"] = snapshots.campaigns_frame(ds.campaigns, at)
    frames["numbers"] = snapshots.numbers_frame(ds.numbers, at)
    frames["caller_id_groups"] = snapshots.caller_id_groups_frame(ds.caller_id_groups, at)
    frames["balance_snapshots"] = snapshots.balance_frame(balance, at)
    for name, frame in frames.items():
        lake.write(name, key, frame)


def build_small(data_dir: Path) -> SmallWarehouse:
    ds = Dataset(seed=11, start_date=START, days=DAYS, cdrs_per_day=PER_DAY)
    lake = Lake((data_dir / "lake").as_uri())
    parts = [write_day(lake, ds, START + dt.timedelta(days=i)) for i in range(DAYS)]
    tables = {name: pl.concat([p.tables()[name] for p in parts]) for name in parts[0].tables()}
    # Snapshot on day 1, then move one user to another team from day 3 on.
    users = copy.deepcopy(ds.users)
    mover = next(u for u in users if u["teams"])
    old_team = mover["teams"][0]["id"]
    new_team = next(t["id"] for t in ds.teams if t["id"] not in {x["id"] for x in mover["teams"]})
    balances = ["5000.1234", "4990.0034", "4987.5"]
    write_snapshots(lake, ds, ds.users, dt.datetime(2026, 11, 1, 1, tzinfo=dt.UTC), balances[0])
    write_snapshots(lake, ds, ds.users, dt.datetime(2026, 11, 2, 1, tzinfo=dt.UTC), balances[1])
    new_name = next(t["name"] for t in ds.teams if t["id"] == new_team)
    mover["teams"] = [{"id": new_team, "name": new_name}]
    write_snapshots(lake, ds, users, dt.datetime(2026, 11, 3, 1, tzinfo=dt.UTC), balances[2])
    for i in range(DAYS):  # as the `reporting_aggregates` asset does after each CDR day
        write_aggregates(lake, partition_key("date", START + dt.timedelta(days=i)))
    build_warehouse(data_dir)
    return SmallWarehouse(data_dir, lake, ds, tables, mover["id"], old_team, new_team, balances)


@pytest.fixture(scope="session")
def small(tmp_path_factory: pytest.TempPathFactory) -> SmallWarehouse:
    return build_small(tmp_path_factory.mktemp("wh"))


@dataclass
class Replacing:
    """How often `replacing` has replaced the partitions so far."""

    times: int = 0


@contextlib.contextmanager
def replacing(lake: Lake, key: str, tables: Sequence[str], pause_s: float) -> Iterator[Replacing]:
    """Another run replacing partition `key` of `tables` over and over while the block runs,
    each time with the same rows in the other order: other bytes and row-group offsets, the
    same answers (float sums aside). Pauses `pause_s` between two replaces."""
    versions: list[dict[str, pl.DataFrame]] = [{}, {}]
    for table in tables:
        frame = lake.read(table, key)
        assert frame is not None, table
        versions[0][table], versions[1][table] = frame, frame.reverse()
    stop = threading.Event()
    done = Replacing()

    def replace() -> None:
        while not stop.is_set():
            for table, frame in versions[done.times % 2].items():
                lake.write(table, key, frame)
            done.times += 1
            time.sleep(pause_s)

    writer = threading.Thread(target=replace)
    writer.start()
    try:
        yield done
    finally:
        stop.set()
        writer.join()
