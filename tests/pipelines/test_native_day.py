"""Issue 23: a sandbox day lands through the day step with every page decoded in the one
native pass, and what it writes is what the tolerant path makes of the same records (the
day normalized again from its `raw_cdrs` partition, record by record)."""

from __future__ import annotations

import logging
from pathlib import Path

from polars.testing import assert_frame_equal

from pipelines.cdr_day import NORMALIZED_TABLES, land_day
from tests.support.clock import SessionClock
from tests.support.served import ServedSandbox
from warehouse.lake import Lake
from warehouse.normalize import normalize


def test_a_sandbox_day_is_decoded_natively_and_lands_as_the_tolerant_path_makes_it(
    served: ServedSandbox, clock: SessionClock, tmp_path: Path
) -> None:
    day = clock.days_ago(2).isoformat()
    lake = Lake(str(tmp_path / "lake"))
    stats, checks = land_day(served.resource(), lake, logging.getLogger("test"), day)
    assert checks.whole(stats.rows, stats.api_total)
    assert stats.rows == served.api_total(clock.days_ago(2)) > 0
    assert stats.pages > 0
    assert stats.native_pages == stats.pages
    key = f"date={day}"
    raw = lake.read("raw_cdrs", key)
    assert raw is not None
    tolerant = normalize(raw).tables()
    assert tolerant["cdrs"].height == stats.rows
    for table in NORMALIZED_TABLES:
        landed = lake.read(table, key)
        expected = tolerant[table]
        if landed is None:  # an empty table publishes no partition
            assert expected.height == 0, table
            continue
        assert_frame_equal(landed, expected, check_exact=True)
