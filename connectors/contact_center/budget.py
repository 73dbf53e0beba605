"""`ByteBudget`: how many bytes of response bodies a client holds at once.

The CDR fetch walks `concurrency` sub-windows in parallel and queues pages ahead of its
consumer. With pages of ~1 MB that is a few dozen MB; with a page that carries one 40 MB
record, eight such bodies received at once would be 320 MB before anything is decoded. So
each CDR page's body is admitted against a budget *before it is read*, by its Content-Length:
the rest of the response waits in the socket (TCP flow control holds the server back), and the
bytes stay counted until the consumer releases them (the pipeline: once the page is written).
A body bigger than the whole budget is admitted alone, when nothing else is held: a big page
slows the day down, it never stops it.
"""

from __future__ import annotations

import asyncio
from collections import deque


class ByteBudget:
    """Bytes held at once, at most `limit` (or one body alone, whatever its size). Waiters are
    admitted first come, first served. Use from one event loop."""

    def __init__(self, limit: int) -> None:
        if limit < 1:
            raise ValueError("a byte budget needs a positive limit")
        self.limit = limit
        self.held = 0
        self.peak = 0  # the most held at once (for the benches' figures)
        self._waiters: deque[tuple[int, asyncio.Future[None]]] = deque()

    def _fits(self, n: int) -> bool:
        return self.held == 0 or self.held + n <= self.limit

    async def acquire(self, n: int) -> None:
        """Wait until `n` more bytes fit (or nothing else is held), then hold them."""
        if not self._waiters and self._fits(n):
            self._hold(n)
            return
        waiter = asyncio.get_running_loop().create_future()
        entry = (n, waiter)
        self._waiters.append(entry)
        try:
            await waiter  # `_wake` holds the bytes for us before it resolves the future
        except BaseException:
            if waiter.done() and not waiter.cancelled():
                self.release(n)  # admitted, but cancelled before we could use it
            else:
                if entry in self._waiters:
                    self._waiters.remove(entry)
                self._wake()  # a smaller waiter behind us may fit now
            raise

    def grow(self, n: int) -> None:
        """Hold `n` more bytes without waiting (a body longer than announced); `n` may be
        negative (shorter)."""
        self._hold(n)
        if n < 0:
            self._wake()

    def release(self, n: int) -> None:
        self.held -= n
        self._wake()

    def _hold(self, n: int) -> None:
        self.held += n
        self.peak = max(self.peak, self.held)

    def _wake(self) -> None:
        while self._waiters and self._fits(self._waiters[0][0]):
            n, waiter = self._waiters.popleft()
            if not waiter.done():
                self._hold(n)
                waiter.set_result(None)
