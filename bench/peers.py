"""Side-by-side bench: dlt's `rest_api` source and `cdrhouse ingest` on the same CDR days.

    python -m bench.peers [--days 3] [--cdrs-per-day 200000] [--no-snapshots] [--json out.json]

Needs the `bench` extra (`pip install -e '.[dev,bench]'`, or `make bench`).

What runs where (the machine has 2 cores, so who burns CPU where matters):

* the **sandbox** is `python -m connectors.sandbox.serve` in its own process on loopback, with
  no faults, warmed (every day generated) before anything is timed (bench.ingest.ServedSandbox);
* **dlt** runs in its own subprocess (`python -m bench.peers --dlt-child ...`) the way a
  competent user would set it up: one `rest_api` resource on `/api/v4/reporting/cdrs` with the
  `started_at[gte]`/`started_at[lt]` filters, `limit=1000`, the cursor paginator
  (`metadata.next_cursor` -> `cursor`), bearer auth, `write_disposition="merge"`,
  `primary_key="id"`, `loader_file_format="parquet"`, destination duckdb; its pipelines dir,
  working dir and database are in a temp dir (no `.dlt/` config of this repo is read);
* **cdrhouse** is the default `cdrhouse ingest --start --end` (issue 23: snapshots of the
  directory and the balance included) as a subprocess with
  `CC_API_BASE_URL=http://127.0.0.1:<port>`, the sandbox key, a fresh `CDRHOUSE_DATA_DIR` and
  no `DAGSTER_HOME` (an ephemeral instance). `--no-snapshots` makes it load the CDRs only, as
  dlt does (the bench before 2026-11-29). For what tokens cost (issue 26: <= 10 % more
  wall), `cdrhouse ingest` runs four times, each into a fresh data dir, in the order raw,
  token, token, raw (`CDRHOUSE_PHONE_NUMBERS`, a bench key under `token`): the cost is the
  mean of the two pairs' wall ratios, so a drift of the machine's speed over those minutes
  (it is larger than the cost measured) adds to one pair what it takes from the other. The
  first pair's ratio alone (one raw run, then one token run: the bench before 2026-11-29
  evening) is printed too. The dlt comparison and the RSS target use the first raw run, as
  before. `--no-token` runs raw once. `--token-pairs N` runs no dlt: N such pairs, raw first
  in odd pairs, token first in even ones, and the mean of their ratios.

Each is measured as a child of this process: wall time, CPU time (the child's rusage from
wait4, including any children it reaped), peak RSS as the child's own VmHWM (`ru_maxrss` can
carry a parent's high-water mark across fork + exec) and the sampled peak of the whole process
tree. Afterwards both databases are opened and the distinct CDR ids compared, id by id: a bench
that compares different work is worthless, so a mismatch fails the run (exit code 1).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any, cast

DLT_PIPELINE = "cdrs_peer"
DLT_DATASET = "contact_center"
DLT_DATABASE = "dlt.duckdb"
TARGET_RATIO = 10.0  # issue 13: cdrhouse >= 10x faster than dlt in wall time
TARGET_RSS_MB = 400.0  # issue 13: cdrhouse ingest's peak RSS
TARGET_TOKEN_COST = 0.10  # issue 26: CDRHOUSE_PHONE_NUMBERS=token costs <= 10 % more wall


@dataclass
class PeerResult:
    loader: str
    wall_s: float
    cpu_s: float
    peak_rss_mb: float
    tree_peak_mb: float
    descendants: int
    sandbox_cpu_s: float
    rows: int = 0
    distinct_ids: int = 0
    steps: dict[str, float] = field(default_factory=dict)


# --------------------------------------------------------------------------- dlt (child side)


def dlt_config(base_url: str, api_key: str, start: date, end: date) -> dict[str, Any]:
    """dlt's `rest_api` configuration for the CDR endpoint over `[start, end)`."""
    return {
        "client": {
            "base_url": f"{base_url}/api/v4/",
            "auth": {"type": "bearer", "token": api_key},
            "paginator": {
                "type": "cursor",
                "cursor_path": "metadata.next_cursor",
                "cursor_param": "cursor",
            },
        },
        "resources": [
            {
                "name": "cdrs",
                "primary_key": "id",
                "write_disposition": "merge",
                "endpoint": {
                    "path": "reporting/cdrs",
                    "data_selector": "cdrs",
                    "params": {
                        "limit": 1000,  # the spec's maximum
                        "started_at[gte]": f"{start.isoformat()}T00:00:00Z",
                        "started_at[lt]": f"{end.isoformat()}T00:00:00Z",
                    },
                },
            }
        ],
    }


