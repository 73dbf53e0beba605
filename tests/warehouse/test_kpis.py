"""The KPI views agree with docs/metrics.md applied in plain Python to the API's own records.

A sandbox is served through `RewritingApp` (one call's `end_reason` becomes a value no setting
names) and ingested as `cdrhouse ingest` runs it, once with the default settings (UTC) and once
with `CDRHOUSE_TIMEZONE=Australia/Sydney` over two UTC days. The expected numbers are computed
here from the day's JSON fetched over HTTP (parsed with `json`, numbers as `Decimal`), never
from the views or the lake.
"""

from __future__ import annotations

import json
import re
import shutil
from collections import Counter, defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import dagster as dg
import httpx
import pytest

from connectors.sandbox.config import DEFAULT_API_KEY
from models.timestamps import iso_ms, parse_ts
from pipelines.cli import main
from pipelines.cli_runs import IngestReport, RunLine, run_ingest
from pipelines.definitions import build_defs
from pipelines.mapping_check import CALL_AGG, MAPPING_CHECK
from pipelines.partitions import partition_window
from pipelines.resources import ContactCenterResource, WarehouseResource
from pipelines.settings import settings_from_env
from pipelines.steps import api_retry_policy
from tests.support.clock import SessionClock
from tests.support.lake import warehouse
from tests.support.oddserver import CDRS_PATH, RewritingApp, record_id, serve_app
from tests.support.sandboxes import make_sandbox
from warehouse.kpi import KpiSettings

CDRS_PER_DAY = 900  # one page of the day holds them all (limit 1000)
SYDNEY = "Australia/Sydney"
ODD_REASON = "transferred_to_voicemail"
COUNTS = ("offered", "answered", "answered_within_sl", "abandoned", "short_abandoned", "blocked")
SUMS = ("answered_queue_s", "handle_s")


def _day_records(base_url: str, day: date) -> list[dict[str, Any]]:
    """The UTC day's CDRs as the API sends them, every decimal read as a `Decimal`."""
    start, end = partition_window(day.isoformat())
    response = httpx.get(
        f"{base_url}{CDRS_PATH}",
        params={"started_at[gte]": iso_ms(start), "started_at[lt]": iso_ms(end), "limit": 1000},
        headers={"Authorization": f"Bearer {DEFAULT_API_KEY}"},
        timeout=30,
    )
    response.raise_for_status()
    page = json.loads(response.content, parse_float=Decimal)
    assert page["metadata"]["total"] == len(page["cdrs"])
    records: list[dict[str, Any]] = page["cdrs"]
    return records


# --- docs/metrics.md, in plain Python ---------------------------------------------------------


def offered(rec: dict[str, Any], kpi: KpiSettings) -> bool:
    return (
        rec["type"] == "call"
        and rec["subtype"] in kpi.inbound_subtypes
        and rec["data"].get("queue") is not None
    )


def outcome(rec: dict[str, Any], kpi: KpiSettings) -> str:
    """answered, abandoned, short_abandoned or blocked, for an offered call."""
    wait = rec["data"]["durations"]["queue"]
    if rec["disposition"] in kpi.answered_dispositions:
        return "answered"
    if rec["data"].get("end_reason") in kpi.abandon_end_reasons and wait is not None:
        return "abandoned" if wait >= kpi.short_abandon_s else "short_abandoned"
    return "blocked"


def measures(records: list[dict[str, Any]], kpi: KpiSettings) -> dict[str, Any]:
    """Every measure of the table in docs/metrics.md over `records` (offered calls only)."""
    m: dict[str, Any] = dict.fromkeys(COUNTS, 0) | dict.fromkeys(SUMS, Decimal(0))
    for rec in records:
        m["offered"] += 1
        kind = outcome(rec, kpi)
        m[kind] += 1
        durations = rec["data"]["durations"]
        if kind == "answered":
            m["answered_within_sl"] += durations["queue"] <= kpi.sl_threshold_s
            m["answered_queue_s"] += durations["queue"]
            m["handle_s"] += durations["talk"] + durations["hold"]
    base = m["answered"] + m["abandoned"]
    m["service_level_pct"] = 100 * Decimal(m["answered_within_sl"]) / base if base else None
    m["abandon_rate_pct"] = 100 * Decimal(m["abandoned"]) / base if base else None
    m["asa_s"] = m["answered_queue_s"] / m["answered"] if m["answered"] else None
    m["aht_s"] = m["handle_s"] / m["answered"] if m["answered"] else None
    return m


