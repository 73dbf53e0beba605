"""Time helpers of the dataset: epoch milliseconds and days (the API's timestamp text is
`models.timestamps`)."""

from __future__ import annotations

from datetime import UTC, date, datetime

from models.timestamps import DAY_MS

HOUR_MS = 3_600_000
# No generated CDR lasts longer than this; lets `ended_at` filters narrow the day range.
MAX_DURATION_MS = 6 * HOUR_MS
_EPOCH_ORDINAL = date(1970, 1, 1).toordinal()


def day_start_ms(d: date) -> int:
    return (d.toordinal() - _EPOCH_ORDINAL) * DAY_MS


def ms_of(dt: datetime) -> int:
    """Aware datetime to epoch milliseconds (truncating sub-millisecond digits)."""
    delta = dt.astimezone(UTC) - datetime(1970, 1, 1, tzinfo=UTC)
    return (delta.days * 86_400 + delta.seconds) * 1000 + delta.microseconds // 1000


def date_of_ms(ms: int) -> date:
    return date.fromordinal(_EPOCH_ORDINAL + ms // DAY_MS)
