"""Backoff math and which failures may be retried for which requests."""

from __future__ import annotations

import random

import pytest

from connectors.contact_center.endpoints import ENDPOINTS, Safety
from connectors.contact_center.errors import (
    BadRequestError,
    ContactCenterError,
    InvalidBodyError,
    PaginationError,
    RateLimitedError,
    ServerError,
    TransportFailure,
    ValidationFailedError,
)
from connectors.contact_center.retry import (
    RETRY_ON,
    Failure,
    RequestRetries,
    RetryPolicy,
    SharedBudget,
    is_retriable,
)

ERRORS = {
    "429": RateLimitedError("x"),
    "5xx": ServerError("x"),
    "reset": TransportFailure("x", never_sent=False),
    "connect": TransportFailure("x", never_sent=True),
    "bad-body": InvalidBodyError("x"),
    "400": BadRequestError("x"),
    "422": ValidationFailedError("x"),
    "pagination": PaginationError("x"),
}
# Which (error, safety) pairs are retried.
RETRIED = {
    Safety.READ: {"429", "5xx", "reset", "connect", "bad-body"},
    Safety.IDEMPOTENT: {"429", "5xx", "reset", "connect", "bad-body"},
    Safety.ONCE: {"connect", "429"},  # a 429 is a refusal before any action
}


@pytest.mark.parametrize("safety", list(Safety), ids=lambda s: s.value)
@pytest.mark.parametrize("name", list(ERRORS))
def test_retry_table(name: str, safety: Safety) -> None:
    assert is_retriable(ERRORS[name], safety) is (name in RETRIED[safety])


def test_creating_posts_are_once() -> None:
    for name in (
        "send_sms",
        "start_call",
        "create_campaign",
        "add_leads",
        "start_campaign",
        "stop_campaign",
        "pause_campaign",
        "hangup_call",
        "schedule_callback",
    ):
        assert ENDPOINTS[name].safety is Safety.ONCE, name
    assert ENDPOINTS["update_campaign"].safety is Safety.IDEMPOTENT
    assert all(e.safety is Safety.READ for e in ENDPOINTS.values() if e.method == "GET")


def test_full_jitter_stays_within_the_exponential_ceiling() -> None:
    policy = RetryPolicy(base_s=0.5, cap_s=4.0, rng=random.Random(1))
    for attempt in range(1, 10):
        ceiling = min(4.0, 0.5 * 2 ** (attempt - 1))
        draws = [policy.delay(attempt) for _ in range(200)]
        assert all(0.0 <= d <= ceiling for d in draws)
        # Full jitter spreads over the whole range, not just near the ceiling.
        assert min(draws) < ceiling * 0.1
        assert max(draws) > ceiling * 0.9


def test_retry_after_replaces_the_backoff() -> None:
    policy = RetryPolicy(base_s=0.5, cap_s=4.0, rng=random.Random(1))
    assert policy.delay(1, RateLimitedError("x", retry_after=7.5)) == 7.5


def test_attempts_and_total_time_are_capped() -> None:
    policy = RetryPolicy(max_attempts=3, max_total_s=10.0, base_s=1.0, cap_s=1.0)
    err = ServerError("x")
    assert policy.next_delay(1, 0.0, err, Safety.READ) is not None
    assert policy.next_delay(3, 0.0, err, Safety.READ) is None  # third attempt was the last
    assert policy.next_delay(1, 9.5, RateLimitedError("x", retry_after=1.0), Safety.READ) is None
    assert policy.next_delay(1, 0.0, err, Safety.ONCE) is None


def test_what_is_retried_is_the_policys_data() -> None:
    only_429 = RetryPolicy(retry_on={**RETRY_ON, Safety.READ: frozenset({Failure.RATE_LIMITED})})
    assert only_429.next_delay(1, 0.0, RateLimitedError("x"), Safety.READ) is not None
    assert only_429.next_delay(1, 0.0, ServerError("x"), Safety.READ) is None
    assert only_429 != RetryPolicy()
    assert hash(RetryPolicy()) == hash(RetryPolicy())  # a frozen value, hashable


class EveryBadRequest(SharedBudget):
    """A caller's budget for 400s (the CDR fetch's is for rejected cursors only)."""

    def covers(self, error: ContactCenterError) -> bool:
        return isinstance(error, BadRequestError)

    def exhausted(self) -> ContactCenterError:
        return PaginationError(f"spent after {self.failures}")


def test_a_shared_budget_spans_requests_and_each_ask_is_a_new_request() -> None:
    policy = RetryPolicy(max_attempts=3, base_s=0.001, cap_s=0.001)
    shared = EveryBadRequest(policy)
    first = RequestRetries(policy, Safety.READ, shared)
    assert isinstance(first.after(ServerError("x")), float)  # the request's own budget
    assert first.attempt == 2
    assert isinstance(first.after(BadRequestError("x")), float)  # the shared one: 1 of 3
    assert first.attempt == 1  # asking again starts the request's budget over
    second = RequestRetries(policy, Safety.READ, shared)
    assert isinstance(second.after(BadRequestError("x")), float)  # 2 of 3, across requests
    spent = second.after(BadRequestError("x"))
    assert isinstance(spent, PaginationError)
    assert str(spent) == "spent after 3"
    # What the budget does not cover stays final, and is raised as it came.
    fatal = ValidationFailedError("x")
    assert RequestRetries(policy, Safety.READ, shared).after(fatal) is fatal
