"""`cdrhouse privacy forget` says where it is on a long erasure: it scans every partition of
every CDR table of the account (a year of days is thousands of partitions, minutes), and
used to print nothing until the end. `forget` tells a `progress` callable after each
partition; the CLI prints a line on stderr at most every 10 s (`ScanProgress`)."""

from __future__ import annotations

import io
from pathlib import Path

from pipelines.cli_privacy import ScanProgress
from tests.support.token_lake import DAY1, DAY2, POLICY, land
from warehouse.erasure import PERSON_TABLES, forget
from warehouse.lake import Lake


def test_forget_tells_its_progress_after_each_partition(tmp_path: Path) -> None:
    lake = Lake(str(tmp_path / "lake"))
    for day in (DAY1, DAY2):
        land(lake, day)
    told: list[tuple[str, int, int]] = []

    forget(lake, "ab" * 32, POLICY.key_check, progress=lambda *a: told.append(a))

    expected = []
    for table in PERSON_TABLES:
        total = len(lake.partitions(table)) + len(lake.rejected_partitions(table))
        expected += [(table, done, total) for done in range(1, total + 1)]
    assert told == expected
    assert len(told) >= 2 * 6  # two days of raw_cdrs, cdrs and the per-type tables


def test_scan_progress_prints_at_most_once_every_interval() -> None:
    out = io.StringIO()
    now = iter([100.0, 104.0, 110.5, 111.0, 125.0])
    progress = ScanProgress("emea", every=10.0, out=out, clock=lambda: next(now))

    for done in range(1, 6):
        progress("raw_cdrs", done, 365)

    assert out.getvalue().splitlines() == [
        "cdrhouse privacy forget: account emea: raw_cdrs, 3 of 365 partitions scanned",
        "cdrhouse privacy forget: account emea: raw_cdrs, 5 of 365 partitions scanned",
    ]
