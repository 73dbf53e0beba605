"""Ingest benchmark: the real CDR ingestion against a sandbox served on loopback.

    python -m bench.ingest --scenario zero-latency|wan|large-day|week|history [--cdrs-per-day N]

Processes (the machine has 2 cores, so who burns CPU where matters):

* the **sandbox** runs as its own process (`python -m connectors.sandbox.serve`, a real uvicorn
  socket): its CPU is not charged to the ingest, and it is warmed (every day generated) before
  anything is timed; faults are switched on through `/_sandbox/faults` only after warming;
* the **ingest** runs in a fresh child process, so its wall time, CPU time and peak RSS are its
  own. For `zero-latency` and `wan` it is the body of the `raw_cdrs` asset without Dagster's
  event bookkeeping (multiprocessing, spawn): `ContactCenterResource.client` ->
  `fetch_cdr_pages` -> `decode_page_typed` -> the day writer (raw and typed tables) ->
  `WarehouseResource.refresh_views()`. `large-day`, `week` and `history` run the whole
  `cdrhouse ingest` command (Dagster runs, checks, aggregates) as a subprocess, and its peak RSS
  is that process's own VmHWM (`history`, the nightly against a 7- and a 365-day lake, is
  bench/history.py);
* the **floors** are measured in this (parent) process after the ingest, with the sandbox idle.

Floors, from the same run:

* CPU floor: the same page bytes, already in memory, parsed with `polars.read_json` and written
  to one Parquet file, in one process. Ratio = cdrhouse rows/s / floor rows/s (higher is better).
  For scenarios of more than `FLOOR_MAX_PAGES` pages the floor is measured on that many pages.
* Network floor: `pages / R`, or `pages x L / concurrency` when larger (L = mean latency incl.
  jitter). Ratio = wall / floor (lower is better). No latency and no rate limit: no floor.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import multiprocessing as mp
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass, field
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any, Protocol, TypeVar

import httpx

CDRS_PATH = "/api/v4/reporting/cdrs"
CONCURRENCY = 8  # ContactCenterResource's default; the network floor divides by it
FLOOR_MAX_PAGES = 200
T = TypeVar("T")


@dataclass(frozen=True)
class Scenario:
    name: str
    days: int
    cdrs_per_day: int
    faults: dict[str, Any] = field(default_factory=dict)
    client_rps: float | None = None  # the client's configured rate limit (a user setting)
    via_cli: bool = False
    reference_cdrs_per_day: int | None = None  # large-day: RSS compared with this day size


SCENARIOS = {
    "zero-latency": Scenario("zero-latency", 1, 200_000),
    "wan": Scenario(
        "wan",
        1,
        200_000,
        faults={"latency_ms": 50.0, "jitter_ms": 20.0, "rate_limit_rps": 20.0},
        client_rps=20.0,
    ),
    "large-day": Scenario("large-day", 1, 1_000_000, via_cli=True, reference_cdrs_per_day=100_000),
    "week": Scenario("week", 7, 200_000, via_cli=True),
    # days = days in the lake before the nightly run; see run_history.
    "history": Scenario("history", 365, 2_000, via_cli=True),
}


@dataclass
class Result:
    label: str
    rows: int = 0
    pages: int = 0
    requests: int = 0
    bytes: int = 0
    wall_s: float = 0.0
    cpu_s: float = 0.0
    peak_rss_mb: float = 0.0
    sandbox_cpu_s: float = 0.0
    warehouse_rows: int = 0

    @property
    def rows_per_s(self) -> float:
        return self.rows / self.wall_s if self.wall_s else 0.0


# --------------------------------------------------------------------------- the sandbox


class ServedSandbox:
    """`python -m connectors.sandbox.serve` in its own process, plus its admin routes.

    The sandbox package (starlette, the emulator) is imported here, never at module level: the
    ingest child re-imports this module, and its peak RSS must not include what the real
    pipeline never loads."""

    def __init__(self, start: date, days: int, cdrs_per_day: int) -> None:
        from bench.sandbox_serve import free_port
        from connectors.sandbox.config import DEFAULT_API_KEY

        self.api_key = DEFAULT_API_KEY  # the served sandbox's full-access key
        self.port = free_port()
        self.base_url = f"http://127.0.0.1:{self.port}"
        cmd = [
            sys.executable, "-m", "connectors.sandbox.serve", "--port", str(self.port),
            "--start-date", start.isoformat(), "--days", str(days),
            "--cdrs-per-day", str(cdrs_per_day),
        ]  # fmt: skip
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL)
        for _ in range(600):
            try:
                httpx.get(self.base_url + "/_sandbox/counters", timeout=1)
            except httpx.TransportError:
                if self.proc.poll() is not None:
                    raise RuntimeError("the sandbox process exited") from None
                time.sleep(0.1)
            else:
                return
        raise RuntimeError("the sandbox did not start")

    def warm(self, days: Sequence[date]) -> float:
        """Generate every day (first use builds it); returns the seconds it took."""
        began = time.perf_counter()
        for d in days:
            params = {"limit": "1", "started_at[gte]": f"{d}T00:00:00Z"}
            params["started_at[lt]"] = f"{d + timedelta(days=1)}T00:00:00Z"
            r = httpx.get(
                self.base_url + CDRS_PATH,
                params=params,
                headers={"Authorization": f"Bearer {self.api_key}"},
                timeout=600,
            )
            r.raise_for_status()
        return time.perf_counter() - began

    def set_faults(self, faults: dict[str, Any]) -> None:
        httpx.put(self.base_url + "/_sandbox/faults", json=faults, timeout=10).raise_for_status()

    def cdr_requests(self) -> int:
        counters = httpx.get(self.base_url + "/_sandbox/counters", timeout=10).json()
        requests = counters.get("requests", counters)
        return int(requests.get(CDRS_PATH, 0)) if isinstance(requests, dict) else 0

    def cpu_s(self) -> float:
        import psutil

        t = psutil.Process(self.proc.pid).cpu_times()
        return float(t.user + t.system)

    def close(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()


# --------------------------------------------------------------------------- the ingest


def _hwm_mb(pid: int | str = "self") -> float | None:
    """VmHWM (peak RSS of this address space) from /proc: unlike ru_maxrss it does not carry
    the parent's high-water mark across fork + exec."""
    try:
        with Path(f"/proc/{pid}/status").open() as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


