"""The report names the days it has no CDRs for, per account.

A night whose ingest failed for one account (a wrong key, its API down) used to show only as
lower totals: the report summed the accounts that landed and said nothing of the one that did
not. A real local lake of three accounts (the sandbox generator's days), `apac` missing the
second day; the report is built from the real `warehouse.duckdb`, and `cdrhouse report` is run
through its entry point."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import duckdb
import pytest

from connectors.sandbox.generator import Dataset
from pipelines.cli import main
from tests.warehouse.conftest import write_day
from warehouse.duck import build_warehouse, write_aggregates
from warehouse.lake import DEFAULT_ACCOUNT, Lake, partition_key
from warehouse.report import build_report, missing_lines, render_html

DAY = dt.date(2026, 11, 20)
NEXT = DAY + dt.timedelta(days=1)
SEEDS = {DEFAULT_ACCOUNT: 31, "emea": 32, "apac": 33}
LANDED = {DEFAULT_ACCOUNT: (DAY, NEXT), "emea": (DAY, NEXT), "apac": (DAY,)}


def _land(data_dir: Path, landed: dict[str, tuple[dt.date, ...]]) -> Path:
    lake = Lake((data_dir / "lake").as_uri())
    for account, days in landed.items():
        sub = lake.account(account)
        ds = Dataset(seed=SEEDS[account], start_date=DAY, days=2, cdrs_per_day=40)
        for day in days:
            write_day(sub, ds, day)
            write_aggregates(sub, partition_key("date", day))
    build_warehouse(data_dir)
    return data_dir


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _land(tmp_path_factory.mktemp("missing"), LANDED)


def _report(data_dir: Path, account: str | None = None, days: int = 2) -> str:
    with duckdb.connect(str(data_dir / "warehouse.duckdb"), read_only=True) as con:
        report = build_report(con, DAY, DAY + dt.timedelta(days=days), account=account)
    assert not report.empty
    return "\n".join([render_html(report), *missing_lines(report)])


def test_every_account_summed_names_the_account_missing_a_day(data_dir: Path) -> None:
    with duckdb.connect(str(data_dir / "warehouse.duckdb"), read_only=True) as con:
        report = build_report(con, DAY, NEXT + dt.timedelta(days=1))
    assert report.missing == {"apac": (NEXT,)}
    page = render_html(report)
    assert 'id="missing-days"' in page
    assert f'<li data-account="apac" data-days="1">account apac: {NEXT} (1 of 2 days)</li>' in page
    assert 'data-account="emea"' not in page
    assert missing_lines(report) == [f"account apac: no CDRs for {NEXT} (1 of 2 days, UTC)"]


def test_one_account_reports_its_own_days_only(data_dir: Path) -> None:
    assert 'id="missing-days"' not in _report(data_dir, "emea")
    assert f"account apac: no CDRs for {NEXT} (1 of 2 days, UTC)" in _report(data_dir, "apac")


def test_consecutive_missing_days_read_as_one_range(data_dir: Path) -> None:
    # Four days asked, two landed at most: the two after them are missing for everyone.
    text = _report(data_dir, days=4)
    after, last = NEXT + dt.timedelta(days=1), NEXT + dt.timedelta(days=2)
    assert f"account emea: no CDRs for {after} to {last} (2 of 4 days, UTC)" in text
    assert f"account apac: no CDRs for {NEXT} to {last} (3 of 4 days, UTC)" in text


def test_a_lake_without_accounts_names_no_account(tmp_path: Path) -> None:
    data_dir = _land(tmp_path, {DEFAULT_ACCOUNT: (DAY,)})
    text = _report(data_dir)
    assert f"\nno CDRs for {NEXT} (1 of 2 days, UTC)" in text
    assert "account default" not in text


def test_every_day_landed_shows_no_notice(tmp_path: Path) -> None:
    data_dir = _land(tmp_path, {DEFAULT_ACCOUNT: (DAY, NEXT), "emea": (DAY, NEXT)})
    text = _report(data_dir)
    assert 'id="missing-days"' not in text
    assert "no CDRs for" not in text


def test_cdrhouse_report_prints_a_line_per_account_missing_days(
    data_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "report.html"
    argv = ["report", "--start", str(DAY), "--end", str(NEXT + dt.timedelta(days=1))]
    env = {"CDRHOUSE_DATA_DIR": str(data_dir)}
    assert main([*argv, "--out", str(out)], env=env) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[1:] == [f"cdrhouse report: account apac: no CDRs for {NEXT} (1 of 2 days, UTC)"]
    assert 'data-account="apac"' in out.read_text()


def test_cdrhouse_report_refuses_an_account_the_warehouse_does_not_hold(
    data_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A mistyped id gave a report of nothing, as if the account had no calls."""
    out = tmp_path / "report.html"
    argv = ["report", "--days", "2", "--account", "emae", "--out", str(out)]
    assert main(argv, env={"CDRHOUSE_DATA_DIR": str(data_dir)}) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == (
        "cdrhouse report: error: --account emae: no such account in this warehouse "
        "(it holds apac, default, emea)\n"
    )
    assert not out.exists()