def dlt_child(base_url: str, api_key: str, start: date, end: date, workdir: Path) -> int:
    """Load the days with dlt; print dlt's own step timings as the last line (JSON)."""
    import dlt
    from dlt.sources.rest_api import rest_api_source

    # dlt's RESTAPIConfig is a TypedDict our plain dict does not claim to be; the bench extra
    # may also be absent where mypy runs (CI lints without it).
    source = rest_api_source(cast(Any, dlt_config(base_url, api_key, start, end)))
    pipeline = dlt.pipeline(
        pipeline_name=DLT_PIPELINE,
        destination=dlt.destinations.duckdb(str(workdir / DLT_DATABASE)),
        dataset_name=DLT_DATASET,
        pipelines_dir=str(workdir / "pipelines"),
    )
    pipeline.run(source, loader_file_format="parquet")
    trace = pipeline.last_trace
    assert trace is not None
    steps = {
        s.step: (s.finished_at - s.started_at).total_seconds()
        for s in trace.steps
        if s.finished_at is not None
    }
    print(json.dumps({"steps": steps}), flush=True)
    return 0


# --------------------------------------------------------------------------- parent side


def _clean_env() -> dict[str, str]:
    """This process's environment without anything that would point a loader elsewhere."""
    drop = ("CC_", "CDRHOUSE_", "DAGSTER_HOME", "DLT_", "RUNTIME__", "DESTINATION__", "SOURCES__")
    return {k: v for k, v in os.environ.items() if not k.startswith(drop)}


def run_dlt(sb: Any, key: str, start: date, end: date, workdir: Path) -> PeerResult:
    env = _clean_env() | {"RUNTIME__DLTHUB_TELEMETRY": "false", "RUNTIME__LOG_LEVEL": "WARNING"}
    env["PYTHONPATH"] = os.pathsep.join(
        [str(Path(__file__).resolve().parent.parent), *filter(None, [env.get("PYTHONPATH")])]
    )
    cmd = [
        sys.executable, "-m", "bench.peers", "--dlt-child", "--base-url", sb.base_url,
        "--api-key", key, "--start", start.isoformat(), "--end", end.isoformat(),
        "--workdir", str(workdir),
    ]  # fmt: skip
    return _measured("dlt 1.31 rest_api", cmd, env, workdir, sb, _dlt_steps)


def _dlt_steps(output: str) -> dict[str, float]:
    """dlt's own step timings: the child's last line (JSON)."""
    steps = json.loads(output.strip().splitlines()[-1]).get("steps", {})
    return {k: round(v, 2) for k, v in steps.items()}


def _measured(
    loader: str,
    cmd: list[str],
    env: dict[str, str],
    cwd: Path,
    sb: Any,
    steps_of: Callable[[str], dict[str, float]],
) -> PeerResult:
    """Run one loader as its own measured process; its figures and the sandbox's CPU."""
    from bench.ingest import measure_process

    sb_cpu0 = sb.cpu_s()
    m = measure_process(cmd, env, cwd=cwd)
    if m.returncode != 0:
        raise RuntimeError(f"{loader} failed ({m.returncode}):\n{m.output[-4000:]}")
    return PeerResult(
        loader=loader,
        wall_s=m.wall_s,
        cpu_s=m.cpu_s,
        peak_rss_mb=m.peak_rss_mb,
        tree_peak_mb=m.tree_peak_mb,
        descendants=m.descendants,
        sandbox_cpu_s=sb.cpu_s() - sb_cpu0,
        steps=steps_of(m.output),
    )