def cpu_seconds() -> float:
    """This process's CPU time so far, user + system, all threads."""
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


def in_fresh_process(target: Callable[..., T], *args: Any) -> T:
    """`target(*args)` in a fresh (spawned) interpreter, so the CPU and peak RSS it reads are
    its own; its return value, or its exception raised here."""
    with ProcessPoolExecutor(max_workers=1, mp_context=mp.get_context("spawn")) as pool:
        return pool.submit(target, *args).result()


def _raw_ingest_child(
    base_url: str, api_key: str, day: date, data_dir: str, rps: float | None
) -> dict[str, Any]:
    """The `raw_cdrs` step's work for one day (raw and typed tables), in a fresh process; its
    figures. The key is an argument: this process must not import connectors.sandbox."""
    from pipelines.cdr_day import land_day
    from pipelines.resources import ContactCenterResource, WarehouseResource

    contact_center = ContactCenterResource(base_url=base_url, api_key=api_key, rate_limit_rps=rps)
    warehouse = WarehouseResource(data_dir=data_dir)
    log = logging.getLogger("bench.ingest")
    began, cpu0 = time.perf_counter(), cpu_seconds()
    # The raw_cdrs step's own code path (fetch -> decode once -> every CDR table, with the
    # checks' tallies), minus Dagster bookkeeping.
    stats, _ = land_day(contact_center, warehouse.lake(), log, day.isoformat())
    warehouse.refresh_views()
    wall, cpu = time.perf_counter() - began, cpu_seconds() - cpu0
    peak_mb = _hwm_mb() or resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {"rows": stats.rows, "pages": stats.pages, "bytes": stats.bytes, "wall_s": wall,
            "cpu_s": cpu, "peak_rss_mb": peak_mb}  # fmt: skip


def run_raw_ingest(sb: ServedSandbox, day: date, rps: float | None, label: str) -> Result:
    with tempfile.TemporaryDirectory(prefix="cdrhouse-bench-") as data_dir:
        requests0, sb_cpu0 = sb.cdr_requests(), sb.cpu_s()
        figures = in_fresh_process(_raw_ingest_child, sb.base_url, sb.api_key, day, data_dir, rps)
        result = Result(label=label, **figures)
        result.requests = sb.cdr_requests() - requests0
        result.sandbox_cpu_s = sb.cpu_s() - sb_cpu0
        result.warehouse_rows = _count(Path(data_dir) / "warehouse.duckdb", "raw_cdrs")
    return result


