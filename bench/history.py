"""The `history` scenario of bench.ingest: the nightly run against a lake of 7 and of 365 days.

    python -m bench.ingest --scenario history [--cdrs-per-day N]

The nightly lookback run (yesterday + DEFAULT_LOOKBACK_DAYS earlier days, and the snapshots,
as pipelines/defs/automation/schedules.py requests them) against a lake that already holds HISTORY_SMALL days,
then the same against one holding `Scenario.days` (365) days. "Yesterday" is two days back,
like the other scenarios, so every CDR of it has ended; it is new to the lake, the lookback
days are re-materialized. Building 365 real days would cost 365 Dagster runs whose refresh
grows with the lake (measured and printed: the base build's seconds per day), so the lake is
built for HISTORY_SMALL real days through `cdrhouse ingest`, and the other days are copies of
those days' `date=` partition directories (every table, the aggregates included, mtimes kept
so nothing looks stale) under new keys. Each measured nightly starts from a fresh copy of its
lake, alternating 7 / 365, best of `HISTORY_REPEATS`. Measured, each robust to how the
refresh is organized:

* the whole `cdrhouse ingest` (its own process, --verbose) and each of its runs' seconds;
* Dagster's per-step durations from the --verbose log, summed by step name (so a step whose
  cost grows with history shows up, whatever it is called);
* the view functions alone on the lake after the nightly, in a fresh process, best of 3:
  `warehouse.duck.refresh_views(data_dir)` (what a run calls at its end: rebuild only when the
  views would change) and the full rebuild `build_warehouse(data_dir)`.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

from bench.ingest import (
    Scenario,
    ServedSandbox,
    cdrhouse_cmd,
    cdrhouse_env,
    in_fresh_process,
    measure_process,
    run_seconds,
)

HISTORY_SMALL = 7
HISTORY_REPEATS = 2
_STEP_RE = re.compile(r'Finished execution of step "([^"]+)" in (?:(\d+)m )?([\d.]+)(ms|s|µs|us)\b')


def _step_seconds(log: str) -> dict[str, float]:
    """Dagster's STEP_SUCCESS durations in a --verbose log, summed per step name."""
    totals: dict[str, float] = {}
    scale = {"ms": 1e-3, "s": 1.0, "µs": 1e-6, "us": 1e-6}
    for name, minutes, value, unit in _STEP_RE.findall(log):
        seconds = float(value) * scale[unit] + (int(minutes) * 60 if minutes else 0)
        totals[name] = totals.get(name, 0.0) + seconds
    return totals


def _clone_days(data_dir: Path, sources: Sequence[date], targets: Sequence[date]) -> int:
    """Copy every table's `date=<source>` directory to `date=<target>`, cycling through the
    sources; returns the number of directories written."""
    lake = data_dir / "lake"
    written = 0
    for table in sorted(p for p in lake.iterdir() if p.is_dir()):
        for i, target in enumerate(targets):
            src = table / f"date={sources[i % len(sources)].isoformat()}"
            if src.is_dir():
                shutil.copytree(src, table / f"date={target.isoformat()}")  # copy2: mtimes kept
                written += 1
    return written


def _views_child(data_dir: str, repeats: int) -> dict[str, float | None]:
    """Best-of-`repeats` seconds of the warehouse's view functions on a lake after a nightly:
    `refresh_views` (what a run does at its end: rebuild only if the views would change) and
    the full rebuild `build_warehouse(data_dir)`. A function the code no longer has is
    left out; the nightly's own figures still stand."""
    import warehouse.duck as duck

    out: dict[str, float | None] = {}
    calls: list[tuple[str, Any]] = [
        ("refresh_views", lambda: duck.refresh_views(Path(data_dir))),
        ("views rebuilt", lambda: duck.build_warehouse(Path(data_dir))),
    ]
    for label, call in calls:
        best: float | None = None
        for _ in range(repeats):
            began = time.perf_counter()
            try:
                call()
            except (AttributeError, TypeError):  # renamed or re-signed by a redesign
                break
            took = time.perf_counter() - began
            best = took if best is None else min(best, took)
        out[label] = best
    return out


def _time_views(data_dir: Path, repeats: int = 3) -> dict[str, float | None]:
    return in_fresh_process(_views_child, str(data_dir), repeats)


@dataclass
class NightlyResult:
    lake_days: int
    wall_s: float
    cpu_s: float
    peak_rss_mb: float
    runs: dict[str, float]
    steps: dict[str, float]
    views: dict[str, float | None]


