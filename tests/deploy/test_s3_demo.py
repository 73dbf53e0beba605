"""The demo's look at what landed (`cdrhouse demo`: table counts and an example query) with
the lake on an object store (`CDRHOUSE_LAKE_URI=s3://...` left set in the shell). It opened
the DuckDB file bare, where the views' `s3://` paths cannot be read: the command ended in a
traceback after a successful ingest. It reads through the warehouse's own connection now."""

from __future__ import annotations

import datetime as dt
import io
import logging
from pathlib import Path

import pytest

from pipelines.cdr_day import land_day
from pipelines.cli_ingest import show_warehouse
from pipelines.resources import ContactCenterResource
from tests.deploy._services import MotoS3
from warehouse.duck import build_warehouse
from warehouse.lake import Lake
from warehouse.privacy import RAW

DAY = "2026-11-20"


def test_the_demo_counts_and_queries_a_lake_on_an_object_store(
    s3: MotoS3, new_bucket: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in s3.env().items():
        monkeypatch.setenv(name, value)
    uri = f"s3://{new_bucket}/lake"
    api = ContactCenterResource(
        base_url="sandbox",
        sandbox_seed=5,
        sandbox_cdrs_per_day=300,
        sandbox_start_date=(dt.date.fromisoformat(DAY) - dt.timedelta(days=2)).isoformat(),
    )
    stats, _ = land_day(api, Lake(uri), logging.getLogger("test"), DAY, privacy=RAW)
    assert stats.rows > 0
    build_warehouse(tmp_path, uri)

    out = io.StringIO()
    show_warehouse(tmp_path, out)
    shown = out.getvalue()
    counts = shown.split("row counts per table:")[1].split("example analyst query:")[0]
    rows = {
        name: int(n.replace(",", "")) for name, n in map(str.split, counts.strip().splitlines())
    }
    assert rows["cdrs"] == rows["raw_cdrs"] == stats.rows, counts
    # The example query's rows (one per CDR type) count every CDR of the day.
    answer = shown.split("example analyst query:")[1].splitlines()
    types = ("call", "sms", "conversation", "hlr_lookup")
    per_type = [
        int(line.split()[1]) for line in answer if line.split()[:1] and line.split()[0] in types
    ]
    assert sum(per_type) == stats.rows, shown
