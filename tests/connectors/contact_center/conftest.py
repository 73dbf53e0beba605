"""Fixtures: a small sandbox and a factory of connector clients wired to it."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from typing import Any

import httpx
import pytest
from pydantic import SecretStr

from connectors.contact_center import ClientSettings, ContactCenterClient
from connectors.sandbox import Sandbox
from connectors.sandbox.config import DEFAULT_API_KEY
from tests.support.sandboxes import make_sandbox as shared_make_sandbox

START = date(2026, 3, 1)
NOW = datetime(2026, 3, 20, tzinfo=UTC)  # well after the data: every CDR visible
NARROW_KEY = "narrow-key-only-balance"


def make_sandbox(cdrs_per_day: int = 1500, days: int = 2, **kw: Any) -> Sandbox:
    return shared_make_sandbox(
        start_date=START,
        days=days,
        cdrs_per_day=cdrs_per_day,
        now=NOW,
        extra_keys={NARROW_KEY: frozenset({"billing.balance.read"})},
        **kw,
    )


def make_client(
    sandbox: Sandbox,
    *,
    key: str = DEFAULT_API_KEY,
    transport: httpx.AsyncBaseTransport | None = None,
    base_url: str = "http://127.0.0.1",
    **overrides: Any,
) -> ContactCenterClient:
    values: dict[str, Any] = {
        "page_size": 1000,
        "concurrency": 8,
        "rate_limit_rps": None,
        # Fast retries: the sandbox's faults are random, not load-related.
        "backoff_base_s": 0.001,
        "backoff_max_s": 0.01,
        "max_attempts": 15,
        **overrides,
    }
    settings = ClientSettings(base_url=base_url, api_key=SecretStr(key), **values)
    return ContactCenterClient(settings, transport=transport or sandbox.transport())


def day(offset: int = 0) -> tuple[datetime, datetime]:
    start = datetime(START.year, START.month, START.day, tzinfo=UTC) + timedelta(days=offset)
    return start, start + timedelta(days=1)


@pytest.fixture(scope="module")
def shared() -> Sandbox:
    """Read-only sandbox for a module."""
    return make_sandbox()
