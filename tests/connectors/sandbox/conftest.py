"""Shared fixtures for the sandbox tests: a small dataset and a synchronous in-process client."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator, Mapping
from datetime import UTC, date, datetime
from types import TracebackType
from typing import Any, Self

import httpx
import pytest

from connectors.sandbox import Sandbox
from connectors.sandbox.config import DEFAULT_API_KEY
from connectors.sandbox.faults import FaultConfig
from tests.support.sandboxes import make_sandbox as shared_make_sandbox

START = date(2026, 11, 1)
DAYS = 3
PER_DAY = 400
# Frozen well after the data so every CDR has "arrived" unless a test moves the clock.
NOW = datetime(2026, 11, 10, 12, 0, tzinfo=UTC)
NARROW_KEY = "narrow-key"  # a valid key with one unrelated scope


V4 = "/api/v4"


class Api:
    """A synchronous face over httpx.AsyncClient on the sandbox's in-process transport.

    Every path is sent with ``prefix`` in front: the read tests give full paths (prefix ""),
    the write tests give paths below ``/api/v4`` (prefix=V4). ``transport`` replaces the
    sandbox's own (e.g. one that answers an app exception with a 500, as a socket would).
    """

    def __init__(
        self,
        sandbox: Sandbox,
        key: str | None = DEFAULT_API_KEY,
        prefix: str = "",
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self._prefix = prefix
        self._runner = asyncio.Runner()
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        self._client = httpx.AsyncClient(
            transport=transport or sandbox.transport(), base_url=sandbox.base_url, headers=headers
        )

    def request(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        return self._runner.run(self._client.request(method, self._prefix + path, **kwargs))

    def get(self, path: str, **kwargs: Any) -> httpx.Response:
        return self.request("GET", path, **kwargs)

    def post(self, path: str, body: Any = None, **kwargs: Any) -> httpx.Response:
        return self.request("POST", path, json=body, **kwargs)

    def patch(self, path: str, body: Any = None, **kwargs: Any) -> httpx.Response:
        return self.request("PATCH", path, json=body, **kwargs)

    def json(self, path: str, **kwargs: Any) -> Any:
        response = self.get(path, **kwargs)
        assert response.status_code == 200, (path, response.status_code, response.text)
        return response.json()

    def close(self) -> None:
        self._runner.run(self._client.aclose())
        self._runner.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def v4_api(sandbox: Sandbox) -> Iterator[Api]:
    """The body of the write modules' ``api`` fixture: an /api/v4 client, closed afterwards."""
    with Api(sandbox, prefix=V4) as client:
        yield client


def make_write_sandbox(
    extra_keys: Mapping[str, frozenset[str]], now: datetime | None = None, **kw: Any
) -> Sandbox:
    """The small sandbox of the write tests: the default key plus ``extra_keys``."""
    return shared_make_sandbox(
        start_date=START, days=2, cdrs_per_day=300, now=now, extra_keys=extra_keys, **kw
    )


def make_sandbox(seed: int = 7, faults: FaultConfig | None = None, **kw: Any) -> Sandbox:
    return shared_make_sandbox(
        seed=seed,
        start_date=kw.pop("start_date", START),
        days=kw.pop("days", DAYS),
        cdrs_per_day=kw.pop("cdrs_per_day", PER_DAY),
        now=NOW,
        extra_keys={NARROW_KEY: frozenset({"billing.balance.read"})},
        faults=faults or FaultConfig(),
        **kw,
    )


@pytest.fixture(scope="module")
def shared() -> Sandbox:
    """A read-only sandbox shared by a module (tests must not mutate it)."""
    return make_sandbox()


@pytest.fixture(scope="module")
def api(shared: Sandbox) -> Iterator[Api]:
    with Api(shared) as client:
        yield client


@pytest.fixture
def fresh() -> Sandbox:
    """A sandbox a test may mutate (faults, clock, state)."""
    return make_sandbox()


@pytest.fixture
def fresh_api(fresh: Sandbox) -> Iterator[Api]:
    with Api(fresh) as client:
        yield client
