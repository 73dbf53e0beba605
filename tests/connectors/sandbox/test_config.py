"""`SandboxConfig` and `FaultConfig` validate their fields; the CLI derives its flags from them."""

from __future__ import annotations

import argparse
from datetime import UTC, date, datetime, timedelta

import pytest
from pydantic import ValidationError

from connectors.sandbox import FaultConfig, SandboxConfig
from connectors.sandbox.cli import add_arguments, build_config, main

START = date(2026, 11, 1)


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    return parser.parse_args(argv)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("error_429_rate", 1.5),
        ("corrupt_rate", -0.1),
        ("latency_ms", -1),
        ("rate_limit_rps", 0),
        ("after_requests", -3),
        ("late_max_minutes", 0),
        ("no_such_knob", 1),
        # A delay with no end held every request for ever; past 64 bits, a 500 traceback.
        ("jitter_ms", float("inf")),
        ("latency_ms", 1e300),
        ("trickle_gap_ms", float("nan")),
        ("retry_after_s", float("inf")),
        ("total_mismatch", 10**23),
    ],
)
def test_a_bad_fault_value_names_its_field(field: str, value: float) -> None:
    with pytest.raises(ValidationError, match=field):
        FaultConfig.model_validate({field: value})


def test_fault_config_is_frozen_hashable_and_shows_only_what_is_on() -> None:
    faults = FaultConfig(error_5xx_rate=0.35, paths=("/api/v4/reporting",))
    assert repr(faults) == "FaultConfig(error_5xx_rate=0.35, paths=('/api/v4/reporting',))"
    assert hash(faults) == hash(FaultConfig.model_validate(faults.to_json()))
    assert faults.model_copy(update={"error_5xx_rate": 0.0}) == FaultConfig(paths=faults.paths)
    with pytest.raises(ValidationError, match="frozen"):
        faults.error_5xx_rate = 1.0  # type: ignore[misc]


def test_sandbox_config_reads_no_clock() -> None:
    # The data window is the caller's choice: a default from "today" would make the same
    # config give different bytes on different days.
    with pytest.raises(ValidationError, match="start_date"):
        SandboxConfig()  # type: ignore[call-arg]
    assert SandboxConfig(start_date=START) == SandboxConfig(start_date=START)


@pytest.mark.parametrize(
    ("field", "value"),
    # Over 5M a day (a day is generated whole, in memory) is refused, as the pipeline's is.
    [("days", 0), ("cdrs_per_day", -1), ("cdrs_per_day", 5_000_001), ("cdrs_per_day", 10**8)],
)
def test_sandbox_config_bounds(field: str, value: int) -> None:
    with pytest.raises(ValidationError, match=field):
        SandboxConfig.model_validate({"start_date": START, field: value})


def test_sandbox_config_errors_never_echo_the_keys() -> None:
    with pytest.raises(ValidationError) as info:
        SandboxConfig.model_validate({"start_date": START, "api_keys": {"k": 5}, "days": "x"})
    assert "input_value" not in str(info.value)


def test_cli_fault_flags_are_the_fault_fields_typed() -> None:
    args = parse("--error-429-rate", "0.25", "--total-mismatch", "3", "--drift-extra-field")
    faults = build_config(args).faults
    assert faults == FaultConfig(error_429_rate=0.25, total_mismatch=3, drift_extra_field=True)
    paths = build_config(parse("--fault-path", "/a", "--fault-path", "/b")).faults.paths
    assert paths == ("/a", "/b")


@pytest.mark.parametrize(
    "argv", [["--error-429-rate", "2"], ["--after-requests", "-1"], ["--latency-ms", "soon"]]
)
def test_cli_refuses_a_bad_fault_flag(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(argv)
    assert info.value.code == 2
    assert argv[0] in capsys.readouterr().err


def test_cli_start_date_defaults_to_the_last_days_up_to_today() -> None:
    before = datetime.now(UTC).date()
    config = build_config(parse("--days", "5"))
    # The CLI reads the clock at its edge: either side of a midnight is today.
    today = config.end_date
    assert today in {before, datetime.now(UTC).date()}
    assert (config.start_date, config.end_date) == (today - timedelta(days=5), today)
    assert build_config(parse("--start-date", "2026-11-01")).start_date == START
