"""Issue 22: publishing is all or nothing, per day; and a day the API answers smaller does not
replace the one the lake holds unless the run accepts it.

A 6,000-CDR sandbox day is ingested exactly, then again through a server that gets it wrong in
a way the row count cannot see: (a) it repeats ids more than 5,000 rows apart (so no row
group's dedupe sees them) and (b) its upper bound is inclusive, so a CDR on a sub-window
boundary comes twice and the next day's first CDR (00:00:00.000) comes with the day. The
server is the sandbox behind `RewritingApp` (tests/support/oddserver.py) over a real socket;
the runs are `cdrhouse ingest`'s (`run_ingest`: the CDR job, its checks, the aggregates, the
views). The failed run must leave every published byte of the day as it was, say what was
wrong, and skip the aggregates; the records it received wait in the lake's rejected area.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from pathlib import Path
from typing import Any

import dagster as dg
import httpx
import polars as pl
import pytest

from connectors.sandbox.config import DEFAULT_API_KEY
from pipelines.cdr_day import NORMALIZED_TABLES
from pipelines.checks import SHRINK_TAG
from pipelines.cli_runs import IngestReport, run_ingest
from pipelines.definitions import CDR_JOB
from tests.support.clock import SessionClock
from tests.support.damage import damage_footer
from tests.support.lake import warehouse
from tests.support.oddserver import RewritingApp, cost_token, record_id, serve_app, with_cost
from tests.support.sandboxes import make_sandbox
from tests.support.served import ServedSandbox
from warehouse.duck import WAREHOUSE_FILE
from warehouse.lake import Lake
from warehouse.viewsql import aggregate_names

CDRS_PER_DAY = 6_000
# Records (in API order) whose ids the repeating server replaces with an id served more than
# 5,000 rows earlier: 3 duplicate ids, in no common row group, and the same row count.
REPEATS = {5_800: 100, 5_850: 200, 5_900: 300}
# Sub-window bounds inside the day (the connector's default sub-window is one hour) where an
# agent call starts, so an inclusive upper bound serves each of them twice.
BOUNDARY_HOURS = (6, 12, 18)
CONTACT = "4915112345678"
# A server that answers the day with fewer records, its totals agreeing (a retention window
# passed; a key that lost the scope of every type but SMS): no gap and no duplicate for the
# four checks above to see.
SMALLER = {"retention-passed": b"&from_phone_number=0", "sms-only": b"&type=sms"}
_LT = re.compile(rb"started_at(%5B|\[)lt(%5D|\])=")


@dataclass
class Api:
    """The served day and the server's current way of getting it wrong (`mode`)."""

    app: RewritingApp
    served: ServedSandbox
    day: date
    repeats: dict[str, str]  # record id -> the earlier id the repeating server sends instead
    mode: str = "exact"

    def rewrite(self, record: bytes) -> bytes:
        if self.mode == "string-costs":
            return with_cost(record, b'"' + cost_token(record) + b'"')
        if self.mode == "sms-renamed":
            return record.replace(b'"type":"sms"', b'"type":"text_message"', 1)
        if self.mode != "repeats":
            return record
        own = record_id(record)
        twin = self.repeats.get(own)
        return record if twin is None else record.replace(own.encode(), twin.encode(), 1)

    def query(self, query: bytes) -> bytes:
        if self.mode in SMALLER:
            return query + SMALLER[self.mode]
        if self.mode != "inclusive":
            return query
        return _LT.sub(lambda m: b"started_at" + m[1] + b"lte" + m[2] + b"=", query)

    def ingest(self, data_dir: Path, instance: dg.DagsterInstance) -> IngestReport:
        defs = self.served.defs(data_dir)
        return run_ingest(
            defs, [self.day.isoformat()], instance=instance, data_dir=data_dir, snapshots=False
        )

    def failure_in(self, mode: str, data_dir: Path, instance: dg.DagsterInstance) -> str:
        """The day ingested through the server in `mode` (then `exact` again): its run failed;
        what it said."""
        self.mode = mode
        try:
            report = self.ingest(data_dir, instance)
        finally:
            self.mode = "exact"
        (line,) = report.runs
        assert not report.success
        assert line.failure is not None
        return line.failure

    def landed(self, data_dir: Path, instance: dg.DagsterInstance) -> Landed:
        """The day ingested exactly, and what the lake and the views then hold of it."""
        assert self.ingest(data_dir, instance).success
        return Landed(
            CDRS_PER_DAY + len(BOUNDARY_HOURS),
            _published(data_dir, self.day),
            _answers(data_dir, self.day),
        )


