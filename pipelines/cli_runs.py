"""Run the Dagster jobs in-process for `cdrhouse ingest`, one run per partition, and say what
each run did: rows written, checks passed, warned and failed, retried steps, the failure.

These are the very jobs the UI and the schedule run (`execute_in_process`). Only the standard
library at module level: `pipelines.cli` imports it, and `cdrhouse --help` must stay light.
"""

from __future__ import annotations

import contextlib
import sys
import threading
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

if TYPE_CHECKING:
    import dagster as dg

    from pipelines.scope import AccountScope

# Dagster's own console logs are for the UI; the CLI prints one line per run instead.
QUIET_RUN_CONFIG: Mapping[str, Any] = {
    "loggers": {"console": {"config": {"log_level": "CRITICAL"}}}
}
# A step retry's reason in the CLI's lines (the failure file keeps it whole).
RETRY_REASON_CHARS = 200
VERBOSE_RUN_CONFIG: Mapping[str, Any] = {"loggers": {"console": {"config": {"log_level": "DEBUG"}}}}


@dataclass
class RunLine:
    """What one run did, for the progress display and the tests."""

    label: str
    success: bool
    seconds: float
    rows: dict[str, int] = field(default_factory=dict)
    checks_failed: list[str] = field(default_factory=list)
    checks_warned: list[str] = field(default_factory=list)
    checks_total: int = 0
    retries: list[str] = field(default_factory=list)
    failure: str | None = None
    # One line when the run met a setup error (a full disk, a missing bucket, refused
    # credentials): no retry fixes it, so `cdrhouse ingest` says only that and exits 2.
    setup_error: str | None = None
    # The file a materialization wrote (its `path` metadata: the report's HTML).
    path: str | None = None


@dataclass
class IngestReport:
    runs: list[RunLine] = field(default_factory=list)

    @property
    def success(self) -> bool:
        return all(r.success and not r.checks_failed for r in self.runs)

    @property
    def setup_error(self) -> str | None:
        return next((r.setup_error for r in self.runs if r.setup_error), None)


def _summarize(label: str, result: dg.ExecuteInProcessResult, seconds: float) -> RunLine:
    import dagster as dg

    line = RunLine(label=label, success=result.success, seconds=seconds)
    for event in result.get_asset_materialization_events():
        mat = event.step_materialization_data.materialization
        rows = mat.metadata.get("dagster/row_count")
        if rows is not None:
            # By table name: a run is one account's (`emea/cdrs` counts as `cdrs`).
            line.rows[mat.asset_key.path[-1]] = int(rows.value)  # type: ignore[arg-type]
        path = mat.metadata.get("path")
        if path is not None:
            line.path = str(path.value)
    for event in result.all_events:
        if event.event_type == dg.DagsterEventType.STEP_UP_FOR_RETRY:
            # Say why a step was retried, or a slow run would look merely slow.
            line.retries.append(f"{event.step_key} ({_retry_reason(event)})")
    for check in result.get_asset_check_evaluations():
        line.checks_total += 1
        if not check.passed:
            name = f"{check.asset_key.to_user_string()}:{check.check_name}"
            if check.severity == dg.AssetCheckSeverity.WARN:
                line.checks_warned.append(name)
            else:
                line.checks_failed.append(name)
    return line


def _retry_reason(event: dg.DagsterEvent) -> str:
    """Why a step went up for retry: its error's cause (the API's error, not Dagster's), cut
    at a word. A `dg.Failure`'s text is its description, without Dagster's class path."""
    error = getattr(event.event_specific_data, "error", None)
    inner = error.cause if error is not None and error.cause is not None else error
    if inner is None:
        return "unknown"
    text = inner.message.strip()
    if inner.cls_name == "Failure":
        text = text.split(": ", 1)[-1] if text.startswith("dagster.") else text
    else:
        text = f"{inner.cls_name}: {text}"
    return (
        text
        if len(text) <= RETRY_REASON_CHARS
        else f"{text[:RETRY_REASON_CHARS].rsplit(' ', 1)[0]} ..."
    )


def _run_notices(label: str, out: TextIO) -> Callable[[Any], None]:
    """An instance event listener that prints, while a run goes on, a step's retry as it is
    scheduled and a day's progress lines: the run's own line comes only at its end, its step
    retries wait 30, 60 and 120 s, and a long day takes minutes, in which the command would
    otherwise look hung."""
    import dagster as dg

    from pipelines.progress import PROGRESS_MARK

    def notice(entry: Any) -> None:
        event = entry.dagster_event
        if event is None:
            message = getattr(entry, "user_message", "") or ""
            if not message.startswith(PROGRESS_MARK):
                return
            text = f"     {label}: {message.removeprefix(PROGRESS_MARK)}"
        elif event.event_type == dg.DagsterEventType.STEP_UP_FOR_RETRY:
            wait = getattr(event.event_specific_data, "seconds_to_wait", None)
            after = (
                "" if wait is None else f" in {wait:.0f} s" if wait >= 10 else f" in {wait:.1f} s"
            )
            text = f"     {label}: retrying {event.step_key}{after} ({_retry_reason(event)})"
        else:
            return
        # A closed pipe (`ingest | head`) must not fail the run from inside Dagster: the run
        # goes on, and the command stops at its next line, between runs, as before.
        with contextlib.suppress(OSError):
            print(text, file=out, flush=True)

    return notice


