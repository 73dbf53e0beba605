"""Two runs of one day: the second's publish waits for the first's (`Lake.publishing`), so the
day's tables are all of one fetch. The other run here is a process holding the day's publish."""

from __future__ import annotations

import logging
import subprocess
import threading
from collections.abc import Callable
from pathlib import Path

from pipelines.cdr_day import DayStats, land_day, renormalize_day
from pipelines.checks import DayChecks
from tests.support.clock import SessionClock
from tests.support.publisher import heard, publisher, say, stop, wait_until_spooled
from tests.support.served import ServedSandbox
from warehouse.lake import Lake
from warehouse.privacy import RAW


def _cdrs_file(lake_root: Path, key: str) -> int | None:
    """The day's published `cdrs` file, as its modification time (None: not published)."""
    path = lake_root / "cdrs" / key / "part-0.parquet"
    return path.stat().st_mtime_ns if path.exists() else None


def _published_once_released(
    lake_root: Path, key: str, holder: subprocess.Popen[str], work: Callable[[], object]
) -> None:
    """`holder` holds the key's publish while `work` runs on a thread: `work` writes its files,
    then waits (the day's `cdrs` as before) until `holder` lets go, and then ends."""
    say(holder, "hold")
    assert heard(holder) == "held"
    before = _cdrs_file(lake_root, key)
    thread = threading.Thread(target=work)
    thread.start()
    wait_until_spooled(lake_root, key, thread.is_alive, files=2)
    thread.join(timeout=2.0)
    assert thread.is_alive()
    assert _cdrs_file(lake_root, key) == before
    say(holder, "release")
    assert heard(holder) == "done"
    thread.join(timeout=60)
    assert not thread.is_alive()
    assert _cdrs_file(lake_root, key) != before


def test_a_day_is_published_only_once_another_runs_publish_of_it_ends(
    served: ServedSandbox, clock: SessionClock, tmp_path: Path
) -> None:
    day = clock.days_ago(2).isoformat()
    key = f"date={day}"
    root = tmp_path / "lake"
    lake = Lake(str(root))
    holder = publisher(root, key, "other")
    results: list[tuple[DayStats, DayChecks]] = []
    try:
        log = logging.getLogger("test")
        _published_once_released(
            root,
            key,
            holder,
            lambda: results.append(land_day(served.resource(), lake, log, day, privacy=RAW)),
        )
        stats, checks = results[0]
        assert checks.whole(stats.rows, stats.api_total)
        cdrs = lake.read("cdrs", key)
        assert cdrs is not None
        assert cdrs.height == stats.rows > 0
        # Normalizing the day again from its raw_cdrs waits the same way.
        _published_once_released(
            root, key, holder, lambda: results.append(renormalize_day(lake, day, privacy=RAW))
        )
        assert len(results) == 2
    finally:
        stop(holder)
