"""`cdrhouse` in a fresh interpreter, and which heavy packages it imported.

The test process has Dagster, polars, DuckDB and pyarrow loaded already, so what a command
imports is only visible from a new process (`sys.modules` after `main(argv)`).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

from tests.support.paths import REPO_ROOT
from tests.support.privacy import with_raw_numbers

HEAVY = ("dagster", "polars", "duckdb", "pyarrow")

_RUN_MAIN = """
import contextlib, io, json, sys
from pipelines.cli import main

out, err = io.StringIO(), io.StringIO()
with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
    try:
        code = main(json.loads(sys.argv[1]), env=json.loads(sys.argv[2]))
    except SystemExit as exc:
        code = exc.code
print(json.dumps({"code": code, "out": out.getvalue(), "err": err.getvalue(),
                  "modules": sorted(sys.modules)}))
"""


def _env(tmp_path: Path) -> dict[str, str]:
    drop = ("CC_API_BASE_URL", "CC_API_KEY", "DAGSTER_HOME", "CDRHOUSE_LAKE_URI")
    env = {k: v for k, v in os.environ.items() if k not in drop}
    env |= {"PYTHONPATH": str(REPO_ROOT), "CDRHOUSE_DATA_DIR": str(tmp_path / "data")}
    return with_raw_numbers(env)


def heavy(modules: list[str]) -> list[str]:
    """The heavy packages (and Dagster's plugins) among imported module names."""
    return sorted(m for m in modules if m.split(".")[0] in HEAVY or m.startswith("dagster_"))


def python(
    tmp_path: Path,
    *args: str,
    env: Mapping[str, str] | None = None,
    drop: tuple[str, ...] = (),
    timeout: float = 120,
) -> subprocess.CompletedProcess[str]:
    """A fresh interpreter in `tmp_path`, no API source or instance set, callers' numbers
    `raw` (then `drop` removed from its environment and `env` added); it must exit 0."""
    base = {k: v for k, v in _env(tmp_path).items() if k not in drop}
    proc = subprocess.run(
        [sys.executable, *args],
        env=base | dict(env or {}),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert proc.returncode == 0, proc.stderr
    return proc


def run_main(tmp_path: Path, argv: list[str], env: dict[str, str]) -> dict[str, object]:
    """`pipelines.cli.main(argv, env=env)` in a fresh interpreter (`env` with
    `CDRHOUSE_PHONE_NUMBERS=raw` unless it says otherwise): its exit code, stdout, stderr and
    every module imported by then."""
    proc = python(tmp_path, "-c", _RUN_MAIN, json.dumps(argv), json.dumps(with_raw_numbers(env)))
    result: dict[str, object] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result