def local_date(rec: dict[str, Any], zone: str) -> date:
    return parse_ts(rec["started_at"]).astimezone(ZoneInfo(zone)).date()


def interval_utc(rec: dict[str, Any]) -> datetime:
    at = parse_ts(rec["started_at"]).astimezone(UTC)
    return at.replace(minute=at.minute - at.minute % 15, second=0, microsecond=0)


def assert_row(got: dict[str, Any], want: dict[str, Any], where: object) -> None:
    for name in (*COUNTS, *SUMS):
        assert got[name] == want[name], (where, name, got[name], want[name])
    for name in ("service_level_pct", "abandon_rate_pct", "asa_s", "aht_s"):
        expected = None if want[name] is None else pytest.approx(float(want[name]), rel=1e-12)
        assert got[name] == expected, (where, name)


# --- the served sandbox and two ingests -------------------------------------------------------


@dataclass
class Served:
    base_url: str
    first_day: date
    odd_id: str  # the inbound queue call whose end_reason no setting names
    queue: int  # the day's busiest queue, whose calls on the thresholds were rewritten
    records: dict[date, list[dict[str, Any]]]  # UTC day -> the API's records (rewritten)
    utc_dir: Path  # the second day ingested with the default settings
    utc_line: RunLine
    sydney_dir: Path  # both days ingested with CDRHOUSE_TIMEZONE=Australia/Sydney
    instance: dg.DagsterInstance

    @property
    def day(self) -> date:
        return self.first_day + timedelta(days=1)


def _ingest(
    base_url: str,
    first_day: date,
    data_dir: Path,
    days: list[date],
    env: dict[str, str],
    instance: dg.DagsterInstance,
) -> RunLine:
    settings = settings_from_env(env)  # the variables, validated as the CLI reads them
    defs = build_defs(
        contact_center=ContactCenterResource(base_url=base_url, api_key=DEFAULT_API_KEY),
        warehouse=WarehouseResource.with_kpi(str(data_dir), None, settings.kpi()),
        start_date=first_day,
        retry_policy=api_retry_policy(max_retries=0, delay_s=0.1),
    )
    report: IngestReport = run_ingest(
        defs, [d.isoformat() for d in days], instance=instance, data_dir=data_dir, snapshots=False
    )
    assert all(line.success for line in report.runs), [line.failure for line in report.runs]
    return report.runs[-1]


def _unmapped(record: bytes) -> bytes:
    return record.replace(b'"end_reason":"no_answer"', f'"end_reason":"{ODD_REASON}"'.encode())


def _wait(seconds: int) -> Any:
    """A rewrite of the call's queue wait (the thresholds' edges, which random data may miss)."""
    return lambda record: re.sub(
        rb'("durations":\{[^}]*"queue":)[0-9]+', rb"\g<1>" + str(seconds).encode(), record
    )


