"""How far one CDR day is from the floor: the floor and each stage of the `raw_cdrs` step,
measured in the same run, on the same day's pages, in one process.

    python -m bench.stages [--cdrs-per-day 200000] [--no-step]

The sandbox is served on loopback in its own process and warmed. This process then measures,
reading its own CPU time (`getrusage`, all threads) around each part:

* **the floor** (pages -> typed Parquet with nothing but the libraries): a sequential sync
  `httpx.Client` fetch of the day's pages (`limit=1000`, the cursor read from the body's tail),
  `pyarrow.json.read_json` of each whole page under the explicit Arrow schema of the field
  table (`warehouse.native.record_type`) on a pool of 2 threads, and one zstd Parquet write of
  the concatenated table;
* **cdrhouse's stages**, each over the whole day, one after the other: the HTTP client fetching
  every page into memory (its parallel sub-windows; after one untimed fetch of the day, as
  its first use in a process imports what it uses), the decode of every page
  (`decode_page_counted`, on 2 threads as in the step), the normalization of every row group,
  the check tallies, and the Parquet writes of `raw_cdrs` and the six typed tables. In the step
  they overlap; here they are apart, so each figure is that stage's own cost;
* **the step itself** (unless `--no-step`): `land_day` into a temporary lake, the stages
  overlapped on their threads as `cdrhouse ingest` runs them (Dagster aside).

It prints CPU per CDR for each, and the ratio cdrhouse / floor (issue 23's target: <= 2x for
the stage sum). `pipelines` is imported first, so the allocators are set as in
`cdrhouse ingest`.
"""

from __future__ import annotations

import argparse
import asyncio
import io
import logging
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import pipelines  # noqa: F401 - the allocator settings of `cdrhouse ingest`, before polars
from bench.ingest import CDRS_PATH, ServedSandbox, cpu_seconds
from connectors.sandbox.config import DEFAULT_API_KEY

THREADS = 2


def _timed(work: Callable[[], Any]) -> tuple[Any, float, float]:
    """(result, CPU seconds, wall seconds)."""
    began, wall = cpu_seconds(), time.perf_counter()
    result = work()
    return result, cpu_seconds() - began, time.perf_counter() - wall


def _fetch(base_url: str, day: date) -> list[bytes]:
    from pipelines.partitions import partition_window
    from pipelines.resources import ContactCenterResource

    contact_center = ContactCenterResource(base_url=base_url, api_key=DEFAULT_API_KEY)
    start, end = partition_window(day.isoformat())  # the window the day's step fetches

    async def pages() -> list[bytes]:
        async with contact_center.client(logging.getLogger("bench.stages")) as client:
            return [p.body async for p in client.fetch_cdr_pages(start, end)]

    return asyncio.run(pages())


# --------------------------------------------------------------------------- the floor


def _cursor(body: bytes) -> str | None:
    """`metadata.next_cursor`, read from the body's tail (the sandbox writes it last)."""
    import orjson

    at = body.rfind(b'"metadata":')
    meta = orjson.loads(body[at + len(b'"metadata":') : -1])
    cursor = meta.get("next_cursor")
    return str(cursor) if cursor else None


def floor_fetch(base_url: str, day: date) -> list[bytes]:
    """The day's pages, one request after the other, with a sync client."""
    import httpx

    params: dict[str, str | int] = {
        "started_at[gte]": f"{day}T00:00:00.000Z",
        "started_at[lt]": f"{day + timedelta(days=1)}T00:00:00.000Z",
        "limit": 1000,
    }
    bodies: list[bytes] = []
    headers = {"Authorization": f"Bearer {DEFAULT_API_KEY}"}
    with httpx.Client(base_url=base_url, headers=headers, timeout=600) as client:
        cursor: str | None = None
        while True:
            response = client.get(
                CDRS_PATH, params={**params, **({"cursor": cursor} if cursor else {})}
            )
            response.raise_for_status()
            bodies.append(response.content)
            cursor = _cursor(response.content)
            if cursor is None:
                return bodies


