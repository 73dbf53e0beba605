"""A row group's numbers are made at once (`Pseudonymizer._made_all`, vectorized) exactly as
one number is made alone (`Pseudonymizer._made`, the path of a record rewritten by path and of
`cdrhouse privacy forget`): token, country, calling code and the JSON text written beside."""

from __future__ import annotations

import phonenumbers
import polars as pl
from hypothesis import given, settings
from hypothesis import strategies as st

from warehouse.privacy import PrivacyPolicy, Pseudonymizer

KEY = b"test-key-for-the-batch-of-numbers"

# One valid number per region (shared calling codes included: +1, +7, +44, +47, +61...).
_EXAMPLES = sorted(
    {
        f"{n.country_code}{phonenumbers.national_significant_number(n)}"
        for region in phonenumbers.SUPPORTED_REGIONS
        for kind in (phonenumbers.PhoneNumberType.MOBILE, phonenumbers.PhoneNumberType.FIXED_LINE)
        if (n := phonenumbers.example_number_for_type(region, kind)) is not None
    }
)
# Forms the vectorized lookups must leave to `_made` (or read the same way).
_ODD = [
    "",
    "0",
    "4915199988877",
    "+4915199988877",
    "004915199988877",
    "49 151 99988877",
    "490151999888",  # a trunk 0 after the calling code
    "4915",  # too short
    "4915199988877123",  # too long
    "\u0664\u0669\u0661\u0665\u0661\u0669\u0669\u0669\u0668\u0668\u0668\u0667\u0667",
    "888123456789",  # no calling code starts it like this
    "80012345678",  # non-geographic (+800)
    "12125550100",
    "447400123456",
    "74951234567",
    "abc",
]


def _alone(values: list[str]) -> dict[str, tuple[str, str | None, int | None, str]]:
    pz = Pseudonymizer(PrivacyPolicy("token", KEY))
    return {v: pz._made(v) for v in values}


def _batch(values: list[str | None]) -> dict[str, tuple[str, str | None, int | None, str]]:
    pz = Pseudonymizer(PrivacyPolicy("token", KEY))
    made = pz._made_all(pl.Series(values, dtype=pl.String()))
    rows = made.select("value", "token", "place", "code", "beside").iter_rows()
    return {v: (t, p, c, b) for v, t, p, c, b in rows}


def test_every_regions_number_and_odd_forms_are_made_as_alone() -> None:
    values: list[str | None] = [*_EXAMPLES, *_ODD, None, _EXAMPLES[0]]  # a null, a repeat
    batch = _batch(values)
    assert set(batch) == set(_EXAMPLES) | set(_ODD)
    assert batch == _alone([*_EXAMPLES, *_ODD])
    assert batch["447400123456"][1:3] == ("GB", 44)
    assert batch["12125550100"][1:3] == ("US", 1)
    assert batch["80012345678"][1:3] == (None, 800)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.text(alphabet="0123456789+ -", max_size=16), max_size=30))
def test_any_digits_are_made_as_alone(values: list[str]) -> None:
    assert _batch(list(values)) == _alone(values)
