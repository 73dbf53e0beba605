"""One way to build a small in-process sandbox; each suite's conftest pins its own defaults."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import date, datetime, timedelta
from typing import Any

import httpx

from connectors.sandbox import Sandbox, SandboxConfig
from connectors.sandbox.config import ALL_SCOPES, DEFAULT_API_KEY


def make_sandbox(
    *,
    start_date: date,
    days: int,
    cdrs_per_day: int,
    now: datetime | None,
    seed: int = 7,
    extra_keys: Mapping[str, frozenset[str]] | None = None,
    **config: Any,
) -> Sandbox:
    """A sandbox over `days` days from `start_date`, the default key plus `extra_keys`.

    `now` freezes its clock (a time well after the data makes every CDR visible); None leaves
    it on the real clock, for tests that only write. Other `config` fields (faults, feature
    flags) go to `SandboxConfig` as given.
    """
    sandbox = Sandbox(
        SandboxConfig(
            seed=seed,
            start_date=start_date,
            days=days,
            cdrs_per_day=cdrs_per_day,
            api_keys={DEFAULT_API_KEY: ALL_SCOPES, **(extra_keys or {})},
            **config,
        )
    )
    if now is not None:
        sandbox.clock.set(now)
    return sandbox


def place_call(base_url: str, sandbox: Sandbox, number: str, at: datetime, minutes: int = 3) -> str:
    """A call from the first agent to `number`, started through the API at `at` (the
    sandbox's clock) and hung up `minutes` later: a call CDR whose started_at is `at`."""
    agent = sandbox.dataset.users[0]["id"]
    headers = {"Authorization": f"Bearer {DEFAULT_API_KEY}"}
    with httpx.Client(base_url=f"{base_url}/api/v4", headers=headers, timeout=30) as api:
        sandbox.clock.set(at)
        started = api.post("/voice/calls", json={"phone_number": number, "user_id": agent})
        assert started.status_code == 201, started.text
        call_id: str = started.json()["call"]["id"]
        sandbox.clock.set(at + timedelta(minutes=minutes))
        ended = api.post(f"/voice/calls/{call_id}/hangup", json={"user_id": agent})
        assert ended.status_code == 200, ended.text
    return call_id
