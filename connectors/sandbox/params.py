"""Strict parsers for what a request carries as text: integers, UUIDs, date-times.

Every id, list parameter and filter goes through these, so no route accepts what Python's own
parsers would also take: `int()` reads Unicode digits (an Arabic-Indic one is 1, a superscript
two raises), underscores, signs and spaces; `uuid.UUID()` reads braces, a `urn:uuid:` prefix
and Unicode hex digits; a datetime cannot hold an instant a few hours past 9999-12-31 in UTC.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Final

INT64_MIN: Final = -(2**63)
INT64_MAX: Final = 2**63 - 1
# Python's int() refuses more than 4300 digits (a ValueError). A number of more than 100
# digits is clamped to this: beyond every id, limit and offset, it compares the same.
_HUGE: Final = 10**100
_ASCII_INT: Final = re.compile(r"-?[0-9]+")
_UUID: Final = re.compile(r"[0-9a-fA-F]{8}-(?:[0-9a-fA-F]{4}-){3}[0-9a-fA-F]{12}")
_DATE_START: Final = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")
_EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)
_MICRO: Final = timedelta(microseconds=1)


def parse_int(raw: str) -> int | None:
    """An optional minus and ASCII digits, of any length (beyond 10**100 clamped to it); else
    None. The one integer parser of every path id, list parameter and filter."""
    if not _ASCII_INT.fullmatch(raw):
        return None
    if len(raw.lstrip("-").lstrip("0")) > 100:
        return -_HUGE if raw.startswith("-") else _HUGE
    return int(raw)


def parse_uuid(raw: str) -> str | None:
    """The canonical lower-case form of an ASCII 8-4-4-4-12 hex UUID; else None."""
    return raw.lower() if _UUID.fullmatch(raw) else None


def instant_ms(text: str) -> int:
    """Epoch milliseconds of an ISO 8601 date-time or date (naive values are UTC), truncating
    sub-millisecond digits like `ms_of(parse_ts(text))`, but for any offset: the arithmetic is
    on integers, so `9999-12-31T23:59:59-01:00` (an instant past the last datetime) is a number
    like any other. Raises ValueError when the text is not ISO 8601.
    """
    if not text.isascii() or not _DATE_START.match(text):
        raise ValueError(f"not an ISO 8601 date-time: {text!r}")
    value = datetime.fromisoformat(text.replace("z", "Z").replace("Z", "+00:00"))
    offset = value.utcoffset() or timedelta(0)
    # The wall time read as UTC, then the offset: two in-range datetimes, integer arithmetic.
    micros = (value.replace(tzinfo=UTC) - _EPOCH) // _MICRO - offset // _MICRO
    return micros // 1000
