"""`cdrhouse … | head`: a reader that stops early ends the command quietly, as it ends any
Unix filter (the shell's status 141, as `head` leaves `cat` with), not with a Python traceback
or an error line. The real command in its own process, its stdout a pipe whose reader has
already closed it, so every write fails."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from pipelines.cli import SIGPIPE_EXIT
from tests.support.paths import REPO_ROOT

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
    env = {**os.environ, "CDRHOUSE_DATA_DIR": str(small.data_dir)}
    read, write = os.pipe()
    os.close(read)  # the reader is gone before the first line
    try:
        done = subprocess.run(
            [sys.executable, "-m", "pipelines.cli", *argv],
            env=env,
            cwd=REPO_ROOT,
            stdout=write,
            stderr=subprocess.PIPE,
            text=True,
            timeout=120,
        )
    finally:
        os.close(write)
    assert done.stderr == ""
    assert done.returncode == SIGPIPE_EXIT
