"""A real socket: Sandbox.serve() and the `cdrhouse sandbox` command answering curl-like calls."""

from __future__ import annotations

import sys

import httpx

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
