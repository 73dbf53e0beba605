"""`parse_day`: the commands' days are YYYY-MM-DD and nothing else Python would take."""

from __future__ import annotations

from datetime import date

import pytest

from models.timestamps import parse_day


def test_a_day_is_read_as_written() -> None:
    assert parse_day("2026-11-27") == date(2026, 11, 27)
    assert parse_day("2024-02-29") == date(2024, 2, 29)


@pytest.mark.parametrize(
    "text",
    [
        "20261127",
        "2026-W48",
        "2026-W48-5",
        "2026W485",
        "2026-11-27T00:00",
        " 2026-11-27",
        "2026-11-27\n",
        "2026-02-30",
        "2026-11",
        "\uff12\uff10\uff12\uff16-11-27",
        "",
    ],
)
def test_anything_else_is_refused(text: str) -> None:
    with pytest.raises(ValueError):
        parse_day(text)
