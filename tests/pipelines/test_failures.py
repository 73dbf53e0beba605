"""Failures: a run killed mid-partition leaves the previous day whole; checks catch bad data.

Faults come from the sandbox itself (5xx from the Nth CDR request on, a wrong metadata.total,
corrupt records), never from patching our code.
"""

import io
import re
from datetime import date
from pathlib import Path

import dagster as dg
import pytest

from connectors.sandbox import FaultConfig, Sandbox, SandboxConfig
from pipelines.cli import run_ingest
from pipelines.definitions import CDR_JOB, build_defs
from pipelines.resources import ContactCenterResource, WarehouseResource
from pipelines.steps import api_retry_policy
from tests.pipelines.conftest import HISTORY_DAYS, SEED, evaluate_failure_sensor
from tests.support.clock import SessionClock
from tests.support.lake import lake_files, read_table, tmp_files
from tests.support.served import ServedSandbox

CDRS_PATH = "/api/v4/reporting/cdrs"


@pytest.fixture
def day(clock: SessionClock) -> date:
    """The day each test ingests: complete, inside the sandbox's data."""
    return clock.days_ago(5)


def _every_cdr_request_fails(served: ServedSandbox, tmp_path: Path) -> dg.Definitions:
    """The location with one step retry, against a sandbox answering every CDR request 5xx."""
    served.sandbox.faults = FaultConfig(error_5xx_rate=1.0, paths=(CDRS_PATH,))
    return served.defs(tmp_path, step_retries=1)


def test_a_step_retry_is_announced_as_the_run_waits_for_it(
    clean_faults: ServedSandbox, day: date, tmp_path
) -> None:
    # A run's line comes at its end; a step retry waits 30 to 120 s before it, and the command
    # printed nothing in between: it looked hung. The notice comes as the retry is scheduled.
    defs = _every_cdr_request_fails(clean_faults, tmp_path)
    out = io.StringIO()
    with dg.DagsterInstance.ephemeral() as instance:
        failed = run_ingest(
            defs,
            [day.isoformat()],
            instance=instance,
            data_dir=tmp_path,
            snapshots=False,
            out=out,
        )
    assert not failed.success
    lines = out.getvalue().splitlines()
    retrying = re.compile(r" retrying raw_cdrs in [0-9.]+ s \(ServerError on GET ")
    notices = [n for n, text in enumerate(lines) if retrying.search(text)]
    assert len(notices) == 1, lines
    assert lines[notices[0]].lstrip().startswith(f"{day.isoformat()}: retrying raw_cdrs")
    # Before the run's own line, which is printed when the run has ended.
    (ended,) = [n for n, text in enumerate(lines) if text.startswith("FAIL")]
    assert notices[0] < ended


def test_killed_run_keeps_previous_partition_then_rerun_is_exact(
    clean_faults: ServedSandbox, day: date, tmp_path
) -> None:
    served = clean_faults
    defs = served.defs(tmp_path, step_retries=1)
    with dg.DagsterInstance.ephemeral() as instance:
        ok = run_ingest(
            defs, [day.isoformat()], instance=instance, data_dir=tmp_path, snapshots=False
        )
        assert ok.success
        before = lake_files(tmp_path)
        cdrs_before = read_table(tmp_path, "cdrs")
        assert cdrs_before.height == served.api_total(day)

        # Every CDR request after the 6th fails with 5xx: the fetch dies half-way, twice (the
        # step retry runs into the same wall), and the client's own retries are exhausted.
        served.sandbox.faults = FaultConfig(
            error_5xx_rate=1.0, after_requests=6, paths=(CDRS_PATH,)
        )
        failed = run_ingest(
            defs, [day.isoformat()], instance=instance, data_dir=tmp_path, snapshots=False
        )
        assert not failed.success
        assert failed.runs[0].failure is not None
        assert "ServerError" in failed.runs[0].failure
        # The step retry policy ran once before giving up, and the CLI line says why.
        assert len(failed.runs[0].retries) == 1
        assert "raw_cdrs" in failed.runs[0].retries[0]
        # The previous partition is whole, byte for byte, and no temp file is left behind.
        assert lake_files(tmp_path) == before
        assert tmp_files(tmp_path) == []
        assert read_table(tmp_path, "cdrs").equals(cdrs_before)

        # The CLI wrote the failure summary; the run-failure sensor writes the same document.
        summaries = list((tmp_path / "failures").glob("*.json"))
        assert len(summaries) == 1
        import json

        summary = json.loads(summaries[0].read_text())
        assert summary["partition"] == day.isoformat()
        step = summary["failed_steps"][0]
        assert step["step"] == "raw_cdrs"
        assert step["error_class"] == "ServerError"
        assert step["endpoint"].endswith(CDRS_PATH)
        summaries[0].unlink()
        evaluate_failure_sensor(instance, summary["run_id"], defs, tmp_path)
        sensor_summary = json.loads(
            (tmp_path / "failures" / f"{summary['run_id']}.json").read_text()
        )
        assert sensor_summary["failed_steps"][0]["error_class"] == "ServerError"
        assert sensor_summary["partition"] == day.isoformat()

        served.sandbox.faults = FaultConfig()
        again = run_ingest(
            defs, [day.isoformat()], instance=instance, data_dir=tmp_path, snapshots=False
        )
        assert again.success
        assert lake_files(tmp_path).keys() == before.keys()
        assert read_table(tmp_path, "cdrs").equals(cdrs_before)
        truth = served.sandbox.truth_cdrs(*_window(day))
        assert set(read_table(tmp_path, "cdrs")["id"].to_list()) == set(truth)


