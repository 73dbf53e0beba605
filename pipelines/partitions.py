"""Daily UTC partitions of the CDR assets.

A partition `YYYY-MM-DD` is the `started_at` window `[day 00:00, day+1 00:00)` UTC. Today's
partial day is never offered (`end_offset=0`): the last partition is yesterday, which the
nightly schedule materializes at 01:00 UTC once the day is over.
"""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

import dagster as dg

# The first day offered by default; `CDRHOUSE_START_DATE` overrides it (read in definitions.py).
DEFAULT_START_DATE = date(2026, 10, 1)


def daily_partitions(start_date: date = DEFAULT_START_DATE) -> dg.DailyPartitionsDefinition:
    """Daily partitions in UTC from `start_date`, ending with the last complete day."""
    return dg.DailyPartitionsDefinition(
        start_date=start_date.isoformat(), timezone="UTC", end_offset=0
    )


def partition_window(partition_key: str) -> tuple[datetime, datetime]:
    """The half-open `started_at` window `[day, day+1)` in UTC of a daily partition key."""
    day = date.fromisoformat(partition_key)
    start = datetime(day.year, day.month, day.day, tzinfo=UTC)
    return start, start + timedelta(days=1)


def partition_keys(start: date, end: date) -> list[str]:
    """Keys of the days in `[start, end)`, oldest first."""
    return [(start + timedelta(days=i)).isoformat() for i in range((end - start).days)]
