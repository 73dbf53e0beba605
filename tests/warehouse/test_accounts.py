"""Several contact centers (accounts) in one lake and one warehouse (issue 25).

A real local lake: the account `default` is the lake root (today's layout), `emea` and `apac`
are sub-lakes (`account_id=<id>/`) with other data, other sources and other time zones.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from pathlib import Path

import duckdb
import polars as pl
import pytest

from connectors.sandbox.generator import Dataset
from tests.warehouse.conftest import SmallWarehouse, write_day, write_snapshots
from warehouse.duck import build_warehouse, create_views, write_aggregates
from warehouse.kpi import KpiSettings
from warehouse.lake import DEFAULT_ACCOUNT, Lake, LakeSourceConflict, partition_key

DAY = dt.date(2026, 11, 20)
ZONES = {"emea": "Europe/Berlin", "apac": "Australia/Sydney"}
DEFAULT_ZONE = "America/New_York"  # CDRHOUSE_TIMEZONE: the default account is not in ZONES
SEEDS = {DEFAULT_ACCOUNT: 11, "emea": 12, "apac": 13}
PER_DAY = {DEFAULT_ACCOUNT: 300, "emea": 250, "apac": 200}
# Internal, not per account: the KPI settings (one row for every account) and the fingerprint.
GLOBAL_VIEWS = {"kpi_settings", "_cdrhouse_views"}


@dataclass
class Accounts:
    data_dir: Path
    lake: Lake
    tables: dict[str, dict[str, pl.DataFrame]]  # account -> normalized CDR table -> rows


def _build(data_dir: Path) -> Accounts:
    lake = Lake((data_dir / "lake").as_uri())
    tables: dict[str, dict[str, pl.DataFrame]] = {}
    for account, seed in SEEDS.items():
        ds = Dataset(seed=seed, start_date=DAY, days=2, cdrs_per_day=PER_DAY[account])
        sub = lake.account(account)
        norm = write_day(sub, ds, DAY)
        tables[account] = norm.tables()
        write_aggregates(sub, partition_key("date", DAY))
        # apac's last snapshot is a day before the others': its `current` is still that one.
        days = [DAY - dt.timedelta(days=1)] if account == "apac" else [DAY, DAY]
        for i, snap_day in enumerate(days):
            at = dt.datetime.combine(snap_day + dt.timedelta(days=i), dt.time(1), dt.UTC)
            write_snapshots(sub, ds, ds.users, at, f"{1000 + seed}.{i}5")
    build_warehouse(data_dir, kpi=KpiSettings(timezone=DEFAULT_ZONE), account_zones=ZONES)
    return Accounts(data_dir, lake, tables)


@pytest.fixture(scope="module")
def accounts(tmp_path_factory: pytest.TempPathFactory) -> Accounts:
    return _build(tmp_path_factory.mktemp("accounts"))


def _con(data_dir: Path) -> duckdb.DuckDBPyConnection:
    return duckdb.connect(str(data_dir / "warehouse.duckdb"), read_only=True)


def _views(con: duckdb.DuckDBPyConnection) -> list[str]:
    rows = con.execute("SELECT view_name FROM duckdb_views() WHERE NOT internal").fetchall()
    return sorted(str(r[0]) for r in rows if r[0] not in GLOBAL_VIEWS)


def test_the_sub_lakes_sit_under_the_root_and_default_is_the_root(accounts: Accounts) -> None:
    root = accounts.lake.root
    assert accounts.lake.account(DEFAULT_ACCOUNT) is accounts.lake
    assert (root / "cdrs" / f"date={DAY}" / "part-0.parquet").is_file()
    for account in ("emea", "apac"):
        assert (
            root / f"account_id={account}" / "cdrs" / f"date={DAY}" / "part-0.parquet"
        ).is_file()
    assert accounts.lake.accounts() == ["default", "apac", "emea"]
    # The root's own listings never take a sub-lake for a table.
    assert not [t for t in accounts.lake.store.list_all() if t.startswith("account_id=")]
    assert accounts.lake.partitions("cdrs") == [f"date={DAY}"]
    with pytest.raises(ValueError, match="bad account id"):
        accounts.lake.account("EMEA")


def test_every_table_and_view_has_account_id_first(accounts: Accounts) -> None:
    with _con(accounts.data_dir) as con:
        names = _views(con)
        assert len(names) > 50
        for name in names:
            first = con.execute(f'DESCRIBE "{name}"').fetchall()[0]
            assert (first[0], first[1]) == ("account_id", "VARCHAR"), name


def test_rows_per_account_equal_what_was_written_to_it(accounts: Accounts) -> None:
    with _con(accounts.data_dir) as con:
        for account, tables in accounts.tables.items():
            for name, frame in tables.items():
                ids = con.execute(
                    f'SELECT id FROM "{name}" WHERE account_id = ? ORDER BY id', [account]
                ).fetchall()
                assert [r[0] for r in ids] == sorted(frame["id"].to_list()), (account, name)
            cost = con.execute(
                "SELECT sum(cost) FROM rpt_daily_volume WHERE account_id = ?", [account]
            ).fetchone()
            assert cost is not None
            assert cost[0] == tables["cdrs"]["cost"].sum(), account
        counted = dict(con.execute("SELECT account_id, count(*) FROM cdrs GROUP BY ALL").fetchall())
        assert counted == {a: PER_DAY[a] for a in SEEDS}


def test_kpi_local_day_comes_from_each_accounts_zone(accounts: Accounts) -> None:
    """Between 13:00 and 23:00 UTC it is already the next day in Sydney, still the same day
    in Berlin: one UTC interval, two local days."""
    with _con(accounts.data_dir) as con:
        for account in SEEDS:
            zone = ZONES.get(account, DEFAULT_ZONE)
            wrong = con.execute(
                "SELECT count(*) FROM rpt_interval_kpis WHERE account_id = ? AND "
                "local_date <> CAST(timezone(?, interval_start_utc) AS DATE)",
                [account, zone],
            ).fetchone()
            assert wrong == (0,), account
        both = con.execute(
            "SELECT e.interval_start_utc, e.local_date, a.local_date "
            "FROM rpt_interval_kpis e JOIN rpt_interval_kpis a USING (interval_start_utc) "
            "WHERE e.account_id = 'emea' AND a.account_id = 'apac' "
            "AND hour(e.interval_start_utc) BETWEEN 13 AND 22"
        ).fetchall()
        assert both, "no UTC interval with calls in both accounts"
        for _, berlin, sydney in both:
            assert berlin == DAY
            assert sydney == DAY + dt.timedelta(days=1)
        # The local days' sums hold per account: apac's offered calls fall on two local days.
        days = con.execute(
            "SELECT local_date, sum(offered) FROM rpt_queue_kpis WHERE account_id = 'apac' "
            "GROUP BY ALL ORDER BY 1"
        ).fetchall()
        assert [d for d, _ in days] == [DAY, DAY + dt.timedelta(days=1)]
        offered = con.execute(
            "SELECT sum(offered) FROM rpt_interval_kpis WHERE account_id = 'apac'"
        ).fetchone()
        assert offered == (sum(n for _, n in days),)
        zones = con.execute("SELECT * FROM account_settings ORDER BY 1").fetchall()
        assert zones == sorted(ZONES.items())


def test_account_zones_survive_a_rebuild_without_them(accounts: Accounts) -> None:
    build_warehouse(accounts.data_dir)  # a command without the accounts file
    with _con(accounts.data_dir) as con:
        zones = con.execute("SELECT * FROM account_settings ORDER BY 1").fetchall()
        assert zones == sorted(ZONES.items())
        tz = con.execute("SELECT timezone FROM kpi_settings").fetchone()
        assert tz == (DEFAULT_ZONE,)


def test_materialized_aggregates_equal_the_computed_ones_per_account(
    accounts: Accounts,
) -> None:
    assert accounts.lake.holders("agg_call_intervals") == ["default", "apac", "emea"]
    views = [
        "rpt_queue_kpis",
        "rpt_interval_kpis",
        "rpt_agent_kpis",
        "rpt_outbound_kpis",
        "rpt_conversation_sla",
        "rpt_daily_volume",
        "rpt_agent_performance",
        "rpt_queue_service",
        "rpt_campaign_outcomes",
        "rpt_cost_daily",
        "rpt_sms_delivery",
    ]
    kpi = KpiSettings(timezone=DEFAULT_ZONE)
    results: list[dict[str, list[tuple[object, ...]]]] = []
    for use in (True, False):
        con = duckdb.connect()
        try:
            create_views(con, accounts.lake, use_aggregates=use, kpi=kpi, account_zones=ZONES)
            results.append(
                {
                    v: con.execute(
                        f"SELECT * EXCLUDE (end_reasons) FROM {v} ORDER BY ALL"
                        if v == "rpt_campaign_outcomes"
                        else f"SELECT * FROM {v} ORDER BY ALL"
                    ).fetchall()
                    for v in views
                }
            )
        finally:
            con.close()
    for v in views:
        assert results[0][v], v
        assert {r[0] for r in results[0][v]} == set(SEEDS), v
        assert results[0][v] == results[1][v], v


def test_snapshots_current_and_history_are_per_account(accounts: Accounts) -> None:
    with _con(accounts.data_dir) as con:
        latest = dict(
            con.execute(
                "SELECT account_id, max(snapshot_date) FROM users_snapshots GROUP BY ALL"
            ).fetchall()
        )
        assert latest["apac"] < latest["emea"]
        current = dict(
            con.execute("SELECT account_id, count(*) FROM users GROUP BY ALL").fetchall()
        )
        expected = dict(
            con.execute(
                "SELECT account_id, count(*) FROM users_snapshots s WHERE snapshot_date = "
                "(SELECT max(snapshot_date) FROM users_snapshots t "
                "WHERE t.account_id = s.account_id) GROUP BY ALL"
            ).fetchall()
        )
        assert current == expected
        assert set(current) == set(SEEDS)
        balance = con.execute(
            "SELECT account_id, count(*), count(change) FROM rpt_balance GROUP BY ALL ORDER BY 1"
        ).fetchall()
        # Each account's first snapshot has no previous one: apac has one, the others two.
        assert balance == [("apac", 1, 0), ("default", 2, 1), ("emea", 2, 1)]
        # Same users in every account (different seeds, overlapping ids): history per account.
        current_versions = dict(
            con.execute(
                "SELECT account_id, count(*) FROM users_history WHERE is_current GROUP BY ALL"
            ).fetchall()
        )
        assert current_versions == current


def test_lake_info_and_partitions_are_per_account(accounts: Accounts) -> None:
    with _con(accounts.data_dir) as con:
        info = con.execute("SELECT account_id, lake_uri, account_uri FROM lake_info").fetchall()
        root = accounts.lake.uri
        assert sorted(info) == [
            ("apac", root, f"{root}/account_id=apac"),
            ("default", root, root),
            ("emea", root, f"{root}/account_id=emea"),
        ]
        files = con.execute(
            "SELECT account_id, count(*) FILTER (WHERE table_name = 'cdrs') FROM lake_partitions "
            "GROUP BY ALL ORDER BY 1"
        ).fetchall()
        assert files == [("apac", 1), ("default", 1), ("emea", 1)]


def test_provenance_is_per_account(tmp_path: Path) -> None:
    lake = Lake((tmp_path / "lake").as_uri())
    frame = pl.DataFrame({"x": [1]})
    lake.account("emea").write("t", "date=2026-11-20", frame, source="sandbox:12")
    lake.write("t", "date=2026-11-20", frame, source="sandbox:11")
    with pytest.raises(LakeSourceConflict, match="into account 'emea'"):
        lake.account("emea").write("t", "date=2026-11-21", frame, source="sandbox:99")
    assert not lake.account("emea").exists("t", "date=2026-11-21")
    # Another account, and the root, go on.
    lake.account("apac").write("t", "date=2026-11-21", frame, source="sandbox:99")
    lake.write("t", "date=2026-11-21", frame, source="sandbox:11")
    assert lake.account("emea").source() == "sandbox:12"
    assert lake.account("apac").source() == "sandbox:99"
    assert lake.source() == "sandbox:11"
    # A sub-lake's reset is that account's; the root's is every account's.
    assert lake.account("apac").reset().removed == 2  # its partition and its marker
    assert lake.accounts() == ["default", "emea"]
    lake.reset()
    assert lake.accounts() == []


def test_a_lake_without_accounts_is_the_default_account(small: SmallWarehouse) -> None:
    """Today's lake: account_id is `default` everywhere, the rows are the same."""
    assert small.lake.accounts() == ["default"]
    with _con(small.data_dir) as con:
        for name in _views(con):
            ids = con.execute(f'SELECT DISTINCT account_id FROM "{name}"').fetchall()
            assert ids in ([], [("default",)]), name
        for name, frame in small.tables.items():
            row = con.execute(f'SELECT count(*) FROM "{name}"').fetchone()
            assert row == (frame.height,), name
        info = con.execute("SELECT account_id, source FROM lake_info").fetchall()
        assert [r[0] for r in info] == ["default"]