def run_history(scenario: Scenario, cdrs_per_day: int | None) -> dict[str, Any]:
    from pipelines.settings import DEFAULT_LOOKBACK_DAYS

    per_day = cdrs_per_day or scenario.cdrs_per_day
    today = datetime.now(UTC).date()
    yesterday = today - timedelta(days=2)  # complete and every CDR of it ended
    nightly = [yesterday - timedelta(days=i) for i in range(DEFAULT_LOOKBACK_DAYS, -1, -1)]
    newest = yesterday - timedelta(days=1)  # the lake's newest day before the nightly
    small = [newest - timedelta(days=i) for i in range(HISTORY_SMALL - 1, -1, -1)]
    large_first = newest - timedelta(days=scenario.days - 1)
    cloned = [large_first + timedelta(days=i) for i in range(scenario.days - HISTORY_SMALL)]
    root = Path(tempfile.mkdtemp(prefix="cdrhouse-history-"))
    sb = ServedSandbox(small[0], (yesterday - small[0]).days + 2, per_day)
    try:
        warm = sb.warm([*small, yesterday])
        print(
            f"[history] sandbox warmed: {HISTORY_SMALL + 1} day(s) of {per_day:,} CDRs in "
            f"{warm:.1f}s",
            flush=True,
        )
        # The base lake: HISTORY_SMALL real days (+ snapshots) through the real pipeline.
        base = root / "base-7"
        base.mkdir()
        build = measure_process(
            cdrhouse_cmd("ingest", "--start", small[0].isoformat(), "--end", yesterday.isoformat()),
            cdrhouse_env(sb, base, small[0]),
            cwd=base,
        )
        if build.returncode != 0:
            raise RuntimeError(f"building the base lake failed:\n{build.output[-4000:]}")
        day_runs = [s for k, s in run_seconds(build.output).items() if k != "snapshots"]
        per_day_s = sum(day_runs) / len(day_runs)
        print(
            f"[history] base lake: {HISTORY_SMALL} real days in {build.wall_s:.1f}s "
            f"({per_day_s:.2f}s per day's run, growing with the lake): {scenario.days} real "
            f"days would take over {per_day_s * scenario.days / 60:.0f} min, so "
            f"{len(cloned)} days are cloned from these {HISTORY_SMALL}",
            flush=True,
        )
        (base / "warehouse.duckdb").unlink(missing_ok=True)  # its views name this directory
        large = root / f"base-{scenario.days}"
        shutil.copytree(base, large)
        began = time.perf_counter()
        dirs = _clone_days(large, small, cloned)
        print(
            f"[history] {scenario.days}-day lake: {dirs:,} partition directories cloned in "
            f"{time.perf_counter() - began:.1f}s",
            flush=True,
        )
        results: dict[int, list[NightlyResult]] = {HISTORY_SMALL: [], scenario.days: []}
        for rep in range(HISTORY_REPEATS):
            for days, src, first in (
                (HISTORY_SMALL, base, small[0]),
                (scenario.days, large, large_first),
            ):
                run_dir = root / f"run-{days}-{rep}"
                shutil.copytree(src, run_dir)
                # Untimed: the up-to-date warehouse.duckdb a deployment has before its nightly
                # (the copied lake's views would name the source directory).
                prep = measure_process(
                    cdrhouse_cmd("lake", "views"), cdrhouse_env(sb, run_dir, first), cwd=run_dir
                )
                if prep.returncode != 0:
                    raise RuntimeError(f"cdrhouse lake views failed:\n{prep.output[-4000:]}")
                args: tuple[str, ...] = ("ingest", "--start", nightly[0].isoformat())
                args += ("--end", (yesterday + timedelta(days=1)).isoformat(), "--verbose")
                m = measure_process(
                    cdrhouse_cmd(*args), cdrhouse_env(sb, run_dir, first), cwd=run_dir
                )
                if m.returncode != 0:
                    raise RuntimeError(f"nightly on {days} days failed:\n{m.output[-4000:]}")
                result = NightlyResult(
                    lake_days=days,
                    wall_s=m.wall_s,
                    cpu_s=m.cpu_s,
                    peak_rss_mb=m.peak_rss_mb,
                    runs=run_seconds(m.output),
                    steps=_step_seconds(m.output),
                    views=_time_views(run_dir),
                )
                results[days].append(result)
                print(
                    f"[history] nightly with {days} days in the lake (#{rep + 1}): "
                    f"{m.wall_s:.1f}s wall, {m.cpu_s:.1f}s CPU",
                    flush=True,
                )
                shutil.rmtree(run_dir, ignore_errors=True)
    finally:
        sb.close()
        shutil.rmtree(root, ignore_errors=True)
    load = os.getloadavg()[0]
    lines, verdicts = _history_report(results, HISTORY_SMALL, scenario.days, yesterday)
    print(
        f"\nscenario history: nightly = {len(nightly)} CDR day(s) [{nightly[0]}, {yesterday}] "
        f"+ snapshots, {per_day:,} CDRs/day, best of {HISTORY_REPEATS}; load average at the "
        f"end {load:.1f} (2 cores)"
    )
    print("\n".join(lines + verdicts))
    return {
        "scenario": "history",
        "cdrs_per_day": per_day,
        "nightly_days": [d.isoformat() for d in nightly],
        "base_build_s": build.wall_s,
        "base_build_s_per_day": per_day_s,
        "results": {str(k): [asdict(r) for r in v] for k, v in results.items()},
        "load_avg": load,
        "verdicts": verdicts,
    }