def run_cli_ingest(sb: ServedSandbox, start: date, end: date, label: str) -> Result:
    """`cdrhouse ingest --start --end --no-snapshots` against the served sandbox."""
    with tempfile.TemporaryDirectory(prefix="cdrhouse-bench-") as data_dir:
        requests0, sb_cpu0 = sb.cdr_requests(), sb.cpu_s()
        args = ("ingest", "--start", start.isoformat(), "--end", end.isoformat(), "--no-snapshots")
        m = measure_process(cdrhouse_cmd(*args), cdrhouse_env(sb, Path(data_dir), start))
        if m.returncode != 0:
            raise RuntimeError(f"cdrhouse ingest failed ({m.returncode}):\n{m.output}")
        database = Path(data_dir) / "warehouse.duckdb"
        result = Result(
            label=label,
            rows=_count(database, "raw_cdrs"),
            wall_s=m.wall_s,
            cpu_s=m.cpu_s,
            peak_rss_mb=m.peak_rss_mb,
            warehouse_rows=_count(database, "cdrs"),
        )
        result.requests = result.pages = sb.cdr_requests() - requests0
        result.sandbox_cpu_s = sb.cpu_s() - sb_cpu0
    return result


def _count(database: Path, table: str) -> int:
    import duckdb

    with duckdb.connect(str(database), read_only=True) as con:
        row = con.execute(f'select count(*) from "{table}"').fetchone()
    return int(row[0]) if row else 0


# --------------------------------------------------------------------------- floors


async def _fetch_bodies(base_url: str, api_key: str, day: date, max_pages: int) -> list[bytes]:
    from connectors.contact_center import ContactCenterClient
    from connectors.contact_center.settings import ClientSettings

    settings = ClientSettings(base_url=base_url, api_key=api_key)
    start = datetime(day.year, day.month, day.day, tzinfo=UTC)
    bodies: list[bytes] = []
    async with ContactCenterClient(settings) as client:
        async for page in client.fetch_cdr_pages(start, start + timedelta(days=1)):
            if page.count:
                bodies.append(page.body)
            if len(bodies) >= max_pages:
                break
    return bodies


def cpu_floor(bodies: list[bytes], repeats: int = 2) -> tuple[int, float]:
    """(rows, best seconds): polars.read_json of every page, then one Parquet file."""
    import polars as pl

    best = float("inf")
    rows = 0
    for _ in range(repeats):
        with tempfile.TemporaryDirectory(prefix="cdrhouse-floor-") as tmp:
            began = time.perf_counter()
            frames = [
                pl.read_json(body).select(pl.col("cdrs").explode()).unnest("cdrs")
                for body in bodies
            ]
            frame = pl.concat(frames, how="diagonal_relaxed")
            frame.write_parquet(Path(tmp) / "floor.parquet")
            best = min(best, time.perf_counter() - began)
            rows = frame.height
            del frames, frame
    return rows, best


def network_floor(scenario: Scenario, pages: int) -> float | None:
    latency_s = (
        scenario.faults.get("latency_ms", 0.0) + scenario.faults.get("jitter_ms", 0.0) / 2
    ) / 1000
    rps = scenario.faults.get("rate_limit_rps")
    floors = [pages * latency_s / CONCURRENCY] if latency_s else []
    if rps:
        floors.append(pages / rps)
    return max(floors) if floors else None


# --------------------------------------------------------------------------- report


def _table(
    results: list[Result],
    floor: tuple[int, float, int],
    net: dict[str, float | None],
) -> str:
    floor_rows, floor_s, floor_pages = floor
    floor_rate = floor_rows / floor_s
    head = (
        f"{'run':<24} {'rows':>10} {'wall s':>8} {'CPU s':>8} {'rows/s':>10} "
        f"{'peak RSS MB':>11} {'pages':>6} {'req':>6} {'sbx CPU s':>9} "
        f"{'x CPU floor':>11} {'net floor s':>11} {'x net floor':>11}"
    )
    lines = [head, "-" * len(head)]
    for r in results:
        nf = net.get(r.label)
        lines.append(
            f"{r.label:<24} {r.rows:>10,} {r.wall_s:>8.2f} {r.cpu_s:>8.2f} {r.rows_per_s:>10,.0f} "
            f"{r.peak_rss_mb:>11.0f} {r.pages:>6} {r.requests:>6} {r.sandbox_cpu_s:>9.2f} "
            f"{r.rows_per_s / floor_rate:>11.2f} "
            f"{(f'{nf:.2f}' if nf else '-'):>11} {(f'{r.wall_s / nf:.2f}' if nf else '-'):>11}"
        )
    lines.append(
        f"CPU floor (polars.read_json + write_parquet, one process, {floor_pages} pages in "
        f"memory): {floor_rows:,} rows in {floor_s:.2f}s = {floor_rate:,.0f} rows/s"
    )
    return "\n".join(lines)