def test_the_report_sums_every_account_or_reports_one(accounts: Accounts) -> None:
    from warehouse.report import build_report, render_html

    start, end = DAY - dt.timedelta(days=1), DAY + dt.timedelta(days=2)
    with _con(accounts.data_dir) as con:
        every = build_report(con, start, end, currency="EUR")
        assert every.headline.cdrs == sum(PER_DAY.values())
        assert every.accounts == ("apac", "default", "emea")
        assert every.headline.cost == sum(t["cdrs"]["cost"].sum() for t in accounts.tables.values())
        # Queue 1 of two accounts is two queues, each named with its account.
        queues = [str(r["queue"]) for r in every.queues.rows]
        assert len(queues) == len(set(queues))
        assert any(q.endswith(" (apac)") for q in queues)
        for account in SEEDS:
            one = build_report(con, start, end, currency="EUR", account=account)
            assert one.headline.cdrs == PER_DAY[account]
            assert one.headline.cost == accounts.tables[account]["cdrs"]["cost"].sum()
            assert one.timezone == ZONES.get(account, DEFAULT_ZONE)
            assert f"; account {account};" in render_html(one)
            offered = con.execute(
                "SELECT sum(offered) FROM rpt_queue_kpis WHERE account_id = ? "
                "AND local_date >= ? AND local_date < ?",
                [account, start, end],
            ).fetchone()
            tile = next(t for t in one.tiles if t.tile.key == "offered")
            assert offered == (tile.value,)
        balance = next(c for c in every.charts if c.chart.key == "balance")
        # Every account's balance summed per snapshot day.
        assert [r["snapshot_date"] for r in balance.rows] == [
            (DAY + dt.timedelta(days=i)).isoformat() for i in (-1, 0, 1)
        ]
        assert "every account summed (apac, default, emea)" in render_html(every)


