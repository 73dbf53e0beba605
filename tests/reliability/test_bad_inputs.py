"""Bad inputs: each gives one clear error that says what to fix, and nothing is half-written.

Configuration and CLI cases go through `cdrhouse ingest` (`pipelines.cli.main`), the way a user
meets them; API replies go through the CLI's run loop (`run_ingest`) with short retry budgets.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace
from datetime import date, timedelta
from pathlib import Path

import dagster as dg
import pydantic
import pytest

from connectors.contact_center import ContactCenterClient
from connectors.contact_center.errors import ValidationFailedError
from connectors.contact_center.settings import ClientSettings
from connectors.sandbox import FaultConfig
from pipelines.cli import IngestReport, main, run_ingest
from pipelines.partitions import partition_window
from pipelines.steps import api_failure
from tests.reliability.conftest import CDRS_PATH, LEDGER, NO_CDR_SCOPE_KEY
from tests.support.cli import assert_one_line_setup_error, clean_env, run_cdrhouse, tree
from tests.support.clock import FAR_FUTURE, SessionClock
from tests.support.lake import lake_files, tmp_files, warehouse
from tests.support.ports import free_port
from tests.support.served import ServedSandbox


def _day(served: ServedSandbox) -> date:
    """The day every case ingests: complete, well inside the sandbox's data."""
    return served.clock.days_ago(4)


def _argv(served: ServedSandbox) -> list[str]:
    day = _day(served)
    return ["ingest", "--start", day.isoformat(), "--end", (day + timedelta(1)).isoformat()]


def _cli(
    env: dict[str, str], capsys: pytest.CaptureFixture[str], argv: list[str]
) -> tuple[int, str]:
    code = main([*argv, "--no-snapshots"], env=env)
    captured = capsys.readouterr()
    return code, captured.out + captured.err


def _assert_clean(text: str, data_dir: Path) -> None:
    assert "Traceback" not in text
    assert lake_files(data_dir) == {} if (data_dir / "lake").exists() else True
    assert tmp_files(data_dir) == []


# (environment override, message, exit code): 2 = refused before any run, 1 = the run failed.
CONFIG_CASES = {
    "no-key": ({"CC_API_KEY": ""}, "set CC_API_KEY", 2),
    "no-base-url": ({"CC_API_BASE_URL": ""}, "no data source configured", 2),
    "key-without-scope": ({"CC_API_KEY": NO_CDR_SCOPE_KEY}, "reporting.cdrs.read", 1),
    "http-non-loopback": ({"CC_API_BASE_URL": "http://cc.example.com"}, "HTTPS is required", 2),
}


@pytest.mark.parametrize("case", list(CONFIG_CASES), ids=list(CONFIG_CASES))
def test_bad_configuration_fails_with_what_to_fix(
    served: ServedSandbox, tmp_path, capsys, case: str
) -> None:
    override, message, expected_code = CONFIG_CASES[case]
    env = {**served.env(tmp_path), **override}
    code, text = _cli(env, capsys, _argv(served))
    assert code == expected_code
    assert message in text, text
    _assert_clean(text, tmp_path)
    LEDGER.bad_inputs.add(case)


# Setup mistakes a user makes before any run: (environment, --start/--end or None for a
# complete recent day, what the one line must say). Each exits 2 within 10 s, as a process.
SETUP_CASES: dict[str, tuple[dict[str, str], tuple[str, str] | None, tuple[str, ...]]] = {
    "lake-uri-one-slash": (
        {"CDRHOUSE_LAKE_URI": "s3:/acme/lake"},
        None,
        ("CDRHOUSE_LAKE_URI='s3:/acme/lake'", "s3://<bucket>/<prefix>"),
    ),
    "lake-uri-ftp": (
        {"CDRHOUSE_LAKE_URI": "ftp://x/y"},
        None,
        ("CDRHOUSE_LAKE_URI='ftp://x/y'", "ftp:// is not supported"),
    ),
    # A host where the path should start (file://data/lake means host "data", path /lake); the
    # path is the test's own directory, so the unchanged code writes there, not to /lake.
    "lake-uri-file-with-host": (
        {"CDRHOUSE_LAKE_URI": "file://data{tmp}/lake"},
        None,
        ("CDRHOUSE_LAKE_URI='file://data", "file:///"),
    ),
    # DuckDB reads the lake as `<lake>/<table>/*/…`: `data*` also read a `data2` lake's files.
    "data-dir-glob": (
        {"CDRHOUSE_DATA_DIR": "{tmp}/data*"},
        None,
        ("the data dir ", "/data* (CDRHOUSE_DATA_DIR", "holds *"),
    ),
    "lake-uri-glob": (
        {"CDRHOUSE_LAKE_URI": "{tmp}/lake[1]"},
        None,
        ("CDRHOUSE_LAKE_URI=", "holds ["),
    ),
    "start-year-1": ({}, ("0001-01-01", "0001-01-02"), ("--start 0001-01-01", "2000-01-01")),
    "start-before-the-api": ({}, ("1999-12-31", "2000-01-02"), ("--start 1999-12-31",)),
    "start-after-today": ({}, (FAR_FUTURE, "2999-01-02"), ("--start 2999-01-01", "yesterday")),
    "start-date-env-year-1": (
        {"CDRHOUSE_START_DATE": "0001-01-01"},
        None,
        ("CDRHOUSE_START_DATE='0001-01-01'", "2000-01-01"),
    ),
    "dagster-home-missing": (
        {"DAGSTER_HOME": "{tmp}/no-such-home"},
        None,
        ("DAGSTER_HOME=", "is not a directory"),
    ),
    "base-url-typo": (
        {"CC_API_BASE_URL": "sandbx"},
        None,
        ("CC_API_BASE_URL='sandbx' is neither a URL nor `sandbox`", "did you mean `sandbox`?"),
    ),
    "base-url-no-scheme": (
        {"CC_API_BASE_URL": "acme.cc.example.com"},
        None,
        ("neither a URL nor `sandbox`", "https://acme.cc.example.com"),
    ),
}