def run_cdrhouse(
    sb: Any,
    start: date,
    end: date,
    data_dir: Path,
    phone_numbers: str = "raw",
    snapshots: bool = True,
) -> PeerResult:
    from bench.ingest import cdrhouse_cmd, cdrhouse_env

    # CC_API_KEY: the sandbox key dlt gets too.
    env = cdrhouse_env(sb, data_dir, start, phone_numbers)
    args = ["ingest", "--start", start.isoformat(), "--end", end.isoformat()]
    cmd = cdrhouse_cmd(*args, *([] if snapshots else ["--no-snapshots"]))
    label = "cdrhouse ingest" if phone_numbers == "raw" else f"cdrhouse {phone_numbers}"
    return _measured(label, cmd, env, data_dir, sb, _cdrhouse_steps)


def _cdrhouse_steps(output: str) -> dict[str, float]:
    """Each run's seconds from its line of `cdrhouse ingest`'s output, as "run <label>"."""
    from bench.ingest import run_seconds

    return {f"run {label}": s for label, s in run_seconds(output).items()}


def compare_ids(cdrhouse_db: Path, dlt_db: Path) -> dict[str, int]:
    """Rows and distinct ids of each, and the ids only one of them has."""
    import duckdb

    with duckdb.connect(str(cdrhouse_db), read_only=True) as con:
        con.execute(f"ATTACH '{dlt_db}' AS peer (READ_ONLY)")
        ours = "(SELECT CAST(id AS VARCHAR) AS id FROM cdrs)"
        theirs = f"(SELECT CAST(id AS VARCHAR) AS id FROM peer.{DLT_DATASET}.cdrs)"
        row = con.execute(
            f"SELECT (SELECT count(*) FROM {ours}), (SELECT count(DISTINCT id) FROM {ours}), "
            f"(SELECT count(*) FROM {theirs}), (SELECT count(DISTINCT id) FROM {theirs}), "
            f"(SELECT count(*) FROM (SELECT id FROM {ours} EXCEPT SELECT id FROM {theirs})), "
            f"(SELECT count(*) FROM (SELECT id FROM {theirs} EXCEPT SELECT id FROM {ours}))"
        ).fetchone()
    assert row is not None
    names = ["cdrhouse_rows", "cdrhouse_ids", "dlt_rows", "dlt_ids", "only_cdrhouse", "only_dlt"]
    return dict(zip(names, (int(v) for v in row), strict=True))


