"""A canary number through the sandbox's write API, landed under `token` (issue 26).

A call is placed through `POST /voice/calls` to a number no generator produces (a German mobile
number; the generator draws city numbers only), so it reaches the CDRs only by that call. The
day lands through `land_day` (the day step's code) under `token`; the canary must then be
nowhere in the lake (every Parquet value and its key-value metadata, `raw_cdrs` and the
rejected area included) nor in `warehouse.duckdb`, while its token, computed here by HMAC from
the number, is in `cdrs`."""

from __future__ import annotations

import hashlib
import hmac
import logging
from collections.abc import Iterator
from datetime import UTC, datetime, time
from pathlib import Path

import polars as pl
import pyarrow.parquet as pq
import pytest

from connectors.sandbox.config import DEFAULT_API_KEY
from pipelines.cdr_day import PERSON_PREVIEW_COLUMNS, land_day, renormalize_day
from pipelines.resources import ContactCenterResource, WarehouseResource
from tests.support.clock import SessionClock
from tests.support.lake import one_row, warehouse
from tests.support.sandboxes import make_sandbox, place_call
from warehouse.lake import Lake
from warehouse.privacy import PrivacyPolicy

CANARY = "4915199988877"
KEY = b"canary-test-key-0123456789abcdef"
TOKEN = hmac.new(KEY, CANARY.encode(), hashlib.sha256).hexdigest()


@pytest.fixture(scope="module")
def landed(clock: SessionClock, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple]:
    day = clock.days_ago(2)
    sandbox = make_sandbox(start_date=day, days=1, cdrs_per_day=600, now=clock.now)
    with sandbox.serve() as handle:
        call_id = place_call(handle.base_url, sandbox, CANARY, datetime.combine(day, time(9), UTC))
        clock.freeze(sandbox)
        data_dir = tmp_path_factory.mktemp("privacy")
        lake = Lake(str(data_dir / "lake"))
        api = ContactCenterResource(base_url=handle.base_url, api_key=DEFAULT_API_KEY)
        policy = PrivacyPolicy("token", KEY)
        log = logging.getLogger("test")
        stats, checks = land_day(api, lake, log, day.isoformat(), privacy=policy)
        assert checks.whole(stats.rows, stats.api_total)
        WarehouseResource(data_dir=str(data_dir)).build_views()
        PREVIEWS.update(stats.previews)
        yield data_dir, lake, day, call_id, policy


PREVIEWS: dict[str, pl.DataFrame] = {}  # the landing's previews (the materializations')


def test_no_preview_holds_a_customers_value(landed: tuple) -> None:
    """Dagster's event log keeps each materialization's preview, where `cdrhouse privacy
    forget` cannot reach: the `cdrs` preview held the first rows' number tokens (cut to 37
    hex digits) and channel account ids, which outlived their erasure."""
    data_dir, *_ = landed
    assert set(PREVIEWS) >= {"raw_cdrs", "cdrs"}
    with warehouse(data_dir) as con:
        tokens = {
            str(v)[:16]
            for row in con.execute(
                "SELECT from_phone_number, to_phone_number, from_identifier, to_identifier, "
                "from_channel_account_id, to_channel_account_id FROM cdrs"
            ).fetchall()
            for v in row
            if v is not None
        }
    for table, preview in PREVIEWS.items():
        assert not set(preview.columns) & set(PERSON_PREVIEW_COLUMNS), table
        shown = preview.drop("record", strict=False).write_ndjson()
        assert [t for t in tokens if t in shown] == [], table


def _parquet_texts(root: Path) -> Iterator[tuple[Path, str]]:
    """Every Parquet file under `root` as text: its key-value metadata and every value."""
    for path in sorted(root.rglob("*.parquet")):
        meta = pq.read_metadata(path).metadata or {}
        frame = pl.DataFrame(pl.from_arrow(pq.read_table(path)))
        yield path, repr(meta) + frame.write_ndjson()


def test_the_canary_is_nowhere_and_its_token_is_in_cdrs(landed: tuple) -> None:
    data_dir, _lake, _day, call_id, _ = landed
    files = list(_parquet_texts(data_dir / "lake"))
    assert files, "nothing landed"
    for path, text in files:
        assert CANARY not in text, path
        assert "+" + CANARY not in text, path
    assert CANARY.encode() not in (data_dir / "warehouse.duckdb").read_bytes()
    with warehouse(data_dir) as con:
        row = one_row(
            con,
            "SELECT to_phone_number, to_phone_country, to_phone_calling_code, pii_forgotten "
            "FROM cdrs WHERE id = ?",
            [call_id],
        )
        assert row == (TOKEN, "DE", 49, False)
        raw = one_row(con, "SELECT record FROM raw_cdrs WHERE id = ?", [call_id])[0]
        assert f'"phone_number":"{TOKEN}","phone_country":"DE","phone_calling_code":49' in raw
        # Analysts still count repeat numbers: every number is a 64-hex token.
        bad = one_row(
            con,
            "SELECT count(*) FROM cdrs WHERE NOT regexp_full_match(from_phone_number, "
            "'[0-9a-f]{64}') OR NOT regexp_full_match(to_phone_number, '[0-9a-f]{64}')",
        )[0]
        assert bad == 0


def test_renormalizing_the_day_from_the_lake_keeps_tokens_and_countries(landed: tuple) -> None:
    data_dir, lake, day, call_id, policy = landed
    stats, checks = renormalize_day(lake, day.isoformat(), privacy=policy)
    assert checks.whole(stats.rows, None)
    WarehouseResource(data_dir=str(data_dir)).build_views()
    with warehouse(data_dir) as con:
        row = one_row(
            con,
            "SELECT to_phone_number, to_phone_country, to_phone_calling_code FROM cdrs "
            "WHERE id = ?",
            [call_id],
        )
    assert row == (TOKEN, "DE", 49)
    for path, text in _parquet_texts(data_dir / "lake"):
        assert CANARY not in text, path
