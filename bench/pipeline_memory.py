"""Peak RSS of `cdrhouse ingest` for one day at growing day sizes (memory must stay flat).

The sandbox runs in this process on a loopback port, so the child's RSS is the pipeline's
alone (Dagster, the client, page decoding and the streaming Parquet writer), not the emulator's.

    .venv/bin/python -m bench.pipeline_memory [cdrs_per_day ...]
"""

import contextlib
import os
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import psutil

from connectors.sandbox import Sandbox, SandboxConfig
from connectors.sandbox.config import DEFAULT_API_KEY

REPO_ROOT = Path(__file__).resolve().parents[1]


def measure(cdrs_per_day: int) -> tuple[float, float]:
    """(peak child RSS in MiB, seconds) of ingesting one day of this size."""
    today = datetime.now(UTC).date()
    day = today - timedelta(days=1)
    sandbox = Sandbox(
        SandboxConfig(seed=3, cdrs_per_day=cdrs_per_day, start_date=day - timedelta(days=1), days=3)
    )
    with sandbox.serve() as handle, tempfile.TemporaryDirectory() as data_dir:
        sandbox.truth_cdrs(*_window(day))  # generate the day before timing the pipeline
        env = {
            **os.environ,
            "CC_API_BASE_URL": handle.base_url,
            "CC_API_KEY": DEFAULT_API_KEY,
            "CDRHOUSE_DATA_DIR": data_dir,
            "PYTHONPATH": str(REPO_ROOT),
        }
        env.pop("DAGSTER_HOME", None)
        cmd = [
            sys.executable,
            "-m",
            "pipelines.cli",
            "ingest",
            "--no-snapshots",
            "--start",
            day.isoformat(),
            "--end",
            today.isoformat(),
        ]
        begun = time.perf_counter()
        log = Path(data_dir) / "ingest.log"
        with log.open("wb") as out:
            proc = subprocess.Popen(cmd, env=env, stdout=out, stderr=subprocess.STDOUT)
            # Sample the child's RSS: its ru_maxrss would count the pages it shared with this
            # process (which holds the sandbox's day) between fork and exec.
            child, peak = psutil.Process(proc.pid), 0
            while proc.poll() is None:
                with contextlib.suppress(psutil.Error):
                    peak = max(peak, child.memory_info().rss)
                time.sleep(0.05)
        seconds = time.perf_counter() - begun
        if proc.returncode != 0:
            raise SystemExit(log.read_text())
        return peak / 2**20, seconds


def _window(day):
    start = datetime(day.year, day.month, day.day, tzinfo=UTC)
    return start, start + timedelta(days=1)


def main() -> None:
    sizes = [int(a) for a in sys.argv[1:]] or [2_000, 20_000, 60_000]
    print(f"{'cdrs/day':>10} {'peak RSS MiB':>13} {'seconds':>8} {'CDRs/s':>8}")
    for size in sizes:
        rss, seconds = measure(size)
        print(f"{size:>10,} {rss:>13.0f} {seconds:>8.1f} {size / seconds:>8.0f}", flush=True)


if __name__ == "__main__":
    main()
