"""The CDR checks computed in the writing step (`DayChecks`): each one fails on the data it
guards against, across row groups, and passes on a clean day."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import dagster as dg
import polars as pl
import pytest

from pipelines.cdr_day import NORMALIZED_TABLES, RAW_COLUMNS, published_counts
from pipelines.checks import (
    SHRINK_TAG,
    DayChecks,
    blocking_problems,
    known_user_ids,
    shrink_limit,
)
from tests.support.damage import damage_footer
from tests.support.sms_records import DAY, decoded_page, sms_record
from warehouse.decode import narrow
from warehouse.lake import Lake
from warehouse.normalize import normalize_decoded
from warehouse.snapshots import users_frames


def _fold(*groups: pl.DataFrame) -> DayChecks:
    checks = DayChecks(DAY)
    for group in groups:
        checks.receive(group)
        checks.add(group.height, normalize_decoded(group))
    return checks


def _results(checks: DayChecks, ids: list[str] | None = None) -> dict[str, dg.AssetCheckResult]:
    def written() -> Iterator[pl.Series]:
        yield pl.Series("id", ids or [], dtype=pl.String)

    known = pl.Series("id", ["u-1"], dtype=pl.String)
    return {str(r.check_name): r for r in checks.results(known, written)}


def test_a_clean_day_passes_every_check() -> None:
    results = _results(
        _fold(decoded_page(sms_record(1), sms_record(2)), decoded_page(sms_record(3)))
    )
    assert {name: r.passed for name, r in results.items()} == dict.fromkeys(results, True)
    assert len(results) == 7


def test_a_duplicate_across_row_groups_fails_ids_unique_and_is_named() -> None:
    dup = sms_record(2)["id"]
    checks = _fold(
        decoded_page(sms_record(1), sms_record(2)),
        decoded_page(sms_record(2, cost=0.5), sms_record(3)),
    )
    written = [sms_record(1)["id"], dup, dup, sms_record(3)["id"]]
    result = _results(checks, [str(i) for i in written])["cdrs_ids_unique"]
    assert not result.passed
    assert result.metadata["duplicate_ids"].value == 1
    assert result.metadata["sample"].value == [dup]


def test_an_id_written_three_times_and_another_twice_are_two_duplicate_ids() -> None:
    a, b = sms_record(1)["id"], sms_record(2)["id"]
    checks = _fold(
        decoded_page(sms_record(1), sms_record(2)),
        decoded_page(sms_record(1), sms_record(3)),
        decoded_page(sms_record(2), sms_record(1)),
    )
    written = [a, b, a, sms_record(3)["id"], b, a]
    result = _results(checks, [str(i) for i in written])["cdrs_ids_unique"]
    assert not result.passed
    assert result.metadata["duplicate_ids"].value == 2
    assert result.metadata["rows"].value == 6
    sample = result.metadata["sample"].value
    assert isinstance(sample, list)
    assert sorted(str(v) for v in sample) == sorted([str(a), str(b)])


def test_window_nulls_types_users_and_quarantine_each_fail() -> None:
    outside = sms_record(1, started_at="2026-11-06T00:00:00.000Z")
    stranger = sms_record(2, user={"id": "u-unknown"})
    broken = sms_record(3, cost="1.00")  # a string cost: quarantined
    fax = sms_record(4, type="fax", data={"pages": 1})  # unknown type: in cdrs, in no type table
    results = _results(_fold(decoded_page(outside, stranger), decoded_page(broken, fax)))
    assert not results["cdrs_started_at_in_window"].passed
    assert results["cdrs_started_at_in_window"].metadata["sample"].value == [outside["id"]]
    assert not results["cdrs_users_known"].passed
    assert not results["cdr_quarantine_empty"].passed
    assert results["cdr_quarantine_empty"].metadata["quarantined"].value == 1
    # The unknown type is accounted for, so the type tables still add up, and no key is null.
    assert results["cdrs_type_tables_add_up"].passed
    assert results["cdrs_type_tables_add_up"].metadata["unknown_type_rows"].value == 1
    assert results["cdrs_keys_not_null"].passed


def test_a_duplicate_inside_one_row_group_is_counted_before_the_groups_dedupe() -> None:
    # normalize keeps one copy per row group, so cdrs alone would look unique.
    dup = str(sms_record(2)["id"])
    checks = _fold(decoded_page(sms_record(1), sms_record(2), sms_record(2, cost=0.5)))
    results = _results(checks, [str(sms_record(1)["id"]), dup, dup])
    assert checks.table_rows["cdrs"] == 2
    ids = results["cdrs_ids_unique"]
    assert not ids.passed
    assert ids.description == f"1 duplicate id among 3 records received (e.g. {dup})"
    adds_up = results["cdrs_raw_rows_add_up"]
    assert not adds_up.passed
    assert adds_up.description == "raw 3 != cdrs 2 + quarantine 0"
    assert not checks.whole(3, 3)
    assert blocking_problems(list(results.values())) == [
        f"cdrs_ids_unique: {ids.description}",
        f"cdrs_raw_rows_add_up: {adds_up.description}",
    ]


def test_whole_needs_every_blocking_check_and_a_quarantined_record_does_not_block() -> None:
    broken = sms_record(3, cost="1.00")  # quarantined: the day is still whole
    unparseable = sms_record(4, started_at="yesterday")  # quarantined, not "outside"
    checks = _fold(decoded_page(sms_record(1), sms_record(2)), decoded_page(broken, unparseable))
    assert checks.whole(4, 4)
    assert checks.whole(4, None)  # a re-normalization: no API total to compare
    assert not checks.whole(4, 5)  # the row count
    results = _results(checks)
    assert not results["cdr_quarantine_empty"].passed
    assert results["cdr_quarantine_empty"].metadata["quarantined"].value == 2
    assert blocking_problems(list(results.values())) == []
    outside = _fold(
        decoded_page(sms_record(1), sms_record(2, started_at="2026-11-06T00:00:00.000Z"))
    )
    assert not outside.whole(2, 2)
    window = _results(outside)["cdrs_started_at_in_window"].description
    assert window == (
        "1 started_at outside [2026-11-05T00:00:00.000Z, 2026-11-06T00:00:00.000Z) "
        f"(e.g. {sms_record(2)['id']})"
    )


def test_type_tables_that_do_not_add_up_fail() -> None:
    checks = _fold(decoded_page(sms_record(1), sms_record(2)))
    checks.table_rows["cdr_sms"] -= 1  # a type table that lost a row
    assert not _results(checks)["cdrs_type_tables_add_up"].passed


def test_known_users_are_the_newest_snapshot_and_wanted_ids_of_older_ones(tmp_path: Path) -> None:
    lake = Lake(str(tmp_path / "lake"))
    snapshots = {
        "2026-11-01": (["u-gone", "u-old"], []),
        "2026-11-02": (["u-1"], ["u-left"]),  # the newest: active and deleted users
    }
    for day, (active, deleted) in snapshots.items():
        taken_at = datetime.fromisoformat(day).replace(tzinfo=UTC)
        users = users_frames([{"id": i} for i in active], [{"id": i} for i in deleted], taken_at)
        lake.write("users", f"snapshot_date={day}", users["users"])

    def known(*wanted: str) -> list[str]:
        return sorted(known_user_ids(lake, wanted).to_list())

    assert known("u-1") == ["u-1", "u-left"]
    # A user only an older snapshot holds is still known; the others of that snapshot are not
    # read into the result, and an id in no snapshot stays unknown.
    assert known("u-1", "u-gone", "u-never") == ["u-1", "u-gone", "u-left"]
    assert known_user_ids(Lake(str(tmp_path / "empty")), ["u-1"]).len() == 0


@pytest.mark.parametrize(
    ("landed", "max_shrink", "held", "kept"),
    [
        (2000, 0.1, 1799, 1800),  # 10 % fewer may replace the day, one more may not
        (5, 0.1, 3, 4),  # a small day may lose one record (rounded up), not two
        (2000, 0.0, 1999, 2000),  # 0: not one record fewer
        (7, 0.5, 2, 3),  # 3.5 rounded up
    ],
)
def test_a_day_fetched_again_is_held_when_it_lost_more_than_the_limit(
    landed: int, max_shrink: float, held: int, kept: int
) -> None:
    checks = _fold(decoded_page(sms_record(1), sms_record(2)))
    checks.landed_rows, checks.max_shrink = landed, max_shrink
    assert checks.shrunk(held)
    assert not checks.shrunk(kept)
    assert not checks.shrunk(landed + 100)  # more records than before: late ones, never held
    result = checks.shrink_result(held)
    assert not result.passed
    assert blocking_problems([result]) == [f"cdrs_day_not_shrunk: {result.description}"]
    assert checks.shrink_result(kept).passed


def test_a_shrunk_day_names_both_counts_and_how_to_accept_it() -> None:
    checks = _fold(decoded_page(sms_record(1), sms_record(2)))
    checks.landed_rows = 6000
    assert not checks.whole(2, 2)
    result = checks.shrink_result(2)
    assert (result.description or "").startswith(
        "2 records received where the lake holds 6000 for the day (100.0% fewer; "
        "CDRHOUSE_MAX_DAY_SHRINK allows 10%)"
    )
    assert "run tag cdrhouse/max_day_shrink=1" in (result.description or "")
    assert result.metadata["landed_rows"].value == 6000
    assert result.metadata["rows"].value == 2
    # 1 accepts any day, even an empty one; nothing landed before: nothing to compare.
    checks.max_shrink = 1.0
    assert not checks.shrunk(0)
    assert checks.shrink_result(0).passed
    assert not DayChecks(DAY).shrunk(0)


@pytest.mark.parametrize(
    ("tags", "limit"),
    [({}, 0.1), ({SHRINK_TAG: "1"}, 1.0), ({SHRINK_TAG: "0.25"}, 0.25), ({SHRINK_TAG: "0"}, 0.0)],
)
def test_a_runs_tag_sets_its_limit(tags: dict[str, str], limit: float) -> None:
    assert shrink_limit(tags, 0.1) == limit


@pytest.mark.parametrize("value", ["lots", "-0.1", "2", "nan", "inf", ""])
def test_a_bad_run_tag_says_what_is_expected(value: str) -> None:
    with pytest.raises(ValueError, match="expected a fraction from 0 to 1") as info:
        shrink_limit({SHRINK_TAG: value}, 0.1)
    assert str(info.value).startswith(f"run tag {SHRINK_TAG}={value!r}: ")


def test_a_day_whose_records_no_longer_normalize_is_held_by_its_cdrs_rows() -> None:
    # The same records as the lake's, two of three now quarantined (their cost a string).
    checks = _fold(
        decoded_page(sms_record(1, cost="1.0"), sms_record(2, cost="2.0"), sms_record(3))
    )
    checks.landed_rows, checks.landed_tables = 3, {"cdrs": 3}
    assert checks.shrunk(3)
    assert not checks.whole(3, 3)
    assert not checks.whole(3, None)  # normalized again from the lake: held too
    result = checks.shrink_result(3)
    assert (result.description or "").startswith(
        "1 of 3 records normalized into cdrs where the lake's cdrs holds 3 for the day "
        "(2 quarantined: 2 cost is a string; types normalized: 1 sms; CDRHOUSE_MAX_DAY_SHRINK "
        "allows 10%)"
    )
    assert result.metadata["table_rows"].value == {"cdrs": 1}
    # One odd record of a day still lands it; so does a run that accepts the day.
    one = _fold(decoded_page(sms_record(1, cost="1.0"), sms_record(2), sms_record(3)))
    one.landed_rows, one.landed_tables = 3, {"cdrs": 3}
    assert not one.shrunk(3)
    checks.max_shrink = 1.0
    assert checks.whole(3, 3)


def test_a_day_whose_type_is_renamed_is_held_by_its_type_table() -> None:
    # The API renames `sms` (an unknown type is kept in cdrs, as a string): cdrs keeps its
    # rows, cdr_sms would be emptied.
    renamed = [sms_record(i, type="text_message") for i in (1, 2, 3)]
    checks = _fold(decoded_page(*renamed))
    checks.landed_rows, checks.landed_tables = 3, {"cdrs": 3, "cdr_sms": 3}
    assert checks.table_rows["cdrs"] == 3
    assert not checks.whole(3, 3)
    assert (checks.shrink_result(3).description or "").startswith(
        "0 of 3 records normalized into cdr_sms where the lake's cdr_sms holds 3 for the day "
        "(0 quarantined: none; types normalized: 3 text_message; "
    )
    # A table the step does not make again is not compared.
    checks.landed_tables = {"cdrs": 3}
    assert checks.whole(3, 3)


def test_the_lakes_counts_leave_the_quarantine_out_and_count_a_damaged_raw_by_its_cdrs(
    tmp_path: Path,
) -> None:
    group = decoded_page(
        sms_record(1), sms_record(2), sms_record(3, cost="1.0")
    )  # one record quarantined
    lake, key, log = Lake(tmp_path.as_uri()), f"date={DAY}", logging.getLogger("test")
    tables = tuple(NORMALIZED_TABLES)
    assert published_counts(lake, key, tables, log) == (None, {})
    lake.write("raw_cdrs", key, narrow(group, RAW_COLUMNS))
    for table, frame in normalize_decoded(group).tables().items():
        lake.write(table, key, frame)
    typed = {"cdrs": 2, "cdr_sms": 2, "cdr_calls": 0, "cdr_conversations": 0, "cdr_hlr_lookups": 0}
    # Fewer quarantined rows is a mend: the quarantine is never compared.
    assert published_counts(lake, key, tables, log) == (3, typed)
    assert published_counts(lake, key, ("cdr_sms",), log) == (3, {"cdr_sms": 2})
    damage_footer(Path(lake.partition_url("raw_cdrs", key)))
    assert published_counts(lake, key, tables, log) == (2 + 1, typed)
    damage_footer(Path(lake.partition_url("cdrs", key)))
    # Neither readable: nothing readable is left to keep (each is replaced as if absent).
    del typed["cdrs"]
    assert published_counts(lake, key, tables, log) == (None, typed)


def test_a_smaller_day_within_the_limit_is_said() -> None:
    checks = _fold(decoded_page(sms_record(1), sms_record(2)))
    assert checks.smaller(2) is None  # nothing landed before
    checks.landed_rows, checks.landed_tables = 20, {"cdrs": 20, "cdr_sms": 2}
    assert checks.whole(19, 19) is False  # cdrs 20 -> 2: held
    checks.landed_tables = {"cdr_sms": 2}
    assert checks.whole(19, 19)
    assert checks.smaller(19) == (
        f"day {DAY} is smaller than the lake's (records 20 -> 19), within the limit of 10% "
        "(CDRHOUSE_MAX_DAY_SHRINK or the run tag cdrhouse/max_day_shrink)"
    )
    assert checks.smaller(20) is None
