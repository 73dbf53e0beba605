"""Sandbox configuration: dataset size, API keys and their scopes, feature flags, faults."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import date, timedelta

from pydantic import BaseModel, ConfigDict, Field, model_validator

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


def _default_keys() -> Mapping[str, frozenset[str]]:
    return {DEFAULT_API_KEY: ALL_SCOPES}


class SandboxConfig(BaseModel):
    """Everything that shapes one sandbox instance; the same config gives the same bytes.

    Nothing here reads the clock: ``start_date`` has no default, so the data window is always
    named by the caller (the CLI and the pipeline pick "the last N days" at their edge).
    """

    # Errors name the field but never echo its value: api_keys holds secrets.
    model_config = ConfigDict(frozen=True, extra="forbid", hide_input_in_errors=True)

    seed: int = 7
    start_date: date
    # A century at most: more is a typo, and the CLI's default start (today - days) and
    # `end_date` must stay inside the calendar (--days 100000000 was an OverflowError).
    days: int = Field(30, ge=1, le=36_600)
    # A day is generated whole, in memory (~4.4 KB a CDR): 100M a day took the machine's memory.
    # The bound is CDRHOUSE_SANDBOX_CDRS_PER_DAY's (pipelines.settings).
    cdrs_per_day: int = Field(20000, ge=0, le=5_000_000)
    # Keys are secrets: never in a repr or a log line.
    api_keys: Mapping[str, frozenset[str]] = Field(default_factory=_default_keys, repr=False)
    # Contact-center feature flags that gate campaign fields.
    dialer_ai: bool = True
    dialing_order: bool = True
    contact_local_time: bool = True
    faults: FaultConfig = Field(default_factory=FaultConfig)

    @model_validator(mode="after")
    def _window_in_calendar(self) -> SandboxConfig:
        if self.start_date.toordinal() + self.days > date.max.toordinal():
            raise ValueError(f"start_date + days runs past {date.max}")
        return self

    @property
    def end_date(self) -> date:
        """The first day after the dataset (exclusive)."""
        return self.start_date + timedelta(days=self.days)
