"""cdrhouse's own environment variables, validated in one place.

A bad value stops the code location (or the `cdrhouse` command) with one line that names the
variable, its value and what is expected, instead of a traceback from deep inside `int()`.
An empty value counts as unset. The API URL and key are not here: they stay `EnvVar`s,
resolved in each run process (see `pipelines/definitions.py`), so the key never enters a model;
nor is the tokens' key (`CDRHOUSE_PII_KEY`). `CDRHOUSE_PHONE_NUMBERS` and `CDRHOUSE_SMS_BODIES`
are checked first, by `pipelines.privacy_settings`, whose errors never echo a value.
"""

from collections.abc import Mapping
from datetime import date
from pathlib import Path

from pydantic import ConfigDict, Field, field_validator

from pipelines.kpi_settings import KpiVariables, ReportVariables, SettingsError, validate_env
from pipelines.partitions import DEFAULT_START_DATE
from pipelines.preflight import start_date_problem
from pipelines.privacy_settings import (
    PhoneNumbers,
    PrivacySettingsError,
    SmsBodies,
    phone_numbers_from_env,
    sms_bodies_from_env,
)
from warehouse.stores import lake_uri_problem, pattern_problem

__all__ = [
    "DEFAULT_LOOKBACK_DAYS",
    "DEFAULT_MAX_DAY_SHRINK",
    "MAX_DAY_SHRINK_VAR",
    "Settings",
    "SettingsError",
    "settings_from_env",
]

DEFAULT_SANDBOX_CDRS_PER_DAY = 2000
DEFAULT_LOOKBACK_DAYS = 3  # the nightly schedule's lookback (CDRHOUSE_LOOKBACK_DAYS)
MAX_DAY_SHRINK_VAR = "CDRHOUSE_MAX_DAY_SHRINK"
# A day fetched again may hold up to 10 % fewer records than the lake's (deleted at the source);
# more, and it is held (`pipelines.checks.SHRINK_CHECK`).
DEFAULT_MAX_DAY_SHRINK = 0.1


class Settings(KpiVariables, ReportVariables):
    """The `CDRHOUSE_*` variables (README "Configuration"); the KPI ones are `KpiVariables`,
    the report's currency `ReportVariables`."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    data_dir: str = Field("data", alias="CDRHOUSE_DATA_DIR", min_length=1)
    lake_uri: str | None = Field(None, alias="CDRHOUSE_LAKE_URI")
    start_date: date = Field(DEFAULT_START_DATE, alias="CDRHOUSE_START_DATE")
    lookback_days: int = Field(DEFAULT_LOOKBACK_DAYS, alias="CDRHOUSE_LOOKBACK_DAYS", ge=0, le=366)
    # How much smaller a day fetched again may be than the lake's (`cdrs_day_not_shrunk`).
    max_day_shrink: float = Field(
        DEFAULT_MAX_DAY_SHRINK, alias=MAX_DAY_SHRINK_VAR, ge=0.0, le=1.0, allow_inf_nan=False
    )
    sandbox_cdrs_per_day: int = Field(
        DEFAULT_SANDBOX_CDRS_PER_DAY, alias="CDRHOUSE_SANDBOX_CDRS_PER_DAY", ge=1, le=5_000_000
    )
    owners: str | None = Field(None, alias="CDRHOUSE_OWNERS")
    # Set by `settings_from_env` from CDRHOUSE_PHONE_NUMBERS / CDRHOUSE_SMS_BODIES (not aliased:
    # validated apart, without echoing a value). None: not chosen, nothing may be ingested.
    phone_numbers: PhoneNumbers | None = None
    sms_bodies: SmsBodies = "drop"

    @field_validator("data_dir")
    @classmethod
    def _check_data_dir(cls, value: str) -> str:
        problem = pattern_problem(str(Path(value).resolve()))
        if problem is not None:
            raise ValueError(problem)
        return value

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


_NAMES = frozenset(str(f.alias) for f in Settings.model_fields.values() if f.alias)


def settings_from_env(env: Mapping[str, str]) -> Settings:
    """The settings `env` holds; raises `SettingsError` naming the first bad variable."""
    try:
        privacy = {
            "phone_numbers": phone_numbers_from_env(env),
            "sms_bodies": sms_bodies_from_env(env),
        }
    except PrivacySettingsError as exc:
        raise SettingsError(str(exc)) from None
    return validate_env(Settings, env, _NAMES).model_copy(update=privacy)