@pytest.mark.parametrize("case", list(SETUP_CASES), ids=list(SETUP_CASES))
def test_setup_mistake_exits_2_at_once_in_one_line(
    clock: SessionClock, tmp_path: Path, case: str
) -> None:
    """The real `cdrhouse ingest` process: exit 2 within 10 s, one line, nothing written."""
    override, window, needles = SETUP_CASES[case]
    day = clock.days_ago(2)
    start, end = window or (day.isoformat(), (day + timedelta(1)).isoformat())
    data_dir = tmp_path / "data"
    # No key: a typo in CC_API_BASE_URL must be named before the missing key.
    env = clean_env(
        CC_API_BASE_URL="sandbox",
        CDRHOUSE_DATA_DIR=str(data_dir),
        CDRHOUSE_SANDBOX_CDRS_PER_DAY="20",
    )
    env.update({k: v.format(tmp=tmp_path) for k, v in override.items()})
    run = run_cdrhouse(["ingest", "--start", start, "--end", end, "--no-snapshots"], env)
    line = assert_one_line_setup_error(run, *needles)
    if case == "base-url-no-scheme":
        assert "did you mean `sandbox`" not in line
    assert tree(tmp_path) == []  # no lake, no warehouse.duckdb, no failure file
    LEDGER.bad_inputs.add(case)


def test_malformed_cluster_id_is_refused_before_any_request() -> None:
    with pytest.raises(pydantic.ValidationError) as info:
        ClientSettings.model_validate(
            {"cluster_id": "Acme_EU!", "service_domain": "example.com", "api_key": "k-123"}
        )
    text = str(info.value)
    assert "cluster_id 'acme_eu!' is not a DNS label" in text
    assert "k-123" not in text
    LEDGER.bad_inputs.add("malformed-cluster-id")


def _run(served: ServedSandbox, data_dir: Path, **overrides) -> IngestReport:
    defs = served.defs(data_dir, max_attempts=2, max_retry_s=2.0, **overrides)
    with dg.DagsterInstance.ephemeral() as instance:
        return run_ingest(
            defs, [_day(served).isoformat()], instance=instance, data_dir=data_dir, snapshots=False
        )


def _failure(report: IngestReport) -> str:
    assert not report.success
    failure = report.runs[0].failure
    assert failure is not None
    assert "Traceback" not in failure
    return failure


def test_unreachable_host_says_which_url_failed(served: ServedSandbox, tmp_path) -> None:
    port = free_port()  # nothing listens there (loopback only, never a remote host)
    served_closed = replace(served, base_url=f"http://127.0.0.1:{port}")
    failure = _failure(_run(served_closed, tmp_path))
    assert "ConnectError" in failure
    assert "never reached the server" in failure
    assert f"check that the base URL http://127.0.0.1:{port} is right" in failure, failure
    _assert_clean(failure, tmp_path)
    LEDGER.bad_inputs.add("unreachable-host")


@pytest.mark.parametrize(
    ("start", "end", "message"),
    [
        ("2026-02-30", "2026-03-02", "is not a date; use YYYY-MM-DD"),
        ("2026-11-05", "2026-11-01", "must be after --start"),
        ("2026-11-01", FAR_FUTURE, "beyond today"),
    ],
    ids=["bad-date", "end-before-start", "range-beyond-today"],
)
def test_bad_cli_arguments_exit_2_with_one_line(
    tmp_path, capsys, start: str, end: str, message: str
) -> None:
    code, text = _cli(
        {"CDRHOUSE_DATA_DIR": str(tmp_path)}, capsys, ["ingest", "--start", start, "--end", end]
    )
    assert code == 2
    assert message in text
    assert len(text.strip().splitlines()) == 1
    _assert_clean(text, tmp_path)
    assert not (tmp_path / "lake").exists()
    LEDGER.bad_inputs.add(f"cli-{message}")


