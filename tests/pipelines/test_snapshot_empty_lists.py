"""A directory list the API answers 200 with nothing in it (a server whose directory is not
loaded yet), where the last snapshot has rows, does not replace that snapshot: the step fails
naming the table and is retried. Before, only `users` was guarded: an empty queues, skills,
teams, campaigns, numbers or caller ID groups list replaced today's snapshot and emptied its
view (every CDR's queue unknown) until the next night. Neither does a users list smaller than
the last by more than CDRHOUSE_MAX_DAY_SHRINK (its deleted users answered empty: every CDR of a
past agent lost its name). A run tagged `cdrhouse/max_day_shrink=1` lands either."""

from __future__ import annotations

import contextlib
import re
from pathlib import Path

import dagster as dg
import httpx
import orjson
import polars as pl
import pytest

from connectors.contact_center.endpoints import ENDPOINTS
from connectors.sandbox.config import DEFAULT_API_KEY
from connectors.sandbox.rewriting import (
    App,
    Receive,
    Scope,
    Send,
    answer_of,
    send_answer,
)
from pipelines.checks import SHRINK_TAG
from pipelines.cli_runs import IngestReport
from pipelines.names import SNAPSHOT_JOB
from pipelines.snapshot_sources import SNAPSHOT_SOURCES
from tests.support.clock import SessionClock
from tests.support.damage import damage_footer
from tests.support.served import suite_defs
from tests.support.snapshot_runs import run_snapshots, serve_wrapped, snapshots_api

# Each family's own list (the table it is refused for) and its endpoints (`users` holds the
# active and the deleted users).
LISTS = {
    "users": ("list_users", "list_deleted_users"),
    "queues": ("list_queues",),
    "skills": ("list_skills",),
    "teams": ("list_teams",),
    "campaigns": ("list_campaigns",),
    "numbers": ("list_numbers",),
    "caller_id_groups": ("list_caller_id_groups",),
}


class EmptyList:
    """The sandbox's app; the lists of `paths` answer 200 with their first `keep` items."""

    def __init__(self, app: App) -> None:
        self.app = app
        self.paths: set[str] = set()
        self.keep = 0

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] not in self.paths:
            await self.app(scope, receive, send)
            return
        start, body = await answer_of(self.app, scope, receive)
        if start.get("status") == 200:
            answer = orjson.loads(body)
            key = next(k for k, v in answer.items() if isinstance(v, list))
            answer[key] = answer[key][: self.keep]
            if isinstance(answer.get("metadata"), dict) and "total" in answer["metadata"]:
                answer["metadata"]["total"] = min(answer["metadata"]["total"], self.keep)
            body = orjson.dumps(answer)
        await send_answer(send, start, body)


def served(clock: SessionClock) -> contextlib.AbstractContextManager[tuple[EmptyList, str]]:
    return serve_wrapped(clock, EmptyList)


def _family(
    base_url: str,
    clock: SessionClock,
    data_dir: Path,
    table: str,
    tags: dict[str, str] | None = None,
) -> tuple[bool, str]:
    """The snapshot of `table`'s family alone (the job's other families cost ~8x as much):
    whether it succeeded, and its step failures' messages."""
    defs = suite_defs(snapshots_api(base_url), data_dir, clock.days_ago(3))
    (source,) = [s for s in SNAPSHOT_SOURCES if s.tables[0] == table]
    with dg.DagsterInstance.ephemeral() as instance:
        result = defs.resolve_job_def(SNAPSHOT_JOB).execute_in_process(
            instance=instance,
            tags=tags,
            raise_on_error=False,
            asset_selection=[dg.AssetKey(t) for t in source.tables],
        )
    texts = []
    for event in result.get_step_failure_events():
        data = event.step_failure_data
        user = data.user_failure_data
        texts.append((user.description if user else None) or str(data.error))
    return result.success, "\n".join(texts)


def _files(lake: Path, table: str) -> list[bytes]:
    return [p.read_bytes() for p in sorted(lake.glob(f"{table}/*/*.parquet"))]