def _window(day):
    from pipelines.partitions import partition_window

    return partition_window(day.isoformat())


def test_row_count_check_blocks_on_a_wrong_api_total(
    clean_faults: ServedSandbox, day: date, tmp_path
) -> None:
    served = clean_faults
    served.sandbox.faults = FaultConfig(total_mismatch=1, paths=(CDRS_PATH,))
    defs = served.defs(tmp_path)
    with dg.DagsterInstance.ephemeral() as instance:
        report = run_ingest(
            defs, [day.isoformat()], instance=instance, data_dir=tmp_path, snapshots=False
        )
    line = report.runs[0]
    assert not report.success
    assert "raw_cdrs:row_count_matches_api_total" in line.checks_failed
    # Blocking: nothing downstream of raw_cdrs was materialized from the suspect data.
    assert "cdrs" not in line.rows


def test_quarantine_check_fails_on_corrupt_records(
    clean_faults: ServedSandbox, day: date, tmp_path
) -> None:
    served = clean_faults
    served.sandbox.faults = FaultConfig(corrupt_rate=0.05, paths=(CDRS_PATH,))
    defs = served.defs(tmp_path)
    with dg.DagsterInstance.ephemeral() as instance:
        result = defs.resolve_job_def(CDR_JOB).execute_in_process(
            partition_key=day.isoformat(), instance=instance, raise_on_error=False
        )
    checks = {c.check_name: c for c in result.get_asset_check_evaluations()}
    quarantine = checks["cdr_quarantine_empty"]
    assert not quarantine.passed
    quarantined = quarantine.metadata["quarantined"].value
    assert isinstance(quarantined, int)
    assert quarantined > 0
    # The rest of the day still landed, and nothing was dropped: raw = cdrs + quarantine.
    assert checks["row_count_matches_api_total"].passed
    assert checks["cdrs_ids_unique"].passed
    raw = quarantine.metadata["raw_rows"].value
    cdrs_rows = quarantine.metadata["cdrs_rows"].value
    assert isinstance(cdrs_rows, int)
    assert raw == cdrs_rows + quarantined


def test_fatal_errors_fail_at_once_and_say_what_to_fix(
    clock: SessionClock, day: date, tmp_path
) -> None:
    # A key without the CDR scope: 403 must not be retried, and the message names the scope.
    first_day = clock.days_ago(HISTORY_DAYS)
    config = SandboxConfig(
        seed=SEED,
        cdrs_per_day=50,
        start_date=first_day,
        days=HISTORY_DAYS + 1,
        api_keys={"narrow-key": frozenset({"users.read"})},
    )
    with Sandbox(config).serve() as handle:
        for key, error_class, hint in [
            ("narrow-key", "PermissionDeniedError", "reporting.cdrs.read"),
            ("wrong-key", "AuthenticationError", "CC_API_KEY"),
        ]:
            defs = build_defs(
                contact_center=ContactCenterResource(base_url=handle.base_url, api_key=key),
                warehouse=WarehouseResource(data_dir=str(tmp_path)),
                start_date=first_day,
                retry_policy=api_retry_policy(max_retries=3, delay_s=30.0),
            )
            with dg.DagsterInstance.ephemeral() as instance:
                report = run_ingest(
                    defs, [day.isoformat()], instance=instance, data_dir=tmp_path, snapshots=False
                )
            line = report.runs[0]
            assert not line.success
            # No step retry (the policy would have waited 30 s): the failure is final.
            assert line.retries == []
            assert line.failure is not None
            assert error_class in line.failure
            assert hint in line.failure
            assert key not in line.failure


def test_the_response_size_limit_is_a_resource_setting() -> None:
    # The connector's error says to raise max_response_bytes: a deployment can, here.
    resource = ContactCenterResource(
        base_url="https://acme.cc.example.com", api_key="k", max_response_bytes=3 * 2**20
    )
    assert resource.settings().max_response_bytes == 3 * 2**20
    small = ContactCenterResource(
        base_url="https://acme.cc.example.com", api_key="k", max_response_bytes=5
    )
    with pytest.raises(dg.Failure, match="max_response_bytes"):
        small.settings()


class _ClosedPipe(io.StringIO):
    """Standard output whose reader has gone (`cdrhouse ingest | head -1`)."""

    def write(self, text: str) -> int:  # noqa: ARG002
        raise BrokenPipeError(32, "Broken pipe")


def test_a_closed_output_does_not_fail_a_run_from_inside_its_retry_notice(
    clean_faults: ServedSandbox, day: date, tmp_path
) -> None:
    # The notice is printed inside Dagster's event handling: a closed pipe there failed the
    # run at its first retry (the retry never ran). The run must go on; the command stops
    # at its next line, after the run, as it did before the notice existed.
    defs = _every_cdr_request_fails(clean_faults, tmp_path)
    with dg.DagsterInstance.ephemeral() as instance:
        with pytest.raises(BrokenPipeError):
            run_ingest(
                defs,
                [day.isoformat()],
                instance=instance,
                data_dir=tmp_path,
                snapshots=False,
                out=_ClosedPipe(),
            )
        (run,) = instance.get_runs()
        kinds = [
            e.dagster_event.event_type
            for e in instance.all_logs(run.run_id)
            if e.dagster_event is not None and e.step_key == "raw_cdrs"
        ]
        # The retry ran, and the step failed on the server's 5xx, not on the pipe.
        assert dg.DagsterEventType.STEP_RESTARTED in kinds, kinds
        assert kinds[-1] == dg.DagsterEventType.STEP_FAILURE
        assert run.status == dg.DagsterRunStatus.FAILURE
