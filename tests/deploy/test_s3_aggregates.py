"""The day's `agg_*` pre-aggregates of a lake on object storage (moto's S3 server over HTTP).

DuckDB reading an `s3://` lake through fsspec opens every file again for each view it binds
and each query: the aggregates of one 2,000-CDR day took ~180 requests (four HEADs and a GET
per open), ~3.5 s of a ~4.7 s run on moto, and a round trip each on a real store. The day's
sources are now copied to local disk once (one download each) and aggregated there: the same
tables, from a handful of requests."""

from __future__ import annotations

import datetime as dt
import logging
from pathlib import Path

import polars as pl
import pytest
from polars.testing import assert_frame_equal

from pipelines.cdr_day import land_day
from pipelines.resources import ContactCenterResource
from tests.deploy._services import MotoS3
from warehouse.duck import aggregate_day, write_aggregates
from warehouse.lake import Lake
from warehouse.privacy import RAW
from warehouse.viewsql import AGG_SOURCES, aggregate_names

DAY = "2026-11-20"
KEY = f"date={DAY}"


@pytest.fixture
def aws(s3: MotoS3, monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in s3.env().items():
        monkeypatch.setenv(name, value)


def _land(lake: Lake) -> None:
    api = ContactCenterResource(
        base_url="sandbox",
        sandbox_seed=11,
        sandbox_cdrs_per_day=2_000,
        sandbox_start_date=(dt.date.fromisoformat(DAY) - dt.timedelta(days=2)).isoformat(),
    )
    stats, checks = land_day(api, lake, logging.getLogger("test"), DAY, privacy=RAW)
    assert checks.whole(stats.rows, stats.api_total)


def test_a_day_on_s3_aggregates_as_on_disk_from_one_download_per_source(
    aws: None, s3: MotoS3, new_bucket: str, tmp_path: Path
) -> None:
    local = Lake(str(tmp_path / "lake"))
    remote = Lake(f"s3://{new_bucket}/lake")
    _land(local)
    _land(remote)
    expected = aggregate_day(local, KEY)
    assert sum(t.num_rows for t in expected.values()) > 0

    before = len(s3.requests())
    got = aggregate_day(remote, KEY)
    made = s3.requests()[before:]

    assert sorted(got) == sorted(aggregate_names())
    for name, table in expected.items():
        assert got[name].schema == table.schema, name
        want, have = pl.from_arrow(table), pl.from_arrow(got[name])
        assert isinstance(want, pl.DataFrame)
        assert isinstance(have, pl.DataFrame)
        assert_frame_equal(have.sort(have.columns), want.sort(want.columns))
    # One download per source partition (plus, at most, a HEAD each): before, ~180.
    assert len(made) <= 2 * len(AGG_SOURCES), made
    assert all(new_bucket in line for line in made)
    # Nothing left on local disk: the copy was temporary.
    assert not list(remote.store.spool_dir().glob("aggregate-day-*"))


@pytest.mark.parametrize("account", [None, "emea"])
def test_the_aggregates_written_to_s3_carry_the_days_source_and_count(
    aws: None, s3: MotoS3, new_bucket: str, account: str | None
) -> None:
    """Of the root, and of an account's sub-lake (`account_id=emea/`, which the local copy
    of its day does not have in its path). The count checked is the copied file's: `cdrs`
    is fetched once, not read again for its footer."""
    root = Lake(f"s3://{new_bucket}/lake")
    remote = root.account(account) if account else root
    _land(remote)
    before = len(s3.requests())
    day = write_aggregates(remote, KEY)
    reads = [r for r in s3.requests()[before:] if "/cdrs/date=" in r and "PUT" not in r]
    assert len(reads) == 1, reads
    assert day.cdrs_rows == 2_000
    volume = remote.read("agg_daily_volume", KEY)
    assert volume is not None
    assert int(volume["cdrs"].sum()) == 2_000
    assert remote.partition_source("agg_daily_volume", KEY) == remote.source()