def _first(base_url: str, clock: SessionClock, data_dir: Path, table: str) -> tuple[Path, int]:
    """The family's first snapshot, landed whole: its file of `table` and its rows."""
    assert _family(base_url, clock, data_dir, table)[0]
    (landed,) = (data_dir / "lake").glob(f"{table}/*/*.parquet")
    rows = pl.read_parquet(landed).height
    assert rows > 0
    return landed, rows


@pytest.mark.parametrize("table", list(LISTS))
def test_a_list_answered_empty_does_not_replace_the_last_snapshot_until_a_run_accepts_it(
    clock: SessionClock, tmp_path: Path, table: str
) -> None:
    lake = tmp_path / "lake"
    with served(clock) as (stub, base_url):
        landed, rows = _first(base_url, clock, tmp_path, table)
        before = _files(lake, table)
        stub.paths = {ENDPOINTS[name].path for name in LISTS[table]}

        success, text = _family(base_url, clock, tmp_path, table)
        assert not success
        day = landed.parent.name.removeprefix("snapshot_date=")
        listed = "no user, active or deleted," if table == "users" else f"no {table}"
        assert (
            f"the API listed {listed} where the snapshot of {day} has {rows}; that snapshot "
            "is not replaced"
        ) in text, text
        assert f"run it again with the run tag {SHRINK_TAG}=1" in text
        assert _files(lake, table) == before

        # A tag that is not a fraction fails the step before the API is asked.
        success, text = _family(base_url, clock, tmp_path, table, tags={SHRINK_TAG: "all"})
        assert not success
        assert f"run tag {SHRINK_TAG}='all': expected a fraction from 0 to 1" in text, text
        assert _files(lake, table) == before

        # The account really has none now: a run tagged 1 lands the empty list.
        assert _family(base_url, clock, tmp_path, table, tags={SHRINK_TAG: "1"})[0]
    (now,) = lake.glob(f"{table}/*/*.parquet")
    assert pl.read_parquet(now).height == 0


def test_a_new_account_whose_list_is_empty_lands_it(clock: SessionClock, tmp_path: Path) -> None:
    # Nothing to compare with: an account without campaigns lands an empty snapshot.
    with served(clock) as (stub, base_url):
        stub.paths = {ENDPOINTS["list_campaigns"].path}
        report, out = run_snapshots(base_url, clock, tmp_path)
    assert isinstance(report, IngestReport)
    (run,) = report.runs
    assert run.success, out  # landed; its check says the list is empty (not blocking)
    assert "campaigns=0" in out
    assert run.checks_failed == ["campaigns:campaigns_snapshot_valid"]
    (landed,) = (tmp_path / "lake").glob("campaigns/*/*.parquet")
    assert pl.read_parquet(landed).height == 0


def test_a_users_list_without_its_deleted_users_does_not_replace_the_last_snapshot(
    clock: SessionClock, tmp_path: Path
) -> None:
    lake = tmp_path / "lake"
    with served(clock) as (stub, base_url):
        landed, _ = _first(base_url, clock, tmp_path, "users")
        users = pl.read_parquet(landed)
        deleted = users.filter(pl.col("deleted_at").is_not_null()).height
        assert users.height > deleted > users.height // 10  # past the 10% limit
        before = _files(lake, "users")
        stub.paths = {ENDPOINTS["list_deleted_users"].path}

        success, text = _family(base_url, clock, tmp_path, "users")
        assert not success
        now = users.height - deleted
        day = landed.parent.name.removeprefix("snapshot_date=")
        assert (
            f"the API listed {now} users, active and deleted, ({deleted / users.height:.1%} "
            f"fewer; CDRHOUSE_MAX_DAY_SHRINK allows 10%) where the snapshot of {day} has "
            f"{users.height}; that snapshot is not replaced"
        ) in text, text
        assert _files(lake, "users") == before

        assert _family(base_url, clock, tmp_path, "users", tags={SHRINK_TAG: "1"})[0]
    (now_file,) = lake.glob("users/*/*.parquet")
    assert pl.read_parquet(now_file).height == now