def test_accounts_on_an_object_store_lake(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The same layout on `s3://` (moto's server): the accounts come from one listing, the
    views read every account's objects with `account_id` from the key."""
    from tests.deploy._services import start_moto
    from warehouse.duck import register_lake

    (tmp_path / "moto").mkdir()
    with start_moto(tmp_path / "moto") as s3:
        for name, value in s3.env().items():
            monkeypatch.setenv(name, value)
        bucket = s3.create_bucket("accounts")
        lake = Lake(f"s3://{bucket}/lake")
        ds = Dataset(seed=12, start_date=DAY, days=1, cdrs_per_day=40)
        written = {
            account: write_day(lake.account(account), ds, DAY).tables()["cdrs"].height
            for account in (DEFAULT_ACCOUNT, "emea")
        }
        assert lake.accounts() == ["default", "emea"]
        assert lake.holders("cdrs") == ["default", "emea"]
        assert lake.holders("users_snapshots") == []
        assert set(lake.store.list_all()) == {"raw_cdrs", *accounts_tables(ds)}
        assert lake.account("emea").partitions("cdrs") == [f"date={DAY}"]
        con = duckdb.connect()
        try:
            register_lake(con, lake)
            create_views(con, lake)
            counted = dict(
                con.execute("SELECT account_id, count(*) FROM cdrs GROUP BY ALL").fetchall()
            )
            info = con.execute(
                "SELECT account_id, account_uri FROM lake_info ORDER BY 1"
            ).fetchall()
        finally:
            con.close()
        assert counted == written
        assert info == [("default", lake.uri), ("emea", f"{lake.uri}/account_id=emea")]


def accounts_tables(ds: Dataset) -> set[str]:
    """The CDR tables `write_day` writes (besides raw_cdrs)."""
    from tests.warehouse.conftest import day_pages
    from warehouse.decode import decode_page
    from warehouse.normalize import normalize

    raw = pl.concat([decode_page(p) for p in day_pages(ds, DAY)])
    return set(normalize(raw).tables())