def _report(results: list[PeerResult], ids: dict[str, int], header: str) -> list[str]:
    head = (
        f"{'loader':<18} {'rows':>9} {'distinct ids':>12} {'wall s':>8} {'CPU s':>8} "
        f"{'rows/s':>8} {'peak RSS MB':>11} {'tree MB':>8} {'sbx CPU s':>9}"
    )
    lines = [header, head, "-" * len(head)]
    lines.extend(
        f"{r.loader:<18} {r.rows:>9,} {r.distinct_ids:>12,} {r.wall_s:>8.2f} {r.cpu_s:>8.2f} "
        f"{r.rows / r.wall_s:>8,.0f} {r.peak_rss_mb:>11.0f} {r.tree_peak_mb:>8.0f} "
        f"{r.sandbox_cpu_s:>9.2f}"
        for r in results
    )
    for r in results:
        if r.steps:
            steps = ", ".join(f"{k} {v:.2f}s" for k, v in r.steps.items())
            lines.append(f"  {r.loader} steps: {steps}")
        if r.descendants:
            lines.append(f"  {r.loader} started {r.descendants} descendant process(es)")
    token = next((r for r in results if r.loader == "cdrhouse token"), None)
    by = {r.loader.split()[0]: r for r in results if r is not token}
    if "dlt" in by and "cdrhouse" in by:
        dlt, ours = by["dlt"], by["cdrhouse"]
        ratio = dlt.wall_s / ours.wall_s
        lines.append(
            f"ratio dlt wall / cdrhouse wall: {ratio:.2f}x (CPU {dlt.cpu_s / ours.cpu_s:.2f}x) "
            f"-> target >= {TARGET_RATIO:.0f}x: {'MET' if ratio >= TARGET_RATIO else 'MISSED'}"
        )
        lines.append(
            f"cdrhouse peak RSS {ours.peak_rss_mb:.0f} MB -> target <= {TARGET_RSS_MB:.0f} MB: "
            f"{'MET' if ours.peak_rss_mb <= TARGET_RSS_MB else 'MISSED'}"
        )
        if token is not None:
            cost = token.wall_s / ours.wall_s - 1
            lines.append(
                f"first pair, token / raw wall: {token.wall_s:.2f}s / {ours.wall_s:.2f}s = "
                f"{cost:+.1%} (CPU {token.cpu_s / ours.cpu_s - 1:+.1%}; one pair, raw first)"
            )
        same = ids["cdrhouse_ids"] == ids["dlt_ids"] and not ids["only_cdrhouse"]
        same = same and not ids["only_dlt"]
        lines.append(
            f"same work: {ids['cdrhouse_ids']:,} vs {ids['dlt_ids']:,} distinct ids, "
            f"{ids['only_cdrhouse']:,} only in cdrhouse, {ids['only_dlt']:,} only in dlt -> "
            f"{'OK' if same else 'MISMATCH: the two loaders did not load the same CDRs'}"
        )
    return lines


def _bench_days(days: int) -> tuple[date, date, list[date]]:
    """The benched days: whole past days, at least two back, so every CDR of them is visible
    (ended) already; (first, end, each day)."""
    first = datetime.now(UTC).date() - timedelta(days=days + 2)
    return first, first + timedelta(days=days), [first + timedelta(days=i) for i in range(days)]


