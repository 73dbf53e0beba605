"""An async token bucket shared by every request of one client.

All concurrent sub-window fetches draw from the same bucket, so a parallel fetch stays under
`rate_limit_rps` as a whole. A server 429 with Retry-After pauses the whole bucket, so the other
workers do not keep hitting a limit the server already told us about.
"""

from __future__ import annotations

import asyncio
import time


class TokenBucket:
    """`rate` tokens per second, at most `burst` saved up; `acquire()` waits for one token."""

    def __init__(self, rate: float | None, burst: int | None = None) -> None:
        if rate is not None and rate <= 0:
            raise ValueError("rate must be > 0 (or None for unlimited)")
        self.rate = rate
        self.capacity = float(burst if burst is not None else max(1, round(rate or 1)))
        self._tokens = self.capacity
        self._stamp = time.monotonic()
        self._paused_until = 0.0
        self._lock = asyncio.Lock()
        self.waited_s = 0.0  # total time callers spent waiting: a figure for logs and benches

    def pause(self, seconds: float) -> None:
        """Hold every caller for `seconds` (a server-sent Retry-After)."""
        self._paused_until = max(self._paused_until, time.monotonic() + seconds)

    async def acquire(self) -> None:
        """Wait until a request may be sent."""
        if self.rate is None and self._paused_until <= time.monotonic():
            return
        # One waiter at a time: FIFO order, and the refill arithmetic needs no re-checks.
        async with self._lock:
            began = time.monotonic()
            while True:
                now = time.monotonic()
                if now < self._paused_until:
                    await asyncio.sleep(self._paused_until - now)
                    continue
                if self.rate is None:
                    break
                self._tokens = min(self.capacity, self._tokens + (now - self._stamp) * self.rate)
                self._stamp = now
                if self._tokens >= 1.0:
                    self._tokens -= 1.0
                    break
                await asyncio.sleep((1.0 - self._tokens) / self.rate)
            self.waited_s += time.monotonic() - began
