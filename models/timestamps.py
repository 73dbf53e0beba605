"""The API's timestamps: one formatter and one parser for every package.

The spec writes timestamps as UTC ISO 8601 with milliseconds and `Z`
(`2026-11-20T10:00:00.123Z`); the warehouse keeps them at millisecond precision.
"""

from __future__ import annotations

import re
from datetime import UTC, date, datetime

DAY_MS = 86_400_000
# No contact center keeps CDRs from before this day: an earlier day is a typo (0001-01-01),
# and Dagster's partitions and the API's date filters are not built for one either.
EARLIEST_DAY = date(2000, 1, 1)
_HOUR_MS = 3_600_000
_EPOCH_ORDINAL = date(1970, 1, 1).toordinal()
_DAY_PREFIX: dict[int, str] = {}
_DATE_START = re.compile(r"^\d{4}-\d{2}-\d{2}")
_DAY = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")  # [0-9]: \d takes any script's digits


def iso_ms(moment: datetime) -> str:
    """An aware datetime as the API writes it: UTC, milliseconds, `Z`."""
    if moment.tzinfo is None:
        raise ValueError("timestamps must be timezone-aware")
    return moment.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def iso_ms_from_epoch(ms: int) -> str:
    """Epoch milliseconds as `iso_ms` writes them, without building a datetime (the sandbox
    formats millions of them; the date part is cached per day)."""
    day, rem = divmod(ms, DAY_MS)
    prefix = _DAY_PREFIX.get(day)
    if prefix is None:
        prefix = _DAY_PREFIX[day] = date.fromordinal(_EPOCH_ORDINAL + day).isoformat() + "T"
    hours, rem = divmod(rem, _HOUR_MS)
    minutes, rem = divmod(rem, 60_000)
    seconds, millis = divmod(rem, 1000)
    return f"{prefix}{hours:02d}:{minutes:02d}:{seconds:02d}.{millis:03d}Z"


def parse_ts(text: str) -> datetime:
    """An ISO 8601 date-time (or date) as an aware UTC datetime; naive values are UTC."""
    if not _DATE_START.match(text):
        raise ValueError(f"not an ISO 8601 date-time: {text!r}")
    value = datetime.fromisoformat(text.replace("z", "Z").replace("Z", "+00:00"))
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def parse_day(text: str) -> date:
    """A calendar day written YYYY-MM-DD, and only so: Python's `date.fromisoformat` also
    takes `20261127` and ISO week dates (`2026-W48` is a Monday), which a command's user
    did not mean. ValueError otherwise."""
    if not _DAY.fullmatch(text):
        raise ValueError(f"not a YYYY-MM-DD day: {text!r}")
    return date.fromisoformat(text)