def _format(line: RunLine) -> str:
    main = [k for k in ("raw_cdrs", "cdrs", "cdr_quarantine") if k in line.rows]
    shown = main or sorted(line.rows)[:4]
    rows = "  ".join(f"{k}={line.rows[k]:,}" for k in shown)
    passed = line.checks_total - len(line.checks_failed) - len(line.checks_warned)
    checks = f"checks {passed}/{line.checks_total} passed" if line.checks_total else ""
    status = "ok  " if line.success and not line.checks_failed else "FAIL"
    if line.path:
        rows = f"{rows}  -> {line.path}" if rows else f"-> {line.path}"
    text = f"{status} {line.label:<12} {rows}  {checks}  {line.seconds:.1f}s"
    for retry in line.retries:
        text += f"\n     retried {retry}"
    if line.checks_warned:
        text += f"\n     warning: {', '.join(line.checks_warned)}"
    if line.checks_failed:
        text += f"\n     failed checks: {', '.join(line.checks_failed)}"
    if line.failure:
        text += f"\n     {line.failure}"
    return text


def run_ingest(
    defs: dg.Definitions,
    keys: Sequence[str],
    *,
    instance: dg.DagsterInstance,
    data_dir: Path,
    snapshots: bool = True,
    verbose: bool = False,
    out: TextIO | None = None,
    on_run: Callable[[RunLine], None] | None = None,
    report_days: int | None = None,
    scope: AccountScope | None = None,
) -> IngestReport:
    """Materialize the account's (`scope`, default: the `default` account) snapshots, then
    each of its CDR partitions (one run each), then, with `report_days`, the
    `contact_center_report` asset of that many days; stop at a failure.

    The report is one more run in the same instance (the UI shows it materialized, with the
    path of its file), not a file written beside Dagster.

    A run that meets a setup error (a step failed with error class `SetupError`: a full disk, a
    missing bucket, refused credentials) prints nothing and sets `RunLine.setup_error`, one
    line naming the failure file. Raises `pipelines.preflight.SetupError` (one line) when the
    instance database stops answering: the run cannot even be recorded as ended."""
    from pipelines.definitions import CDR_JOB, SNAPSHOT_JOB
    from pipelines.preflight import stop_on_interrupt
    from pipelines.resources import ContactCenterResource
    from pipelines.scope import DEFAULT_SCOPE
    from warehouse.interrupt import deferred_signals, stop_signals

    scope = scope or DEFAULT_SCOPE
    api = (defs.resources or {}).get(scope.resource_key)
    if isinstance(api, ContactCenterResource) and api.key_by_value and not instance.is_ephemeral:
        # Each run would save the key in the instance's storage (its job snapshot).
        raise ValueError("pass the API key as dg.EnvVar('CC_API_KEY'), not as a value")
    run_config = VERBOSE_RUN_CONFIG if verbose else QUIET_RUN_CONFIG
    out = out or sys.stdout
    # Snapshots first: the CDR checks look CDR users up in the users dimension.
    snapshot_job = defs.resolve_job_def(scope.named(SNAPSHOT_JOB))
    cdr_job = defs.resolve_job_def(scope.named(CDR_JOB))
    plan = [_Planned("snapshots", snapshot_job)] if snapshots else []
    plan += [_Planned(k, cdr_job, k) for k in keys]
    if report_days is not None:
        plan.append(_report_run(defs, report_days))
    # A signal ends the step without a retry (`stop_on_interrupt`), then the command.
    with stop_signals() as stopped, deferred_signals(stopped):
        token = stop_on_interrupt.set(stopped)
        try:
            return _run_plan(
                plan,
                instance=instance,
                data_dir=data_dir,
                run_config=run_config,
                out=out,
                on_run=on_run,
                stopped=stopped,
            )
        finally:
            stop_on_interrupt.reset(token)