def test_a_local_day_half_landed_names_the_utc_day_it_lacks(tmp_path: Path) -> None:
    """Each account's local days span two UTC days: Sydney's DAY begins at 13:00 UTC the day
    before, New York's NEXT ends at 05:00 UTC the day after. Those UTC days not landed left a
    local day of the period half counted, and the report said nothing of it."""
    zones = {"apac": "Australia/Sydney", "emea": "America/New_York"}
    _land(tmp_path, dict.fromkeys(SEEDS, (DAY, NEXT)))
    build_warehouse(tmp_path, account_zones=zones)
    before, after = DAY - dt.timedelta(days=1), NEXT + dt.timedelta(days=1)
    with duckdb.connect(str(tmp_path / "warehouse.duckdb"), read_only=True) as con:
        report = build_report(con, DAY, after)
    assert report.missing == {"apac": (before,), "emea": (after,)}
    assert report.utc_days == {DEFAULT_ACCOUNT: 2, "apac": 3, "emea": 3}
    assert missing_lines(report) == [
        f"account apac: no CDRs for {before} (1 of 3 days, UTC)",
        f"account emea: no CDRs for {after} (1 of 3 days, UTC)",
    ]
    with duckdb.connect(str(tmp_path / "warehouse.duckdb"), read_only=True) as con:
        # Sydney's NEXT is UTC DAY 13:00 to NEXT 13:00: both landed.
        assert "apac" not in build_report(con, NEXT, after).missing


def test_report_days_end_with_the_last_day_the_accounts_reported_have_ended(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`cdrhouse report --days N` ended with the last day complete in CDRHOUSE_TIMEZONE's
    zone (UTC), whatever the account's: New York's day ends at 05:00 UTC the day after, so
    its last day was not ingested whole yet, and the report said nothing."""
    from zoneinfo import ZoneInfo

    from warehouse.cli import last_complete_local_end, report_end

    _land(tmp_path, {DEFAULT_ACCOUNT: (DAY,), "emea": (DAY,)})
    build_warehouse(tmp_path, account_zones={"emea": "America/New_York"})
    now = dt.datetime.now(dt.UTC)
    utc_end = last_complete_local_end(now, dt.UTC)
    ny_end = last_complete_local_end(now, ZoneInfo("America/New_York"))
    assert report_end(now, ["Australia/Sydney"]) == utc_end
    assert report_end(now, ["UTC", "America/New_York"]) == ny_end < utc_end

    def printed_range(*account: str) -> str:
        out = tmp_path / "report.html"
        argv = ["report", "--days", "2", *account, "--out", str(out)]
        assert main(argv, env={"CDRHOUSE_DATA_DIR": str(tmp_path)}) == 0
        return capsys.readouterr().out.splitlines()[0]

    ny = f"{ny_end - dt.timedelta(days=2)} .. {ny_end - dt.timedelta(days=1)}"
    utc = f"{utc_end - dt.timedelta(days=2)} .. {utc_end - dt.timedelta(days=1)}"
    assert ny in printed_range("--account", "emea")
    assert ny in printed_range()  # every account summed: the latest to end its day
    assert utc in printed_range("--account", DEFAULT_ACCOUNT)


def one_value(con: duckdb.DuckDBPyConnection, sql: str) -> int:
    row = con.execute(sql).fetchone()
    assert row is not None
    return int(row[0])


def test_charts_keep_apart_what_accounts_and_agents_name_alike(data_dir: Path) -> None:
    """The sandbox's accounts name their campaigns alike, and an account may have two agents
    of one name (a past "Lara (old)" and a new one): the outbound and agent charts, keyed by
    label, drew them as one bar (connect rates stacked past 100 %), and the SMS chart drew an
    unnamed bar per account and day."""
    with duckdb.connect(str(data_dir / "warehouse.duckdb"), read_only=True) as con:
        report = build_report(con, DAY, NEXT + dt.timedelta(days=1))
        groups = {
            view: one_value(
                con,
                f"SELECT count(DISTINCT (account_id, {key})) FROM {view} "
                f"WHERE local_date >= DATE '{DAY}' AND local_date <= DATE '{NEXT}' {extra}",
            )
            for view, key, extra in (
                ("rpt_outbound_kpis", "campaign_id", ""),
                ("rpt_agent_kpis", "user_id", "AND calls_handled + conversations_handled > 0"),
            )
        }
    charts = {c.chart.key: c.rows for c in report.charts}
    campaigns = {r["campaign"] for r in charts["outbound"]}
    assert len(campaigns) == groups["rpt_outbound_kpis"] > 1
    agents = {r["agent"] for r in charts["agents"]}
    shown = len({r["rank"] for r in charts["agents"]})
    assert len(agents) == shown == min(groups["rpt_agent_kpis"], 20)
    days = [r["date"] for r in charts["sms"] if r["status"] == "sent"]
    assert len(days) == len(set(days))
