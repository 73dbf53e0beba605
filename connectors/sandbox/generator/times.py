"""Time helpers of the dataset: epoch milliseconds, days, and the API's timestamp text."""

from __future__ import annotations

from datetime import UTC, date, datetime

DAY_MS = 86_400_000
HOUR_MS = 3_600_000
# No generated CDR lasts longer than this; lets `ended_at` filters narrow the day range.
MAX_DURATION_MS = 6 * HOUR_MS
_EPOCH_ORDINAL = date(1970, 1, 1).toordinal()
_DAY_PREFIX: dict[int, str] = {}


def iso_ms(ms: int) -> str:
    """Epoch milliseconds to `YYYY-MM-DDTHH:MM:SS.mmmZ` (cheap: the date part is cached)."""
    day, rem = divmod(ms, DAY_MS)
    prefix = _DAY_PREFIX.get(day)
    if prefix is None:
        prefix = _DAY_PREFIX[day] = date.fromordinal(_EPOCH_ORDINAL + day).isoformat() + "T"
    hours, rem = divmod(rem, HOUR_MS)
    minutes, rem = divmod(rem, 60_000)
    seconds, millis = divmod(rem, 1000)
    return f"{prefix}{hours:02d}:{minutes:02d}:{seconds:02d}.{millis:03d}Z"


def day_start_ms(d: date) -> int:
    return (d.toordinal() - _EPOCH_ORDINAL) * DAY_MS


def ms_of(dt: datetime) -> int:
    """Aware datetime to epoch milliseconds (truncating sub-millisecond digits)."""
    delta = dt.astimezone(UTC) - datetime(1970, 1, 1, tzinfo=UTC)
    return (delta.days * 86_400 + delta.seconds) * 1000 + delta.microseconds // 1000


def date_of_ms(ms: int) -> date:
    return date.fromordinal(_EPOCH_ORDINAL + ms // DAY_MS)


def ts(d: datetime) -> str:
    """Aware datetime to `YYYY-MM-DDTHH:MM:SS.mmmZ`."""
    return iso_ms(ms_of(d))