@pytest.fixture(scope="module")
def served(clock: SessionClock, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    first = clock.days_ago(3)
    sandbox = make_sandbox(start_date=first, days=3, cdrs_per_day=CDRS_PER_DAY, now=clock.now)
    rewrites: dict[str, Any] = {}
    app = RewritingApp(sandbox.app, lambda r: rewrites.get(record_id(r), lambda b: b)(r))
    with serve_app(app) as base_url, dg.DagsterInstance.ephemeral() as instance:
        day = first + timedelta(days=1)
        kpi = KpiSettings()
        calls = [r for r in _day_records(base_url, day) if offered(r, kpi)]
        # The queue with the most unanswered calls (the cases below need four of them).
        queue = Counter(
            r["data"]["queue"]["id"] for r in calls if r["disposition"] == "no_answer"
        ).most_common(1)[0][0]
        mine = [r for r in calls if r["data"]["queue"]["id"] == queue]
        no_answer = [r["id"] for r in mine if r["disposition"] == "no_answer"]
        answered = [r["id"] for r in mine if r["disposition"] == "answered"]
        assert len(no_answer) >= 4
        assert len(answered) >= 2
        odd = no_answer[0]
        rewrites[odd] = _unmapped
        # Waits of exactly T (within SL), T + 1 (not), S (abandoned) and S - 1 (short).
        rewrites[answered[0]] = _wait(kpi.sl_threshold_s)
        rewrites[answered[1]] = _wait(kpi.sl_threshold_s + 1)
        rewrites[no_answer[1]] = _wait(kpi.short_abandon_s)
        rewrites[no_answer[2]] = _wait(kpi.short_abandon_s - 1)
        records = {d: _day_records(base_url, d) for d in (first, day)}
        tmp = tmp_path_factory.mktemp("kpis")
        sydney_env = {"CDRHOUSE_TIMEZONE": SYDNEY}
        _ingest(base_url, first, tmp / "sydney", [first, day], sydney_env, instance)
        # Last: the newest evaluation of the mapping check in `instance` is this run's.
        utc_line = _ingest(base_url, first, tmp / "utc", [day], {}, instance)
        yield Served(
            base_url, first, odd, queue, records, tmp / "utc", utc_line, tmp / "sydney", instance
        )


def _rows(data_dir: Path, sql: str) -> list[dict[str, Any]]:
    with warehouse(data_dir) as con:
        cursor = con.execute(sql)
        names = [d[0] for d in cursor.description]
        return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]


# --- the tests --------------------------------------------------------------------------------


def test_queue_and_interval_kpis_equal_the_definitions_applied_to_the_raw_records(
    served: Served,
) -> None:
    kpi = KpiSettings()
    calls = [r for r in served.records[served.day] if offered(r, kpi)]
    queue = served.queue
    mine = [r for r in calls if r["data"]["queue"]["id"] == queue]
    waits = {(r["disposition"], r["data"]["durations"]["queue"]) for r in mine}
    assert {("answered", 20), ("answered", 21), ("no_answer", 5), ("no_answer", 4)} <= waits
    want = measures(mine, kpi)
    assert want["abandoned"]  # a queue worth comparing
    assert want["short_abandoned"]
    assert want["blocked"]
    (got,) = _rows(
        served.utc_dir,
        f"SELECT * FROM rpt_queue_kpis WHERE local_date = DATE '{served.day}' "
        f"AND queue_id = {queue}",
    )
    assert_row(got, want, queue)
    newest = max(mine, key=lambda r: r["started_at"])
    assert got["queue_name"] == newest["data"]["queue"]["name"]

    # The 15-minute intervals: each one equals the definitions over its calls, and their sums
    # are the day's row.
    intervals = _rows(
        served.utc_dir,
        f"SELECT * FROM rpt_interval_kpis WHERE local_date = DATE '{served.day}' "
        f"AND queue_id = {queue} ORDER BY interval_start_utc",
    )
    per_interval: dict[datetime, list[dict[str, Any]]] = defaultdict(list)
    for r in mine:
        per_interval[interval_utc(r)].append(r)
    assert [row["interval_start_utc"] for row in intervals] == sorted(per_interval)
    for row in intervals:
        assert_row(row, measures(per_interval[row["interval_start_utc"]], kpi), row)
        utc = row["interval_start_utc"].astimezone(UTC)
        assert row["interval_start_local"] == utc.replace(tzinfo=None)
    for name in (*COUNTS, *SUMS):
        assert sum(row[name] for row in intervals) == want[name], name
    # And every other queue of the day.
    for row in _rows(
        served.utc_dir, f"SELECT * FROM rpt_queue_kpis WHERE local_date = DATE '{served.day}'"
    ):
        theirs = [r for r in calls if r["data"]["queue"]["id"] == row["queue_id"]]
        assert_row(row, measures(theirs, kpi), row["queue_id"])


