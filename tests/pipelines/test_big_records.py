"""Issue 22: memory is bounded by bytes, not only by rows.

A row group ends at 5,000 records *or* at the writer's byte budget, so a day whose records
carry multi-MB strings is written in small row groups (counted in the Parquet footer, not
timed, no RSS threshold: those are `bench/big_records.py`'s); reading a partition back never
joins row groups into one batch; and such a day lands exactly through the real pipeline (the
client's byte budget, the early release of page bodies, the byte-bounded row groups).
"""

from __future__ import annotations

import datetime as dt
import hashlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import dagster as dg
import polars as pl
import pyarrow.parquet as pq
import pytest

from connectors.sandbox.rewriting import (
    RewritingApp,
    big_text,
    page_records,
    record_id,
    serve_app,
    with_summary,
)
from models.timestamps import iso_ms
from pipelines.cdr_day import DayStats, DayWriter
from pipelines.checks import DayChecks
from pipelines.cli_runs import run_ingest
from pipelines.partitions import partition_window
from tests.support.clock import SessionClock
from tests.support.lake import published
from tests.support.sandboxes import make_sandbox
from tests.support.served import ServedSandbox
from warehouse.decode import decode_page_typed
from warehouse.lake import Lake, partition_key

MIB = 2**20
# What a row group may hold, uncompressed (the writer's byte budget, documented in README).
ROW_GROUP_BUDGET = 48 * MIB


@dataclass
class BigDay:
    """A served sandbox day whose chosen call records carry a big summary."""

    served: ServedSandbox
    app: RewritingApp
    day: dt.date
    big: dict[str, bytes]  # id -> the record as served (with its big summary)

    def api_day(self) -> list[bytes]:
        """Every record of the day, as served, in pages of 1,000 (over HTTP)."""
        import httpx

        start, end = partition_window(self.day.isoformat())
        body = httpx.get(
            f"{self.served.base_url}/api/v4/reporting/cdrs",
            params={"started_at[gte]": iso_ms(start), "started_at[lt]": iso_ms(end), "limit": 1000},
            headers={"Authorization": "Bearer sbx-full-access-key"},
            timeout=120,
        ).content
        return page_records(body)


SIZE = 16 * MIB  # each big summary: four of them, 64 MiB of records, past one row group's budget
BIG = 4


@pytest.fixture(scope="module")
def big_day(clock: SessionClock) -> Iterator[BigDay]:
    first = clock.days_ago(3)
    sandbox = make_sandbox(start_date=first, days=3, cdrs_per_day=200, now=clock.now)
    chosen: set[str] = set()

    def rewrite(record: bytes) -> bytes:
        cdr_id = record_id(record)
        return with_summary(record, big_text(cdr_id, SIZE)) if cdr_id in chosen else record

    app = RewritingApp(sandbox.app, rewrite)
    with serve_app(app) as base_url:
        # Pages of 20 over 1-hour sub-windows: the big records are in different pages.
        defaults = {"page_size": 20, "concurrency": 4, "max_attempts": 4, "max_retry_s": 10.0}
        served = ServedSandbox(sandbox, base_url, first, clock, defaults)
        day = BigDay(served, app, clock.days_ago(2), {})
        calls = [r for r in day.api_day() if b'"type":"call"' in r]
        step = len(calls) // BIG
        chosen.update(record_id(r) for r in calls[::step][:BIG])
        day.big.update((record_id(r), r) for r in day.api_day() if record_id(r) in chosen)
        assert len(day.big) == BIG
        yield day


def _page(records: list[bytes]) -> bytes:
    meta = b'{"total":%d,"next_cursor":null}' % len(records)
    return b'{"cdrs":[' + b",".join(records) + b'],"metadata":' + meta + b"}"