def _run_plan(
    plan: Sequence[_Planned],
    *,
    instance: dg.DagsterInstance,
    data_dir: Path,
    run_config: Mapping[str, Any],
    out: TextIO,
    on_run: Callable[[RunLine], None] | None,
    stopped: threading.Event,
) -> IngestReport:
    """`run_ingest`'s runs, one after the other; `KeyboardInterrupt` once `stopped` is set."""
    from pipelines.failures import (
        failure_summary,
        source_not_configured,
        summary_line,
        write_failure_summary,
    )
    from pipelines.preflight import (
        INTERRUPTED,
        SETUP_ERROR,
        SetupError,
        storage_problem,
        write_failure,
    )

    report = IngestReport()
    for planned in plan:
        if stopped.is_set():
            raise KeyboardInterrupt
        label, job_name, partition = planned.label, planned.job.name, planned.partition
        begun = time.perf_counter()
        run_id = str(uuid.uuid4())  # known before the run: named even if it cannot be recorded
        instance.add_event_listener(run_id, _run_notices(label, out))
        try:
            result = planned.job.execute_in_process(
                run_config={**run_config, **planned.config},
                instance=instance,
                partition_key=partition,
                asset_selection=planned.selection,
                raise_on_error=False,
                run_id=run_id,
            )
            line = _summarize(label, result, time.perf_counter() - begun)
            run = instance.get_run_by_id(result.run_id) if not result.success else None
        except Exception as exc:
            problem = storage_problem(exc, state="stopped answering during a run")
            if problem is None:
                raise
            where = f"the run of {label} ({run_id})"
            written = write_failure(
                data_dir, run_id, job_name, partition, problem, None, recorded=False
            )
            details = f"; details: {written}" if written else ""
            raise SetupError(
                f"{problem}; {where} is not recorded as ended (the next cdrhouse ingest marks "
                f"it FAILED){details}"
            ) from None
        if not result.success:
            assert run is not None
            failures = [e for e in result.all_events if e.is_step_failure]
            summary = failure_summary(run, failures)
            if stopped.is_set() or any(
                s["error_class"] == INTERRUPTED for s in summary["failed_steps"]
            ):
                # Ctrl-C or SIGTERM: the run is recorded as ended, nothing of its day
                # published; the caller ends the command as interrupted.
                raise KeyboardInterrupt
            setup = [s for s in summary["failed_steps"] if s["error_class"] == SETUP_ERROR]
            line.failure = summary_line(summary)
            if setup:
                # No retry fixes it, and the next day would meet it too: one line, exit 2.
                try:
                    written = write_failure_summary(data_dir, summary)
                except OSError:  # the full disk may be this very one
                    written = None
                details = f"; details: {written}" if written else ""
                line.failure += f"\n     {setup[0]['message']}{details}"
                line.setup_error = f"{label}: {setup[0]['message']}{details}"
                report.runs.append(line)
                if on_run is not None:
                    on_run(line)
                break
            # Like the sensor: with no source configured nothing is written, not even this.
            if not source_not_configured(summary):
                path = write_failure_summary(data_dir, summary)
                line.failure += f"\n     details: {path}"
            for step in summary["failed_steps"]:
                line.failure += f"\n     {step['message']}"
        report.runs.append(line)
        print(_format(line), file=out, flush=True)
        if on_run is not None:
            on_run(line)
        if not result.success:
            break
    if stopped.is_set():  # whatever the last run made of it (a retry, success)
        raise KeyboardInterrupt
    return report


@dataclass(frozen=True)
class _Planned:
    """One run of `run_ingest`: a job, for one partition or none, of some of its assets."""

    label: str
    job: dg.JobDefinition
    partition: str | None = None
    selection: Sequence[dg.AssetKey] | None = None  # None: every asset of the job
    config: Mapping[str, Any] = field(default_factory=dict)  # merged into the run config


def _report_run(defs: dg.Definitions, days: int) -> _Planned:
    """`contact_center_report` alone, of the last `days` days, in the implicit asset job
    (the one the UI's "Materialize" button launches)."""
    import dagster as dg

    from pipelines.names import REPORT_ASSET

    key = dg.AssetKey(REPORT_ASSET)
    job = defs.resolve_implicit_job_def_def_for_assets([key])
    if job is None:
        raise ValueError(f"no asset job holds {REPORT_ASSET}")
    config = {"ops": {REPORT_ASSET: {"config": {"days": days}}}}
    return _Planned("report", job, selection=[key], config=config)


def ensure_pools(pools: Sequence[str]) -> Callable[[dg.DagsterInstance], None]:
    """`ensure_pool` of each pool (one per account: `pipelines.scope`), as `open_instance`'s
    preparation; `dagster.yaml`'s `concurrency.pools.default_limit` applies to each."""

    def prepare(instance: dg.DagsterInstance) -> None:
        for pool in pools:
            ensure_pool(instance, pool)

    return prepare


def ensure_pool(instance: dg.DagsterInstance, pool: str | None = None, attempts: int = 5) -> None:
    """Create the API pool's limit row (at the instance's default limit) before any run.

    `pool` defaults to `pipelines.names.API_POOL` (looked up here, not at import time).

    Dagster creates it lazily inside the first step that claims a slot. On PostgreSQL, pods
    whose first runs start together race on that insert and the losers' runs fail (an
    IntegrityError, then InFailedSqlTransaction inside Dagster). The daemon's run queue does
    this before it launches a run; `cdrhouse ingest` runs in-process, so it does it here."""
    from sqlalchemy.exc import SQLAlchemyError

    if pool is None:
        from pipelines.names import API_POOL

        pool = API_POOL
    storage = instance.event_log_storage
    if not storage.supports_global_concurrency_limits:
        return
    for attempt in range(attempts):
        if pool in storage.get_concurrency_keys():
            return
        try:
            storage.initialize_concurrency_limit_to_default(pool)
        except SQLAlchemyError:
            if attempt == attempts - 1:
                raise
            time.sleep(0.2 * (attempt + 1))  # another pod is creating it: look again
        else:
            return