def test_a_sydney_day_spanning_two_utc_days_is_exact(served: Served) -> None:
    kpi = KpiSettings(timezone=SYDNEY)
    local = served.day  # Sydney's day starts 10 or 11 hours before the UTC day
    calls = [
        r
        for day in (served.first_day, served.day)
        for r in served.records[day]
        if offered(r, kpi) and local_date(r, SYDNEY) == local
    ]
    utc_days = {parse_ts(r["started_at"]).astimezone(UTC).date() for r in calls}
    assert utc_days == {served.first_day, served.day}  # the local day spans both partitions
    rows = _rows(
        served.sydney_dir, f"SELECT * FROM rpt_queue_kpis WHERE local_date = DATE '{local}'"
    )
    queues = {r["data"]["queue"]["id"] for r in calls}
    assert {row["queue_id"] for row in rows} == queues
    for row in rows:
        theirs = [r for r in calls if r["data"]["queue"]["id"] == row["queue_id"]]
        assert_row(row, measures(theirs, kpi), row["queue_id"])
    intervals = _rows(
        served.sydney_dir,
        f"SELECT * FROM rpt_interval_kpis WHERE local_date = DATE '{local}'",
    )
    everything = measures(calls, kpi)
    for name in (*COUNTS, *SUMS):
        assert sum(row[name] for row in intervals) == everything[name], name
    zone = ZoneInfo(SYDNEY)
    for row in intervals:
        assert row["interval_start_local"] == row["interval_start_utc"].astimezone(zone).replace(
            tzinfo=None
        )
    # The settings the views were built with say so.
    (settings,) = _rows(served.sydney_dir, "SELECT timezone FROM kpi_settings")
    assert settings["timezone"] == SYDNEY


def test_abandon_rate_counts_no_outbound_busy_or_failed_call(served: Served) -> None:
    kpi = KpiSettings()
    records = served.records[served.day]

    def first(match: Any) -> dict[str, Any]:
        return next(r for r in records if r["type"] == "call" and r["data"]["queue"] and match(r))

    # Real CDRs of the sandbox that "offered minus answered" counted as abandoned.
    outbound = first(lambda r: r["subtype"] == "outbound" and r["disposition"] == "no_answer")
    busy = first(lambda r: r["subtype"] == "inbound" and r["disposition"] == "busy")
    failed = first(lambda r: r["subtype"] == "inbound" and r["disposition"] == "failed")
    assert outbound["data"]["end_reason"] == "no_answer"  # the end reason of an abandon
    for rec, offered_too in ((outbound, False), (busy, True), (failed, True)):
        queue = rec["data"]["queue"]["id"]
        mine = [r for r in records if offered(r, kpi) and r["data"]["queue"]["id"] == queue]
        abandoned = {r["id"] for r in mine if outcome(r, kpi) == "abandoned"}
        assert rec["id"] not in abandoned
        assert (rec["id"] in {r["id"] for r in mine}) is offered_too
        (got,) = _rows(
            served.utc_dir,
            "SELECT offered, answered, abandoned, blocked, abandon_rate_pct FROM rpt_queue_kpis "
            f"WHERE local_date = DATE '{served.day}' AND queue_id = {queue}",
        )
        (old,) = _rows(
            served.utc_dir,
            "SELECT calls_offered, calls_answered, calls_unanswered FROM rpt_queue_service "
            f"WHERE date = DATE '{served.day}' AND queue_id = {queue}",
        )
        assert got["offered"] == len(mine)
        assert got["abandoned"] == len(abandoned)
        answered = sum(outcome(r, kpi) == "answered" for r in mine)
        assert got["abandon_rate_pct"] == pytest.approx(
            100 * len(abandoned) / (answered + len(abandoned))
        )
        # The unanswered count of the older view still holds the call: the new rate does not.
        assert old["calls_unanswered"] > got["abandoned"]
        if offered_too:
            assert got["blocked"] >= 1