def test_row_groups_end_at_the_byte_budget(big_day: BigDay, tmp_path: Path) -> None:
    """Pages of 10 records, one of them 16 MiB, go through the day writer as the asset runs
    it: the raw and the calls partitions are cut into row groups of at most the budget (the
    old writer cut only every 5,000 rows: one row group of 64 MiB of records)."""
    records = big_day.api_day()
    bigs = list(big_day.big.values())
    small = [r for r in records if record_id(r) not in big_day.big]
    pages = [_page([big, *small[i * 9 : i * 9 + 9]]) for i, big in enumerate(bigs)]
    lake = Lake(str(tmp_path / "lake"))
    key = partition_key("date", big_day.day)
    stats, checks = DayStats(), DayChecks(big_day.day.isoformat())
    with (
        lake.writer("raw_cdrs", key, source="test") as raw,
        lake.writer("cdr_calls", key, source="test") as calls,
    ):
        writer = DayWriter(raw, {"cdr_calls": calls}, checks, stats)
        for body in pages:
            writer.add(decode_page_typed(body))
        writer.flush()

    raw_meta = pq.ParquetFile(lake.partition_path("raw_cdrs", key)).metadata
    sizes = [raw_meta.row_group(i).total_byte_size for i in range(raw_meta.num_row_groups)]
    assert raw_meta.num_rows == len(pages) * 10
    assert sum(sizes) > ROW_GROUP_BUDGET  # the day is bigger than one row group may be
    assert max(sizes) <= ROW_GROUP_BUDGET, sizes
    assert raw_meta.num_row_groups >= 2, sizes
    calls_meta = pq.ParquetFile(lake.partition_path("cdr_calls", key)).metadata
    assert calls_meta.num_row_groups >= 2
    # Nothing lost on the way: every big summary is in the calls partition, exact.
    got = lake.read("cdr_calls", key)
    assert got is not None
    summaries = dict(got.select("id", "summary").iter_rows())
    for cdr_id in big_day.big:
        assert summaries[cdr_id] == big_text(cdr_id, SIZE).decode()
    # The preview keeps a few cut values, not the 16 MiB record of the first row group.
    preview = stats.previews["raw_cdrs"]
    assert max(preview["record"].str.len_bytes().to_list()) <= 64


def test_reading_a_partition_back_never_joins_row_groups(tmp_path: Path) -> None:
    """`iter_batches` (the re-normalization's reader) yields at most one row group per batch:
    a batch of 5,000 rows over row groups of one 40 MB record each would hold them all."""
    lake = Lake(str(tmp_path / "lake"))
    day = dt.date(2026, 11, 20)
    key = partition_key("date", day)
    with lake.writer("raw_cdrs", key, source="test") as w:
        for group in range(4):
            ids = [f"g{group}-{i}" for i in range(3)]
            w.write(
                pl.DataFrame(
                    {
                        "id": ids,
                        "type": ["call"] * 3,
                        "started_at_raw": ["2026-11-20T00:00:00.000Z"] * 3,
                        "record": ["{}"] * 3,
                        "date": [day] * 3,
                    }
                )
            )
    batches = [b["id"].to_list() for b in lake.iter_batches("raw_cdrs", key, rows=5_000)]
    assert batches == [[f"g{g}-{i}" for i in range(3)] for g in range(4)]
    # ... and still at most `rows` at a time within a row group.
    assert [len(b) for b in lake.iter_batches("raw_cdrs", key, rows=2)] == [2, 1] * 4


def test_a_day_of_multi_mb_records_lands_exactly(big_day: BigDay, tmp_path: Path) -> None:
    """The real pipeline (`cdrhouse ingest`'s run loop, over a socket): every id once, rows
    equal the API's total, each 16 MiB record and summary byte for byte, row groups within the
    budget, and nothing quarantined."""
    served = big_day.served
    defs = served.defs(tmp_path)
    with dg.DagsterInstance.ephemeral() as instance:
        report = run_ingest(
            defs, [big_day.day.isoformat()], instance=instance, data_dir=tmp_path, snapshots=False
        )
    (line,) = report.runs
    assert line.success, line.failure
    lake = Lake(str(tmp_path / "lake"))
    key = partition_key("date", big_day.day)
    served_day = big_day.api_day()
    api_ids = [record_id(r) for r in served_day]
    assert served.api_total(big_day.day) == len(api_ids)
    raw = lake.read("raw_cdrs", key)
    assert raw is not None
    assert raw.height == len(api_ids)
    assert sorted(raw["id"].to_list()) == sorted(api_ids)
    records = dict(raw.select("id", "record").iter_rows())
    for cdr_id, served_record in big_day.big.items():
        got = records[cdr_id].encode()
        assert len(got) == len(served_record)
        assert hashlib.sha256(got).digest() == hashlib.sha256(served_record).digest()
    calls = lake.read("cdr_calls", key)
    assert calls is not None
    summaries = dict(calls.select("id", "summary").iter_rows())
    for cdr_id in big_day.big:
        assert summaries[cdr_id] == big_text(cdr_id, SIZE).decode()
    cdrs = lake.read("cdrs", key)
    assert cdrs is not None
    assert sorted(cdrs["id"].to_list()) == sorted(api_ids)
    quarantine = lake.read("cdr_quarantine", key)
    assert quarantine is None or quarantine.height == 0
    meta = pq.ParquetFile(lake.partition_path("raw_cdrs", key)).metadata
    sizes = [meta.row_group(i).total_byte_size for i in range(meta.num_row_groups)]
    assert sum(sizes) > ROW_GROUP_BUDGET
    assert max(sizes) <= ROW_GROUP_BUDGET, sizes


