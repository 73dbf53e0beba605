"""`st run <url>/api/v4/openapi.json --checks all` against `cdrhouse sandbox` on a real port.

Fixed seed, 5 examples per operation, every phase schemathesis runs by default: the run must end
with 0 failures. `unsupported_method` is left out (the spec answers an unknown method with
404, "path invalid": see schemathesis.toml beside this file, which also holds the per-operation
exceptions, each with its spec line).

One worker (`--workers 1`): CPython 3.11 keeps the AST constructor's recursion depth in one
per-interpreter counter, so `ast.parse` in two threads at once (Hypothesis describing a
strategy's lambda, in two schemathesis workers) can raise "SystemError: AST constructor
recursion depth mismatch". With one worker, the one thread that generates is the only one that
parses while a phase runs (the phases run one after another). It costs a few seconds: the
sandbox answers in its own process either way.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.ports import free_port
from tests.support.processes import served_process

HERE = Path(__file__).parent
BIN = Path(sys.executable).parent


@pytest.mark.timeout(480)
def test_schemathesis_finds_no_failure(tmp_path: Path) -> None:
    st = BIN / "st"
    cdrhouse = BIN / "cdrhouse"
    if not st.exists() or not cdrhouse.exists():
        pytest.fail(
            "schemathesis (dev extra) and the cdrhouse script must be installed: make install"
        )
    port = free_port()
    serve = [
        str(cdrhouse), "sandbox", "--port", str(port), "--seed", "7",
        "--start-date", "2026-11-01", "--days", "2", "--cdrs-per-day", "200",
    ]  # fmt: skip
    url = f"http://127.0.0.1:{port}/api/v4/openapi.json"
    run = [
        str(st), "--config-file", str(HERE / "schemathesis.toml"), "run", url,
        "--checks", "all", "--exclude-checks", "unsupported_method",
        "--seed", "1", "--max-examples", "5", "--workers", "1", "--no-color",
        "-H", "Authorization: Bearer sbx-full-access-key",
    ]  # fmt: skip
    try:
        with served_process(serve, url):
            result = subprocess.run(
                run, cwd=tmp_path, capture_output=True, text=True, timeout=450, check=False
            )
    finally:
        shutil.rmtree(tmp_path / "schemathesis-report", ignore_errors=True)
    summary = result.stdout[result.stdout.find("= SUMMARY =") :]
    print(summary)  # shown with -rA / on failure: the lines the issue asks for
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-2000:]
    assert "Tested: 65" in summary
    assert " failures" not in summary.splitlines()[-1]
