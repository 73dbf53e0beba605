"""Issue 26, erasure against a day landing at the same time: `cdrhouse privacy forget` runs
while the nightly step re-pulls a day the person called in. The step read the forget-list
before the forget wrote it, and publishes after the forget scanned the day; it still lands
the day without the person (`pipelines.cdr_day._forget_late`)."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from connectors.sandbox.faults import FaultConfig
from pipelines.cdr_day import land_day
from tests.support.served import ServedSandbox
from tests.support.token_lake import POLICY, flagged, holding
from warehouse.erasure import PERSON_TABLES, forget
from warehouse.lake import Lake

CDRS_PATH = "/api/v4/reporting/cdrs"
LATENCY_MS = 2000.0  # each answer of the re-pull: the forget runs inside this wait


@pytest.fixture
def slow(served: ServedSandbox) -> Iterator[ServedSandbox]:
    served.reset()
    yield served
    served.reset()


def _requests(served: ServedSandbox) -> int:
    return served.sandbox.counters.get(CDRS_PATH, 0)


def test_a_forget_while_the_day_lands_is_honoured_when_the_day_publishes(
    slow: ServedSandbox, tmp_path: Path
) -> None:
    day = slow.clock.days_ago(4).isoformat()
    log = logging.getLogger("test")
    lake = Lake(str(tmp_path / "lake"))
    land_day(slow.resource(), lake, log, day, privacy=POLICY)
    cdrs = lake.read("cdrs", f"date={day}")
    assert cdrs is not None
    token = str(cdrs["from_phone_number"].drop_nulls()[0])
    slow.sandbox.faults = FaultConfig(latency_ms=LATENCY_MS)
    asked = _requests(slow)

    with ThreadPoolExecutor(max_workers=1) as pool:
        landing = pool.submit(land_day, slow.resource(), lake, log, day, privacy=POLICY)
        deadline = time.monotonic() + 60
        while _requests(slow) == asked:  # the re-pull has read the forget-list, and waits
            assert time.monotonic() < deadline
            assert not landing.done(), landing.result()
            time.sleep(0.01)
        erased = forget(lake, token, POLICY.key_check)
        raced = not landing.done()  # the forget ended before the day was published
        stats, checks = landing.result()

    assert raced
    assert erased.partitions > 0  # the day as first landed held the person
    assert checks.whole(stats.rows, stats.api_total)
    assert holding(lake, token) == {t: set() for t in PERSON_TABLES}
    assert flagged(lake)["cdrs"]  # the re-pulled rows of the person are flagged


def test_a_forget_while_a_withheld_day_lands_reaches_its_rejected_copy(
    slow: ServedSandbox, tmp_path: Path
) -> None:
    """The re-pull is withheld (the API's total says more than it sent): the day stays as it
    was and the records received go to the rejected area for diagnosis. A forget while it
    ran erased the day, but the rejected copy, written with the forget-list read before the
    forget, kept the person's token."""
    day = slow.clock.days_ago(4).isoformat()
    key = f"date={day}"
    log = logging.getLogger("test")
    lake = Lake(str(tmp_path / "lake"))
    land_day(slow.resource(), lake, log, day, privacy=POLICY)
    cdrs = lake.read("cdrs", key)
    assert cdrs is not None
    token = str(cdrs["from_phone_number"].drop_nulls()[0])
    slow.sandbox.faults = FaultConfig(latency_ms=LATENCY_MS, total_mismatch=5)
    asked = _requests(slow)

    with ThreadPoolExecutor(max_workers=1) as pool:
        landing = pool.submit(land_day, slow.resource(), lake, log, day, privacy=POLICY)
        deadline = time.monotonic() + 60
        while _requests(slow) == asked:
            assert time.monotonic() < deadline
            assert not landing.done(), landing.result()
            time.sleep(0.01)
        forget(lake, token, POLICY.key_check)
        raced = not landing.done()
        stats, checks = landing.result()

    assert raced
    assert not checks.whole(stats.rows, stats.api_total)
    rejected = lake.open_parquet("raw_cdrs", key, rejected=True)
    assert rejected is not None
    records = rejected.read(columns=["record"]).column("record").to_pylist()
    assert records
    assert [r for r in records if token in r] == []
    assert holding(lake, token) == {t: set() for t in PERSON_TABLES}
