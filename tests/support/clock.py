"""One "now" for a whole test session, read once and handed to every sandbox the tests serve.

A date computed at import time in several modules drifts apart when the suite crosses midnight
UTC, and a sandbox on the real clock keeps releasing calls while a test compares counts. The
session's clock is frozen instead: the sandboxes are set to it, and tests derive their days from
it. What still reads the real clock (Dagster's partitions, `cdrhouse ingest`'s "beyond today")
only ever sees a date equal to or later than `today`, so days at or before `today` stay valid.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta

from connectors.sandbox import Sandbox

# A day after any real today: an `--end` there is "beyond today" whenever the suite runs, even
# across midnight UTC (the boundary itself is tested on an injected today).
FAR_FUTURE = "2999-01-01"


@dataclass(frozen=True)
class SessionClock:
    """The session's frozen UTC instant and the dates derived from it."""

    now: datetime

    @classmethod
    def read(cls) -> SessionClock:
        """The real time, once, to the millisecond (the warehouse's precision)."""
        now = datetime.now(UTC)
        return cls(now - timedelta(microseconds=now.microsecond % 1000))

    @property
    def today(self) -> date:
        return self.now.date()

    def days_ago(self, days: int) -> date:
        return self.today - timedelta(days=days)

    def at(self, day: date, hour: int, minute: int = 0) -> datetime:
        """A UTC instant on `day` (schedule ticks, freshness deadlines)."""
        return datetime.combine(day, time(hour, minute), tzinfo=UTC)

    def freeze(self, sandbox: Sandbox) -> None:
        """Set the sandbox's clock to this one: it and the test agree on what has arrived."""
        sandbox.clock.set(self.now)
