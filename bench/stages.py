"""Where one CDR day's CPU goes: each stage of the `raw_cdrs` step run alone, in one process.

    python -m bench.stages [--cdrs-per-day 200000]

The sandbox is served on loopback in its own process and warmed. This process then runs the
step's stages one after the other, each over the whole day, and reads its own CPU time
(`getrusage`, all threads) around each: the HTTP client fetching every page into memory, the
decode of every page, the normalization of every row group, the check tallies, and the Parquet
writes of `raw_cdrs` and the six typed tables. In the step they overlap on three threads; here
they are apart, so each figure is that stage's own cost. `pipelines` is imported first, so the
allocators are set as in `cdrhouse ingest`.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
import tempfile
from collections.abc import Callable
from contextlib import ExitStack
from datetime import UTC, date, datetime, timedelta
from typing import Any

import pipelines  # noqa: F401 - the allocator settings of `cdrhouse ingest`, before polars
from bench.ingest import ServedSandbox, cpu_seconds
from connectors.sandbox.config import DEFAULT_API_KEY


def _timed(work: Callable[[], Any]) -> tuple[Any, float]:
    began = cpu_seconds()
    result = work()
    return result, cpu_seconds() - began


def _fetch(base_url: str, day: date) -> list[bytes]:
    from pipelines.partitions import partition_window
    from pipelines.resources import ContactCenterResource

    contact_center = ContactCenterResource(base_url=base_url, api_key=DEFAULT_API_KEY)
    start, end = partition_window(day.isoformat())  # the window the day's step fetches

    async def pages() -> list[bytes]:
        async with contact_center.client(logging.getLogger("bench.stages")) as client:
            return [p.body async for p in client.fetch_cdr_pages(start, end)]

    return asyncio.run(pages())


def run(cdrs_per_day: int) -> list[tuple[str, float]]:
    import polars as pl

    from pipelines.cdr_day import NORMALIZED_TABLES, RAW_COLUMNS, ROW_GROUP_ROWS
    from pipelines.checks import DayChecks
    from pipelines.memory import release_free_memory
    from warehouse.decode import decode_page_typed
    from warehouse.lake import Lake
    from warehouse.normalize import normalize_decoded

    day = datetime.now(UTC).date() - timedelta(days=3)  # long over: every CDR has ended
    sandbox = ServedSandbox(day, 2, cdrs_per_day)
    try:
        sandbox.warm([day])
        bodies, fetch_s = _timed(lambda: _fetch(sandbox.base_url, day))
    finally:
        sandbox.close()
    frames, decode_s = _timed(lambda: [decode_page_typed(b) for b in bodies])
    groups: list[pl.DataFrame] = []
    while frames:  # row groups as the day writer makes them: whole pages up to ROW_GROUP_ROWS
        take, rows = 0, 0
        while take < len(frames) and rows < ROW_GROUP_ROWS:
            rows += frames[take].height
            take += 1
        groups.append(pl.concat(frames[:take], how="vertical_relaxed"))
        frames = frames[take:]
    tables, normalize_s = _timed(lambda: [normalize_decoded(g) for g in groups])
    checks = DayChecks(day.isoformat())

    def tally() -> None:
        for group, normalized in zip(groups, tables, strict=True):
            checks.add(group.height, normalized)

    _, checks_s = _timed(tally)

    def write() -> None:  # DayWriter.flush's writes, with its release after each row group
        with tempfile.TemporaryDirectory(prefix="cdrhouse-stages-") as tmp, ExitStack() as stack:
            lake = Lake(tmp)
            key = f"date={day.isoformat()}"
            raw = stack.enter_context(lake.writer("raw_cdrs", key))
            typed = {t: stack.enter_context(lake.writer(t, key)) for t in NORMALIZED_TABLES}
            for group, normalized in zip(groups, tables, strict=True):
                raw.write(group.select(RAW_COLUMNS))
                for table, attr in NORMALIZED_TABLES.items():
                    frame = getattr(normalized, attr)
                    if frame.height:
                        typed[table].write(frame)
                release_free_memory()

    _, write_s = _timed(write)
    rows = sum(g.height for g in groups)
    megabytes = sum(map(len, bodies)) / 1e6
    print(f"one day: {rows:,} CDRs, {len(bodies)} pages, {megabytes:.0f} MB of JSON")
    stages = [
        ("HTTP client (every page into memory)", fetch_s),
        ("decode (split + one json_decode)", decode_s),
        ("normalize (6 typed tables + quarantine)", normalize_s),
        ("check tallies", checks_s),
        ("Parquet writes (raw + 6 tables)", write_s),
    ]
    for name, seconds in stages:
        print(f"{name:42s} {seconds:6.2f} s CPU {seconds / rows * 1e6:6.1f} us/CDR")
    total = sum(s for _, s in stages)
    print(f"{'total':42s} {total:6.2f} s CPU {total / rows * 1e6:6.1f} us/CDR")
    return stages


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.stages", description=__doc__)
    parser.add_argument("--cdrs-per-day", type=int, default=200_000)
    args = parser.parse_args(argv)
    run(args.cdrs_per_day)
    return 0


if __name__ == "__main__":
    sys.exit(main())
