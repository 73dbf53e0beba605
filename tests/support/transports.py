"""httpx transports for tests that look at what the client put on the wire."""

from __future__ import annotations

import httpx


class Recording(httpx.AsyncBaseTransport):
    """Passes every request on to `inner`, keeping a copy (body read, so tests can inspect it)."""

    def __init__(self, inner: httpx.AsyncBaseTransport) -> None:
        self.inner = inner
        self.requests: list[httpx.Request] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        await request.aread()
        self.requests.append(request)
        return await self.inner.handle_async_request(request)
