"""What erasing one person costs (`cdrhouse privacy forget`, `warehouse.erasure.forget`).

    python -m bench.erasure [--days 3] [--cdrs-per-day 20000]

Lands the days from the in-process sandbox under `CDRHOUSE_PHONE_NUMBERS=token` with the day
step (`land_day`), then forgets a caller of one CDR of the first day (`--busiest`: the most
frequent `from` token of the first day, in every day) in a child process, and prints its
seconds and peak RSS, the partitions scanned and rewritten, the rows changed, and the lake's
size: the scan reads every partition's text once, so its cost grows with the lake, the
rewrite's with the partitions that hold the person. Partitions without the token are checked
byte-identical, and no partition holds the token afterwards.
"""

from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import logging
import multiprocessing
import tempfile
import time
from pathlib import Path

import polars as pl

from pipelines.cdr_day import land_day
from pipelines.resources import ContactCenterResource
from warehouse.erasure import PERSON_TABLES, ForgetResult, forget
from warehouse.lake import Lake
from warehouse.privacy import PrivacyPolicy

POLICY = PrivacyPolicy("token", b"bench-erasure-key")


def _digests(lake: Lake) -> dict[tuple[str, str], str]:
    return {
        (t, k): hashlib.sha256(lake.partition_path(t, k).read_bytes()).hexdigest()
        for t in PERSON_TABLES
        for k in lake.partitions(t)
    }


def _holds(lake: Lake, table: str, key: str, token: str) -> bool:
    frame = lake.read(table, key)
    assert frame is not None
    found = frame.select(pl.any_horizontal(pl.col(pl.String).str.contains(token, literal=True)))
    return bool(found.to_series().any())


def _forget(uri: str, token: str) -> tuple[ForgetResult, float, float]:
    """In a fresh process: what forget changed, its seconds and the process's peak RSS."""
    began = time.perf_counter()
    result = forget(Lake(uri), token)
    seconds = time.perf_counter() - began
    # VmHWM, not ru_maxrss: that one can carry the parent's high-water mark across fork + exec.
    status = Path("/proc/self/status").read_text()
    peak_kib = next(
        int(line.split()[1]) for line in status.splitlines() if line.startswith("VmHWM")
    )
    return result, seconds, peak_kib / 1024


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.erasure", description=__doc__)
    parser.add_argument("--days", type=int, default=3)
    parser.add_argument("--cdrs-per-day", type=int, default=20_000)
    parser.add_argument("--busiest", action="store_true", help="the most frequent caller")
    args = parser.parse_args(argv)
    start = dt.datetime.now(dt.UTC).date() - dt.timedelta(days=args.days + 1)
    source = ContactCenterResource(
        base_url="sandbox",
        sandbox_cdrs_per_day=args.cdrs_per_day,
        sandbox_start_date=start.isoformat(),
    )
    with tempfile.TemporaryDirectory(prefix="cdrhouse-erasure-") as tmp:
        lake = Lake(str(Path(tmp) / "lake"))
        began = time.perf_counter()
        for i in range(args.days):
            day = (start + dt.timedelta(days=i)).isoformat()
            land_day(source, lake, logging.getLogger("bench"), day, privacy=POLICY)
        landed_s = time.perf_counter() - began
        first = lake.read("cdrs", lake.partitions("cdrs")[0])
        assert first is not None
        counts = first.get_column("from_phone_number").drop_nulls().value_counts(sort=True)
        token = counts.row(0 if args.busiest else counts.height - 1)[0]
        size = sum(p.stat().st_size for p in lake.root.rglob("*.parquet"))
        before = _digests(lake)
        with multiprocessing.get_context("spawn").Pool(1) as pool:
            result, forget_s, peak = pool.apply(_forget, (lake.uri, token))
        after = _digests(lake)
        changed = {k for k in before if before[k] != after[k]}
        assert len(changed) == result.partitions, (changed, result)
        left = [(t, k) for t, k in before if _holds(lake, t, k, token)]
        assert not left, left
    print(
        f"erasure: {args.days} days x {args.cdrs_per_day} CDRs landed in {landed_s:.1f} s "
        f"({size / 2**20:.1f} MiB of Parquet, {len(before)} partitions)"
    )
    print(
        f"erasure: forget took {forget_s:.2f} s: {result.rows} rows in {result.partitions} "
        f"partitions rewritten, {len(before) - len(changed)} partitions byte-identical; "
        f"peak RSS of its process {peak:.0f} MiB"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
