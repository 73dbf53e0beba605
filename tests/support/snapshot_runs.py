"""The snapshots job against a small sandbox behind a rewriting app, as the snapshot tests run
it: served on loopback, the job run as `cdrhouse ingest` runs it (`run_ingest`)."""

from __future__ import annotations

import contextlib
import io
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TypeVar

import dagster as dg

from connectors.sandbox.config import DEFAULT_API_KEY
from connectors.sandbox.rewriting import App, serve_app
from pipelines.cli_runs import IngestReport, run_ingest
from pipelines.resources import ContactCenterResource
from tests.support.clock import SessionClock
from tests.support.sandboxes import make_sandbox
from tests.support.served import suite_defs

W = TypeVar("W", bound=App)


@contextmanager
def serve_wrapped(clock: SessionClock, wrap: Callable[[App], W]) -> Iterator[tuple[W, str]]:
    """A 2-day sandbox's app wrapped by `wrap`, served: the wrapper and the base URL."""
    sandbox = make_sandbox(start_date=clock.days_ago(3), days=2, cdrs_per_day=5, now=clock.now)
    stub = wrap(sandbox.app)
    with serve_app(stub) as base_url:
        yield stub, base_url


def snapshots_api(base_url: str, *, by_env: bool = False) -> ContactCenterResource:
    """One attempt per request (the tests' faults are not transient); the key by value, or
    as `EnvVar("CC_API_KEY")` as a deployment passes it."""
    return ContactCenterResource(
        base_url=base_url,
        api_key=dg.EnvVar("CC_API_KEY") if by_env else DEFAULT_API_KEY,
        phone_numbers="raw",
        max_attempts=1,
    )


def run_snapshots(
    base_url: str,
    clock: SessionClock,
    data_dir: Path,
    instance: dg.DagsterInstance | None = None,
    step_retries: int = 0,
) -> tuple[IngestReport, str]:
    """The snapshots job as `cdrhouse ingest` runs it: its report and what it printed."""
    api = snapshots_api(base_url, by_env=instance is not None)
    defs = suite_defs(api, data_dir, clock.days_ago(3), step_retries=step_retries)
    out = io.StringIO()
    with contextlib.ExitStack() as stack:
        if instance is None:
            instance = stack.enter_context(dg.DagsterInstance.ephemeral())
        report = run_ingest(defs, [], instance=instance, data_dir=data_dir, out=out)
    return report, out.getvalue()