def _targets(
    scenario: Scenario, results: list[Result], floor_rate: float, net: dict[str, float | None]
) -> list[str]:
    main = results[-1]
    out: list[str] = []
    if scenario.name == "zero-latency":
        ratio = main.rows_per_s / floor_rate
        out.append(
            f"target rows/s >= 0.6 x CPU floor: {ratio:.2f} -> {'MET' if ratio >= 0.6 else 'MISSED'}"
        )
    if scenario.name == "wan":
        nf = net[main.label]
        assert nf is not None
        ratio = main.wall_s / nf
        out.append(
            f"target wall <= 1.2 x network floor: {ratio:.2f} -> {'MET' if ratio <= 1.2 else 'MISSED'}"
        )
    if scenario.name == "large-day":
        ref = results[0]
        growth = main.peak_rss_mb / ref.peak_rss_mb - 1
        ok = main.peak_rss_mb <= 400 and growth <= 0.20
        out.append(
            f"target peak RSS <= 400 MB and <= +20% of the {ref.rows:,}-row day: "
            f"{main.peak_rss_mb:.0f} MB, {growth:+.0%} -> {'MET' if ok else 'MISSED'}"
        )
    # A raw run's rows are what the ingest said; a CLI run counts both from the warehouse
    # (raw_cdrs and cdrs), so there is nothing the ingest said to compare.
    if not scenario.via_cli:
        out.extend(
            f"WARNING {r.label}: warehouse has {r.warehouse_rows:,} rows, ingest said {r.rows:,}"
            for r in results
            if r.warehouse_rows != r.rows
        )
    return out


# --------------------------------------------------------------------------- measured processes


@dataclass
class Measured:
    """One child process: wall, CPU (its rusage, incl. the children it reaped), peak RSS."""

    wall_s: float
    cpu_s: float
    peak_rss_mb: float  # the child's own VmHWM (not ru_maxrss: see _hwm_mb)
    tree_peak_mb: float  # sampled peak of the summed VmRSS of the child and its descendants
    descendants: int  # how many descendant processes were seen
    output: str
    returncode: int


def measure_process(
    cmd: Sequence[str], env: dict[str, str], cwd: str | Path | None = None, interval: float = 0.2
) -> Measured:
    """Run `cmd` to completion; stdout+stderr are captured, never raised on a failure."""
    import psutil

    began = time.perf_counter()
    proc = subprocess.Popen(
        list(cmd), env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    )
    peaks: list[float] = []
    tree: list[float] = [0.0]
    seen: set[int] = set()
    done = threading.Event()

    def watch() -> None:  # until the child is reaped (no poll(): wait4 below reaps it)
        while not done.is_set():
            if (hwm := _hwm_mb(proc.pid)) is not None:
                peaks.append(hwm)
            try:
                me = psutil.Process(proc.pid)
                kids = me.children(recursive=True)
                seen.update(k.pid for k in kids)
                total = 0
                for p in [me, *kids]:
                    with contextlib.suppress(psutil.Error):
                        total += p.memory_info().rss
                tree.append(total / 2**20)
            except psutil.Error:
                pass
            done.wait(interval)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    assert proc.stdout is not None
    output = proc.stdout.read().decode(errors="replace")
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - began
    done.set()
    watcher.join()
    proc.returncode = os.waitstatus_to_exitcode(status)
    return Measured(
        wall_s=wall,
        cpu_s=usage.ru_utime + usage.ru_stime,
        peak_rss_mb=max(peaks) if peaks else usage.ru_maxrss / 1024,
        tree_peak_mb=max(tree),
        descendants=len(seen),
        output=output,
        returncode=proc.returncode,
    )


def cdrhouse_cmd(*args: str) -> list[str]:
    """`cdrhouse <args>`, by the venv's entry point when it has one."""
    exe = shutil.which("cdrhouse", path=str(Path(sys.executable).parent))
    return [*([exe] if exe else [sys.executable, "-m", "pipelines.cli"]), *args]


class Api(Protocol):
    """Where a benched `cdrhouse` finds the API: a served sandbox, or any other server."""

    @property
    def base_url(self) -> str: ...

    @property
    def api_key(self) -> str: ...


