"""A directory record with a known field of another type than the spec's (a date that is no
date, a list that is a string, a name that is a number) lands with the rest of its snapshot:
the field null, its value as received under `_unreadable` in the row's `extra`, and a warning
naming the fields, never the values. Before, one such agent failed the whole `users`
snapshot (`ResponseShapeError`, not retried), every night until the server changed. A field
the spec does not show on an item of a list made into bridge rows (a user's teams) is kept
in `extra` too."""

from __future__ import annotations

import contextlib
import logging
import shutil
from pathlib import Path
from typing import Any

import dagster as dg
import httpx
import orjson
import polars as pl
import pytest

from connectors.sandbox.config import DEFAULT_API_KEY
from connectors.sandbox.rewriting import (
    App,
    Receive,
    Scope,
    Send,
    answer_of,
    send_answer,
)
from pipelines.cli_runs import IngestReport
from tests.support.clock import SessionClock
from tests.support.paths import LOCAL_INSTANCE_YAML
from tests.support.snapshot_runs import run_snapshots, serve_wrapped

USERS_PATH = "/api/v4/users"
DELETED_PATH = "/api/v4/users/deleted"
BALANCE_PATH = "/api/v4/billing/balance"
# The first user of the list, and the second: what the server sends in place of their values.
ODD: list[dict[str, Any]] = [
    {"created_at": "yesterday", "teams": "sales"},
    {
        "security_access_group": {"id": 1, "name": 5},
        "teams": [{"id": 9, "name": "Night", "role": "lead"}],  # a field the spec does not show
    },
]


class OddUsers:
    """The sandbox's app, with the first users of its users list given the values of `odd`."""

    def __init__(self, app: App, odd: list[dict[str, Any]]) -> None:
        self.app = app
        self.odd = odd
        self.changed: list[str] = []
        self.empty = False  # then both user lists answer 200 with no user
        self.balance: dict[str, Any] = {}  # fields added to the balance object

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        paths = (USERS_PATH, DELETED_PATH, BALANCE_PATH)
        if scope["type"] != "http" or scope["path"] not in paths:
            await self.app(scope, receive, send)
            return
        start, body = await answer_of(self.app, scope, receive)
        first_page = scope["path"] == USERS_PATH and b"offset=0" in b"&" + scope["query_string"]
        if start.get("status") != 200:
            pass
        elif scope["path"] == BALANCE_PATH:
            answer = orjson.loads(body)
            answer["balance"].update(self.balance)
            body = orjson.dumps(answer)
        elif self.empty:
            body = orjson.dumps({"users": [], "metadata": {"total": 0}})
        elif first_page:
            page = orjson.loads(body)
            for user, odd in zip(page["users"], self.odd, strict=False):
                self.changed.append(user["id"])
                user.update(odd)
            body = orjson.dumps(page)
        await send_answer(send, start, body)


def odd_users(
    clock: SessionClock, odd: list[dict[str, Any]]
) -> contextlib.AbstractContextManager[tuple[OddUsers, str]]:
    return serve_wrapped(clock, lambda app: OddUsers(app, odd))


def _snapshots(
    base_url: str,
    clock: SessionClock,
    data_dir: Path,
    instance: dg.DagsterInstance | None = None,
) -> tuple[IngestReport, str]:
    return run_snapshots(base_url, clock, data_dir, instance)