def test_a_422_body_lists_the_fields_to_fix(served: ServedSandbox) -> None:
    day = _day(served).isoformat()
    start, end = partition_window(day)

    async def fetch() -> None:
        async with ContactCenterClient(served.resource().settings()) as client:
            async for _ in client.fetch_cdr_pages(start, end, filters={"type": "video"}):
                pass

    with pytest.raises(ValidationFailedError) as info:
        asyncio.run(fetch())
    failure = api_failure(info.value, partition=day)
    assert failure.description is not None
    assert "422" in failure.description
    assert "type:" in failure.description
    assert "fix these fields" in failure.description
    assert failure.allow_retries is False
    LEDGER.bad_inputs.add("422-body")


REPLY_CASES = {
    "html-error-page": (FaultConfig(html_rate=1.0), "non-JSON body (content-type text/html"),
    "empty-body": (FaultConfig(empty_body_rate=1.0), "an empty body"),
    "cdrs-key-missing": (FaultConfig(missing_key_rate=1.0), "no 'cdrs' array"),
}


@pytest.mark.parametrize("case", list(REPLY_CASES), ids=list(REPLY_CASES))
def test_broken_api_reply_fails_the_day_and_writes_nothing(
    served: ServedSandbox, tmp_path, case: str
) -> None:
    faults, message = REPLY_CASES[case]
    served.sandbox.faults = FaultConfig(**{**faults.to_json(), "paths": (CDRS_PATH,)})
    failure = _failure(_run(served, tmp_path))
    assert "InvalidBodyError" in failure
    assert message in failure, failure
    _assert_clean(failure, tmp_path)
    LEDGER.bad_inputs.add(case)


def test_total_disagreeing_with_records_blocks_the_day(served: ServedSandbox, tmp_path) -> None:
    served.sandbox.faults = FaultConfig(total_mismatch=3, paths=(CDRS_PATH,))
    report = _run(served, tmp_path)
    line = report.runs[0]
    assert not report.success
    assert "raw_cdrs:row_count_matches_api_total" in line.checks_failed
    # Blocking: no normalized table was written from the suspect day.
    assert "cdrs" not in line.rows
    assert not any(k.startswith("cdrs/") for k in lake_files(tmp_path))
    assert tmp_files(tmp_path) == []
    LEDGER.bad_inputs.add("total-mismatch")


def test_wrong_typed_records_are_quarantined_counted_and_fail_the_check(
    served: ServedSandbox, tmp_path
) -> None:
    served.sandbox.faults = FaultConfig(corrupt_rate=0.05, paths=(CDRS_PATH,))
    report = _run(served, tmp_path)
    line = report.runs[0]
    assert "cdr_quarantine:cdr_quarantine_empty" in line.checks_failed
    quarantined = line.rows["cdr_quarantine"]
    assert quarantined > 0
    truth = served.sandbox.truth_cdrs(*partition_window(_day(served).isoformat()))
    with warehouse(tmp_path) as con:
        reasons = con.execute("select id, reason from cdr_quarantine").fetchall()
        ids = {i for (i,) in con.execute("select id from cdrs").fetchall()}
    assert len(reasons) == quarantined
    text = " ".join(r for _, r in reasons)
    assert "cost" in text
    assert "started_at" in text
    # Nothing lost: every CDR of the day is in cdrs or in quarantine, never in both.
    quarantine_ids = {i for i, _ in reasons}
    assert ids | quarantine_ids == set(truth)
    assert not ids & quarantine_ids
    LEDGER.bad_inputs.update({"string-cost", "unparseable-timestamp"})


@pytest.mark.parametrize("start", ["20261101", "2026-W45", "2026-W45-1"])
def test_a_day_in_another_iso_form_is_refused_not_read_as_some_day(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], start: str
) -> None:
    """Python reads `2026-W45` as the Monday of week 45 and `20261101` as a date: the
    commands say YYYY-MM-DD, and a range the user did not write is not ingested."""
    code, text = _cli(
        {"CDRHOUSE_DATA_DIR": str(tmp_path), "CC_API_BASE_URL": "sandbox"},
        capsys,
        ["ingest", "--start", start, "--end", "2026-11-03"],
    )
    assert code == 2
    assert f"--start {start!r} is not a date; use YYYY-MM-DD" in text, text
    assert len(text.strip().splitlines()) == 1
    assert not (tmp_path / "lake").exists()


@pytest.mark.parametrize("name", ["home?x", "home%20x"])
def test_a_dagster_home_that_garbles_sqlites_url_is_refused_before_dagster_writes(
    clock: SessionClock, tmp_path: Path, name: str
) -> None:
    """Dagster's SQLite URL cut `home?x` at the `?`: it wrote a database `home` beside the
    home, then failed with "no such table: event_logs"."""
    (tmp_path / name).mkdir()
    day = clock.days_ago(2)
    env = clean_env(
        CC_API_BASE_URL="sandbox",
        CDRHOUSE_DATA_DIR=str(tmp_path / "data"),
        DAGSTER_HOME=str(tmp_path / name),
    )
    argv = ["ingest", "--start", day.isoformat(), "--end", str(day + timedelta(1))]
    run = run_cdrhouse([*argv, "--no-snapshots"], env)
    assert_one_line_setup_error(run, f"DAGSTER_HOME='{tmp_path / name}'", "without ? or %XX")
    assert tree(tmp_path) == [name]
    LEDGER.bad_inputs.add(f"dagster-home-{name}")
