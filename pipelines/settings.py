"""cdrhouse's own environment variables, validated in one place.

A bad value stops the code location (or the `cdrhouse` command) with one line that names the
variable, its value and what is expected, instead of a traceback from deep inside `int()`.
An empty value counts as unset. The API URL and key are not here: they stay `EnvVar`s,
resolved in each run process (see `definitions.py`), so the key never enters a model.
"""

from collections.abc import Mapping
from datetime import date
from functools import cache
from typing import Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from pipelines.partitions import DEFAULT_START_DATE
from pipelines.preflight import start_date_problem
from pipelines.schedules import DEFAULT_LOOKBACK_DAYS
from warehouse import kpi as k
from warehouse.kpi import KpiSettings
from warehouse.stores import lake_uri_problem

DEFAULT_SANDBOX_CDRS_PER_DAY = 2000


class SettingsError(ValueError):
    """An environment variable holds a value cdrhouse cannot use (message: one line)."""


class Settings(BaseModel):
    """The `CDRHOUSE_*` variables (README "Configuration")."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    data_dir: str = Field("data", alias="CDRHOUSE_DATA_DIR", min_length=1)
    lake_uri: str | None = Field(None, alias="CDRHOUSE_LAKE_URI")
    start_date: date = Field(DEFAULT_START_DATE, alias="CDRHOUSE_START_DATE")
    lookback_days: int = Field(DEFAULT_LOOKBACK_DAYS, alias="CDRHOUSE_LOOKBACK_DAYS", ge=0, le=366)
    sandbox_cdrs_per_day: int = Field(
        DEFAULT_SANDBOX_CDRS_PER_DAY, alias="CDRHOUSE_SANDBOX_CDRS_PER_DAY", ge=1, le=5_000_000
    )
    owners: str | None = Field(None, alias="CDRHOUSE_OWNERS")
    # The KPI definitions (docs/metrics.md): the business day's zone, two thresholds, and the
    # call values that mark inbound, outbound, answered and abandoned (comma-separated lists).
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
    def _disjoint_lists(self) -> "Settings":
        # A value in both lists of a pair would count a call both ways.
        pairs = (
            ("inbound_subtypes", "outbound_subtypes"),
            ("answered_dispositions", "unanswered_dispositions"),
            ("abandon_end_reasons", "other_end_reasons"),
        )
        for first, second in pairs:
            both = sorted(set(getattr(self, first)) & set(getattr(self, second)))
            if both:
                alias = str(Settings.model_fields[second].alias)
                other = str(Settings.model_fields[first].alias)
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

    @field_validator("lake_uri")
    @classmethod
    def _check_lake_uri(cls, value: str | None) -> str | None:
        problem = None if value is None else lake_uri_problem(value)
        if problem is not None:
            raise ValueError(problem)
        return value

    @field_validator("start_date")
    @classmethod
    def _check_start_date(cls, value: date) -> date:
        problem = start_date_problem(value)
        if problem is not None:
            raise ValueError(problem)
        return value


@cache
def _zones() -> frozenset[str]:
    import zoneinfo  # the IANA database Python knows (DuckDB's ICU knows these names too)

    return frozenset(zoneinfo.available_timezones()) | {"UTC"}


_NAMES = frozenset(str(f.alias) for f in Settings.model_fields.values())


def settings_from_env(env: Mapping[str, str]) -> Settings:
    """The settings `env` holds; raises `SettingsError` naming the first bad variable."""
    values = {k: v for k, v in env.items() if k in _NAMES and v != ""}
    try:
        return Settings.model_validate(values)
    except ValidationError as exc:
        error = exc.errors()[0]
        message = str(error["msg"]).removeprefix("Value error, ")
        if not error["loc"]:  # a check across variables names them in its message
            raise SettingsError(message) from None
        name = str(error["loc"][0])
        raise SettingsError(f"{name}={values.get(name)!r}: {message}") from None