def test_a_call_value_no_setting_names_makes_the_day_warn_naming_it(served: Served) -> None:
    assert f"{CALL_AGG}:{MAPPING_CHECK}" in served.utc_line.checks_warned
    key = dg.AssetCheckKey(dg.AssetKey(CALL_AGG), MAPPING_CHECK)
    (record,) = served.instance.event_log_storage.get_asset_check_execution_history(key, limit=1)
    assert record.event is not None
    assert record.event.dagster_event is not None
    evaluation = record.event.dagster_event.event_specific_data
    assert isinstance(evaluation, dg.AssetCheckEvaluation)
    assert evaluation.severity == dg.AssetCheckSeverity.WARN
    assert not evaluation.passed
    assert evaluation.metadata["unmapped_end_reason"].value == ODD_REASON
    assert evaluation.description is not None
    assert f"end_reason: {ODD_REASON} (1 calls)" in evaluation.description
    # The odd call counts by the definitions: not an abandon (its reason is not in the setting).
    (odd,) = [r for r in served.records[served.day] if r["id"] == served.odd_id]
    assert odd["data"]["end_reason"] == ODD_REASON
    assert outcome(odd, KpiSettings()) == "blocked"


def test_cdrhouse_sql_refuses_an_unknown_zone_and_follows_a_new_one(
    served: Served, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tmp_path / "data"
    shutil.copytree(served.utc_dir, data)
    env = {"CDRHOUSE_DATA_DIR": str(data), "CDRHOUSE_TIMEZONE": "Europe/Berln"}
    assert main(["sql", "SELECT 1"], env) == 2
    err = capsys.readouterr().err.strip()
    assert err == (
        "cdrhouse: error: CDRHOUSE_TIMEZONE='Europe/Berln': not an IANA time zone; "
        "use a name like UTC, Europe/Berlin or Australia/Sydney"
    )
    env["CDRHOUSE_TIMEZONE"] = "Europe/Berlin"  # the views were built in UTC: rebuilt first
    query = (
        "SELECT timezone, (SELECT min(interval_start_local) FROM rpt_interval_kpis) "
        "FROM kpi_settings"
    )
    assert main(["sql", "--format", "csv", query], env) == 0
    zone, first = capsys.readouterr().out.strip().splitlines()[-1].split(",")
    assert zone == "Europe/Berlin"
    # Berlin is 1 or 2 hours ahead of UTC: the first interval's wall clock is not midnight UTC.
    utc_first = min(
        interval_utc(r) for r in served.records[served.day] if offered(r, KpiSettings())
    )
    assert datetime.fromisoformat(first) == utc_first.astimezone(ZoneInfo("Europe/Berlin")).replace(
        tzinfo=None
    )


def test_an_analyst_without_the_kpi_variables_keeps_the_views_zone_and_lake(
    served: Served, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The pipeline built the views in Berlin over a lake outside the data dir; an analyst's
    shell sets neither CDRHOUSE_TIMEZONE nor CDRHOUSE_LAKE_URI. `cdrhouse sql` must answer in
    Berlin over that lake, not rebuild the shared file in UTC over `<data dir>/lake`."""
    data, lake = tmp_path / "data", tmp_path / "shared_lake"
    shutil.copytree(served.utc_dir / "lake", lake)
    pipeline = {
        "CDRHOUSE_DATA_DIR": str(data),
        "CDRHOUSE_LAKE_URI": lake.as_uri(),
        "CDRHOUSE_TIMEZONE": "Europe/Berlin",
    }
    query = (
        "SELECT timezone, (SELECT lake_uri FROM lake_info), (SELECT count(*) FROM cdrs) "
        "FROM kpi_settings"
    )
    assert main(["sql", "--format", "csv", query], pipeline) == 0
    built = capsys.readouterr().out.strip().splitlines()[-1]
    assert built.startswith("Europe/Berlin," + lake.as_uri())
    assert not built.endswith(",0")
    stamp = (data / "warehouse.duckdb").stat().st_mtime_ns
    analyst = {"CDRHOUSE_DATA_DIR": str(data)}
    assert main(["sql", "--format", "csv", query], analyst) == 0
    assert capsys.readouterr().out.strip().splitlines()[-1] == built
    assert (data / "warehouse.duckdb").stat().st_mtime_ns == stamp  # not rebuilt
