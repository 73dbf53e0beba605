"""Retry policy as data: which failures are retried, and how long to wait.

Which requests are retried (by `Safety`, see endpoints.py):

- READ (every GET) and IDEMPOTENT (PATCH of a campaign: sending the same fields twice leaves the
  campaign as one send would) are retried on any `RetriableAPIError`: 429, 5xx, transport
  failures and invalid bodies.
- ONCE (POSTs that create something - a call, an SMS, a campaign, leads, a callback - and the
  campaign start/stop/pause transitions, hangup, webhook retrigger, PATCH of leads) is retried
  only when the request provably never reached the server: connect error, connect timeout, pool
  timeout. A 5xx, a reset or a read timeout may come after the server acted, so a retry could
  send an SMS or start a call twice, so the caller gets the error and decides (e.g. look the
  SMS up before sending again). A 429 is the one server answer that is retried: the spec names
  it a refusal ("Clients should retry 429 with growing backoff"), so nothing was done.

Waits are exponential with full jitter (uniform in [0, min(cap, base * 2**n)]), replaced by the
server's Retry-After when it sent one; attempts and total time are both capped.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from connectors.contact_center.endpoints import Safety
from connectors.contact_center.errors import (
    RateLimitedError,
    RetriableAPIError,
    TransportFailure,
)


def is_retriable(error: Exception, safety: Safety) -> bool:
    """Whether `error` may be retried for a request of this safety class."""
    if not isinstance(error, RetriableAPIError):
        return False
    if safety is Safety.ONCE:
        # A 429 is the server refusing the request before acting on it (the spec's documented
        # rate limit), so it is as safe to resend as a request that never left.
        if isinstance(error, RateLimitedError):
            return True
        return isinstance(error, TransportFailure) and error.never_sent
    return True


@dataclass(frozen=True)
class RetryPolicy:
    """Backoff parameters; `delay()` is pure given the RNG."""

    max_attempts: int = 8
    max_total_s: float = 120.0
    base_s: float = 0.25
    cap_s: float = 20.0
    rng: random.Random = field(default_factory=random.Random, compare=False, repr=False)

    def delay(self, attempt: int, error: Exception | None = None) -> float:
        """Seconds to wait after failed attempt number `attempt` (1-based)."""
        if isinstance(error, RateLimitedError) and error.retry_after is not None:
            return error.retry_after
        ceiling = min(self.cap_s, self.base_s * 2 ** (attempt - 1))
        return self.rng.uniform(0.0, ceiling)

    def next_delay(
        self, attempt: int, elapsed_s: float, error: Exception, safety: Safety
    ) -> float | None:
        """The wait before another attempt, or None when the error is final or the budget spent."""
        if attempt >= self.max_attempts or not is_retriable(error, safety):
            return None
        wait = self.delay(attempt, error)
        if elapsed_s + wait > self.max_total_s:
            return None
        return wait