def run(
    days: int,
    cdrs_per_day: int,
    keep: Path | None = None,
    with_token: bool = True,
    snapshots: bool = True,
) -> dict[str, Any]:
    from bench.ingest import ServedSandbox
    from connectors.sandbox.config import DEFAULT_API_KEY

    first, end, wanted = _bench_days(days)
    root = Path(tempfile.mkdtemp(prefix="cdrhouse-peers-", dir=keep))
    sb = ServedSandbox(first, days + 1, cdrs_per_day)
    try:
        warm = sb.warm(wanted)
        print(
            f"sandbox {sb.base_url}: warmed {days} day(s) of {cdrs_per_day:,} CDRs "
            f"[{first}, {end}) in {warm:.1f}s",
            flush=True,
        )
        dlt_dir, ours_dir = root / "dlt", root / "cdrhouse"
        dlt_dir.mkdir()
        ours_dir.mkdir()
        dlt = run_dlt(sb, DEFAULT_API_KEY, first, end, dlt_dir)
        print(f"dlt done in {dlt.wall_s:.1f}s", flush=True)
        ours = run_cdrhouse(sb, first, end, ours_dir, snapshots=snapshots)
        print(f"cdrhouse done in {ours.wall_s:.1f}s", flush=True)
        token, pairs = None, None
        if with_token:
            # raw (above), token, token, raw: see the module's text. The first token run's
            # warehouse is kept to compare its ids with dlt's.
            token_dir = root / "cdrhouse-token"
            token_dir.mkdir()
            token = run_cdrhouse(sb, first, end, token_dir, "token", snapshots)
            print(f"cdrhouse (token) done in {token.wall_s:.1f}s", flush=True)
            rest = _interleaved(sb, first, end, ["token", "raw"], snapshots)
            pairs = _pairs_summary([ours, rest[1]], [token, rest[0]])
    except BaseException:
        if keep is None:
            shutil.rmtree(root, ignore_errors=True)
        raise
    finally:
        sb.close()
    ids = compare_ids(ours_dir / "warehouse.duckdb", dlt_dir / DLT_DATABASE)
    dlt.rows, dlt.distinct_ids = ids["dlt_rows"], ids["dlt_ids"]
    ours.rows, ours.distinct_ids = ids["cdrhouse_rows"], ids["cdrhouse_ids"]
    load = os.getloadavg()
    header = (
        f"\npeers: {days} day(s) x {cdrs_per_day:,} CDRs, zero latency; load average at the end "
        f"{load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f} (1/5/15 min, 2 cores); cdrhouse "
        + ("the default command (snapshots included)" if snapshots else "--no-snapshots")
    )
    if token is not None:
        token_ids = compare_ids(
            root / "cdrhouse-token" / "warehouse.duckdb", dlt_dir / DLT_DATABASE
        )
        token.rows, token.distinct_ids = token_ids["cdrhouse_rows"], token_ids["cdrhouse_ids"]
        if token_ids["only_cdrhouse"] or token_ids["only_dlt"]:
            raise RuntimeError(f"the token run loaded other CDRs than dlt: {token_ids}")
    lines = _report([dlt, ours, *([token] if token else [])], ids, header)
    if pairs is not None:
        lines += pairs["lines"]
    print("\n".join(lines), flush=True)
    if keep is None:
        shutil.rmtree(root, ignore_errors=True)
    else:
        print(f"kept {root}")
    same = not ids["only_cdrhouse"] and not ids["only_dlt"]
    return {
        "days": days,
        "cdrs_per_day": cdrs_per_day,
        "range": [first.isoformat(), end.isoformat()],
        "results": [asdict(r) for r in (dlt, ours, token) if r is not None],
        "ratio_wall": dlt.wall_s / ours.wall_s,
        "ids": ids,
        "same_work": same and ids["cdrhouse_ids"] == ids["dlt_ids"],
        "load_avg": list(load),
        "snapshots": snapshots,
        "token_cost": None if pairs is None else {k: v for k, v in pairs.items() if k != "lines"},
        "report": lines,
    }


def _interleaved(
    sb: Any, first: date, end: date, modes: list[str], snapshots: bool
) -> list[PeerResult]:
    """`cdrhouse ingest` once per mode, in this order, each into a fresh data dir."""
    out = []
    for mode in modes:
        with tempfile.TemporaryDirectory(prefix="cdrhouse-pairs-") as tmp:
            r = run_cdrhouse(sb, first, end, Path(tmp), mode, snapshots)
        out.append(r)
        print(
            f"cdrhouse {mode:5s}: {r.wall_s:6.2f} s wall, {r.cpu_s:6.2f} s CPU, "
            f"{r.peak_rss_mb:4.0f} MB",
            flush=True,
        )
    return out


def _pairs_summary(raw: list[PeerResult], token: list[PeerResult]) -> dict[str, Any]:
    """Each pair's token / raw wall ratio, their mean against the target, and the lines."""
    ratios = [t.wall_s / r.wall_s - 1 for r, t in zip(raw, token, strict=True)]
    cpu = [t.cpu_s / r.cpu_s - 1 for r, t in zip(raw, token, strict=True)]
    mean = sum(ratios) / len(ratios)
    met = "MET" if mean <= TARGET_TOKEN_COST else "MISSED"
    lines = [
        f"raw wall: {', '.join(f'{r.wall_s:.2f}' for r in raw)} s; token wall: "
        f"{', '.join(f'{t.wall_s:.2f}' for t in token)} s (RSS raw "
        f"{', '.join(f'{r.peak_rss_mb:.0f}' for r in raw)} / token "
        f"{', '.join(f'{t.peak_rss_mb:.0f}' for t in token)} MB)",
        f"token / raw wall per pair: {', '.join(f'{x:+.1%}' for x in ratios)}; "
        f"mean {mean:+.1%} (CPU mean {sum(cpu) / len(cpu):+.1%}) "
        f"-> target <= +{TARGET_TOKEN_COST:.0%}: {met}",
    ]
    return {
        "ratios": ratios,
        "cpu_ratios": cpu,
        "mean": mean,
        "results": {"raw": [asdict(r) for r in raw], "token": [asdict(t) for t in token]},
        "lines": lines,
    }


