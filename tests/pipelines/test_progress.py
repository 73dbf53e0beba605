"""A long day says how far it is while it is fetched: in the run's log (the UI's run view) and
in `cdrhouse ingest`'s output, before the day's own line. Before, a day of a million CDRs
behind a rate limit printed nothing from its start to its end."""

from __future__ import annotations

import io
import re
from datetime import date
from pathlib import Path

import dagster as dg
import pytest
from pydantic import ValidationError

from connectors.sandbox import FaultConfig
from pipelines.cli_runs import run_ingest
from pipelines.progress import PROGRESS_MARK
from pipelines.resources import ContactCenterResource
from tests.support.clock import SessionClock
from tests.support.served import ServedSandbox

WAITING = re.compile(r"^     (?P<day>\S+): no page yet after [\d,]+ s$")
PROGRESS = re.compile(
    r"^     (?P<day>\S+): (?P<received>[\d,]+) CDRs received of (?P<announced>[\d,]+) "
    r"announced so far, (?P<pages>[\d,]+) pages \([\d.,]+ MiB\), [\d,]+ CDRs/s$"
)


def _number(text: str) -> int:
    return int(text.replace(",", ""))


def test_a_days_progress_is_printed_while_it_is_fetched(
    clean_faults: ServedSandbox, clock: SessionClock, tmp_path: Path
) -> None:
    served = clean_faults
    day: date = clock.days_ago(5)
    # Small pages, each answered slowly: the day's fetch takes at least three answers in a row.
    served.sandbox.faults = FaultConfig(latency_ms=150.0)
    defs = served.defs(tmp_path, page_size=20, progress_every_s=0.1)
    out = io.StringIO()
    with dg.DagsterInstance.ephemeral() as instance:
        report = run_ingest(
            defs, [day.isoformat()], instance=instance, data_dir=tmp_path, snapshots=False, out=out
        )
        (run,) = instance.get_runs()
        logged = [
            e.user_message
            for e in instance.all_logs(run.run_id)
            if e.dagster_event is None and e.user_message.startswith(PROGRESS_MARK)
        ]
    assert report.success, out.getvalue()
    lines = out.getvalue().splitlines()
    progress = [(n, m) for n, text in enumerate(lines) if (m := PROGRESS.match(text))]
    assert len(progress) >= 2, lines
    (ended,) = [n for n, text in enumerate(lines) if text.startswith("ok ")]
    assert all(n < ended for n, _ in progress), lines  # while the day was fetched
    # Lines before the first page say so; no other line comes between.
    waiting = [n for n, text in enumerate(lines) if WAITING.match(text)]
    assert sorted(waiting + [n for n, _ in progress]) == list(range(ended)), lines
    assert {m["day"] for _, m in progress} == {day.isoformat()}
    received = [_number(m["received"]) for _, m in progress]
    assert received == sorted(received)
    assert received[-1] > received[0]
    total = report.runs[0].rows["raw_cdrs"]
    assert all(_number(m["announced"]) <= total for _, m in progress)
    assert received[-1] <= total
    # The same lines in the run's log, where the UI shows them.
    assert len(logged) == len(progress) + len(waiting)


def test_no_progress_line_when_it_is_turned_off(
    clean_faults: ServedSandbox, clock: SessionClock, tmp_path: Path
) -> None:
    served = clean_faults
    served.sandbox.faults = FaultConfig(latency_ms=150.0)
    defs = served.defs(tmp_path, page_size=20, progress_every_s=0)
    out = io.StringIO()
    with dg.DagsterInstance.ephemeral() as instance:
        report = run_ingest(
            defs,
            [clock.days_ago(5).isoformat()],
            instance=instance,
            data_dir=tmp_path,
            snapshots=False,
            out=out,
        )
    assert report.success
    assert "CDRs received" not in out.getvalue()
    assert "no page yet" not in out.getvalue()


SNAPSHOT_PROGRESS = re.compile(
    r"^     snapshots: (?P<family>[a-z_]+): requests sent (?P<sent>[\d,]+) "
    r"\((?P<retried>[\d,]+) retried\) in [\d,]+ s$"
)


def test_a_snapshots_progress_is_printed_while_it_is_read(
    clean_faults: ServedSandbox, tmp_path: Path
) -> None:
    # The queues' and teams' members are two requests per group: thousands of them behind a
    # rate limit said nothing until the run's line.
    served = clean_faults
    served.sandbox.faults = FaultConfig(latency_ms=60.0)
    defs = served.defs(tmp_path, progress_every_s=0.03)
    out = io.StringIO()
    with dg.DagsterInstance.ephemeral() as instance:
        report = run_ingest(defs, [], instance=instance, data_dir=tmp_path, out=out)
    assert report.success, out.getvalue()
    lines = out.getvalue().splitlines()
    progress = [(n, m) for n, text in enumerate(lines) if (m := SNAPSHOT_PROGRESS.match(text))]
    (ended,) = [n for n, text in enumerate(lines) if text.startswith("ok ")]
    assert progress, lines
    assert all(n < ended for n, _ in progress)
    families = [m["family"] for _, m in progress]
    assert "queues" in families  # one request for the list, then two per queue
    sent = [int(m["sent"].replace(",", "")) for _, m in progress if m["family"] == "queues"]
    assert sent == sorted(sent)
    assert sent[-1] > 1


@pytest.mark.parametrize("every_s", [-1.0, float("nan")], ids=["negative", "nan"])
def test_a_progress_interval_that_cannot_be_is_refused(every_s: float) -> None:
    # A typo (-15) or an unset variable read as NaN must not start a task that logs without
    # a pause, or never.
    with pytest.raises(ValidationError, match="progress_every_s"):
        ContactCenterResource(base_url="sandbox", progress_every_s=every_s)