@dataclass
class Landed:
    """A day as an exact ingest left it: its records, the bytes of its files, what it answers."""

    rows: int
    files: dict[str, str]
    answers: dict[str, list[tuple[Any, ...]]]


def _agent_call_at(base_url: str, api_key: str, sandbox: Any, at: datetime) -> str:
    """An agent's call started through the API at `at` (the sandbox's clock), hung up a minute
    later: a call CDR whose started_at is exactly `at`."""
    agent = sandbox.dataset.users[0]["id"]
    headers = {"Authorization": f"Bearer {api_key}"}
    with httpx.Client(base_url=f"{base_url}/api/v4", headers=headers, timeout=30) as api:
        sandbox.clock.set(at)
        started = api.post("/voice/calls", json={"phone_number": CONTACT, "user_id": agent})
        assert started.status_code == 201, started.text
        call_id: str = started.json()["call"]["id"]
        sandbox.clock.set(at + timedelta(minutes=1))
        ended = api.post(f"/voice/calls/{call_id}/hangup", json={"user_id": agent})
        assert ended.status_code == 200, ended.text
    return call_id


@pytest.fixture(scope="module")
def api(clock: SessionClock) -> Iterator[Api]:
    first = clock.days_ago(3)
    day = clock.days_ago(2)  # the next day, with its CDR at 00:00:00.000, is served too
    sandbox = make_sandbox(start_date=first, days=3, cdrs_per_day=CDRS_PER_DAY, now=clock.now)
    holder: list[Api] = []
    app = RewritingApp(sandbox.app, lambda r: holder[0].rewrite(r), lambda q: holder[0].query(q))
    with serve_app(app) as base_url:
        calls = [
            _agent_call_at(
                base_url, DEFAULT_API_KEY, sandbox, datetime.combine(day, time(h), tzinfo=UTC)
            )
            for h in BOUNDARY_HOURS
        ]
        clock.freeze(sandbox)
        ids = sandbox.dataset.day(day).ids  # API order: (started_at, id)
        assert len(ids) == CDRS_PER_DAY
        assert not set(calls) & set(ids)
        # One window at a time, in API order: every row group of the day is predictable.
        defaults = {"concurrency": 1, "max_attempts": 2, "max_retry_s": 2.0}
        served = ServedSandbox(sandbox, base_url, first, clock, defaults)
        api = Api(app, served, day, {ids[at]: ids[twin] for at, twin in REPEATS.items()})
        holder.append(api)
        yield api


def _normalize_again(
    api: Api, data_dir: Path, instance: dg.DagsterInstance, **tags: str
) -> dg.ExecuteInProcessResult:
    """The day's typed tables materialized without `raw_cdrs`: normalized again from the lake."""
    job = api.served.defs(data_dir).resolve_job_def(CDR_JOB)
    typed = [k for k in job.asset_layer.executable_asset_keys if k.path[0] != "raw_cdrs"]
    return job.execute_in_process(
        partition_key=api.day.isoformat(),
        instance=instance,
        asset_selection=typed,
        tags=tags,
        raise_on_error=False,
    )


def _step_failure(result: dg.ExecuteInProcessResult) -> str:
    """What the run's one failed step (the day's) said."""
    (failure,) = [e for e in result.all_events if e.is_step_failure]
    assert failure.step_key == "raw_cdrs"
    user = failure.step_failure_data.user_failure_data
    assert user is not None
    return user.description or ""


