"""Shared fixtures for the sandbox tests: a small dataset and a synchronous in-process client."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from datetime import UTC, date, datetime
from typing import Any

import httpx
import pytest

from connectors.sandbox import Sandbox
from connectors.sandbox.config import ALL_SCOPES, DEFAULT_API_KEY, SandboxConfig
from connectors.sandbox.faults import FaultConfig

START = date(2026, 11, 1)
DAYS = 3
PER_DAY = 400
# Frozen well after the data so every CDR has "arrived" unless a test moves the clock.
NOW = datetime(2026, 11, 10, 12, 0, tzinfo=UTC)
NARROW_KEY = "narrow-key"  # a valid key with one unrelated scope


class Api:
    """A synchronous face over httpx.AsyncClient on the sandbox's in-process transport."""

    def __init__(self, sandbox: Sandbox, key: str | None = DEFAULT_API_KEY) -> None:
        self._runner = asyncio.Runner()
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        self._client = httpx.AsyncClient(
            transport=sandbox.transport(), base_url=sandbox.base_url, headers=headers
        )

    def request(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        return self._runner.run(self._client.request(method, path, **kwargs))

    def get(self, path: str, **kwargs: Any) -> httpx.Response:
        return self.request("GET", path, **kwargs)

    def json(self, path: str, **kwargs: Any) -> Any:
        response = self.get(path, **kwargs)
        assert response.status_code == 200, (path, response.status_code, response.text)
        return response.json()

    def close(self) -> None:
        self._runner.run(self._client.aclose())
        self._runner.close()


def make_sandbox(seed: int = 7, faults: FaultConfig | None = None, **kw: Any) -> Sandbox:
    keys = {DEFAULT_API_KEY: ALL_SCOPES, NARROW_KEY: frozenset({"billing.balance.read"})}
    config = SandboxConfig(
        seed=seed,
        start_date=kw.pop("start_date", START),
        days=kw.pop("days", DAYS),
        cdrs_per_day=kw.pop("cdrs_per_day", PER_DAY),
        api_keys=keys,
        faults=faults or FaultConfig(),
        **kw,
    )
    sandbox = Sandbox(config)
    sandbox.clock.set(NOW)
    return sandbox


@pytest.fixture(scope="module")
def shared() -> Sandbox:
    """A read-only sandbox shared by a module (tests must not mutate it)."""
    return make_sandbox()


@pytest.fixture(scope="module")
def api(shared: Sandbox) -> Iterator[Api]:
    client = Api(shared)
    yield client
    client.close()


@pytest.fixture
def fresh() -> Sandbox:
    """A sandbox a test may mutate (faults, clock, state)."""
    return make_sandbox()


@pytest.fixture
def fresh_api(fresh: Sandbox) -> Iterator[Api]:
    client = Api(fresh)
    yield client
    client.close()