def floor_decode(bodies: list[bytes]) -> Any:
    """Every page -> one typed Arrow table, pages decoded on a pool of `THREADS`."""
    import pyarrow as pa
    import pyarrow.json as pj

    from warehouse.native import record_type

    schema = pa.schema([pa.field("cdrs", pa.list_(record_type()))])
    options = pj.ParseOptions(explicit_schema=schema, unexpected_field_behavior="ignore")

    def decode(page: bytes) -> Any:
        read = pj.ReadOptions(use_threads=False, block_size=len(page) + 64)
        table = pj.read_json(io.BytesIO(page), read_options=read, parse_options=options)
        return pa.Table.from_struct_array(table.column("cdrs").combine_chunks().flatten())

    with ThreadPoolExecutor(THREADS) as pool:
        return pa.concat_tables(list(pool.map(decode, bodies)))


def floor_write(table: Any, path: Path) -> None:
    import pyarrow.parquet as pq

    pq.write_table(table, path, compression="zstd")


# --------------------------------------------------------------------------- cdrhouse


def _land_step(base_url: str, day: date) -> int:
    from pipelines.cdr_day import land_day
    from pipelines.resources import ContactCenterResource
    from warehouse.lake import Lake

    contact_center = ContactCenterResource(base_url=base_url, api_key=DEFAULT_API_KEY)
    with tempfile.TemporaryDirectory(prefix="cdrhouse-stages-") as tmp:
        stats, checks = land_day(contact_center, Lake(tmp), logging.getLogger("bench"), str(day))
        if not checks.whole(stats.rows, stats.api_total):
            raise RuntimeError("the day step did not land the whole day")
        return stats.rows