def cdrhouse_env(sb: Api, data_dir: Path, first_day: date) -> dict[str, str]:
    """The environment of a benched `cdrhouse` against `sb`: none of the caller's CC_*,
    CDRHOUSE_* or DAGSTER_HOME (an ephemeral instance); callers' numbers `raw`, the figures of
    record (a bench of `token` sets CDRHOUSE_PHONE_NUMBERS and CDRHOUSE_PII_KEY over it)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CC_", "CDRHOUSE_"))}
    env.pop("DAGSTER_HOME", None)
    return env | {
        "CC_API_BASE_URL": sb.base_url,
        "CC_API_KEY": sb.api_key,
        "CDRHOUSE_DATA_DIR": str(data_dir),
        "CDRHOUSE_PHONE_NUMBERS": "raw",
        # A deployment that has kept N days has its partitions start N days back.
        "CDRHOUSE_START_DATE": first_day.isoformat(),
    }


def run_seconds(output: str) -> dict[str, float]:
    """`ok   2026-11-19   raw_cdrs=…  checks 7/7 passed  1.1s` lines: label -> seconds."""
    runs: dict[str, float] = {}
    for line in output.splitlines():
        parts = line.split()
        if len(parts) >= 3 and parts[0] in ("ok", "FAIL") and parts[-1].endswith("s"):
            with contextlib.suppress(ValueError):
                runs[parts[1]] = float(parts[-1][:-1])
    return runs


# --------------------------------------------------------------------------- main


def run(scenario: Scenario, cdrs_per_day: int | None) -> dict[str, Any]:
    per_day = cdrs_per_day or scenario.cdrs_per_day
    today = datetime.now(UTC).date()
    # Whole past days, at least two back, so every CDR of them is visible (ended) already.
    first = today - timedelta(days=scenario.days + 2)
    days = [first + timedelta(days=i) for i in range(scenario.days)]
    results: list[Result] = []
    net: dict[str, float | None] = {}
    runs: list[tuple[int, str]] = []
    if scenario.reference_cdrs_per_day:
        ref = scenario.reference_cdrs_per_day * per_day // scenario.cdrs_per_day
        runs.append((ref, f"{scenario.name} ({ref // 1000}k ref)"))
    runs.append((per_day, scenario.name))
    bodies: list[bytes] = []
    for size, label in runs:
        sb = ServedSandbox(first, scenario.days + 1, size)
        try:
            warm = sb.warm(days)
            print(
                f"[{label}] sandbox warmed: {len(days)} day(s) of {size:,} CDRs in {warm:.1f}s",
                flush=True,
            )
            if scenario.faults:
                sb.set_faults(scenario.faults)
            if scenario.via_cli:
                result = run_cli_ingest(sb, days[0], days[-1] + timedelta(days=1), label)
            else:
                result = run_raw_ingest(sb, days[0], scenario.client_rps, label)
            if scenario.faults:
                sb.set_faults({})
            net[label] = network_floor(scenario, result.pages)
            results.append(result)
            print(
                f"[{label}] ingest done: {result.rows:,} rows in {result.wall_s:.2f}s", flush=True
            )
            if size == per_day:
                bodies = asyncio.run(
                    _fetch_bodies(sb.base_url, sb.api_key, days[0], FLOOR_MAX_PAGES)
                )
        finally:
            sb.close()
    rows, seconds = cpu_floor(bodies)
    table = _table(results, (rows, seconds, len(bodies)), net)
    verdicts = _targets(scenario, results, rows / seconds, net)
    load = os.getloadavg()[0]
    print(f"\nscenario {scenario.name}: {scenario.days} day(s) x {per_day:,} CDRs; "
          f"load average at the end {load:.1f} (2 cores)\n{table}")  # fmt: skip
    for line in verdicts:
        print(line)
    return {
        "scenario": scenario.name,
        "cdrs_per_day": per_day,
        "results": [asdict(r) | {"rows_per_s": r.rows_per_s} for r in results],
        "cpu_floor_rows_per_s": rows / seconds,
        "network_floor_s": net,
        "load_avg": load,
        "verdicts": verdicts,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.ingest", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--scenario", choices=sorted(SCENARIOS), required=True)
    parser.add_argument("--cdrs-per-day", type=int, default=None, help="override (quick runs)")
    parser.add_argument("--json", type=Path, default=None, help="also write the figures here")
    args = parser.parse_args(argv)
    scenario = SCENARIOS[args.scenario]
    if scenario.name == "history":
        from bench.history import run_history  # it imports this module

        summary = run_history(scenario, args.cdrs_per_day)
    else:
        summary = run(scenario, args.cdrs_per_day)
    if args.json is not None:
        args.json.write_text(json.dumps(summary, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
