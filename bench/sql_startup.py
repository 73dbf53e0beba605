"""Wall time of `cdrhouse sql "select 1"`, start to exit, over an existing data dir.

    .venv/bin/python -m bench.sql_startup --data-dir /tmp/demo/data        # after `cdrhouse demo`
    .venv/bin/python -m bench.sql_startup --data-dir DIR --repo . --repo /path/to/other/checkout

Each run is a fresh process (what an analyst pays per query): interpreter start, imports,
opening the warehouse, the query, printing. With several `--repo` checkouts (same venv, each
on PYTHONPATH in turn) the runs alternate between them, so a busy machine weighs on all alike.
One warm-up run per checkout is not counted.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--data-dir", type=Path, required=True, help="CDRHOUSE_DATA_DIR to query")
    parser.add_argument("--repo", type=Path, action="append", help="checkout to run (repeatable)")
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--query", default="select 1")
    args = parser.parse_args()
    repos = [r.resolve() for r in (args.repo or [Path()])]
    times: dict[Path, list[float]] = {r: [] for r in repos}
    for i in range(args.runs + 1):
        for repo in repos:
            env = {
                **os.environ,
                "CDRHOUSE_DATA_DIR": str(args.data_dir.resolve()),
                "PYTHONPATH": str(repo),
            }
            argv = [sys.executable, "-m", "pipelines.cli", "sql", args.query]
            start = time.perf_counter()
            done = subprocess.run(argv, env=env, cwd=repo, capture_output=True, text=True)
            elapsed = time.perf_counter() - start
            if done.returncode != 0:
                raise SystemExit(f"cdrhouse sql failed in {repo}: {done.stderr.strip()}")
            if i:  # the first round warms the page cache
                times[repo].append(elapsed)
    print(f"cdrhouse sql {args.query!r} over {args.data_dir} ({args.runs} runs per checkout)")
    for repo, t in times.items():
        print(
            f"  {repo}: wall s min {min(t):.3f}  median {statistics.median(t):.3f}  "
            f"max {max(t):.3f}"
        )
    in_process(args.data_dir, args.query, args.runs * 5)


def in_process(data_dir: Path, query: str, runs: int) -> None:
    """What `cdrhouse sql` adds inside the process: the plain read-only connection of before
    (`connect`) against the locked one and the statement check (`connect_analyst`,
    `read_statements`), each opening the warehouse and answering `query`."""
    from warehouse.duck import connect, connect_analyst
    from warehouse.sqlguard import read_statements

    def plain() -> None:
        con = connect(data_dir)
        con.sql(query).to_arrow_table()
        con.close()

    def locked() -> None:
        con = connect_analyst(data_dir)
        con.sql(read_statements(con, query)[-1]).to_arrow_table()
        con.close()

    print(f"in one process, {runs} runs each (open + check + answer):")
    for name, step in (("connect (before)", plain), ("connect_analyst + check", locked)):
        step()  # warm-up
        spent = []
        for _ in range(runs):
            start = time.perf_counter()
            step()
            spent.append(time.perf_counter() - start)
        print(f"  {name:<24} median {statistics.median(spent) * 1000:.1f} ms")


if __name__ == "__main__":
    main()
