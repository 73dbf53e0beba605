"""Sandbox configuration: dataset size, API keys and their scopes, feature flags, faults."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta

from connectors.sandbox.faults import FaultConfig

DEFAULT_API_KEY = "sbx-full-access-key"

# Scopes named by the spec, plus the obvious domain.resource.read/manage names for the
# endpoints whose scope is "not shown" (see docs/sandbox.md).
SPEC_SCOPES: frozenset[str] = frozenset(
    {
        "voice.call.manage",
        "routing.queues.read",
        "users.read",
        "users.teams.read",
        "campaigns.read",
        "campaigns.manage",
        "reporting.cdrs.read",
        "messaging.conversations.read",
        "messaging.conversations.manage",
        "messaging.sms.send",
        "messaging.whatsapp_templates.read",
        "messaging.canned_messages.read",
        "numbers.read",
        "billing.balance.read",
        "contact_center.wrapup_codes.read",
        "tasks.scheduled_callbacks.manage",
        "tasks.webhooks.read",
        "tasks.webhooks.manage",
    }
)
CHOSEN_SCOPES: frozenset[str] = frozenset(
    {
        "routing.skills.read",
        "users.skills.read",
        "messaging.channel_profiles.read",
        "contact_center.wrapup_code_groups.read",
        "tasks.scheduled_callbacks.read",
    }
)
ALL_SCOPES: frozenset[str] = SPEC_SCOPES | CHOSEN_SCOPES


def _default_start() -> date:
    return datetime.now(UTC).date() - timedelta(days=30)


def _default_keys() -> Mapping[str, frozenset[str]]:
    return {DEFAULT_API_KEY: ALL_SCOPES}


@dataclass(frozen=True)
class SandboxConfig:
    """Everything that shapes one sandbox instance; the same config gives the same bytes."""

    seed: int = 7
    start_date: date = field(default_factory=_default_start)
    days: int = 30
    cdrs_per_day: int = 20000
    api_keys: Mapping[str, frozenset[str]] = field(default_factory=_default_keys)
    # Contact-center feature flags that gate campaign fields.
    dialer_ai: bool = True
    dialing_order: bool = True
    contact_local_time: bool = True
    faults: FaultConfig = field(default_factory=FaultConfig)

    def __repr__(self) -> str:
        # Keys are secrets: never show them in a repr or a log line.
        return (
            f"SandboxConfig(seed={self.seed}, start_date={self.start_date}, days={self.days}, "
            f"cdrs_per_day={self.cdrs_per_day}, api_keys=<{len(self.api_keys)} redacted>, "
            f"dialer_ai={self.dialer_ai}, dialing_order={self.dialing_order}, "
            f"contact_local_time={self.contact_local_time}, faults={self.faults!r})"
        )

    @property
    def end_date(self) -> date:
        """The first day after the dataset (exclusive)."""
        return self.start_date + timedelta(days=self.days)
