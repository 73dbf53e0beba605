"""Big-record benchmark: a day whose CDR pages each carry one huge string, through `cdrhouse ingest`.

    python -m bench.big_records [--records 24] [--mib 40] [--cdrs-per-day 20000]
                                [--limit-mib 512] [--product-path DIR] [--json FILE]

A sandbox day is served on loopback through `RewritingApp` (connectors/sandbox/rewriting.py):
in each of `--records` hourly windows, the first call record gets a `data.summary` of
`--mib` MiB (letters and spaces, deterministic per CDR id, the same bytes on every request).
With the client's 1-hour sub-windows and 1,000-record pages, a day of 20,000 CDRs has one page
per window, so every page of the day carries one big record, and the client's parallel
sub-windows receive several at once.

The whole `cdrhouse ingest --no-snapshots` for that day runs as a subprocess; its peak RSS is
its own VmHWM, sampled from /proc (and the sampled sum over its process tree). Then the lake is
checked: every API id once in `raw_cdrs` and `cdrs`, rows == the API's total, quarantine empty,
and each big record's exact bytes (`raw_cdrs.record`) and summary (`cdr_calls.summary`), by
length and SHA-256. `--product-path` runs the command on another checkout (PYTHONPATH), e.g. a
`git worktree` of an older commit, to measure it on the same day.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import httpx
import pyarrow.parquet as pq

from bench.ingest import cdrhouse_cmd, cdrhouse_env, measure_process
from connectors.sandbox import Sandbox, SandboxConfig
from connectors.sandbox.config import DEFAULT_API_KEY
from connectors.sandbox.rewriting import (
    CDRS_PATH,
    RewritingApp,
    big_text,
    page_records,
    record_id,
    serve_app,
    with_summary,
)
from models.timestamps import iso_ms

MIB = 2**20


@dataclass(frozen=True)
class Served:
    base_url: str
    api_key: str


@dataclass
class Big:
    """One big record: its summary's and its whole record's length and SHA-256."""

    summary_len: int
    summary_sha: str
    record_len: int
    record_sha: str


@dataclass
class Figures:
    commit: str
    day: str
    cdrs_per_day: int
    api_total: int
    big_records: int
    big_mib: int
    wall_s: float = 0.0
    cpu_s: float = 0.0
    peak_rss_mib: float = 0.0
    tree_peak_mib: float = 0.0
    descendants: int = 0
    raw_rows: int = 0
    cdrs_rows: int = 0
    quarantine_rows: int = 0
    raw_row_groups: int = 0
    big_found: int = 0
    problems: list[str] = field(default_factory=list)
    load_avg: float = 0.0

    @property
    def exact(self) -> bool:
        return not self.problems


def _get(base_url: str, params: dict[str, str]) -> bytes:
    response = httpx.get(
        base_url + CDRS_PATH,
        params=params,
        headers={"Authorization": f"Bearer {DEFAULT_API_KEY}"},
        timeout=600,
    )
    response.raise_for_status()
    return response.content


def _window(start: datetime, end: datetime, **extra: str) -> dict[str, str]:
    return {"started_at[gte]": iso_ms(start), "started_at[lt]": iso_ms(end), **extra}


def choose_big(base_url: str, day: date, count: int) -> dict[str, bytes]:
    """The first call record of each of `count` hours of the day spread over it: id -> bytes."""
    start = datetime(day.year, day.month, day.day, tzinfo=UTC)
    chosen: dict[str, bytes] = {}
    for i in range(count):
        hour = start + timedelta(hours=i * 24 // count)
        body = _get(base_url, _window(hour, hour + timedelta(hours=1), type="call", limit="1"))
        (record,) = page_records(body)
        chosen[record_id(record)] = record
    return chosen


def _commit(product: Path) -> str:
    out = subprocess.run(
        ["git", "-C", str(product), "rev-parse", "--short", "HEAD"],
        capture_output=True,
        text=True,
        check=False,
    )
    dirty = subprocess.run(
        ["git", "-C", str(product), "status", "--porcelain", "--untracked-files=no"],
        capture_output=True,
        text=True,
        check=False,
    ).stdout.strip()
    return out.stdout.strip() + ("+dirty" if dirty else "") if out.returncode == 0 else "?"


def check_lake(lake: Path, day: date, api_ids: set[str], big: dict[str, Big], f: Figures) -> None:
    """Compare the landed day with the API, reading the big columns a row group at a time."""
    key = f"date={day.isoformat()}"
    raw_file = pq.ParquetFile(lake / "raw_cdrs" / key / "part-0.parquet")
    f.raw_rows = raw_file.metadata.num_rows
    f.raw_row_groups = raw_file.metadata.num_row_groups
    raw_ids: list[str] = []
    seen: dict[str, tuple[int, str]] = {}
    for i in range(raw_file.metadata.num_row_groups):
        group = raw_file.read_row_group(i, columns=["id", "record"])
        ids = group.column("id").to_pylist()
        raw_ids.extend(ids)
        records = group.column("record")
        for j, cdr_id in enumerate(ids):
            if cdr_id in big:
                text = records[j].as_py().encode()
                seen[cdr_id] = (len(text), hashlib.sha256(text).hexdigest())
        del group, records
    summaries: dict[str, tuple[int, str]] = {}
    calls = pq.ParquetFile(lake / "cdr_calls" / key / "part-0.parquet")
    for i in range(calls.metadata.num_row_groups):
        group = calls.read_row_group(i, columns=["id", "summary"])
        for cdr_id, summary in zip(
            group.column("id").to_pylist(), group.column("summary"), strict=True
        ):
            if cdr_id in big:
                text = summary.as_py().encode()
                summaries[cdr_id] = (len(text), hashlib.sha256(text).hexdigest())
        del group
    cdrs = pq.read_table(lake / "cdrs" / key / "part-0.parquet", columns=["id"])
    f.cdrs_rows = cdrs.num_rows
    quarantine = lake / "cdr_quarantine" / key / "part-0.parquet"
    f.quarantine_rows = pq.ParquetFile(quarantine).metadata.num_rows if quarantine.exists() else 0
    problems = f.problems
    if len(raw_ids) != len(set(raw_ids)):
        problems.append(f"raw_cdrs has {len(raw_ids) - len(set(raw_ids))} duplicate ids")
    if set(raw_ids) != api_ids:
        problems.append(
            f"raw_cdrs ids differ from the API's: {len(api_ids - set(raw_ids))} missing, "
            f"{len(set(raw_ids) - api_ids)} extra"
        )
    if set(cdrs.column("id").to_pylist()) != api_ids or f.cdrs_rows != len(api_ids):
        problems.append("cdrs ids differ from the API's")
    for name, rows in (("raw_cdrs", f.raw_rows), ("cdrs", f.cdrs_rows)):
        if rows != f.api_total:
            problems.append(f"{name} has {rows:,} rows, the API's total is {f.api_total:,}")
    if f.quarantine_rows:
        problems.append(f"{f.quarantine_rows} rows in cdr_quarantine")
    for cdr_id, want in big.items():
        if seen.get(cdr_id) != (want.record_len, want.record_sha):
            problems.append(f"raw_cdrs.record of {cdr_id} is not the served bytes")
        if summaries.get(cdr_id) != (want.summary_len, want.summary_sha):
            problems.append(f"cdr_calls.summary of {cdr_id} is not the served text")
        else:
            f.big_found += 1


def run(args: argparse.Namespace) -> Figures:
    today = datetime.now(UTC).date()
    day = today - timedelta(days=2)  # a whole past day: every CDR of it has ended
    size = args.mib * MIB
    config = SandboxConfig(seed=7, start_date=day, days=1, cdrs_per_day=args.cdrs_per_day)
    sandbox = Sandbox(config)
    chosen: set[str] = set()  # empty while choosing: the records as the sandbox writes them

    def rewrite(record: bytes) -> bytes:
        cdr_id = record_id(record)
        return with_summary(record, big_text(cdr_id, size)) if cdr_id in chosen else record

    app = RewritingApp(sandbox.app, rewrite)
    product = Path(args.product_path).resolve() if args.product_path else Path.cwd()
    with serve_app(app) as base_url:
        start = datetime(day.year, day.month, day.day, tzinfo=UTC)
        began = time.perf_counter()
        originals = choose_big(base_url, day, args.records)
        big: dict[str, Big] = {}
        for cdr_id, record in originals.items():
            text = big_text(cdr_id, size)
            served = with_summary(record, text)
            big[cdr_id] = Big(
                len(text),
                hashlib.sha256(text).hexdigest(),
                len(served),
                hashlib.sha256(served).hexdigest(),
            )
            chosen.add(cdr_id)
        total_body = _get(base_url, _window(start, start + timedelta(days=1), limit="1"))
        api_total = int(json.loads(total_body)["metadata"]["total"])
        api_ids = set(sandbox.truth_cdrs(start, start + timedelta(days=1)))
        print(
            f"day {day}: {api_total:,} CDRs, {len(big)} records with a {args.mib} MiB summary "
            f"(one per hourly window), prepared in {time.perf_counter() - began:.1f}s",
            flush=True,
        )
        f = Figures(_commit(product), day.isoformat(), args.cdrs_per_day, api_total, len(big),
                    args.mib)  # fmt: skip
        if len(api_ids) != api_total:
            f.problems.append(f"the sandbox's truth has {len(api_ids)} ids, its API {api_total}")
        with tempfile.TemporaryDirectory(prefix="cdrhouse-big-") as data_dir:
            env = cdrhouse_env(Served(base_url, DEFAULT_API_KEY), Path(data_dir), day)
            if args.product_path:
                env["PYTHONPATH"] = str(product)
            argv = ("ingest", "--start", day.isoformat(), "--end",
                    (day + timedelta(days=1)).isoformat(), "--no-snapshots")  # fmt: skip
            m = measure_process(cdrhouse_cmd(*argv), env, cwd=product, interval=0.05)
            f.wall_s, f.cpu_s = m.wall_s, m.cpu_s
            f.peak_rss_mib, f.tree_peak_mib = m.peak_rss_mb, m.tree_peak_mb
            f.descendants = m.descendants
            if m.returncode != 0:
                f.problems.append(f"cdrhouse ingest exited {m.returncode}")
                print(m.output[-4000:], file=sys.stderr)
            else:
                check_lake(Path(data_dir) / "lake", day, api_ids, big, f)
    f.load_avg = os.getloadavg()[0]
    return f


def report(f: Figures, limit_mib: int) -> str:
    ok = f.peak_rss_mib <= limit_mib
    lines = [
        f"commit {f.commit}; day {f.day}: {f.api_total:,} CDRs (API total), {f.big_records} x "
        f"{f.big_mib} MiB summaries; load average at the end {f.load_avg:.1f} (2 cores)",
        f"cdrhouse ingest: wall {f.wall_s:.1f}s, CPU {f.cpu_s:.1f}s, peak RSS (VmHWM) "
        f"{f.peak_rss_mib:.0f} MiB, process tree peak (sampled) {f.tree_peak_mib:.0f} MiB, "
        f"{f.descendants} descendant process(es)",
        f"lake: raw_cdrs {f.raw_rows:,} rows in {f.raw_row_groups} row groups, cdrs "
        f"{f.cdrs_rows:,}, quarantine {f.quarantine_rows}, big records exact "
        f"{f.big_found}/{f.big_records}",
        "day exact: yes" if f.exact else "day exact: NO\n  " + "\n  ".join(f.problems),
        f"peak RSS {f.peak_rss_mib:.0f} MiB <= {limit_mib} MiB -> {'MET' if ok else 'MISSED'}",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.big_records", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--records", type=int, default=24, help="big records, one per hour")
    parser.add_argument("--mib", type=int, default=40, help="size of each big summary")
    parser.add_argument("--cdrs-per-day", type=int, default=20_000)
    parser.add_argument("--limit-mib", type=int, default=512, help="the pod size to meet")
    parser.add_argument("--product-path", default=None, help="run cdrhouse from this checkout")
    parser.add_argument("--json", type=Path, default=None, help="also write the figures here")
    args = parser.parse_args(argv)
    figures = run(args)
    print(report(figures, args.limit_mib))
    if args.json is not None:
        args.json.write_text(json.dumps(asdict(figures), indent=2))
    return 0 if figures.exact else 1


if __name__ == "__main__":
    sys.exit(main())
