"""`cdrhouse … | head`: a reader that stops early ends the command as it ends any Unix filter
(the shell's status 141, as `head` leaves `cat` with), not with a Python traceback or an error
line; a command that writes (`ingest | less`, quit early) says on stderr that it stopped. The
real command in its own process, its stdout a pipe whose reader has already closed it, so
every write fails."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from pipelines.cli import SIGPIPE_EXIT
from tests.support.paths import LOCAL_INSTANCE_YAML, REPO_ROOT

from .conftest import SmallWarehouse


@pytest.mark.parametrize(
    "argv",
    [
        ["sql", "SELECT range FROM range(5000)", "--max-rows", "5000"],
        ["sql", "SELECT range FROM range(5000)", "--format", "csv"],
        ["lake", "info"],
    ],
    ids=["sql-table", "sql-csv", "lake-info"],
)
def test_a_closed_pipe_ends_the_command_quietly(small: SmallWarehouse, argv: list[str]) -> None:
    done = _into_a_closed_pipe(argv, {"CDRHOUSE_DATA_DIR": str(small.data_dir)})
    assert done.stderr == ""
    assert done.returncode == SIGPIPE_EXIT


def test_an_ingest_stopped_by_a_closed_pipe_says_so(tmp_path: Path) -> None:
    (tmp_path / "dagster.yaml").write_text(LOCAL_INSTANCE_YAML.read_text())
    env = {
        "CC_API_BASE_URL": "sandbox",
        "CDRHOUSE_DATA_DIR": str(tmp_path / "data"),
        "CDRHOUSE_PHONE_NUMBERS": "raw",
        "CDRHOUSE_SANDBOX_CDRS_PER_DAY": "50",
        "DAGSTER_HOME": str(tmp_path),
    }
    argv = ["ingest", "--start", "2026-11-02", "--end", "2026-11-03", "--no-snapshots"]
    done = _into_a_closed_pipe(argv, env)
    assert done.returncode == SIGPIPE_EXIT
    assert done.stderr == (
        "cdrhouse ingest: stopped: its output was closed (the reader of the pipe exited); what "
        "was published before stays, run it again to finish\n"
    )
    # Its first line could not be written: it stopped before any run.
    assert not list((tmp_path / "data").rglob("*.parquet"))


def _into_a_closed_pipe(
    argv: list[str], values: dict[str, str]
) -> subprocess.CompletedProcess[str]:
    scrub = ("CC_API_", "CDRHOUSE_", "DAGSTER_")
    env = {k: v for k, v in os.environ.items() if not k.startswith(scrub)} | values
    read, write = os.pipe()
    os.close(read)  # the reader is gone before the first line
    try:
        return subprocess.run(
            [sys.executable, "-m", "pipelines.cli", *argv],
            env=env,
            cwd=REPO_ROOT,
            stdout=write,
            stderr=subprocess.PIPE,
            text=True,
            timeout=300,
        )
    finally:
        os.close(write)
