"""Time every reporting view at ~10M CDRs.

    .venv/bin/python -m bench.queries                      # 100 days x 100k = 10M CDRs
    .venv/bin/python -m bench.queries --days 10 --per-day 20000 --distinct-days 2   # quick

CDRs come from the sandbox generator (no HTTP) through `decode_page` + `normalize` into a Parquet
lake, each day's `agg_*` partitions written as the `reporting_aggregates` asset writes them
(`write_aggregates`), then `build_warehouse`. The generator makes ~10k CDRs/s in pure Python, so by default only
`--distinct-days` days are generated and normalized; the other days are copies of those
normalized tables with dates shifted and ids made unique (same shape, same sizes). Pass
`--distinct-days` equal to `--days` to generate everything (slow on 2 cores).
"""

from __future__ import annotations

import argparse
import datetime as dt
import shutil
import statistics
import time
from pathlib import Path

import polars as pl

from connectors.sandbox.generator import Dataset, encode_page
from warehouse import snapshots
from warehouse.decode import decode_page
from warehouse.duck import build_warehouse, connect, write_aggregates
from warehouse.lake import Lake, partition_key
from warehouse.normalize import normalize
from warehouse.viewsql import reporting_sql_files

START = dt.date(2026, 1, 1)


def shifted(frame: pl.DataFrame, days: int, tag: str) -> pl.DataFrame:
    delta = dt.timedelta(days=days)
    cols = [pl.col("id") + tag, pl.col("date") + delta]
    cols += [pl.col(c) + delta for c in ("started_at", "ended_at") if c in frame.columns]
    return frame.with_columns(cols)


def build_lake(out: Path, days: int, per_day: int, distinct: int, raw: bool) -> dict[str, float]:
    lake = Lake(out.joinpath("lake").as_uri())
    ds = Dataset(seed=7, start_date=START, days=distinct, cdrs_per_day=per_day)
    t_gen = t_norm = t_write = t_agg = 0.0
    sources: list[dict[str, pl.DataFrame]] = []
    for i in range(distinct):
        t0 = time.perf_counter()
        records = ds.day(START + dt.timedelta(days=i)).records
        t1 = time.perf_counter()
        pages = [
            encode_page(records[j : j + 1000], len(records), None)
            for j in range(0, len(records), 1000)
        ]
        raw_df = pl.concat([decode_page(p) for p in pages])
        tables = normalize(raw_df).tables()
        if raw:
            tables["raw_cdrs"] = raw_df
        t2 = time.perf_counter()
        sources.append(tables)
        t_gen += t1 - t0
        t_norm += t2 - t1
        print(
            f"  generated+normalized day {i + 1}/{distinct}: gen {t1 - t0:.1f}s, decode+normalize {t2 - t1:.1f}s",
            flush=True,
        )
    for d in range(days):
        t0 = time.perf_counter()
        day = START + dt.timedelta(days=d)
        src = sources[d % distinct]
        for name, frame in src.items():
            out_frame = frame if d < distinct else shifted(frame, d - d % distinct, f"-d{d}")
            lake.write(name, partition_key("date", day), out_frame)
        t1 = time.perf_counter()
        write_aggregates(lake, partition_key("date", day))  # the asset's work for the day
        t_write += t1 - t0
        t_agg += time.perf_counter() - t1
        if d % 10 == 9:
            print(f"  wrote {d + 1}/{days} days", flush=True)
    at = dt.datetime.combine(START + dt.timedelta(days=days - 1), dt.time(1), dt.UTC)
    frames = snapshots.users_frames(ds.users, ds.deleted_users, at)
    frames["queues"] = snapshots.queues_frames(ds.queues, {}, {}, at)["queues"]
    frames["balance_snapshots"] = snapshots.balance_frame(ds.balance, at)
    for name, frame in frames.items():
        lake.write(name, partition_key("snapshot_date", at.date()), frame)
    total = per_day * distinct
    return {
        "generate_s": t_gen,
        "normalize_s": t_norm,
        "normalize_cdrs_per_s": total / t_norm if t_norm else 0.0,
        "write_s": t_write,
        "aggregate_s": t_agg,
    }


def time_views(data_dir: Path, repeat: int) -> list[tuple[str, float, float, int]]:
    views = [p.stem.split("_", 1)[1] for p in reporting_sql_files()]
    results = []
    con = connect(data_dir)
    try:
        last = con.execute("SELECT max(date) FROM cdrs").fetchall()[0][0]
        for v in views:
            times, rows = [], 0
            for _ in range(repeat):
                t0 = time.perf_counter()
                rows = len(con.sql(f"SELECT * FROM {v}").fetchall())
                times.append(time.perf_counter() - t0)
            pruned = f"SELECT * FROM {v}"
            if v != "rpt_balance":
                pruned += f" WHERE date >= DATE '{last}' - INTERVAL 7 DAY"
            t0 = time.perf_counter()
            con.sql(pruned).fetchall()
            results.append((v, statistics.median(times), time.perf_counter() - t0, rows))
    finally:
        con.close()
    return results


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--days", type=int, default=100)
    ap.add_argument("--per-day", type=int, default=100_000)
    ap.add_argument("--distinct-days", type=int, default=4)
    ap.add_argument("--out", type=Path, default=Path("bench/out"))
    ap.add_argument("--raw", action="store_true", help="also write raw_cdrs (large)")
    ap.add_argument("--reuse", action="store_true", help="reuse an existing lake in --out")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    if not args.reuse:
        shutil.rmtree(args.out, ignore_errors=True)
        args.out.mkdir(parents=True)
        print(
            f"building lake: {args.days} days x {args.per_day} CDRs ({args.distinct_days} generated)"
        )
        stats = build_lake(
            args.out, args.days, args.per_day, min(args.distinct_days, args.days), args.raw
        )
        for k, v in stats.items():
            print(f"  {k}: {v:,.1f}")
    t0 = time.perf_counter()
    build_warehouse(args.out)
    print(f"build_warehouse: {time.perf_counter() - t0:.2f}s")
    with connect(args.out) as con:
        n = con.execute("SELECT count(*) FROM cdrs").fetchall()[0][0]
    print(f"\n{n:,} CDRs; median of {args.repeat} runs, full result fetched\n")
    print(f"{'view':<24} {'all days (s)':>12} {'last 7d (s)':>12} {'rows':>8}")
    for view, full, pruned, rows in time_views(args.out, args.repeat):
        flag = "" if full <= 1.0 else "  > 1 s"
        print(f"{view:<24} {full:>12.3f} {pruned:>12.3f} {rows:>8}{flag}")


if __name__ == "__main__":
    main()
