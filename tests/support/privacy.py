"""How the tests' `cdrhouse` and Dagster processes land callers' numbers.

Without `CDRHOUSE_PHONE_NUMBERS` nothing is ingested (README "Callers' privacy"), so every
environment the support code builds for a `cdrhouse` or Dagster process says `raw`, today's
behaviour, unless the caller sets it (an empty value counts as unset: that is how a test asks
for the refusal).
"""

from __future__ import annotations

from collections.abc import Mapping

from warehouse.privacy import PHONE_NUMBERS_VAR

RAW_NUMBERS: Mapping[str, str] = {PHONE_NUMBERS_VAR: "raw"}


def with_raw_numbers(env: Mapping[str, str]) -> dict[str, str]:
    """`env`, with `CDRHOUSE_PHONE_NUMBERS=raw` unless it sets the variable itself."""
    return {**RAW_NUMBERS, **env}
