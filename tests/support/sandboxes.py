"""One way to build a small in-process sandbox; each suite's conftest pins its own defaults."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import date, datetime
from typing import Any

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