def test_under_token_big_and_ordinary_groups_land_whole_and_in_order(
    big_day: BigDay, tmp_path: Path
) -> None:
    """Under `token` a batch of ordinary row groups is rewritten and normalized on the privacy
    thread while the writer writes the groups before it; a big group (past BIG_GROUP_BYTES)
    is rewritten alone and normalized by the writer after its raw write. Both kinds, mixed,
    land every record once, in page order, each 16 MiB summary exact, the numbers as tokens,
    and the day's checks count every row."""
    import json

    from pipelines.cdr_day import BIG_GROUP_BYTES
    from warehouse.privacy import PrivacyPolicy, Pseudonymizer, is_token

    assert SIZE >= BIG_GROUP_BYTES  # a page with a big record makes a big group
    records = big_day.api_day()
    bigs = list(big_day.big.values())
    small = [r for r in records if record_id(r) not in big_day.big]
    pages: list[list[bytes]] = []
    for i, big in enumerate(bigs):
        # Four pages of 5: two ordinary groups of 10, one batch of two; then a big group.
        pages += [small[i * 20 + j : i * 20 + j + 5] for j in range(0, 20, 5)]
        pages.append([big, *small[80 + i * 9 : 89 + i * 9]])
    order = [record_id(r) for page in pages for r in page]
    lake = Lake(str(tmp_path / "lake"))
    key = partition_key("date", big_day.day)
    stats, checks = DayStats(), DayChecks(big_day.day.isoformat())
    privacy = Pseudonymizer(PrivacyPolicy("token", b"big-records-token-key-0123456789"))
    with (
        lake.writer("raw_cdrs", key, source="test") as raw,
        lake.writer("cdrs", key, source="test") as cdrs_writer,
        lake.writer("cdr_calls", key, source="test") as calls,
    ):
        writer = DayWriter(
            raw,
            {"cdrs": cdrs_writer, "cdr_calls": calls},
            checks,
            stats,
            rows=10,
            privacy=privacy,
            batch_rows=20,
        )
        try:
            for page in pages:
                writer.add(decode_page_typed(_page(page)))
            writer.flush()
        finally:
            writer.close()

    landed_raw, cdrs, got_calls = published(lake, key, "raw_cdrs", "cdrs", "cdr_calls")
    assert landed_raw["id"].to_list() == order
    assert cdrs["id"].to_list() == order
    assert checks.raw_rows == len(order)
    assert checks.table_rows["cdrs"] == len(order)
    summaries = dict(got_calls.select("id", "summary").iter_rows())
    for cdr_id in big_day.big:
        assert summaries[cdr_id] == big_text(cdr_id, SIZE).decode()
    numbers = {
        side["phone_number"]
        for page in pages
        for r in page
        for side in (json.loads(r).get("from"), json.loads(r).get("to"))
        if isinstance(side, dict) and side.get("phone_number")
    }
    assert numbers
    texts = landed_raw["record"].to_list()
    for number in numbers:
        assert not any(number in t for t in texts), number
    for column in ("from_phone_number", "to_phone_number"):
        values = cdrs[column].drop_nulls().to_list()
        assert values
        assert all(is_token(v) for v in values), column
