"""Golden equality: normalizing the fixture pages gives exactly the tables the normalization
before issue 13 gave (tests/warehouse/golden/make.py says how they were made).

The pages hold drift (unknown fields and types), corrupt records, revisions, odd page sizes and
hand-made odd pages, so every branch of decoding and normalization is covered."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest
from polars.testing import assert_frame_equal

from warehouse.decode import decode_page, decode_page_typed
from warehouse.normalize import NormalizedTables, normalize, normalize_decoded

GOLDEN = Path(__file__).parent / "golden"
TABLES = ("cdrs", "cdr_calls", "cdr_conversations", "cdr_sms", "cdr_hlr_lookups", "cdr_quarantine")


def golden_pages() -> list[bytes]:
    return pl.read_parquet(GOLDEN / "pages.parquet")["body"].to_list()


def expected(table: str) -> pl.DataFrame:
    return pl.read_parquet(GOLDEN / f"{table}.parquet")


def assert_golden(tables: NormalizedTables) -> None:
    got = tables.tables()
    assert set(got) == set(TABLES)
    for table in TABLES:
        assert_frame_equal(got[table], expected(table), check_exact=True)


def test_fixture_covers_every_branch() -> None:
    cdrs, quarantine = expected("cdrs"), expected("cdr_quarantine")
    assert cdrs["extra"].is_not_null().any()  # unknown top-level fields
    assert expected("cdr_sms")["extra"].is_not_null().any()  # unknown data fields
    assert (~cdrs["type"].is_in(["call", "conversation", "sms", "hlr_lookup"])).any()
    reasons = " ".join(quarantine["reason"].to_list())
    for reason in ("structure", "cost is a string", "started_at", "missing id", "missing type"):
        assert reason in reasons
    assert len(golden_pages()) >= 8  # pages of 333, 1000, 7, 1, 999... records, and hand-made


def test_decode_once_then_project_is_identical_to_the_old_normalization() -> None:
    typed = pl.concat([decode_page_typed(p) for p in golden_pages()], how="vertical_relaxed")
    assert_golden(normalize_decoded(typed))


def test_renormalizing_raw_rows_from_the_lake_is_identical() -> None:
    raw = pl.concat([decode_page(p) for p in golden_pages()])
    assert_golden(normalize(raw))


@pytest.mark.parametrize("batch", [1, 2, 7])
def test_page_by_page_typed_rows_concatenated_in_batches_still_match(batch: int) -> None:
    pages = golden_pages()
    frames = [
        pl.concat([decode_page_typed(p) for p in pages[i : i + batch]], how="vertical_relaxed")
        for i in range(0, len(pages), batch)
    ]
    assert_golden(normalize_decoded(pl.concat(frames, how="vertical_relaxed")))


def test_raw_rows_of_the_typed_decode_are_the_exact_records() -> None:
    # What lands in raw_cdrs (the lake's copy a day is re-normalized from) is unchanged too.
    columns = ["id", "type", "started_at_raw", "record"]
    for page in golden_pages():
        assert_frame_equal(
            decode_page_typed(page).select(columns), decode_page(page).select(columns)
        )
