"""A server that trickles its answer: a few bytes at a time, each within the read timeout.

httpx's read timeout counts from one read to the next, so without a deadline on the whole
response such a server (a stuck proxy, an overloaded gateway) holds a CDR fetch forever. The
client gives each attempt `request_deadline_s`, then retries a GET as after a read timeout."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import Any

import httpx
import orjson
import pytest

from connectors.contact_center import ContactCenterClient, TransportFailure
from connectors.sandbox import Sandbox
from connectors.sandbox.faults import FaultConfig

from .conftest import day, make_client, make_sandbox

CDRS_PATH = "/api/v4/reporting/cdrs"
# Far past the deadlines below, far short of a trickled page's minutes: a client without a
# deadline is still reading when this ends the test.
OUTER_LIMIT_S = 30.0


@contextmanager
def _client(sandbox: Sandbox, transport: str, **overrides: Any) -> Iterator[ContactCenterClient]:
    if transport == "in-process":
        yield make_client(sandbox, **overrides)
        return
    with sandbox.serve() as server:
        yield make_client(
            sandbox, base_url=server.base_url, transport=httpx.AsyncHTTPTransport(), **overrides
        )


async def _ids(client: ContactCenterClient, start: datetime, end: datetime) -> list[str]:
    async with client:
        pages = [page async for page in client.fetch_cdr_pages(start, end)]
    return [r["id"] for page in pages for r in orjson.loads(page.body)["cdrs"]]


@pytest.mark.parametrize("transport", ["in-process", "socket"])
def test_a_response_that_never_ends_in_time_fails_at_the_deadline(transport: str) -> None:
    sandbox = make_sandbox(cdrs_per_day=300, days=1)
    # Every CDR answer trickles: 256 bytes every 20 ms, so each read comes well within the
    # 1 s read timeout, and a 300-CDR page (~250 KB) would take ~20 s.
    sandbox.faults = FaultConfig(trickle_rate=1.0, trickle_gap_ms=20, paths=(CDRS_PATH,))
    start, end = day()
    settings = {"timeout_s": 1.0, "request_deadline_s": 0.5, "max_attempts": 2, "concurrency": 2}
    began = time.monotonic()
    with _client(sandbox, transport, **settings) as client, pytest.raises(TransportFailure) as err:
        asyncio.run(asyncio.wait_for(_ids(client, start, end), OUTER_LIMIT_S))
    took = time.monotonic() - began
    message = str(err.value)
    assert "request_deadline_s (0.5 s)" in message, message
    assert message.startswith(f"GET {CDRS_PATH} failed in transport"), message
    # Two attempts of 0.5 s each, their backoff, and the sandbox's start: nowhere near 20 s.
    assert took < 10, took


def test_trickled_answers_are_retried_and_every_cdr_arrives_once() -> None:
    sandbox = make_sandbox(cdrs_per_day=2000, days=1)
    start, end = day()
    truth = set(sandbox.truth_cdrs(start, end))
    sandbox.faults = FaultConfig(trickle_rate=0.3, trickle_gap_ms=20, paths=(CDRS_PATH,))
    before = sandbox.counters.get(CDRS_PATH, 0)
    settings = {"timeout_s": 1.0, "request_deadline_s": 0.3, "page_size": 200}
    with _client(sandbox, "socket", **settings) as client:
        ids = asyncio.run(asyncio.wait_for(_ids(client, start, end), OUTER_LIMIT_S))
        retries = client.stats["retries"]
    assert sorted(ids) == sorted(truth)  # each CDR once: a cut-off answer kept nothing
    assert retries > 0
    assert sandbox.counters.get(CDRS_PATH, 0) - before > len(truth) // 200


def test_a_directory_list_that_trickles_fails_at_the_deadline() -> None:
    # The other request path (no byte budget): the users' list, every answer trickled.
    sandbox = make_sandbox(cdrs_per_day=10, days=1)
    sandbox.faults = FaultConfig(trickle_rate=1.0, trickle_gap_ms=200, paths=("/api/v4/users",))
    settings: dict[str, Any] = {"timeout_s": 1.0, "request_deadline_s": 0.3, "max_attempts": 2}

    async def users() -> int:
        async with make_client(sandbox, **settings) as client:
            return len(await client.list_all_users())

    began = time.monotonic()
    with pytest.raises(TransportFailure, match=r"request_deadline_s \(0\.3 s\)"):
        asyncio.run(asyncio.wait_for(users(), OUTER_LIMIT_S))
    assert time.monotonic() - began < 10
