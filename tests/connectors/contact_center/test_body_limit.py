"""A response body is read up to `max_response_bytes`, decoded: a body that never ends, or a
small compressed one that decodes to gigabytes, fails its request instead of filling the
memory (`httpx`'s `aread()` has no bound)."""

from __future__ import annotations

import asyncio
import gzip
from collections.abc import AsyncIterator

import httpx
import pytest

from connectors.contact_center import ResponseTooLargeError

from .conftest import make_client, make_sandbox

MIB = 2**20
LIMIT = 4 * MIB
# The endless body stops here: the code before the limit read all of it (then failed on it),
# and a test must not take the machine's memory.
SAFETY = 256 * MIB


class _Body(httpx.AsyncByteStream):
    """`total` bytes of a JSON-looking body, 1 MiB at a time; counts what was taken."""

    def __init__(self, total: int) -> None:
        self.total, self.sent = total, 0

    async def __aiter__(self) -> AsyncIterator[bytes]:
        chunk = b'{"users": [' + b" " * (MIB - 11)
        while self.sent < self.total:
            self.sent += len(chunk)
            yield chunk
            chunk = b" " * MIB


class _Serve(httpx.AsyncBaseTransport):
    """Answers every request with the same 200 response; counts the requests."""

    def __init__(self, headers: dict[str, str], body: _Body | bytes) -> None:
        self.headers, self.body, self.requests = headers, body, 0

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:  # noqa: ARG002
        self.requests += 1
        if isinstance(self.body, bytes):
            return httpx.Response(200, headers=self.headers, content=self.body)
        return httpx.Response(200, headers=self.headers, stream=self.body)


def _list_users(transport: _Serve) -> ResponseTooLargeError:
    async def main() -> None:
        sandbox = make_sandbox(cdrs_per_day=1, days=1)
        async with make_client(sandbox, transport=transport, max_response_bytes=LIMIT) as client:
            await asyncio.wait_for(client.list_users(), 60)

    with pytest.raises(ResponseTooLargeError) as info:
        asyncio.run(main())
    return info.value


def test_a_body_that_never_ends_fails_its_request_at_the_limit_without_a_retry() -> None:
    body = _Body(SAFETY)
    transport = _Serve({"content-type": "application/json"}, body)
    error = _list_users(transport)
    assert "max_response_bytes (4,194,304 bytes" in str(error)
    assert body.sent <= LIMIT + MIB  # stopped at the limit, not at the end of the stream
    assert transport.requests == 1  # the same request would bring it again


def test_a_compression_bomb_is_stopped_at_its_decoded_size() -> None:
    bomb = gzip.compress(b'{"users": [' + b" " * (64 * MIB) + b"]}", compresslevel=9)
    assert len(bomb) < 100_000
    headers = {"content-type": "application/json", "content-encoding": "gzip"}
    error = _list_users(_Serve(headers, bomb))
    assert "decoded" in str(error)


def test_a_declared_length_past_the_limit_is_refused_before_reading() -> None:
    body = _Body(SAFETY)
    headers = {"content-type": "application/json", "content-length": str(10 * 2**30)}
    _list_users(_Serve(headers, body))
    assert body.sent == 0