def token_pairs(pairs: int, days: int, cdrs_per_day: int, snapshots: bool = True) -> dict[str, Any]:
    """What `token` costs, without dlt: `pairs` runs of `cdrhouse ingest` under `raw` and
    under `token`, interleaved (raw first in odd pairs, token first in even ones) on one warm
    sandbox, so drift of the machine's speed falls on both; each pair's ratio and the mean."""
    from bench.ingest import ServedSandbox

    first, end, wanted = _bench_days(days)
    sb = ServedSandbox(first, days + 1, cdrs_per_day)
    runs: dict[str, list[PeerResult]] = {"raw": [], "token": []}
    try:
        sb.warm(wanted)
        for i in range(pairs):
            modes = ["raw", "token"] if i % 2 == 0 else ["token", "raw"]
            for mode, r in zip(modes, _interleaved(sb, first, end, modes, snapshots), strict=True):
                runs[mode].append(r)
    finally:
        sb.close()
    summary = _pairs_summary(runs["raw"], runs["token"])
    load = os.getloadavg()
    lines = [
        *summary.pop("lines"),
        f"load at the end {load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f}",
    ]
    print("\n".join(lines), flush=True)
    return {"pairs": pairs, **summary, "load_avg": list(load), "report": lines}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.peers", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--days", type=int, default=3)
    parser.add_argument("--cdrs-per-day", type=int, default=200_000)
    parser.add_argument("--json", type=Path, default=None, help="also write the figures here")
    parser.add_argument("--keep", type=Path, default=None, help="keep both databases under here")
    parser.add_argument(
        "--no-token", action="store_true", help="skip the CDRHOUSE_PHONE_NUMBERS=token run"
    )
    parser.add_argument(
        "--no-snapshots",
        action="store_true",
        help="cdrhouse ingest --no-snapshots: the CDRs only, as dlt loads (the bench before "
        "2026-11-29)",
    )
    # The dlt subprocess (internal).
    parser.add_argument("--dlt-child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--base-url", help=argparse.SUPPRESS)
    parser.add_argument("--api-key", help=argparse.SUPPRESS)
    parser.add_argument("--start", type=date.fromisoformat, help=argparse.SUPPRESS)
    parser.add_argument("--end", type=date.fromisoformat, help=argparse.SUPPRESS)
    parser.add_argument("--workdir", type=Path, help=argparse.SUPPRESS)
    parser.add_argument(
        "--token-pairs",
        type=int,
        default=0,
        metavar="N",
        help="no dlt: N interleaved pairs of `cdrhouse ingest` under raw and token, and the "
        "mean of their wall ratios (what token costs, with the machine's drift on both)",
    )
    args = parser.parse_args(argv)
    if args.token_pairs:
        pairs = token_pairs(args.token_pairs, args.days, args.cdrs_per_day, not args.no_snapshots)
        if args.json is not None:
            args.json.write_text(json.dumps(pairs, indent=2))
        return 0
    if args.dlt_child:
        return dlt_child(args.base_url, args.api_key, args.start, args.end, args.workdir)
    summary = run(args.days, args.cdrs_per_day, args.keep, not args.no_token, not args.no_snapshots)
    if args.json is not None:
        args.json.write_text(json.dumps(summary, indent=2))
    return 0 if summary["same_work"] else 1


if __name__ == "__main__":
    sys.exit(main())
