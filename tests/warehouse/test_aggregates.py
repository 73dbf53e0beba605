"""Per-day pre-aggregates are written per day (as the `reporting_aggregates` asset writes them),
read by the reports, and follow a day's partitions when that day is aggregated again."""

from __future__ import annotations

import datetime as dt
import threading
import time

import polars as pl
from polars.testing import assert_frame_equal

from models.tables import CDR_SMS, CDRS
from warehouse.duck import (
    AggregateDay,
    build_warehouse,
    built_fingerprint,
    connect,
    refresh_views,
    views_fingerprint,
    write_aggregates,
)
from warehouse.lake import Lake, footer_source, partition_key
from warehouse.viewsql import AGG_SOURCES, aggregate_names

from .conftest import START, build_small, replacing


def test_aggregates_are_written_per_day_and_follow_partition_changes(tmp_path) -> None:
    small = build_small(tmp_path)  # writes every day's aggregates with `write_aggregates`
    lake_dir = tmp_path / "lake"
    names = aggregate_names()
    assert "agg_daily_volume" in names
    days = [f"date={START + dt.timedelta(days=i)}" for i in range(3)]
    for agg in names:
        assert small.lake.partitions(agg) == days
        # Derived data carries the source of the day's CDR partition.
        assert footer_source(small.lake.partition_footer(agg, days[0])) == small.lake.source()

    # Rewrite day 2 with half its CDRs and aggregate that day again: only its aggregates change.
    key = partition_key("date", START + dt.timedelta(days=1))
    for table in ("cdrs", "cdr_calls", "cdr_conversations", "cdr_sms"):
        frame = small.lake.read(table, key)
        assert frame is not None
        small.lake.write(table, key, frame.head(frame.height // 2))
    before = {agg: small.lake.stamps(agg) for agg in names}
    written = write_aggregates(small.lake, key)
    assert sorted(written.tables) == sorted(names)
    assert written.cdrs_rows == 400  # what the asset's volume check compares with
    assert sum(written.tables["agg_daily_volume"]["cdrs"].to_pylist()) == 400
    for agg in names:
        after = small.lake.stamps(agg)
        assert {k: after[k] for k in after if k != key} == {
            k: v for k, v in before[agg].items() if k != key
        }
    build_warehouse(tmp_path)
    with connect(tmp_path) as con:
        got = con.sql(
            "SELECT date, sum(cdrs) AS n FROM rpt_daily_volume GROUP BY date ORDER BY date"
        ).pl()
        direct = con.sql("SELECT date, count(*) AS n FROM cdrs GROUP BY date ORDER BY date").pl()
        view_sql = con.execute(
            "SELECT sql FROM duckdb_views() WHERE view_name = 'agg_daily_volume'"
        ).fetchall()[0][0]
    assert got["n"].to_list() == direct["n"].cast(pl.Int128).to_list() == [800, 400, 800]
    assert f"{lake_dir}/agg_daily_volume/" in view_sql  # the report scans the written files

    # A day whose CDR partitions are deleted, aggregated again, disappears from the reports too.
    for table in ("cdrs", "cdr_calls", "cdr_conversations", "cdr_sms", "cdr_hlr_lookups"):
        small.lake.delete_partition(table, key)
    emptied = write_aggregates(small.lake, key)
    assert emptied.cdrs_rows == 0
    assert all(table.num_rows == 0 for table in emptied.tables.values())
    build_warehouse(tmp_path)
    with connect(tmp_path) as con:
        days_shown = con.sql("SELECT DISTINCT date FROM rpt_daily_volume ORDER BY 1").fetchall()
    assert [d[0] for d in days_shown] == [START, START + dt.timedelta(days=2)]


def test_views_follow_a_lake_uri_outside_the_data_dir(tmp_path) -> None:
    small = build_small(tmp_path / "elsewhere")  # lake at <tmp>/elsewhere/lake
    data_dir = tmp_path / "warehouse-only"
    build_warehouse(data_dir, small.lake.uri)
    assert not (data_dir / "lake").exists()
    with connect(data_dir) as con:
        rows = con.execute("SELECT count(*) FROM cdrs").fetchall()
    expected = 0
    for key in small.lake.partitions("cdrs"):
        frame = small.lake.read("cdrs", key)
        assert frame is not None, key
        expected += frame.height
    assert rows == [(expected,)]
    assert expected > 0


def test_views_are_rebuilt_only_when_they_would_change(tmp_path) -> None:
    lake = Lake((tmp_path / "lake").as_uri())
    lake.write("cdrs", "date=2026-11-01", CDRS.empty())
    assert refresh_views(tmp_path)  # no warehouse yet
    assert built_fingerprint(tmp_path) == views_fingerprint(lake)
    lake.write("cdrs", "date=2026-11-02", CDRS.empty())
    assert not refresh_views(tmp_path)  # a new partition of a known table: its glob finds it
    lake.write("cdr_sms", "date=2026-11-02", CDR_SMS.empty())
    assert refresh_views(tmp_path)  # the table's first partition turns its empty view into a scan
    assert not refresh_views(tmp_path)


def _sorted(table: object) -> pl.DataFrame:
    frame = pl.from_arrow(table)
    assert isinstance(frame, pl.DataFrame)
    return frame.sort(frame.columns)


def test_a_day_replaced_while_it_is_aggregated_is_read_whole(tmp_path) -> None:
    """Two runs of one day at once (two backfills of it, or the nightly lookback during a
    backfill) replace its partitions while the other aggregates them. DuckDB opens a file
    again for each view and query: read in place, it took one version's footer and another's
    pages ("TProtocolException: Invalid data", 18 of 27 aggregations here before). The day is
    now aggregated from links to its files as they were when it started."""
    small = build_small(tmp_path)
    key = partition_key("date", START)
    expected = {n: _sorted(t) for n, t in write_aggregates(small.lake, key).tables.items()}
    runs = 0
    with replacing(small.lake, key, sorted(AGG_SOURCES), 0.0) as replaced:
        deadline = time.monotonic() + 4.0
        while time.monotonic() < deadline or runs < 5:
            day = write_aggregates(small.lake, key)
            runs += 1
            assert day.cdrs_rows == 800
            for name, table in day.tables.items():
                # Float sums may differ in the last bits with the rows' order.
                assert_frame_equal(_sorted(table), expected[name], check_exact=False, rel_tol=1e-12)
    assert replaced.times > runs  # the day was replaced during (nearly) every aggregation
    # Nothing of the copies is left behind.
    assert not list((tmp_path / "lake" / "_tmp").glob("aggregate-day-*"))


def test_a_day_is_aggregated_from_one_version_of_its_tables(tmp_path) -> None:
    """The day's sources are copied under its publish lock: while a run publishes the day
    (here the test holds the lock, as such a run does), the aggregation waits for it, then
    reads what it published, never `cdrs` of one version beside `cdr_calls` of the next."""
    small = build_small(tmp_path)
    key = partition_key("date", START)
    calls = small.lake.read("cdr_calls", key)
    assert calls is not None
    gone = calls["id"].head(10).implode()
    days: list[AggregateDay] = []
    aggregating = threading.Thread(target=lambda: days.append(write_aggregates(small.lake, key)))
    with small.lake.publishing(key):
        aggregating.start()
        aggregating.join(timeout=2.0)
        assert aggregating.is_alive()
        # That run's fetch of the day has 10 calls fewer: its cdrs, then its cdr_calls.
        for table in ("cdrs", "cdr_calls"):
            frame = small.lake.read(table, key)
            assert frame is not None
            small.lake.write(table, key, frame.filter(~pl.col("id").is_in(gone)))
    aggregating.join(timeout=60)
    assert not aggregating.is_alive()
    assert days[0].cdrs_rows == 790
    volume = pl.from_arrow(days[0].tables["agg_daily_volume"])
    assert isinstance(volume, pl.DataFrame)
    assert volume.filter(pl.col("type") == "call")["cdrs"].sum() == calls.height - 10
