"""How many requests the views over an `s3://` lake cost (moto's S3 server over HTTP).

A view globs its table's partition files. With `<table>/*/part-0.parquet`, fsspec listed the
table's prefix and then each day's, a request per day, each time DuckDB bound the view: an
analyst's `SELECT count(*) FROM cdrs` over a year of days listed ~366 times before reading a
footer. On an object store the views now glob `<table>/**/part-0.parquet`, which fsspec
answers with one flat listing of the table's keys, and a connection keeps each glob's answer
as long as its listings (`LISTING_CACHE_S`)."""

from __future__ import annotations

import datetime as dt
import logging
import urllib.parse
from pathlib import Path

import pytest

from pipelines.cdr_day import land_day
from pipelines.resources import ContactCenterResource
from tests.deploy._services import MotoS3
from warehouse.analyst import connect_analyst
from warehouse.duck import build_warehouse
from warehouse.lake import Lake
from warehouse.privacy import RAW

FIRST = dt.date(2026, 11, 20)
DAYS = 4
CDRS_PER_DAY = 40


@pytest.fixture
def aws(s3: MotoS3, monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in s3.env().items():
        monkeypatch.setenv(name, value)


def _listed(requests: list[str]) -> list[str]:
    """The prefixes listed (ListObjectsV2), decoded."""
    return [
        urllib.parse.parse_qs(urllib.parse.urlparse(r.split(" ", 1)[1]).query).get("prefix", [""])[
            0
        ]
        for r in requests
        if "list-type=2" in r
    ]


def _land(lake: Lake, seed: int, days: list[dt.date]) -> None:
    api = ContactCenterResource(
        base_url="sandbox",
        sandbox_seed=seed,
        sandbox_cdrs_per_day=CDRS_PER_DAY,
        sandbox_start_date=(FIRST - dt.timedelta(days=1)).isoformat(),
    )
    for day in days:
        stats, checks = land_day(api, lake, logging.getLogger("test"), day.isoformat(), privacy=RAW)
        assert checks.whole(stats.rows, stats.api_total)


def test_a_query_lists_each_table_once_whatever_the_days(
    aws: None, s3: MotoS3, new_bucket: str, tmp_path: Path
) -> None:
    uri = f"s3://{new_bucket}/lake"
    days = [FIRST + dt.timedelta(days=i) for i in range(DAYS)]
    _land(Lake(uri), 5, days)

    before = len(s3.requests())
    build_warehouse(tmp_path, uri)
    built = _listed(s3.requests()[before:])
    # No day's prefix is listed: each table's keys come from flat listings.
    assert built, "the views were built without listing the lake"
    assert not [p for p in built if "date=" in p], built

    con = connect_analyst(tmp_path)
    try:
        before = len(s3.requests())
        count = con.execute("SELECT count(*) FROM cdrs").fetchone()
        made = s3.requests()[before:]
        assert count == (DAYS * CDRS_PER_DAY,)
        assert _listed(made) == ["lake/cdrs/"], made
        # Then at most a read of each day's file (its footer; DuckDB may hold it already).
        assert len([p for p in made if "/cdrs/date=" in p]) <= DAYS, made

        # The same connection again: the glob's answer is kept, only the footers are read.
        before = len(s3.requests())
        one = con.execute(f"SELECT count(*) FROM cdrs WHERE date = DATE '{days[1]}'").fetchone()
        assert one == (CDRS_PER_DAY,)
        assert _listed(s3.requests()[before:]) == []
    finally:
        con.close()


def test_a_day_landed_after_the_glob_was_kept_is_seen_by_a_new_connection(
    aws: None, s3: MotoS3, new_bucket: str, tmp_path: Path
) -> None:
    """The kept answer is the connection's: `cdrhouse sql` (a connection per command) sees
    a day published since, as it did when the listings alone were kept."""
    uri = f"s3://{new_bucket}/lake"
    _land(Lake(uri), 6, [FIRST])
    build_warehouse(tmp_path, uri)
    first = connect_analyst(tmp_path)
    try:
        assert first.execute("SELECT count(*) FROM cdrs").fetchone() == (CDRS_PER_DAY,)
        _land(Lake(uri), 6, [FIRST + dt.timedelta(days=1)])
        second = connect_analyst(tmp_path)
        try:
            assert second.execute("SELECT count(*) FROM cdrs").fetchone() == (2 * CDRS_PER_DAY,)
        finally:
            second.close()
    finally:
        first.close()
