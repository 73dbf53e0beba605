"""The allocator settings of `pipelines.memory` reach polars and Arrow, and never override a
deployment's own (each case in a fresh interpreter: the settings act at first import)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from pipelines.memory import POLARS_JEMALLOC
from tests.support.clock import SessionClock
from tests.support.fresh import python

PROBE = """
import json, os, sys
first = sys.argv[1]
if first == "polars":
    import polars
import pipelines
import polars, pyarrow
print(json.dumps({
    "jemalloc": os.environ.get("_RJEM_MALLOC_CONF"),
    "arrow_pool": pyarrow.default_memory_pool().backend_name,
}))
"""


def _probe(tmp_path: Path, first: str = "pipelines", **env: str) -> dict[str, str]:
    drop = ("_RJEM_MALLOC_CONF", "ARROW_DEFAULT_MEMORY_POOL")
    out = python(tmp_path, "-c", PROBE, first, env=env, drop=drop).stdout
    return json.loads(out.splitlines()[-1])


def test_importing_pipelines_configures_polars_jemalloc_and_the_arrow_pool(tmp_path: Path) -> None:
    seen = _probe(tmp_path)
    # Polars prepends its own defaults; jemalloc takes the last value of each option.
    assert seen["jemalloc"].endswith(POLARS_JEMALLOC)
    assert seen["arrow_pool"] == "system"


def test_settings_of_the_deployment_win(tmp_path: Path) -> None:
    seen = _probe(tmp_path, _RJEM_MALLOC_CONF="narenas:4", ARROW_DEFAULT_MEMORY_POOL="mimalloc")
    assert seen["jemalloc"].endswith("narenas:4")
    assert POLARS_JEMALLOC not in seen["jemalloc"]
    assert seen["arrow_pool"] == "mimalloc"


def test_nothing_is_claimed_for_polars_once_it_is_loaded(tmp_path: Path) -> None:
    # Too late for jemalloc: the variable would only mislead whoever reads it.
    seen = _probe(tmp_path, "polars")
    assert POLARS_JEMALLOC not in seen["jemalloc"]


STEP_PROBE = """
import json, sys
import dagster as dg
from pipelines.definitions import CDR_JOB, defs

job = defs().resolve_job_def(CDR_JOB)
aggs = [k for k in job.asset_layer.executable_asset_keys if k.path[0].startswith("agg_")]
seen = {"after_load": "duckdb" in sys.modules}
day = job.execute_in_process(
    partition_key=sys.argv[1],
    asset_selection=[k for k in job.asset_layer.executable_asset_keys if k not in aggs],
)
seen["day_ok"] = day.success
seen["rows"] = [m.metadata.get("dagster/row_count").value
                for m in day.asset_materializations_for_node("raw_cdrs")
                if m.asset_key.path == ["cdrs"]]
seen["after_day"] = "duckdb" in sys.modules
seen["aggs_ok"] = job.execute_in_process(partition_key=sys.argv[1], asset_selection=aggs).success
seen["after_aggs"] = "duckdb" in sys.modules
print(json.dumps(seen))
"""


def test_the_cdr_day_step_runs_without_loading_duckdb(tmp_path: Path, clock: SessionClock) -> None:
    """DuckDB's library keeps ~35 MB resident once loaded; the day's CDR step, the peak of a
    run, never loads it. The aggregates step after it does (the control)."""
    day = clock.days_ago(2).isoformat()
    env = {"CC_API_BASE_URL": "sandbox", "CDRHOUSE_START_DATE": day}
    out = python(tmp_path, "-c", STEP_PROBE, day, env=env, timeout=300)
    seen = json.loads(out.stdout.splitlines()[-1])
    assert seen["day_ok"]
    assert seen["rows"]
    assert seen["rows"][0] > 0
    assert seen["after_load"] is False
    assert seen["after_day"] is False
    assert seen["aggs_ok"]
    assert seen["after_aggs"] is True


FRAGMENTED = """
import json
from pipelines.memory import release_free_memory

def rss_anon_mb():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("RssAnon:"):
                return int(line.split()[1]) / 1024

# 100 KB buffers (under glibc's mmap threshold, so on the heap), each followed by a small
# object that stays: once the buffers are freed, free pages lie between live ones.
big, kept = [], []
for _ in range(2000):
    big.append(bytearray(100_000))
    kept.append(bytearray(64))
del big
freed = rss_anon_mb()
released = release_free_memory()
print(json.dumps({"freed": freed, "after": rss_anon_mb(), "released": released}))
"""


@pytest.mark.skipif(sys.platform != "linux", reason="glibc's heap, read from /proc")
def test_free_pages_between_live_allocations_go_back_to_the_system(tmp_path: Path) -> None:
    """What the day's writer does after each row group: without it, RSS grows with the day."""
    seen = json.loads(python(tmp_path, "-c", FRAGMENTED).stdout.splitlines()[-1])
    assert seen["released"] is True
    assert seen["freed"] - seen["after"] > 50  # MB given back
    assert seen["after"] < seen["freed"] / 2
