"""Under `token` the day writer rewrites row groups a batch at a time (`PRIVACY_BATCH_ROWS`) and
writes each group alone: every partition is then the same, row group for row group, as when
each group is rewritten on its own, forgotten tokens included."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import polars as pl
import pyarrow.parquet as pq
import pytest

from connectors.sandbox.generator import Dataset, encode_page
from pipelines.cdr_day import DayStats, DayWriter
from pipelines.checks import DayChecks
from tests.support.lake import published
from tests.warehouse.conftest import PAGE, day_pages
from warehouse.decode import decode_page_typed
from warehouse.lake import Lake, partition_key
from warehouse.privacy import PrivacyPolicy, Pseudonymizer, e164_digits

DAY = dt.date(2026, 11, 20)
KEY = b"batches-test-key-0123456789abcdef"
GROUP_ROWS = 100
TABLES = ("cdrs", "cdr_calls", "cdr_conversations", "cdr_sms", "cdr_hlr_lookups")


def _land(
    root: Path,
    pages: list[bytes],
    batch_rows: int,
    forgotten: frozenset[str],
    tables: tuple[str, ...] = TABLES,
) -> Lake:
    lake = Lake((root / "lake").as_uri())
    key = partition_key("date", DAY)
    privacy = Pseudonymizer(PrivacyPolicy("token", KEY), forgotten)
    stats, checks = DayStats(), DayChecks(DAY.isoformat())
    writers = {name: lake.writer(name, key, source="test") for name in tables}
    with lake.writer("raw_cdrs", key, source="test") as raw:
        for writer in writers.values():
            writer.__enter__()
        day = DayWriter(
            raw, writers, checks, stats, rows=GROUP_ROWS, privacy=privacy, batch_rows=batch_rows
        )
        try:
            for body in pages:
                day.add(decode_page_typed(body))
            day.flush()
        finally:
            day.close()
        for writer in writers.values():
            writer.__exit__(None, None, None)
    return lake


@pytest.mark.parametrize("batch_rows", [350, 400, 10_000])
def test_a_batch_of_groups_lands_what_each_group_alone_lands(
    batch_rows: int, tmp_path: Path
) -> None:
    ds = Dataset(seed=8, start_date=DAY, days=1, cdrs_per_day=1_150)
    pages = day_pages(ds, DAY)
    # Two callers forgotten: their tokens land null, in whichever batch their calls are.
    records = [json.loads(r) for r in ds.day(DAY).records]
    callers = sorted({n for r in records if (n := (r.get("from") or {}).get("phone_number"))})
    probe = Pseudonymizer(PrivacyPolicy("token", KEY))
    forgotten = frozenset(probe.phone(n) for n in callers[:2])
    assert all(e164_digits(n) for n in callers[:2])
    alone = _land(tmp_path / "alone", pages, GROUP_ROWS, forgotten)
    batched = _land(tmp_path / "batched", pages, batch_rows, forgotten)
    key = partition_key("date", DAY)
    for table in ("raw_cdrs", *TABLES):
        a, b = alone.read(table, key), batched.read(table, key)
        assert a is not None, table
        assert b is not None, table
        assert a.height > 0 or table != "raw_cdrs"
        assert a.equals(b), table
        groups = [pq.ParquetFile(lk.partition_path(table, key)).metadata for lk in (alone, batched)]
        assert groups[0].num_row_groups == groups[1].num_row_groups, table
    raw = alone.read("raw_cdrs", key)
    assert raw is not None
    assert raw.height == len(ds.day(DAY).records)
    assert raw.get_column("pii_forgotten").fill_null(False).sum() > 0
    cdrs = batched.read("cdrs", key)
    assert cdrs is not None
    assert cdrs.filter(pl.col("from_phone_number").is_in(list(forgotten))).height == 0


def test_bad_records_in_a_token_batch_go_to_quarantine_without_their_numbers(
    tmp_path: Path,
) -> None:
    """A record the typed decode refuses (a cost sent as text) sits in a batch the privacy
    thread rewrites and projects: it lands in `cdr_quarantine` with its reason, its numbers
    replaced there and in `raw_cdrs` like any other, and the rest of the day lands beside it."""
    ds = Dataset(seed=9, start_date=DAY, days=1, cdrs_per_day=450)
    records = list(ds.day(DAY).records)
    bad = [i for i, r in enumerate(records) if b'"type":"call"' in r][:3]
    numbers = set()
    for i in bad:
        record = json.loads(records[i])
        numbers |= {record["from"]["phone_number"], record["to"]["phone_number"]}
        cost = records[i].index(b'"cost":')
        end = records[i].index(b",", cost)
        records[i] = records[i][:cost] + b'"cost":"twelve"' + records[i][end:]
    pages = [
        encode_page(records[i : i + PAGE], len(records), None) for i in range(0, len(records), PAGE)
    ]
    tables = (*TABLES, "cdr_quarantine")
    lake = _land(tmp_path, pages, 2 * GROUP_ROWS, frozenset(), tables)
    key = partition_key("date", DAY)
    quarantine, raw, cdrs = published(lake, key, "cdr_quarantine", "raw_cdrs", "cdrs")
    bad_ids = {json.loads(records[i])["id"] for i in bad}
    assert set(quarantine["id"].to_list()) == bad_ids
    assert all(r and "cost" in r for r in quarantine["reason"].to_list())
    assert raw.height == len(records)
    assert cdrs.height == len(records) - len(bad)
    assert not bad_ids & set(cdrs["id"].to_list())
    for frame in (raw, quarantine):
        text = frame.write_ndjson()
        for number in numbers:
            assert number not in text, number
    assert all('"cost":"twelve"' in r for r in quarantine["record"].to_list())
