"""Retry policy as data: which failures are retried, the budgets, and how long to wait.

Which failures are retried depends on the request's `Safety` (endpoints.py); `RETRY_ON` is the
table, over the retriable failures of `Failure`:

- READ (every GET) and IDEMPOTENT (PATCH of a campaign: sending the same fields twice leaves the
  campaign as one send would) are retried on every one: 429, 5xx, transport failures and
  invalid bodies.
- ONCE (POSTs that create something - a call, an SMS, a campaign, leads, a callback - and the
  campaign start/stop/pause transitions, hangup, webhook retrigger, PATCH of leads) is retried
  only when the request provably never reached the server: connect error, connect timeout, pool
  timeout. A 5xx, a reset or a read timeout may come after the server acted, so a retry could
  send an SMS or start a call twice, so the caller gets the error and decides (e.g. look the
  SMS up before sending again). A 429 is the one server answer that is retried: the spec names
  it a refusal ("Clients should retry 429 with growing backoff"), so nothing was done.

Budgets: a request (one `ClientCore._send` call, `RequestRetries`) has `max_attempts` attempts
within `max_total_s`. A caller may add a `SharedBudget` for a failure the table calls final but
the caller knows to be transient where it sends (cdr.py: a cursor rejected past the offset
window). Its retries are counted across every request that shares it, `max_attempts` failures in
all, with no time cap; each one is a new request, whose own budget starts over.

Waits are exponential with full jitter (uniform in [0, min(cap, base * 2**n)]), replaced by the
server's Retry-After when it sent one.
"""

from __future__ import annotations

import random
import time
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum
from types import MappingProxyType

from connectors.contact_center.endpoints import Safety
from connectors.contact_center.errors import (
    ContactCenterError,
    InvalidBodyError,
    RateLimitedError,
    ServerError,
    TransportFailure,
)


class Failure(Enum):
    """A retriable failure, as the policy tells them apart."""

    RATE_LIMITED = "429"
    SERVER = "5xx"
    INVALID_BODY = "2xx body that is not the JSON it should be"
    UNSENT = "transport failure before any byte of the request left"
    TRANSPORT = "transport failure after the request may have arrived"


def failure_of(error: Exception) -> Failure | None:
    """The policy's name for `error`; None for an error that is never retried (fatal ones)."""
    match error:
        case RateLimitedError():
            return Failure.RATE_LIMITED
        case ServerError():
            return Failure.SERVER
        case InvalidBodyError():
            return Failure.INVALID_BODY
        case TransportFailure(never_sent=True):
            return Failure.UNSENT
        case TransportFailure():
            return Failure.TRANSPORT
    return None


RETRY_ON: Mapping[Safety, frozenset[Failure]] = MappingProxyType(
    {
        Safety.READ: frozenset(Failure),
        Safety.IDEMPOTENT: frozenset(Failure),
        # A 429 is the server refusing the request before acting on it (the spec's documented
        # rate limit), so it is as safe to resend as a request that never left.
        Safety.ONCE: frozenset({Failure.RATE_LIMITED, Failure.UNSENT}),
    }
)


def is_retriable(
    error: Exception, safety: Safety, retry_on: Mapping[Safety, frozenset[Failure]] = RETRY_ON
) -> bool:
    """Whether `error` may be retried for a request of this safety class."""
    return failure_of(error) in retry_on[safety]


@dataclass(frozen=True)
class RetryPolicy:
    """What is retried (`retry_on`), the per-request budget (`max_attempts`, `max_total_s`) and
    the backoff (`base_s`, `cap_s`); `delay()` is pure given the RNG."""

    max_attempts: int = 8
    max_total_s: float = 120.0
    base_s: float = 0.25
    cap_s: float = 20.0
    # A read-only mapping: compared, but left out of the hash (it has none).
    retry_on: Mapping[Safety, frozenset[Failure]] = field(
        default_factory=lambda: RETRY_ON, hash=False
    )
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
        if attempt >= self.max_attempts or not is_retriable(error, safety, self.retry_on):
            return None
        wait = self.delay(attempt, error)
        if elapsed_s + wait > self.max_total_s:
            return None
        return wait


class SharedBudget(ABC):
    """Retries of a failure the policy calls final, which the caller knows to be transient where
    it sends; shared by every request given it (e.g. all pages of one CDR sub-window)."""

    def __init__(self, policy: RetryPolicy) -> None:
        self.policy = policy
        self.failures = 0

    @abstractmethod
    def covers(self, error: ContactCenterError) -> bool:
        """Whether this budget retries `error` (asked only of errors the policy does not)."""

    @abstractmethod
    def exhausted(self) -> ContactCenterError:
        """What to raise once the budget is spent."""

    def next_delay(self) -> float | None:
        """Count a covered failure: the wait before asking again, or None when spent."""
        self.failures += 1
        if self.failures >= self.policy.max_attempts:
            return None
        return self.policy.delay(self.failures)


class RequestRetries:
    """The retry state of one request: its attempt number and clock, and the caller's
    `SharedBudget` if it gave one. `after()` is the one retry decision of `_send`."""

    __slots__ = ("_began", "attempt", "policy", "safety", "shared")

    def __init__(
        self, policy: RetryPolicy, safety: Safety, shared: SharedBudget | None = None
    ) -> None:
        self.policy = policy
        self.safety = safety
        self.shared = shared
        self.attempt = 1
        self._began = time.monotonic()

    def after(self, error: ContactCenterError) -> float | ContactCenterError:
        """After a failed attempt: the wait before the next one, or the error to raise."""
        elapsed = time.monotonic() - self._began
        wait = self.policy.next_delay(self.attempt, elapsed, error, self.safety)
        if wait is not None:
            self.attempt += 1
            return wait
        if self.shared is None or not self.shared.covers(error):
            return error
        wait = self.shared.next_delay()
        if wait is None:
            return self.shared.exhausted()
        # Asking again is a new request: the shared budget bounds these, the request's restarts.
        self.attempt, self._began = 1, time.monotonic()
        return wait
