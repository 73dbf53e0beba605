"""A clear summary of every failed run, in the log and on disk.

The summary names the partition, the failing step and asset, the API endpoint and the error
class (e.g. `PermissionDeniedError` on `GET /api/v4/reporting/cdrs`), so an operator can act
without reading a stack trace. It is written to `<data_dir>/failures/<run_id>.json` by the
run-failure sensor (`pipelines.defs.automation.sensors`) and by the CLI for the runs it executes
in process. A run that failed because no data source
is configured (`SourceNotConfigured`) is only logged: nothing is written then.
"""

import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import dagster as dg
from dagster_shared.error import SerializableErrorInfo

from models.timestamps import iso_ms
from pipelines.resources import SOURCE_NOT_CONFIGURED, utc_now

FAILURES_DIR = "failures"
_DAGSTER_ERRORS = ("Dagster", "Failure", "RetryRequested")


def _innermost(error: SerializableErrorInfo | None) -> SerializableErrorInfo | None:
    """The user's exception behind Dagster's wrappers (DagsterExecutionStepExecutionError...)."""
    found = error
    while error is not None:
        if not (error.cls_name or "").startswith(_DAGSTER_ERRORS):
            return error
        found = error
        error = error.cause or error.context
    return found


def _meta_value(metadata: Mapping[str, Any], key: str) -> Any:
    value = metadata.get(key)
    return getattr(value, "value", value)


def step_summary(event: dg.DagsterEvent) -> dict[str, Any]:
    """One failed step: which step, which endpoint, which error class, and the message."""
    data = event.step_failure_data
    user = data.user_failure_data
    metadata: Mapping[str, Any] = user.metadata if user is not None else {}
    inner = _innermost(data.error)
    error_class = _meta_value(metadata, "error_class") or (inner.cls_name if inner else "unknown")
    message = (user.description if user is not None else None) or (
        inner.message.strip() if inner else ""
    )
    return {
        "step": event.step_key,
        "error_class": error_class,
        "endpoint": _meta_value(metadata, "endpoint") or "",
        "fatal": bool(_meta_value(metadata, "fatal")),
        "message": (message or "")[:1000],
    }


def failure_summary(run: dg.DagsterRun, step_failures: Iterable[dg.DagsterEvent]) -> dict[str, Any]:
    """The JSON document written for one failed run."""
    steps = [step_summary(event) for event in step_failures]
    return {
        "run_id": run.run_id,
        "job": run.job_name,
        "partition": run.tags.get("dagster/partition"),
        "backfill": run.tags.get("dagster/backfill"),
        "written_at": iso_ms(utc_now()),
        "failed_steps": steps,
    }


def summary_line(summary: Mapping[str, Any]) -> str:
    """A one-line human summary, e.g. for the CLI and the sensor log."""
    parts = [
        f"{s['step']}: {s['error_class']}" + (f" on {s['endpoint']}" if s["endpoint"] else "")
        for s in summary["failed_steps"]
    ]
    where = f"partition {summary['partition']}" if summary.get("partition") else "unpartitioned"
    return f"run {summary['run_id']} ({where}) failed: " + ("; ".join(parts) or "no step failed")


def source_not_configured(summary: Mapping[str, Any]) -> bool:
    """The run failed because no API is configured: nothing may be written for it."""
    return any(s["error_class"] == SOURCE_NOT_CONFIGURED for s in summary["failed_steps"])


def write_failure_summary(data_dir: Path, summary: Mapping[str, Any]) -> Path:
    """Write `<data_dir>/failures/<run_id>.json` atomically (temp file + rename)."""
    folder = data_dir / FAILURES_DIR
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{summary['run_id']}.json"
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(summary, indent=2, default=str))
    tmp.replace(path)
    return path
