"""Per-day pre-aggregates are materialized, read by the reports, and refreshed when data moves."""

from __future__ import annotations

import datetime as dt

import polars as pl

from models.tables import CDR_SMS, CDRS
from warehouse.duck import (
    build_warehouse,
    built_fingerprint,
    connect,
    materialize_aggregates,
    refresh_views,
    views_fingerprint,
)
from warehouse.lake import Lake, partition_key
from warehouse.viewsql import aggregate_names

from .conftest import START, build_small


def test_aggregates_are_materialized_and_follow_partition_changes(tmp_path) -> None:
    small = build_small(tmp_path)
    lake_dir = tmp_path / "lake"
    names = aggregate_names()
    assert "agg_daily_volume" in names
    for agg in names:
        assert small.lake.partitions(agg) == [
            f"date={START + dt.timedelta(days=i)}" for i in range(3)
        ]
    assert materialize_aggregates(lake_dir) == 0  # nothing changed: nothing recomputed

    # Rewrite day 2 with half its CDRs: only that day's aggregates are recomputed.
    key = partition_key("date", START + dt.timedelta(days=1))
    for table in ("cdrs", "cdr_calls", "cdr_conversations", "cdr_sms"):
        frame = small.lake.read(table, key)
        assert frame is not None
        small.lake.write(table, key, frame.head(frame.height // 2))
    build_warehouse(tmp_path)
    assert materialize_aggregates(lake_dir) == 0
    with connect(tmp_path) as con:
        got = con.sql(
            "SELECT date, sum(cdrs) AS n FROM rpt_daily_volume GROUP BY date ORDER BY date"
        ).pl()
        direct = con.sql("SELECT date, count(*) AS n FROM cdrs GROUP BY date ORDER BY date").pl()
        view_sql = con.execute(
            "SELECT sql FROM duckdb_views() WHERE view_name = 'agg_daily_volume'"
        ).fetchall()[0][0]
    assert got["n"].to_list() == direct["n"].cast(pl.Int128).to_list() == [800, 400, 800]
    assert f"{lake_dir}/agg_daily_volume/" in view_sql  # the report scans the materialized files

    # A day whose CDR partitions are deleted disappears from the reports too.
    for table in ("cdrs", "cdr_calls", "cdr_conversations", "cdr_sms", "cdr_hlr_lookups"):
        small.lake.delete_partition(table, key)
    build_warehouse(tmp_path)
    assert key not in small.lake.partitions("agg_daily_volume")
    with connect(tmp_path) as con:
        days = con.sql("SELECT DISTINCT date FROM rpt_daily_volume ORDER BY 1").fetchall()
    assert [d[0] for d in days] == [START, START + dt.timedelta(days=2)]


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
