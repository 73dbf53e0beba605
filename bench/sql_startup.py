"""Wall time of `cdrhouse sql "select 1"`, start to exit, over an existing data dir.

    .venv/bin/python -m bench.sql_startup --data-dir /tmp/demo/data        # after `cdrhouse demo`
    .venv/bin/python -m bench.sql_startup --data-dir DIR --runs 15 --query "select count(*) from cdrs"

Each run is a fresh process (what an analyst pays per query): interpreter start, imports,
opening the warehouse, the query, printing. One warm-up run is not counted.
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
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", type=Path, required=True, help="CDRHOUSE_DATA_DIR to query")
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--query", default="select 1")
    args = parser.parse_args()
    cli = Path(sys.executable).parent / "cdrhouse"
    env = {**os.environ, "CDRHOUSE_DATA_DIR": str(args.data_dir.resolve())}
    times: list[float] = []
    for i in range(args.runs + 1):
        start = time.perf_counter()
        done = subprocess.run([str(cli), "sql", args.query], env=env, capture_output=True, text=True)
        elapsed = time.perf_counter() - start
        if done.returncode != 0:
            raise SystemExit(f"cdrhouse sql failed: {done.stderr.strip()}")
        if i:  # the first run warms the page cache
            times.append(elapsed)
    print(f"cdrhouse sql {args.query!r} over {args.data_dir} ({args.runs} runs, one process each)")
    print(
        f"  wall s: min {min(times):.3f}  median {statistics.median(times):.3f}  "
        f"max {max(times):.3f}"
    )


if __name__ == "__main__":
    main()
