"""A page that JSON readers read differently never lands: the connector counts a page's records
with simdjson (the first of two `cdrs` keys wins), the decoder splits them with msgspec (the
last wins). A server that sends `"cdrs":[…],"cdrs":null` with `metadata.total` 0 had the
connector count the records and the decoder land none, and the day's checks (rows against the
API's total, both 0) passed: the day was published without them. The day step now compares
each page's count with the rows decoded, and fails the day.

The server is the sandbox behind `RewritingApp` over a real socket; the run is
`cdrhouse ingest`'s (`run_ingest`)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
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
