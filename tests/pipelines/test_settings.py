"""A bad environment value gives one line naming the variable, and nothing runs."""

from __future__ import annotations

import subprocess
import sys
from datetime import date

import pytest

from pipelines.settings import SettingsError, settings_from_env


@pytest.mark.parametrize(
    ("name", "value", "expected"),
    [
        ("CDRHOUSE_LOOKBACK_DAYS", "three", "valid integer"),
        ("CDRHOUSE_LOOKBACK_DAYS", "-1", "greater than or equal to 0"),
        ("CDRHOUSE_SANDBOX_CDRS_PER_DAY", "2k", "valid integer"),
        ("CDRHOUSE_START_DATE", "2026-13-01", "valid date"),
        ("CDRHOUSE_TIMEZONE", "Europe/Berln", "not an IANA time zone"),
        ("CDRHOUSE_TIMEZONE", "+02:00", "not an IANA time zone"),
        ("CDRHOUSE_TIMEZONE", "localtime", "not an IANA time zone"),
        ("CDRHOUSE_SL_THRESHOLD_S", "twenty", "valid integer"),
        ("CDRHOUSE_SHORT_ABANDON_S", "-5", "greater than or equal to 0"),
        ("CDRHOUSE_ABANDON_END_REASONS", "no_answer,,caller_hangup", "without empty items"),
        ("CDRHOUSE_CURRENCY", "euro", "not an ISO 4217 currency code"),
        ("CDRHOUSE_CURRENCY", "eur", "did you mean 'EUR'?"),
        ("CDRHOUSE_CURRENCY", "€", "three capital letters"),
        ("CDRHOUSE_DATA_DIR", "/srv/data*", "DuckDB reads as a file pattern"),
        ("CDRHOUSE_DATA_DIR", "/srv/x?y", "DuckDB reads as a file pattern"),
        ("CDRHOUSE_LAKE_URI", "file:///srv/lake%5B1%5D", "holds ["),
        ("CDRHOUSE_MAX_DAY_SHRINK", "ten percent", "valid number"),
        ("CDRHOUSE_MAX_DAY_SHRINK", "10", "less than or equal to 1"),
        ("CDRHOUSE_MAX_DAY_SHRINK", "-0.1", "greater than or equal to 0"),
        ("CDRHOUSE_MAX_DAY_SHRINK", "nan", "finite number"),
    ],
)
def test_a_bad_value_names_its_variable(name: str, value: str, expected: str) -> None:
    with pytest.raises(SettingsError) as info:
        settings_from_env({name: value})
    message = str(info.value)
    assert message.startswith(f"{name}={value!r}: ")
    assert expected in message
    assert "\n" not in message


def test_unset_and_empty_mean_the_defaults() -> None:
    settings = settings_from_env(
        {"CDRHOUSE_LOOKBACK_DAYS": "", "CDRHOUSE_START_DATE": "2026-11-01"}
    )
    assert settings.lookback_days == 3
    assert settings.start_date == date(2026, 11, 1)
    assert settings.data_dir == "data"
    assert settings.currency is None  # no sign before money
    assert settings.max_day_shrink == 0.1
    assert settings_from_env({"CDRHOUSE_CURRENCY": "EUR"}).currency == "EUR"


def test_cdrhouse_ingest_exits_2_with_one_line_and_writes_nothing(tmp_path) -> None:
    env = {
        "PATH": "/usr/bin:/bin",
        "CC_API_BASE_URL": "sandbox",
        "CDRHOUSE_DATA_DIR": str(tmp_path / "data"),
        "CDRHOUSE_SANDBOX_CDRS_PER_DAY": "lots",
    }
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pipelines.cli",
            "ingest",
            "--start",
            "2026-11-01",
            "--end",
            "2026-11-02",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().splitlines() == [
        "cdrhouse: error: CDRHOUSE_SANDBOX_CDRS_PER_DAY='lots': "
        "Input should be a valid integer, unable to parse string as an integer"
    ]
    assert not (tmp_path / "data").exists()


def test_kpi_lists_are_comma_separated_and_may_not_overlap() -> None:
    kpi = settings_from_env(
        {"CDRHOUSE_TIMEZONE": "Australia/Sydney", "CDRHOUSE_INBOUND_SUBTYPES": "inbound, callback"}
    ).kpi()
    assert (kpi.timezone, kpi.inbound_subtypes) == ("Australia/Sydney", ("inbound", "callback"))
    assert settings_from_env({}).kpi().abandon_end_reasons == ("no_answer", "caller_hangup")
    with pytest.raises(SettingsError) as info:
        settings_from_env({"CDRHOUSE_OTHER_END_REASONS": "agent_hangup,no_answer"})
    assert str(info.value) == (
        "CDRHOUSE_OTHER_END_REASONS: no_answer is also in CDRHOUSE_ABANDON_END_REASONS"
    )


def test_the_cli_names_every_kpi_variable_so_sql_skips_pydantic_only_when_none_is_set() -> None:
    from pipelines.cli import KPI_VARIABLES, _kpi_settings
    from pipelines.kpi_settings import KPI_NAMES

    assert KPI_VARIABLES == KPI_NAMES
    berlin = _kpi_settings({"CDRHOUSE_TIMEZONE": "Europe/Berlin"})
    assert berlin is not None
    assert berlin.timezone == "Europe/Berlin"
    # None set (empty counts as unset): no settings, the views keep those they were built with.
    assert _kpi_settings({"CDRHOUSE_TIMEZONE": ""}) is None


def test_the_shrink_limit_reaches_the_warehouse_resource_of_the_runs() -> None:
    from pipelines.definitions import resources_from_env

    _, warehouse = resources_from_env({"CDRHOUSE_MAX_DAY_SHRINK": "0.5"}, date(2026, 11, 1))
    assert warehouse.max_day_shrink == 0.5
    _, warehouse = resources_from_env({}, date(2026, 11, 1))
    assert warehouse.max_day_shrink == 0.1
