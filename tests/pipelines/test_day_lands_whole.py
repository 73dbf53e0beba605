"""A day that cannot land whole lands nothing, whatever breaks.

- A page that JSON readers read differently: the connector counts a page's records with
  simdjson (the first of two `cdrs` keys wins), the decoder splits them with msgspec (the last
  wins). A server that sends `"cdrs":[…],"cdrs":null` with `metadata.total` 0 had the
  connector count the records and the decoder land none, and the day's checks (rows against
  the API's total, both 0) passed: the day was published without them. The day step now
  compares each page's count with the rows decoded, and fails the day.
- A file of the day that cannot be published: each table's file was renamed into place as its
  writer finished, so a refused rename left the tables before it published (`PublishGroup`).

The server is the sandbox behind `RewritingApp` over a real socket; the runs are
`cdrhouse ingest`'s (`run_ingest`)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import dagster as dg
import msgspec
import pytest

from pipelines.cli_runs import run_ingest
from tests.support.clock import SessionClock
from tests.support.oddserver import RewritingApp, serve_app
from tests.support.sandboxes import make_sandbox
from tests.support.served import ServedSandbox
from warehouse.lake import Lake

CDRS_PER_DAY = 300


def lake_files(data_dir: Path, day: str) -> list[Path]:
    """The files of `day` in the lake's tables (a partition's file, or a file in its folder's
    place); the lake's own folders (`_locks`, `_tmp`) left out."""
    lake = data_dir / "lake"
    found = [*lake.glob(f"*/date={day}"), *lake.glob(f"*/date={day}/*")]
    return [p for p in found if p.is_file() and not p.relative_to(lake).as_posix().startswith("_")]


class _Page(msgspec.Struct):
    cdrs: list[msgspec.Raw]
    metadata: msgspec.Raw


class _TwiceApp(RewritingApp):
    """With `twice` set, each page with records is sent with a second `cdrs` key, `null`, and a
    `metadata.total` of 0."""

    twice = False

    def _page(self, body: bytes) -> bytes:
        page = msgspec.json.decode(body, type=_Page)
        if not self.twice or not page.cdrs:
            return body
        records = b",".join(bytes(r) for r in page.cdrs)
        return b'{"cdrs":[' + records + b'],"cdrs":null,"metadata":{"total":0}}'


@dataclass
class Api:
    app: _TwiceApp
    served: ServedSandbox


@pytest.fixture(scope="module")
def api(clock: SessionClock) -> Iterator[Api]:
    first = clock.days_ago(2)
    sandbox = make_sandbox(start_date=first, days=2, cdrs_per_day=CDRS_PER_DAY, now=clock.now)
    app = _TwiceApp(sandbox.app, lambda r: r)
    with serve_app(app) as base_url:
        clock.freeze(sandbox)
        defaults = {"max_attempts": 2, "max_retry_s": 2.0}
        yield Api(app, ServedSandbox(sandbox, base_url, first, clock, defaults))


def test_a_page_read_two_ways_fails_its_day_and_lands_nothing(api: Api, tmp_path: Path) -> None:
    day = api.served.first_day.isoformat()
    lake = Lake((tmp_path / "lake").as_uri())
    with dg.DagsterInstance.ephemeral() as instance:
        api.app.twice = True
        try:
            bad = run_ingest(
                api.served.defs(tmp_path),
                [day],
                instance=instance,
                data_dir=tmp_path,
                snapshots=False,
            )
        finally:
            api.app.twice = False
        (line,) = bad.runs
        assert not bad.success
        assert line.failure is not None
        assert "the connector read" in line.failure, line.failure
        assert lake.read("cdrs", f"date={day}") is None
        assert lake.read("raw_cdrs", f"date={day}") is None

        good = run_ingest(
            api.served.defs(tmp_path),
            [day],
            instance=instance,
            data_dir=tmp_path,
            snapshots=False,
        )
        assert good.success, good.runs[0].failure
        landed = lake.read("cdrs", f"date={day}")
        assert landed is not None
        assert landed.height == api.served.api_total(api.served.first_day) > 0


def test_a_day_whose_last_file_cannot_be_published_publishes_none(api: Api, tmp_path: Path) -> None:
    day = (api.served.first_day + timedelta(days=1)).isoformat()
    # Where the day's `cdrs` partition goes, a file: its rename fails, after the other typed
    # tables' (published in the writers' order).
    blocked = tmp_path / "lake" / "cdrs" / f"date={day}"
    blocked.parent.mkdir(parents=True)
    blocked.write_text("in the way")
    with dg.DagsterInstance.ephemeral() as instance:
        bad = run_ingest(
            api.served.defs(tmp_path), [day], instance=instance, data_dir=tmp_path, snapshots=False
        )
    assert not bad.success
    lake = tmp_path / "lake"
    landed = sorted(p.relative_to(lake).as_posix() for p in lake_files(tmp_path, day))
    assert landed == [f"cdrs/date={day}"], landed
    assert not list((tmp_path / "lake" / "_tmp").glob("undo-*"))
