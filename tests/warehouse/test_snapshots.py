"""Snapshot records -> frames: timestamps in every form the spec shows."""

from __future__ import annotations

import datetime as dt

from warehouse import snapshots

AT = dt.datetime(2026, 11, 21, 1, tzinfo=dt.UTC)


def test_snapshot_timestamps_parse_in_every_form_the_spec_shows() -> None:
    forms = ["2026-11-20T10:00:00.123Z", "2026-11-20T10:00:00Z", "2026-11-20T12:00:00.5+02:00"]
    numbers = [{"id": i, "created_at": text} for i, text in enumerate(forms)]
    got = snapshots.numbers_frame(numbers, AT)["created_at"].to_list()
    utc = dt.UTC
    assert got == [
        dt.datetime(2026, 11, 20, 10, 0, 0, 123000, tzinfo=utc),
        dt.datetime(2026, 11, 20, 10, 0, 0, tzinfo=utc),
        dt.datetime(2026, 11, 20, 10, 0, 0, 500000, tzinfo=utc),
    ]