def run(cdrs_per_day: int, step: bool = True) -> dict[str, float]:
    import polars as pl

    from pipelines import cdr_day
    from pipelines.cdr_day import NORMALIZED_TABLES, RAW_COLUMNS, ROW_GROUP_ROWS
    from pipelines.checks import DayChecks
    from pipelines.memory import release_free_memory
    from warehouse import decode
    from warehouse.lake import Lake
    from warehouse.normalize import normalize_decoded

    # A group's raw columns as the day writer takes them (a select on commits without `narrow`).
    narrow = getattr(decode, "narrow", lambda f, n: f.select(c for c in n if c in f.columns))

    day = datetime.now(UTC).date() - timedelta(days=3)  # long over: every CDR has ended
    sandbox = ServedSandbox(day, 2, cdrs_per_day)
    try:
        sandbox.warm([day])
        floor_bodies, floor_fetch_s, floor_fetch_w = _timed(
            lambda: floor_fetch(sandbox.base_url, day)
        )
        # Once untimed first: the client's first fetch in a process imports what it uses
        # (~0.5 s of CPU, 2-3 us/CDR of this day), which the floor's client had imported.
        _fetch(sandbox.base_url, day)
        bodies, fetch_s, fetch_w = _timed(lambda: _fetch(sandbox.base_url, day))
        step_rows, step_s, step_w = (
            _timed(lambda: _land_step(sandbox.base_url, day)) if step else (0, 0.0, 0.0)
        )
    finally:
        sandbox.close()
    table, floor_decode_s, floor_decode_w = _timed(lambda: floor_decode(floor_bodies))
    with tempfile.TemporaryDirectory(prefix="cdrhouse-floor-") as tmp:
        target = Path(tmp) / "floor.parquet"
        _, floor_write_s, floor_write_w = _timed(lambda: floor_write(table, target))
    floor_rows = table.num_rows
    table = None  # its buffers go before cdrhouse's stages run

    # Counted pages, whichever the product offers (the bench runs on older commits too).
    counted = getattr(decode, "decode_page_counted", None)

    def decode_all() -> tuple[list[pl.DataFrame], int]:
        with ThreadPoolExecutor(THREADS) as pool:
            if counted is None:
                return list(pool.map(decode.decode_page_typed, bodies)), 0
            done = list(pool.map(counted, bodies))
        return [d.frame for d in done], sum(d.native for d in done)

    (frames, native_pages), decode_s, decode_w = _timed(decode_all)
    groups: list[pl.DataFrame] = []
    while frames:  # row groups as the day writer makes them: whole pages up to ROW_GROUP_ROWS
        take, rows = 0, 0
        while take < len(frames) and rows < ROW_GROUP_ROWS:
            rows += frames[take].height
            take += 1
        groups.append(pl.concat(frames[:take], how="vertical_relaxed"))
        frames = frames[take:]
    tables, normalize_s, normalize_w = _timed(lambda: [normalize_decoded(g) for g in groups])
    checks = DayChecks(day.isoformat())

    def tally() -> None:
        for group, normalized in zip(groups, tables, strict=True):
            checks.receive(group)
            checks.add(group.height, normalized)

    _, checks_s, checks_w = _timed(tally)

    # The product's cadence (after each group before it had one: the bench runs on older
    # commits too).
    release_every = getattr(cdr_day, "RELEASE_EVERY_GROUPS", 1)

    def write() -> None:  # DayWriter.flush's writes, with its releases
        with tempfile.TemporaryDirectory(prefix="cdrhouse-stages-") as tmp, ExitStack() as stack:
            lake = Lake(tmp)
            key = f"date={day.isoformat()}"
            raw = stack.enter_context(lake.writer("raw_cdrs", key))
            typed = {t: stack.enter_context(lake.writer(t, key)) for t in NORMALIZED_TABLES}
            for i, (group, normalized) in enumerate(zip(groups, tables, strict=True), 1):
                raw.write(narrow(group, RAW_COLUMNS))
                for table_name, attr in NORMALIZED_TABLES.items():
                    frame = getattr(normalized, attr)
                    if frame.height:
                        typed[table_name].write(frame)
                if i % release_every == 0:
                    release_free_memory()
            release_free_memory()

    _, write_s, write_w = _timed(write)
    rows = sum(g.height for g in groups)
    megabytes = sum(map(len, bodies)) / 1e6
    print(
        f"one day: {rows:,} CDRs, {len(bodies)} pages ({native_pages} decoded natively), "
        f"{megabytes:.0f} MB of JSON; the floor's sequential fetch: {len(floor_bodies)} pages, "
        f"{floor_rows:,} CDRs"
    )

    def line(name: str, cpu: float, wall: float, n: int) -> None:
        print(f"  {name:46s} {cpu:6.2f} s CPU {wall:6.2f} s wall {cpu / n * 1e6:6.1f} us/CDR")

    floor = [
        ("sequential sync httpx fetch", floor_fetch_s, floor_fetch_w),
        (f"pyarrow.json, explicit schema, {THREADS} threads", floor_decode_s, floor_decode_w),
        ("zstd Parquet write", floor_write_s, floor_write_w),
    ]
    stages = [
        ("HTTP client (every page into memory)", fetch_s, fetch_w),
        (f"decode ({THREADS} threads)", decode_s, decode_w),
        ("normalize (6 typed tables + quarantine)", normalize_s, normalize_w),
        ("check tallies", checks_s, checks_w),
        ("Parquet writes (raw + 6 tables)", write_s, write_w),
    ]
    print("floor (pages -> typed Parquet, nothing but the libraries):")
    for name, cpu, wall in floor:
        line(name, cpu, wall, floor_rows)
    floor_cpu = sum(c for _, c, _ in floor)
    line("floor total", floor_cpu, sum(w for _, _, w in floor), floor_rows)
    print("cdrhouse, each stage of the day step alone:")
    for name, cpu, wall in stages:
        line(name, cpu, wall, rows)
    stage_cpu = sum(c for _, c, _ in stages)
    line("stage sum", stage_cpu, sum(w for _, _, w in stages), rows)
    floor_us, stage_us = floor_cpu / floor_rows * 1e6, stage_cpu / rows * 1e6
    out = {"floor_us": floor_us, "stages_us": stage_us, "ratio": stage_us / floor_us}
    if step:
        print("cdrhouse, the day step itself (land_day: stages overlapped on their threads):")
        line("land_day", step_s, step_w, step_rows)
        out |= {
            "step_us": step_s / step_rows * 1e6,
            "step_ratio": step_s / step_rows * 1e6 / floor_us,
        }
    print(
        f"ratio cdrhouse / floor, CPU per CDR: stage sum {out['ratio']:.2f}x"
        + (f", day step {out['step_ratio']:.2f}x" if step else "")
        + " (target <= 2x)"
    )
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.stages", description=__doc__)
    parser.add_argument("--cdrs-per-day", type=int, default=200_000)
    parser.add_argument("--no-step", action="store_true", help="skip the land_day measurement")
    args = parser.parse_args(argv)
    run(args.cdrs_per_day, step=not args.no_step)
    return 0


if __name__ == "__main__":
    sys.exit(main())
