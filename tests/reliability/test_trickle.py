"""A CDR server that trickles its answers, through the real CDR job: the code location's
`request_deadline_s` cuts each slow answer, the client asks again, and the day lands exact
(the connector's own cases: tests/connectors/contact_center/test_deadline.py)."""

from __future__ import annotations

from pathlib import Path

import dagster as dg

from connectors.sandbox import FaultConfig
from tests.reliability.conftest import CDRS_PATH, assert_exact, run_ok
from tests.support.served import ServedSandbox


def test_trickled_cdr_pages_are_cut_at_the_deadline_and_the_day_lands_exact(
    served: ServedSandbox, tmp_path: Path
) -> None:
    # A fifth of the answers come 256 bytes every 20 ms (each read well within the 1 s read
    # timeout; a page takes seconds); the resource gives an answer 0.5 s.
    served.sandbox.faults = FaultConfig(trickle_rate=0.2, trickle_gap_ms=20, paths=(CDRS_PATH,))
    before = served.sandbox.counters.get(CDRS_PATH, 0)
    day = served.clock.days_ago(4)
    result = run_ok(served.defs(tmp_path, timeout_s=1.0, request_deadline_s=0.5), day)
    requests = served.sandbox.counters.get(CDRS_PATH, 0) - before
    served.sandbox.faults = FaultConfig()
    pages = _pages(result)
    assert requests > pages, (requests, pages)  # the cut answers were asked for again
    assert_exact(tmp_path, served.sandbox, day, case="trickle")


def _pages(result: dg.ExecuteInProcessResult) -> int:
    for event in result.get_asset_materialization_events():
        mat = event.step_materialization_data.materialization
        if mat.asset_key == dg.AssetKey("raw_cdrs"):
            value = mat.metadata["pages"].value
            assert isinstance(value, int)
            return value
    raise AssertionError("raw_cdrs was not materialized")
