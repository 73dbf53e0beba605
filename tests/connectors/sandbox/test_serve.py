"""A real socket: Sandbox.serve() and the `cdrhouse sandbox` command answering curl-like calls."""

from __future__ import annotations

import argparse
import signal
import socket
import subprocess
import sys

import httpx
import pytest

from connectors.sandbox.cli import add_arguments
from tests.connectors.sandbox.conftest import make_sandbox
from tests.support.ports import free_port
from tests.support.processes import served_process


def test_serve_over_a_real_socket() -> None:
    sandbox = make_sandbox()
    with sandbox.serve() as server:
        assert server.base_url.startswith("http://127.0.0.1:")
        response = httpx.get(
            server.base_url + "/api/v4/reporting/cdrs?limit=2",
            headers={"Authorization": "Bearer sbx-full-access-key"},
        )
    assert response.status_code == 200
    body = response.json()
    assert len(body["cdrs"]) == 2
    assert set(body["metadata"]) == {"total", "next_cursor"}


def test_cli_serves_on_a_port_and_prints_url_and_key() -> None:
    port = free_port()
    cmd = [
        sys.executable, "-m", "connectors.sandbox.serve", "--port", str(port),
        "--seed", "7", "--start-date", "2026-11-01", "--days", "2", "--cdrs-per-day", "300",
        "--api-key", "test-key-123",
    ]  # fmt: skip
    url = f"http://127.0.0.1:{port}/api/v4/reporting/cdrs?limit=2"
    with served_process(cmd, url, read_stdout=True) as proc:
        assert proc.stdout is not None
        first = proc.stdout.readline()
        assert f"http://127.0.0.1:{port}" in first
        assert "test-key-123" in proc.stdout.readline()
        response = httpx.get(url, headers={"Authorization": "Bearer test-key-123"})
        assert response.status_code == 200
        assert len(response.json()["cdrs"]) == 2
        assert httpx.get(url, headers={"Authorization": "Bearer nope"}).status_code == 401


def test_a_port_in_use_is_one_line_and_exit_2_with_nothing_printed_as_served() -> None:
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        cmd = [sys.executable, "-m", "connectors.sandbox.serve", "--port", str(port)]
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 2, done
    assert done.stdout == ""  # no URL printed as if it were served
    assert done.stderr.startswith(f"cdrhouse sandbox: error: cannot listen on 127.0.0.1:{port}")
    assert done.stderr.count("\n") == 1, done.stderr


@pytest.mark.parametrize("port", ["0", "-1", "65536", "99999", "http"])
def test_a_port_out_of_range_is_a_usage_error(port: str) -> None:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    with pytest.raises(SystemExit) as usage:
        parser.parse_args(["--port", port])
    assert usage.value.code == 2


def test_ctrl_c_stops_the_served_sandbox_with_exit_0() -> None:
    port = free_port()
    cmd = [sys.executable, "-m", "connectors.sandbox.serve", "--port", str(port), "--days", "1"]
    url = f"http://127.0.0.1:{port}/api/v4/reporting/cdrs?limit=1"
    with served_process(cmd, url) as proc:
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=60) == 0


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--days", "100000000"], "argument --days: 100000000 is out of range 1-36600"),
        (["--days", "0"], "argument --days: 0 is out of range 1-36600"),
        (["--cdrs-per-day", "-5"], "argument --cdrs-per-day: -5 is out of range 0-5000000"),
        (["--start-date", "2026-W45"], "argument --start-date: '2026-W45': expected YYYY-MM-DD"),
        (["--start-date", "20261101"], "argument --start-date: '20261101': expected YYYY-MM-DD"),
    ],
    ids=["days-past-the-calendar", "no-day", "negative-cdrs", "week-date", "basic-date"],
)
def test_a_sandbox_argument_out_of_its_range_is_a_usage_error(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """--days 100000000 was an OverflowError traceback (today - days), and a week date or
    20261101 was read as some day."""
    parser = argparse.ArgumentParser(prog="cdrhouse sandbox")
    add_arguments(parser)
    with pytest.raises(SystemExit) as usage:
        parser.parse_args(argv)
    assert usage.value.code == 2
    assert capsys.readouterr().err.splitlines()[-1] == f"cdrhouse sandbox: error: {message}"


def test_a_data_window_past_the_calendar_is_one_line_and_exit_2() -> None:
    cmd = [sys.executable, "-m", "pipelines.cli", "sandbox", "--port", str(free_port())]
    done = subprocess.run(
        [*cmd, "--start-date", "9999-12-30", "--days", "5"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr == "cdrhouse sandbox: Value error, start_date + days runs past 9999-12-31\n"
    assert done.stdout == ""
