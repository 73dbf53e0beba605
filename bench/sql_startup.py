"""Wall time of `cdrhouse sql QUERY`, start to exit, against plain DuckDB in a fresh process.

    .venv/bin/python -m bench.sql_startup --data-dir /tmp/demo/data        # after `cdrhouse demo`
    .venv/bin/python -m bench.sql_startup --data-dir DIR --repo . --repo /path/to/other/checkout

Each run is a fresh process (what an analyst pays per query): interpreter start, imports,
opening the warehouse, the query, printing. The yardstick, in the same rounds, is
`python -c "import duckdb; duckdb.connect(WAREHOUSE, read_only=True).sql(QUERY).fetchall()"`:
the least any Python answer of that query can cost. Each round runs every process once, one
after the other (the yardstick, then each `--repo` checkout on PYTHONPATH in turn), so a busy
machine weighs on all alike; one warm-up round is not counted. The target (issue 24): the
median of `cdrhouse sql` at most 2x the yardstick's median.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

TARGET_RATIO = 2.0
# A query on a view (the lake's CDRs through `cdrs`), as an analyst types it.
QUERY = "SELECT type, count(*) AS cdrs FROM cdrs GROUP BY type ORDER BY type"
BARE = "import duckdb, sys; duckdb.connect(sys.argv[1], read_only=True).sql(sys.argv[2]).fetchall()"


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--data-dir", type=Path, required=True, help="CDRHOUSE_DATA_DIR to query")
    parser.add_argument("--repo", type=Path, action="append", help="checkout to run (repeatable)")
    parser.add_argument("--runs", type=int, default=15, help="counted rounds (default 15)")
    parser.add_argument("--query", default=QUERY)
    parser.add_argument("--in-process", action="store_true", help="also time the connections")
    args = parser.parse_args()
    data_dir = args.data_dir.resolve()
    warehouse = data_dir / "warehouse.duckdb"
    if not warehouse.exists():
        raise SystemExit(f"no warehouse at {warehouse}; run `cdrhouse demo` first")
    repos = [r.resolve() for r in (args.repo or [Path()])]
    base_env = {**os.environ, "CDRHOUSE_DATA_DIR": str(data_dir)}
    commands: dict[str, tuple[list[str], dict[str, str], Path]] = {
        "duckdb": ([sys.executable, "-c", BARE, str(warehouse), args.query], base_env, Path()),
    }
    for repo in repos:
        argv = [sys.executable, "-m", "pipelines.cli", "sql", args.query]
        commands[f"cdrhouse sql @ {repo}"] = (argv, {**base_env, "PYTHONPATH": str(repo)}, repo)
    times: dict[str, list[float]] = {name: [] for name in commands}
    for i in range(args.runs + 1):
        for name, (argv, env, cwd) in commands.items():
            start = time.perf_counter()
            done = subprocess.run(argv, env=env, cwd=cwd, capture_output=True, text=True)
            elapsed = time.perf_counter() - start
            if done.returncode != 0:
                raise SystemExit(f"{name} failed: {done.stderr.strip()}")
            if i:  # the first round warms the page cache
                times[name].append(elapsed)
    bytecode = "off" if os.environ.get("PYTHONDONTWRITEBYTECODE") else "on"
    print(f"query: {args.query}")
    print(
        f"over {warehouse}: {args.runs} alternating rounds, fresh process each, "
        f"bytecode cache {bytecode}, load average {_load()} at the end"
    )
    bare = statistics.median(times["duckdb"])
    for name, spent in times.items():
        print(
            f"  {name:<40} wall s median {statistics.median(spent):.3f}  "
            f"min {min(spent):.3f}  max {max(spent):.3f}"
        )
    for name in list(commands)[1:]:
        ratio = statistics.median(times[name]) / bare
        verdict = "MET" if ratio <= TARGET_RATIO else "MISSED"
        print(f"  ratio {name} / duckdb: {ratio:.2f} (target <= {TARGET_RATIO:g}) -> {verdict}")
    if args.in_process:
        in_process(data_dir, args.query, args.runs * 3)


def _load() -> str:
    return " / ".join(f"{x:.2f}" for x in os.getloadavg())


def in_process(data_dir: Path, query: str, runs: int) -> None:
    """What `cdrhouse sql` adds inside the process: the plain read-only connection (`connect`)
    against the locked one and the statement check (`connect_analyst`, `read_statements`),
    each opening the warehouse and answering `query`."""
    from warehouse.analyst import connect_analyst
    from warehouse.duck import connect
    from warehouse.sqlguard import read_statements

    def plain() -> None:
        con = connect(data_dir)
        con.sql(query).fetchall()
        con.close()

    def locked() -> None:
        con = connect_analyst(data_dir)
        con.sql(read_statements(con, query)[-1]).fetchall()
        con.close()

    print(f"in one process, {runs} runs each (open + check + answer):")
    for name, step in (("connect (plain)", plain), ("connect_analyst + check", locked)):
        step()  # warm-up
        spent = []
        for _ in range(runs):
            start = time.perf_counter()
            step()
            spent.append(time.perf_counter() - start)
        print(f"  {name:<24} median {statistics.median(spent) * 1000:.1f} ms")


if __name__ == "__main__":
    main()
