"""The KPI variables (docs/metrics.md) and the report's currency, validated like every
`CDRHOUSE_*` variable.

Apart from `pipelines.settings` (which extends `KpiVariables` and `ReportVariables`) so that
`cdrhouse sql`, `report` and `lake` can check them and hand them on without importing Dagster.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from functools import cache
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from warehouse import kpi as k
from warehouse.kpi import KpiSettings

M = TypeVar("M", bound=BaseModel)


class SettingsError(ValueError):
    """An environment variable holds a value cdrhouse cannot use (message: one line)."""


@cache
def _zones() -> frozenset[str]:
    import zoneinfo  # the IANA names Python knows (DuckDB's ICU knows them too)

    # `localtime` is the machine's zone to Python, and unknown to DuckDB's ICU, which the views
    # read the zone with: a name that means the same on every machine, or nothing.
    return (frozenset(zoneinfo.available_timezones()) - {"localtime"}) | {"UTC"}


def known_timezone(name: str) -> bool:
    """An IANA zone name both Python and DuckDB's ICU know (`localtime` excluded)."""
    return name in _zones()


class KpiVariables(BaseModel):
    """The business day's zone, the two thresholds, and the call values that mark inbound,
    outbound, answered and abandoned (comma-separated lists)."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    timezone: str = Field(k.DEFAULT_TIMEZONE, alias="CDRHOUSE_TIMEZONE")
    sl_threshold_s: int = Field(
        k.DEFAULT_SL_THRESHOLD_S, alias="CDRHOUSE_SL_THRESHOLD_S", ge=0, le=86_400
    )
    short_abandon_s: int = Field(
        k.DEFAULT_SHORT_ABANDON_S, alias="CDRHOUSE_SHORT_ABANDON_S", ge=0, le=86_400
    )
    inbound_subtypes: tuple[str, ...] = Field(
        k.DEFAULT_INBOUND_SUBTYPES, alias="CDRHOUSE_INBOUND_SUBTYPES"
    )
    outbound_subtypes: tuple[str, ...] = Field(
        k.DEFAULT_OUTBOUND_SUBTYPES, alias="CDRHOUSE_OUTBOUND_SUBTYPES"
    )
    answered_dispositions: tuple[str, ...] = Field(
        k.DEFAULT_ANSWERED_DISPOSITIONS, alias="CDRHOUSE_ANSWERED_DISPOSITIONS"
    )
    unanswered_dispositions: tuple[str, ...] = Field(
        k.DEFAULT_UNANSWERED_DISPOSITIONS, alias="CDRHOUSE_UNANSWERED_DISPOSITIONS"
    )
    abandon_end_reasons: tuple[str, ...] = Field(
        k.DEFAULT_ABANDON_END_REASONS, alias="CDRHOUSE_ABANDON_END_REASONS"
    )
    other_end_reasons: tuple[str, ...] = Field(
        k.DEFAULT_OTHER_END_REASONS, alias="CDRHOUSE_OTHER_END_REASONS"
    )

    @field_validator(
        "inbound_subtypes",
        "outbound_subtypes",
        "answered_dispositions",
        "unanswered_dispositions",
        "abandon_end_reasons",
        "other_end_reasons",
        mode="before",
    )
    @classmethod
    def _split_list(cls, value: Any) -> Any:
        if not isinstance(value, str):
            return value
        items = tuple(v.strip() for v in value.split(","))
        if any(not v for v in items):
            raise ValueError("give comma-separated values without empty items, e.g. 'a,b'")
        return items

    @field_validator("timezone")
    @classmethod
    def _check_timezone(cls, value: str) -> str:
        if value not in _zones():
            raise ValueError(
                "not an IANA time zone; use a name like UTC, Europe/Berlin or Australia/Sydney"
            )
        return value

    @model_validator(mode="after")
    def _disjoint_lists(self) -> KpiVariables:
        # A value in both lists of a pair would count a call both ways.
        pairs = (
            ("inbound_subtypes", "outbound_subtypes"),
            ("answered_dispositions", "unanswered_dispositions"),
            ("abandon_end_reasons", "other_end_reasons"),
        )
        for first, second in pairs:
            both = sorted(set(getattr(self, first)) & set(getattr(self, second)))
            if both:
                alias = str(KpiVariables.model_fields[second].alias)
                other = str(KpiVariables.model_fields[first].alias)
                raise ValueError(f"{alias}: {', '.join(both)} is also in {other}")
        return self

    def kpi(self) -> KpiSettings:
        """The KPI settings the warehouse views and the mapping check apply."""
        return KpiSettings(
            timezone=self.timezone,
            sl_threshold_s=self.sl_threshold_s,
            short_abandon_s=self.short_abandon_s,
            inbound_subtypes=self.inbound_subtypes,
            outbound_subtypes=self.outbound_subtypes,
            answered_dispositions=self.answered_dispositions,
            unanswered_dispositions=self.unanswered_dispositions,
            abandon_end_reasons=self.abandon_end_reasons,
            other_end_reasons=self.other_end_reasons,
        )


KPI_NAMES = frozenset(str(f.alias) for f in KpiVariables.model_fields.values())

_CURRENCY = re.compile(r"[A-Z]{3}")


class ReportVariables(BaseModel):
    """What the report writes before money: an ISO 4217 code (unset: no sign)."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    currency: str | None = Field(None, alias="CDRHOUSE_CURRENCY")

    @field_validator("currency")
    @classmethod
    def _check_currency(cls, value: str | None) -> str | None:
        if value is None or _CURRENCY.fullmatch(value):
            return value
        hint = f"; did you mean {value.upper()!r}?" if _CURRENCY.fullmatch(value.upper()) else ""
        raise ValueError(
            f"not an ISO 4217 currency code (three capital letters, like EUR or USD){hint}"
        )


REPORT_NAMES = frozenset(str(f.alias) for f in ReportVariables.model_fields.values())


def validate_env(model: type[M], env: Mapping[str, str], names: frozenset[str]) -> M:
    """`model` from the variables of `env` it names (empty = unset); raises `SettingsError`
    naming the first bad variable, on one line."""
    values = {key: v for key, v in env.items() if key in names and v != ""}
    try:
        return model.model_validate(values)
    except ValidationError as exc:
        error = exc.errors()[0]
        message = str(error["msg"]).removeprefix("Value error, ")
        if not error["loc"]:  # a check across variables names them in its message
            raise SettingsError(message) from None
        name = str(error["loc"][0])
        shown = values.get(name)
        if name == "CDRHOUSE_LAKE_URI" and shown is not None:
            from warehouse.stores import shown_uri  # a refused URI may carry a secret

            shown = shown_uri(shown)
        raise SettingsError(f"{name}={shown!r}: {message}") from None


def kpi_from_env(env: Mapping[str, str]) -> KpiSettings:
    """The KPI settings `env` holds (`SettingsError` on a bad one)."""
    return validate_env(KpiVariables, env, KPI_NAMES).kpi()


def currency_from_env(env: Mapping[str, str]) -> str | None:
    """`CDRHOUSE_CURRENCY` (`SettingsError` on a bad one); None when unset or empty."""
    return validate_env(ReportVariables, env, REPORT_NAMES).currency
