"""The allocator settings of `pipelines.memory` reach polars and Arrow, and never override a
deployment's own (each case in a fresh interpreter: the settings act at first import)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from pipelines.memory import POLARS_JEMALLOC

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


def _probe(first: str = "pipelines", **env: str) -> dict[str, str]:
    base = {
        k: v
        for k, v in os.environ.items()
        if k not in ("_RJEM_MALLOC_CONF", "ARROW_DEFAULT_MEMORY_POOL")
    }
    out = subprocess.run(
        [sys.executable, "-c", PROBE, first],
        env=base | env,
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    ).stdout
    return json.loads(out.splitlines()[-1])


def test_importing_pipelines_configures_polars_jemalloc_and_the_arrow_pool() -> None:
    seen = _probe()
    # Polars prepends its own defaults; jemalloc takes the last value of each option.
    assert seen["jemalloc"].endswith(POLARS_JEMALLOC)
    assert seen["arrow_pool"] == "system"


def test_settings_of_the_deployment_win() -> None:
    seen = _probe(_RJEM_MALLOC_CONF="narenas:4", ARROW_DEFAULT_MEMORY_POOL="mimalloc")
    assert seen["jemalloc"].endswith("narenas:4")
    assert POLARS_JEMALLOC not in seen["jemalloc"]
    assert seen["arrow_pool"] == "mimalloc"


def test_nothing_is_claimed_for_polars_once_it_is_loaded() -> None:
    # Too late for jemalloc: the variable would only mislead whoever reads it.
    seen = _probe("polars")
    assert POLARS_JEMALLOC not in seen["jemalloc"]