def _published(data_dir: Path, day: date) -> dict[str, str]:
    """sha256 of every published file of the day's partitions (every table, `agg_*` too)."""
    lake = data_dir / "lake"
    return {
        str(p.relative_to(lake)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(lake.glob(f"*/date={day}/*"))
        if p.is_file()
    }


def _answers(data_dir: Path, day: date) -> dict[str, list[tuple[Any, ...]]]:
    """What an analyst reads: the day's cdrs and raw_cdrs, every `rpt_*` view whole."""
    with warehouse(data_dir) as con:
        views = [
            name
            for (name,) in con.execute(
                "select table_name from information_schema.tables "
                "where table_name like 'rpt\\_%' escape '\\' order by 1"
            ).fetchall()
        ]
        assert len(views) >= 6, views
        out = {
            "cdrs": con.execute("select * from cdrs where date = ? order by id", [day]).fetchall(),
            "raw_cdrs": con.execute(
                "select id, record from raw_cdrs where date = ? order by id, record", [day]
            ).fetchall(),
        }
        for view in views:
            out[view] = sorted(con.execute(f"select * from {view}").fetchall(), key=repr)
    return out


@pytest.mark.parametrize(
    ("mode", "problems"),
    [
        (
            "repeats",
            [
                "cdrs_ids_unique: 3 duplicate ids among 6003 records received (e.g. ",
            ],
        ),
        (
            "inclusive",
            [
                "cdrs_ids_unique: 3 duplicate ids among 6007 records received (e.g. ",
                "cdrs_started_at_in_window: 1 started_at outside [",
            ],
        ),
    ],
    ids=["repeated-ids-5000-rows-apart", "inclusive-upper-bound"],
)
def test_a_failing_run_leaves_every_published_byte_of_its_day(
    api: Api, tmp_path: Path, mode: str, problems: list[str]
) -> None:
    day = api.day
    with dg.DagsterInstance.ephemeral() as instance:
        api.mode = "exact"
        good = api.ingest(tmp_path, instance)
        (line,) = good.runs
        assert line.success, line.failure
        assert line.rows["cdrs"] == CDRS_PER_DAY + len(BOUNDARY_HOURS)
        before = _published(tmp_path, day)
        tables = {name.split("/")[0] for name in before}
        assert tables == {"raw_cdrs", *NORMALIZED_TABLES, *aggregate_names()}
        answers = _answers(tmp_path, day)
        views = hashlib.sha256((tmp_path / WAREHOUSE_FILE).read_bytes()).hexdigest()

        api.mode = mode
        try:
            bad = api.ingest(tmp_path, instance)
        finally:
            api.mode = "exact"
        (line,) = bad.runs
        # Nothing of the day was published: every byte as it was, no materialization.
        assert _published(tmp_path, day) == before
        assert _answers(tmp_path, day) == answers
        assert hashlib.sha256((tmp_path / WAREHOUSE_FILE).read_bytes()).hexdigest() == views
        assert line.rows == {}
        # The run failed (not only its checks).
        assert not bad.success
        assert not line.success
        # The line and the failure file say what was wrong.
        assert line.failure is not None
        for problem in problems:
            assert problem in line.failure, line.failure
        (summary_file,) = (tmp_path / "failures").glob("*.json")
        summary = json.loads(summary_file.read_text())
        (step,) = summary["failed_steps"]
        assert step["step"] == "raw_cdrs"
        assert step["error_class"] == "BlockingCheckFailed"
        for problem in problems:
            assert problem in step["message"]
        assert "quarantine not empty" not in step["message"]
        # The aggregates (and their view refresh) did not run for the day: Dagster abandons
        # the step downstream of a failed one.
        run_id = summary["run_id"]
        started = {
            e.step_key for e in instance.all_logs(run_id, of_type=dg.DagsterEventType.STEP_START)
        }
        assert started == {"raw_cdrs"}
        aggregates = [e for e in instance.all_logs(run_id) if e.step_key == "reporting_aggregates"]
        # Only what the run planned at its start, and a log line: no step event, no
        # materialization, no check evaluation.
        planned = {
            dg.DagsterEventType.ASSET_MATERIALIZATION_PLANNED,
            dg.DagsterEventType.ASSET_CHECK_EVALUATION_PLANNED,
        }
        assert {e.dagster_event_type for e in aggregates} <= {*planned, None}
        (abandoned,) = [e.user_message for e in aggregates if e.dagster_event_type is None]
        assert abandoned.startswith(
            "Dependencies for step reporting_aggregates failed: ['raw_cdrs'"
        )
        assert abandoned.endswith("Not executing.")
        # The records received are kept for diagnosis, where no reader takes them.
        lake = Lake((tmp_path / "lake").as_uri())
        published_raw = lake.read("raw_cdrs", f"date={day}")
        kept = list(lake.iter_batches("raw_cdrs", f"date={day}", rejected=True))
        received = sum(batch.height for batch in kept)
        assert published_raw is not None
        assert received == published_raw.height + (4 if mode == "inclusive" else 0)
        assert lake.partition_url("raw_cdrs", f"date={day}", rejected=True) in step["message"]

        # The right server again: the day lands whole, and its rejected copy is gone.
        summary_file.unlink()
        again = api.ingest(tmp_path, instance)
        assert again.success, again.runs[0].failure
        assert _answers(tmp_path, day)["cdrs"] == answers["cdrs"]
        assert not lake.exists("raw_cdrs", f"date={day}", rejected=True)


def test_renormalizing_a_day_whose_raw_records_repeat_ids_publishes_nothing(
    api: Api, tmp_path: Path
) -> None:
    """A raw partition that repeats ids (published before this rule, by old code) normalized
    again without the API: the typed tables and aggregates of the day stay as they were."""
    day, key = api.day, f"date={api.day}"
    with dg.DagsterInstance.ephemeral() as instance:
        assert api.ingest(tmp_path, instance).success
        # The repeating server's records become the published raw_cdrs, as old code left them.
        lake = Lake((tmp_path / "lake").as_uri())
        raw = lake.read("raw_cdrs", key)
        assert raw is not None
        ids, records = raw["id"].to_list(), raw["record"].to_list()
        for n, own in enumerate(ids):
            twin = api.repeats.get(own)
            if twin is not None:
                ids[n], records[n] = twin, records[n].replace(own, twin, 1)
        repeated = raw.with_columns(pl.Series("id", ids), pl.Series("record", records))
        lake.write("raw_cdrs", key, repeated, source=lake.partition_source("raw_cdrs", key))
        before = _published(tmp_path, day)
        answers = _answers(tmp_path, day)

        result = _normalize_again(api, tmp_path, instance)
    assert not result.success
    checks = {c.check_name: c for c in result.get_asset_check_evaluations()}
    assert not checks["cdrs_ids_unique"].passed
    assert (checks["cdrs_ids_unique"].description or "").startswith("3 duplicate ids among 6003")
    assert result.get_asset_materialization_events() == []
    assert "cdrs_ids_unique: 3 duplicate ids" in _step_failure(result)
    assert _published(tmp_path, day) == before
    assert _answers(tmp_path, day) == answers


def test_normalizing_a_day_without_a_published_raw_partition_publishes_nothing(
    api: Api, tmp_path: Path
) -> None:
    """A rejected (or never landed) day has no `raw_cdrs` partition: the typed tables asked for
    alone must fail saying so, not publish an empty day that every check would call whole."""
    day = api.day
    with dg.DagsterInstance.ephemeral() as instance:
        result = _normalize_again(api, tmp_path, instance)
    assert not result.success
    assert result.get_asset_materialization_events() == []
    assert "no published raw_cdrs partition" in _step_failure(result)
    assert _published(tmp_path, day) == {}


@pytest.mark.parametrize("mode", list(SMALLER))
def test_a_day_the_api_answers_smaller_is_kept_until_a_run_accepts_it(
    api: Api, tmp_path: Path, mode: str
) -> None:
    """Backfilling every partition from the UI reaches days older than the API keeps: its answer
    (no records, total 0) passes every other check. The day the lake holds stays, byte for byte;
    the run fails naming both counts and how to accept a day really deleted at the source."""
    day, key = api.day, f"date={api.day}"
    lake = Lake((tmp_path / "lake").as_uri())
    with dg.DagsterInstance.ephemeral() as instance:
        exact = api.landed(tmp_path, instance)
        landed, before, answers = exact.rows, exact.files, exact.answers
        failure = api.failure_in(mode, tmp_path, instance)
        # What the API sent waits in the rejected area, out of every reader's way.
        kept = list(lake.iter_batches("raw_cdrs", key, rejected=True))
        smaller = sum(batch.height for batch in kept)
        assert smaller < landed * 0.9
        assert (
            f"day {day} not published: cdrs_day_not_shrunk: {smaller} records received "
            f"where the lake holds {landed} for the day"
        ) in failure
        assert f"run tag {SHRINK_TAG}=1" in failure
        assert _published(tmp_path, day) == before
        assert _answers(tmp_path, day) == answers
        api.mode = mode
        try:
            assert api.served.api_total(day) == smaller
            job = api.served.defs(tmp_path).resolve_job_def(CDR_JOB)
            # A tag that is not a limit stops the step before the API is asked.
            odd = job.execute_in_process(
                partition_key=day.isoformat(),
                instance=instance,
                tags={SHRINK_TAG: "all"},
                raise_on_error=False,
            )
            assert not odd.success
            assert _step_failure(odd).startswith(
                f"run tag {SHRINK_TAG}='all': expected a fraction from 0 to 1"
            )
            assert _published(tmp_path, day) == before
            # The run that says so replaces the day with what the API now answers.
            accepted = job.execute_in_process(
                partition_key=day.isoformat(),
                instance=instance,
                tags={SHRINK_TAG: "1"},
                raise_on_error=False,
            )
        finally:
            api.mode = "exact"
        # Accepted, the smaller day is said in the run's log, not only allowed.
        said = [e.user_message for e in instance.all_logs(accepted.run_id)]
    assert accepted.success
    assert any(
        m.startswith(f"day {day} is smaller than the lake's (records {landed} -> {smaller}, ")
        and m.endswith(
            f"within the limit of 100% (CDRHOUSE_MAX_DAY_SHRINK or the run tag {SHRINK_TAG})"
        )
        for m in said
    ), said
    checks = {c.check_name: c for c in accepted.get_asset_check_evaluations()}
    assert checks["cdrs_day_not_shrunk"].passed
    raw = lake.read("raw_cdrs", key)
    cdrs = lake.read("cdrs", key)
    assert raw is not None
    assert cdrs is not None
    assert raw.height == cdrs.height == smaller
    if mode == "sms-only":
        assert set(cdrs["type"].to_list()) == {"sms"}
    assert not lake.exists("raw_cdrs", key, rejected=True)


def test_a_day_whose_raw_partition_is_damaged_is_replaced_by_fetching_it_again(
    api: Api, tmp_path: Path
) -> None:
    """A failing disk leaves the day's `raw_cdrs` footer unreadable: fetching the day again is
    the remedy `cdrhouse sql` names, so the shrink check counts the day by its typed tables
    then (raw = cdrs + quarantine for every day published), and still keeps a day the API
    answers smaller."""
    day, key = api.day, f"date={api.day}"
    lake = Lake((tmp_path / "lake").as_uri())
    raw_file = Path(lake.partition_url("raw_cdrs", key))
    with dg.DagsterInstance.ephemeral() as instance:
        assert api.ingest(tmp_path, instance).success
        landed = CDRS_PER_DAY + len(BOUNDARY_HOURS)
        answers = _answers(tmp_path, day)
        damage_footer(raw_file)
        cdrs_file = f"cdrs/{key}/part-0.parquet"
        cdrs_before = _published(tmp_path, day)[cdrs_file]
        failure = api.failure_in("retention-passed", tmp_path, instance)
        assert f"0 records received where the lake holds {landed} for the day" in failure
        assert _published(tmp_path, day)[cdrs_file] == cdrs_before
        again = api.ingest(tmp_path, instance)
    assert again.success, again.runs[0].failure
    raw = lake.read("raw_cdrs", key)
    assert raw is not None
    assert raw.height == landed
    assert _answers(tmp_path, day)["cdrs"] == answers["cdrs"]


def test_a_day_whose_records_no_longer_read_keeps_its_typed_tables(
    api: Api, tmp_path: Path
) -> None:
    """The API starts sending every cost as a JSON string (a format change, not an odd record):
    each record is quarantined, which does not block a day, and the day's `cdrs`, type tables
    and aggregates were replaced by empty ones (raw_cdrs kept them). Now the day is held, the
    same way when it is normalized again from a `raw_cdrs` of such records, until a run
    accepts it."""
    day, key = api.day, f"date={api.day}"
    lake = Lake((tmp_path / "lake").as_uri())
    with dg.DagsterInstance.ephemeral() as instance:
        exact = api.landed(tmp_path, instance)
        landed, before, answers = exact.rows, exact.files, exact.answers
        failure = api.failure_in("string-costs", tmp_path, instance)
        assert (
            f"cdrs_day_not_shrunk: 0 of {landed} records normalized into cdrs where the lake's "
            f"cdrs holds {landed} for the day ({landed} quarantined: {landed} "
        ) in failure
        assert _published(tmp_path, day) == before
        assert _answers(tmp_path, day) == answers

        # The same records as the day's published raw_cdrs (as a run before this check left
        # them), normalized again without the API: held too.
        raw = lake.read("raw_cdrs", key)
        assert raw is not None
        strings = raw.with_columns(
            pl.Series("record", [_string_cost(r) for r in raw["record"].to_list()])
        )
        lake.write("raw_cdrs", key, strings, source=lake.partition_source("raw_cdrs", key))
        before = _published(tmp_path, day)
        again = _normalize_again(api, tmp_path, instance)
        assert not again.success
        assert f"cdrs_day_not_shrunk: 0 of {landed} records normalized" in _step_failure(again)
        assert _published(tmp_path, day) == before
        accepted = _normalize_again(api, tmp_path, instance, **{SHRINK_TAG: "1"})
    assert accepted.success
    quarantine = lake.read("cdr_quarantine", key)
    assert quarantine is not None
    assert quarantine.height == landed


def _string_cost(record: str) -> str:
    return with_cost(record.encode(), b'"' + cost_token(record.encode()) + b'"').decode()


def test_a_day_whose_type_is_renamed_keeps_its_type_table(api: Api, tmp_path: Path) -> None:
    """The API renames a CDR type: its records land in `cdrs` with the new name (an unknown
    enum value is kept), and the day's `cdr_sms` would be emptied: held, naming the types."""
    day, key = api.day, f"date={api.day}"
    lake = Lake((tmp_path / "lake").as_uri())
    with dg.DagsterInstance.ephemeral() as instance:
        assert api.ingest(tmp_path, instance).success
        sms = lake.read("cdr_sms", key)
        assert sms is not None
        assert sms.height > 0
        before = _published(tmp_path, day)
        failure = api.failure_in("sms-renamed", tmp_path, instance)
    assert (
        f"cdrs_day_not_shrunk: 0 of {CDRS_PER_DAY + len(BOUNDARY_HOURS)} records normalized "
        f"into cdr_sms where the lake's cdr_sms holds {sms.height} for the day (0 quarantined: "
        "none; types normalized: "
    ) in failure
    assert f"{sms.height} text_message" in failure
    assert _published(tmp_path, day) == before