@pytest.mark.parametrize("table", ["users", "queues"])
def test_a_damaged_last_snapshot_is_replaced_not_compared(
    clock: SessionClock, tmp_path: Path, table: str
) -> None:
    # The users comparison reads the last snapshot's row count: a damaged file there must not
    # stop the snapshot that replaces it (nor an empty queues list's check).
    with served(clock) as (stub, base_url):
        landed, rows = _first(base_url, clock, tmp_path, table)
        damage_footer(landed)
        if table == "queues":
            stub.paths = {ENDPOINTS["list_queues"].path}
        success, text = _family(base_url, clock, tmp_path, table)
    assert success, text
    assert pl.read_parquet(landed).height == (rows if table == "users" else 0)


def test_another_list_smaller_than_the_last_snapshot_lands(
    clock: SessionClock, tmp_path: Path
) -> None:
    # Campaigns end and numbers are released: only an empty list is held, not a smaller one.
    lake = tmp_path / "lake"
    with served(clock) as (stub, base_url):
        assert _family(base_url, clock, tmp_path, "campaigns")[0]
        assert pl.read_parquet(next(lake.glob("campaigns/*/*.parquet"))).height > 1
        stub.paths, stub.keep = {ENDPOINTS["list_campaigns"].path}, 1
        success, text = _family(base_url, clock, tmp_path, "campaigns")
    assert success, text
    (landed,) = lake.glob("campaigns/*/*.parquet")
    assert pl.read_parquet(landed).height == 1


QUEUE_USERS = re.compile(r"/api/v4/routing/queues/(\d+)/users")


class GoneQueues:
    """The sandbox's app; the members of the queues in `gone` are asked of a queue id that
    does not exist (the sandbox's own 404), the first `times` times (None: always)."""

    def __init__(self, app: App) -> None:
        self.app = app
        self.gone: set[str] = set()
        self.times: int | None = None
        self.answered_404 = 0

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        match = QUEUE_USERS.fullmatch(scope.get("path", ""))
        if match and match.group(1) in self.gone and (self.times is None or self.times > 0):
            if self.times is not None:
                self.times -= 1
            self.answered_404 += 1
            scope = {**scope, "path": "/api/v4/routing/queues/987654321/users"}
        await self.app(scope, receive, send)


@pytest.mark.parametrize("gone", ["one", "every"])
def test_a_queue_gone_during_the_walk_has_its_family_read_again(
    clock: SessionClock, tmp_path: Path, gone: str
) -> None:
    # A queue deleted between the list and the read of its members (a 404) failed the queues
    # snapshot, not retried, until the next night. Now the step reads the family again; a 404
    # for every queue is a wrong path, and fails at once as before.
    with serve_wrapped(clock, GoneQueues) as (stub, base_url):
        listed = httpx.get(
            base_url + ENDPOINTS["list_queues"].path,
            params={"limit": 100},
            headers={"Authorization": f"Bearer {DEFAULT_API_KEY}"},
        )
        queues = [str(q["id"]) for q in listed.json()["queues"]]
        assert len(queues) > 1
        stub.gone, stub.times = ({queues[0]}, 1) if gone == "one" else (set(queues), None)
        report, out = run_snapshots(base_url, clock, tmp_path, step_retries=1)
    assert isinstance(report, IngestReport)
    (run,) = report.runs
    if gone == "one":
        assert run.success, out
        assert stub.answered_404 == 1
        assert "ListingChangedError" in out  # the retried attempt, said
        members = pl.read_parquet(tmp_path / "lake" / "queue_members" / "*" / "*.parquet")
        assert members.filter(pl.col("queue_id") == int(queues[0])).height > 0
    else:
        assert not run.success
        assert "NotFoundError on GET /api/v4/routing/queues/" in out, out
        assert stub.answered_404 == len(queues)  # one attempt: not retried
        assert not list((tmp_path / "lake").glob("queues/*/*.parquet"))