def test_a_user_with_fields_of_another_type_lands_with_the_others(
    clock: SessionClock, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with (
        odd_users(clock, ODD) as (stub, base_url),
        caplog.at_level(logging.WARNING, logger="connectors.contact_center"),
    ):
        stub.balance = {"currency": "EUR"}  # the spec shows the amount only
        report, out = _snapshots(base_url, clock, tmp_path)
        listed = httpx.get(
            f"{base_url}{USERS_PATH}",
            params={"limit": 100},
            headers={"Authorization": f"Bearer {DEFAULT_API_KEY}"},
        ).json()
    assert report.success, out
    assert len(stub.changed) == 2

    lake = tmp_path / "lake"
    users = pl.read_parquet(lake / "users" / "*" / "*.parquet")
    assert set(users.filter(~pl.col("deleted"))["id"]) == {u["id"] for u in listed["users"]}

    first_user, second_user = (
        users.filter(pl.col("id") == i).row(0, named=True) for i in stub.changed
    )
    assert first_user["created_at"] is None
    assert orjson.loads(first_user["extra"])["_unreadable"] == ODD[0]
    teams = pl.read_parquet(lake / "user_teams" / "*" / "*.parquet")
    assert stub.changed[0] not in set(teams["user_id"])
    assert second_user["security_access_group_id"] == 1
    assert second_user["security_access_group_name"] is None
    assert orjson.loads(second_user["extra"])["security_access_group"] == {
        "_unreadable": {"name": 5}
    }
    # An item of a list made into bridge rows with a field the spec does not show: the list
    # is kept as received (it was dropped, past the model that kept it).
    assert orjson.loads(second_user["extra"])["teams"] == ODD[1]["teams"]
    assert teams.filter(pl.col("user_id") == stub.changed[1]).select(
        "team_id", "team_name"
    ).rows() == [(9, "Night")]

    # The balance object's field the spec does not show is kept too (it was dropped).
    balance = pl.read_parquet(lake / "balance_snapshots" / "*" / "*.parquet").row(0, named=True)
    assert orjson.loads(balance["extra"]) == {"currency": "EUR"}

    (warning,) = [r.getMessage() for r in caplog.records if "another type" in r.getMessage()]
    # (in the run's log, where the UI shows it: test_the_connectors_warnings_are_in_the_runs_log)
    assert warning.startswith(f"GET {USERS_PATH}: 2 of {len(listed['users'])} records")
    assert "(created_at, security_access_group.name, teams)" in warning
    assert "yesterday" not in warning
    assert "sales" not in warning


def test_a_user_whose_id_cannot_be_read_fails_the_snapshot_naming_its_endpoint(
    clock: SessionClock, tmp_path: Path
) -> None:
    # A record without a usable id is no directory object: the snapshot is refused (the last
    # one stays), and the failure names the users list, not the CDR endpoint it used to name.
    odd: list[dict[str, Any]] = [{"id": {"value": 42}}]
    with odd_users(clock, odd) as (_, base_url):
        report, out = _snapshots(base_url, clock, tmp_path)
    assert not report.success
    assert "users_snapshot: ResponseShapeError on GET /api/v4/users\n" in out
    assert "ResponseShapeError on GET /api/v4/users: response does not match User (id: " in out
    assert "/reporting/cdrs" not in out
    assert not list((tmp_path / "lake").glob("users/*/*.parquet"))


def test_an_empty_directory_does_not_replace_the_last_snapshot(
    clock: SessionClock, tmp_path: Path
) -> None:
    # A server that answers 200 with no user, active or deleted (its directory not loaded
    # yet): landed, it replaced today's snapshot and emptied the users view until the next
    # night, every CDR's agent unknown.
    with odd_users(clock, []) as (stub, base_url):
        first, _ = _snapshots(base_url, clock, tmp_path)
        assert first.success
        (landed,) = (tmp_path / "lake").glob("users/*/*.parquet")
        before = landed.read_bytes()
        users = pl.read_parquet(landed).height
        stub.empty = True
        second, out = _snapshots(base_url, clock, tmp_path)
    assert not second.success
    day = landed.parent.name.removeprefix("snapshot_date=")  # (UTC today, as the run saw it)
    assert (
        f"the API listed no user, active or deleted, where the snapshot of {day} has {users}; "
        "that snapshot is not replaced"
    ) in out
    assert [p.read_bytes() for p in (tmp_path / "lake").glob("users/*/*.parquet")] == [before]
    # The other families landed as usual.
    assert "numbers=" in out


def test_the_connectors_warnings_are_in_the_runs_log(
    clock: SessionClock, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Under the instance of dagster.yaml (`make dev`, production): the warning was only on the
    # run worker's stderr, and the UI showed a snapshot with nulls and no word why.
    home = tmp_path / "home"
    home.mkdir()
    shutil.copy(LOCAL_INSTANCE_YAML, home / "dagster.yaml")
    monkeypatch.setenv("CC_API_KEY", DEFAULT_API_KEY)
    with (
        odd_users(clock, ODD) as (_, base_url),
        dg.DagsterInstance.from_config(str(home)) as instance,
    ):
        report, out = _snapshots(base_url, clock, tmp_path / "data", instance)
        assert report.success, out
        (run,) = instance.get_runs()
        logged = [
            (e.level, e.step_key, e.user_message)
            for e in instance.all_logs(run.run_id)
            if "another type than the spec's" in e.user_message
        ]
    assert [(level, step) for level, step, _ in logged] == [(logging.WARNING, "users_snapshot")]
    assert logged[0][2].startswith(f"GET {USERS_PATH}: 2 of ")