def _history_report(
    results: dict[int, list[NightlyResult]], small: int, large: int, yesterday: date
) -> tuple[list[str], list[str]]:
    def best(days: int, get: Any) -> float | None:
        values = [v for r in results[days] if (v := get(r)) is not None]
        return min(values) if values else None

    rows: list[tuple[str, Any]] = [
        ("nightly wall s (whole cdrhouse ingest)", lambda r: r.wall_s),
        ("nightly CPU s", lambda r: r.cpu_s),
        ("nightly peak RSS MB", lambda r: r.peak_rss_mb),
    ]
    labels = sorted({k for rs in results.values() for r in rs for k in r.runs})
    rows += [(f"run {k} s", lambda r, k=k: r.runs.get(k)) for k in labels]
    steps = sorted({k for rs in results.values() for r in rs for k in r.steps})
    # Steps under 0.1 s everywhere (the per-asset check steps) are summed into one row.
    big = [
        k for k in steps if any(r.steps.get(k, 0.0) >= 0.1 for rs in results.values() for r in rs)
    ]
    small_steps = [k for k in steps if k not in big]
    rows += [(f"step {k} s (all runs)", lambda r, k=k: r.steps.get(k)) for k in big]
    if small_steps:
        rows.append(
            (
                f"{len(small_steps)} steps under 0.1 s each, summed",
                lambda r: sum(r.steps.get(k, 0.0) for k in small_steps),
            )
        )
    rows += [
        ("refresh_views() alone s (end of a run)", lambda r: r.views.get("refresh_views")),
        ("build_warehouse s", lambda r: r.views.get("views rebuilt")),
    ]
    head = f"{'':<58} {f'{small} days':>10} {f'{large} days':>10} {'ratio':>7}"
    lines = [head, "-" * len(head)]
    figures: dict[str, tuple[float | None, float | None]] = {}
    for label, get in rows:
        a, b = best(small, get), best(large, get)
        figures[label] = (a, b)
        ratio = f"{b / a:.2f}" if a and b else "-"
        fa = f"{a:.2f}" if a is not None else "-"
        fb = f"{b:.2f}" if b is not None else "-"
        lines.append(f"{label[:58]:<58} {fa:>10} {fb:>10} {ratio:>7}")
    verdicts: list[str] = []
    # The refresh inside the nightly: the aggregate steps (whatever they are called now).
    aggs = [k for k in figures if k.startswith("step ") and "aggregat" in k]
    for label in (
        "nightly wall s (whole cdrhouse ingest)",
        f"run {yesterday.isoformat()} s",
        *aggs,
        "refresh_views() alone s (end of a run)",
    ):
        a, b = figures.get(label, (None, None))
        if a and b:
            ok = b / a <= 1.5
            verdicts.append(
                f"target {large} days within 1.5x of {small} days, {label}: {b / a:.2f}x "
                f"({b - a:+.2f}s) -> {'MET' if ok else 'MISSED'}"
            )
    wall_a, wall_b = figures["nightly wall s (whole cdrhouse ingest)"]
    if wall_a and wall_b:
        verdicts.append(
            f"the nightly's cost of the extra {large - small} days: {wall_b - wall_a:+.1f}s"
        )
    return lines, verdicts
