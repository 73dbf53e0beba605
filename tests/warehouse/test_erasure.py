"""Issue 26: erasing one person (`warehouse.erasure.forget`) from a lake the day step landed
under `token`: their token leaves every row of every table, only the partitions that held it
are replaced, and a re-pull of the day does not bring it back."""

from __future__ import annotations

import hashlib
import json
import multiprocessing
import shutil
import threading
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow as pa
import pytest

from pipelines.cdr_day import renormalize_day
from tests.support.publisher import wait_until_spooled
from tests.support.token_lake import (
    DAY1,
    DAY2,
    KEY,
    POLICY,
    Person,
    as_text,
    day1_caller,
    digests,
    flagged,
    holding,
    land,
)
from warehouse.erasure import PERSON_TABLES, erase_partition, forget
from warehouse.lake import FORGET_LIST, Lake, LakeKeyConflict
from warehouse.privacy import FORGOTTEN, RAW, PrivacyPolicy, phone_token


@pytest.fixture(scope="module")
def landed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Person]:
    """Two days landed under `token` (built once; each test erases from its own copy)."""
    base = tmp_path_factory.mktemp("erasure")
    lake = Lake(str(base / "lake"))
    for day in (DAY1, DAY2):
        land(lake, day)
    raw = Lake(str(base / "raw"))
    land(raw, DAY1, RAW)
    return base / "lake", day1_caller(lake, raw)


@pytest.fixture
def lake(landed: tuple[Path, Person], tmp_path: Path) -> Lake:
    shutil.copytree(landed[0], tmp_path / "lake")
    return Lake(str(tmp_path / "lake"))


@pytest.fixture
def person(landed: tuple[Path, Person]) -> Person:
    return landed[1]


def _frames(lake: Lake, table: str, key: str) -> pl.DataFrame:
    frame = lake.read(table, key)
    assert frame is not None
    return frame


def test_forget_leaves_no_row_holding_the_token_and_rewrites_only_its_partitions(
    lake: Lake, person: Person
) -> None:
    root = lake.root
    before = holding(lake, person.token)
    assert before["raw_cdrs"], "the caller is in the lake"
    assert before["cdrs"]
    assert {key for rows in before.values() for key, _ in rows} == {f"date={DAY1}"}
    assert not any(flagged(lake).values())
    files = digests(root)
    frames = {(t, k): _frames(lake, t, k) for t in PERSON_TABLES for k in lake.partitions(t)}

    result = forget(lake, person.token)

    assert not any(holding(lake, person.token).values())
    # Exactly the rows that held it are flagged, and counted, per table.
    assert flagged(lake) == before
    for table in PERSON_TABLES:
        assert result.tables[table].rows == len(before[table]), table
        assert result.tables[table].partitions == len({k for k, _ in before[table]}), table
    assert result.rows == sum(len(rows) for rows in before.values())
    # Partitions without the token: the same bytes; with it: replaced.
    after = digests(root)
    for table in PERSON_TABLES:
        held = {k for k, _ in before[table]}
        for key in lake.partitions(table):
            rel = f"{table}/{key}/part-0.parquet"
            assert (after[rel] != files[rel]) == (key in held), rel
    assert lake.forgotten() == {person.token}
    assert (root / FORGET_LIST).read_text() == f"{person.token}\n"
    # In a replaced partition, every other value is as it was: the rows that did not hold the
    # token whole, the rows that did in every column that did not hold it.
    for table in PERSON_TABLES:
        for key in {k for k, _ in before[table]}:
            old, new = frames[(table, key)], _frames(lake, table, key)
            ids = {i for k, i in before[table] if k == key}
            assert new.columns == old.columns
            assert new.filter(~pl.col("id").is_in(ids)).equals(old.filter(~pl.col("id").is_in(ids)))
            old_held, new_held = (f.filter(pl.col("id").is_in(ids)).sort("id") for f in (old, new))
            for column in old.columns:
                if column == FORGOTTEN:
                    continue
                was = as_text(old_held.select(column)).to_series()
                if not was.str.contains(person.token, literal=True).fill_null(False).any():
                    # (the numbers' countries among them: kept beside the erased token)
                    assert new_held[column].equals(old_held[column]), (table, column)
                elif old_held.schema[column] == pl.String:  # the token's value: null now
                    is_token = old_held[column] == person.token
                    assert new_held.filter(is_token)[column].null_count() == is_token.sum()
            if "record" in old.columns:  # the JSON stays JSON, with null in the token's place
                quoted = f'"{person.token}"'
                for was_text, text in zip(old_held["record"], new_held["record"], strict=True):
                    assert json.loads(text) == json.loads(was_text.replace(quoted, "null"))


def test_a_re_pull_of_the_erased_day_does_not_bring_the_person_back(
    lake: Lake, person: Person
) -> None:
    before = holding(lake, person.token)
    forget(lake, person.token)
    day2 = {rel: d for rel, d in digests(lake.root).items() if f"date={DAY2}" in rel}

    land(lake, DAY1)  # the day step pulls day 1 from the API again, whole

    assert not any(holding(lake, person.token).values())
    again = flagged(lake)
    # raw_cdrs and cdrs: the rows that held the token, again; every table's rows of those CDRs
    # (the day step flags a CDR's row in each table where its record lost a forgotten value).
    erased = {i for _, i in before["raw_cdrs"]}
    assert {i for _, i in before["cdrs"]} == erased
    assert again["raw_cdrs"] == before["raw_cdrs"]
    assert again["cdrs"] == before["cdrs"]
    for table in PERSON_TABLES:
        ids = set(_frames(lake, table, f"date={DAY1}")["id"]) if lake.partitions(table) else set()
        assert again[table] == {(f"date={DAY1}", i) for i in erased & ids}, table
    assert {rel: d for rel, d in digests(lake.root).items() if f"date={DAY2}" in rel} == day2


def test_forgetting_twice_changes_nothing_more(lake: Lake, person: Person) -> None:
    forget(lake, person.token)
    files = digests(lake.root)
    again = forget(lake, person.token)
    assert again.rows == 0
    assert again.partitions == 0
    assert digests(lake.root) == files


def test_a_partition_landed_without_the_flag_gains_it_false_on_the_other_rows(
    lake: Lake, person: Person
) -> None:
    """A partition written before the privacy stage (no `pii_forgotten`) that holds the token
    gets the column: true on the rows erased, false on the others."""
    key = f"date={DAY1}"
    old = _frames(lake, "raw_cdrs", key).drop(FORGOTTEN)
    lake.write("raw_cdrs", key, old, source=lake.partition_source("raw_cdrs", key))
    assert FORGOTTEN not in _frames(lake, "raw_cdrs", key).columns
    held = {i for _, i in holding(lake, person.token)["raw_cdrs"]}

    forget(lake, person.token)

    new = _frames(lake, "raw_cdrs", key)
    assert new.columns == [*old.columns[:-1], FORGOTTEN, "date"]
    assert set(new.filter(pl.col(FORGOTTEN))["id"]) == held
    assert new[FORGOTTEN].null_count() == 0
    assert (
        new.drop(FORGOTTEN)
        .filter(~pl.col("id").is_in(held))
        .equals(old.filter(~pl.col("id").is_in(held)))
    )


def test_the_number_in_any_written_form_is_the_token_the_lake_holds(person: Person) -> None:
    digits = person.number.removeprefix("+")
    spaced = f"+{digits[:2]} {digits[2:5]} {digits[5:]}"
    for form in (person.number, "00" + digits, digits, spaced):
        assert phone_token(KEY, form) == person.token, form
    assert phone_token(b"another key", person.number) != person.token


def test_a_value_that_is_not_a_token_is_refused_before_anything_is_written(
    lake: Lake, person: Person
) -> None:
    files = digests(lake.root)
    for bad in (person.number, person.token.upper(), person.token[:-1], ""):
        with pytest.raises(ValueError, match="not a token"):
            forget(lake, bad)
    assert digests(lake.root) == files


def test_a_rejected_copy_holding_the_token_is_erased_and_stays_rejected(
    lake: Lake, person: Person
) -> None:
    """A failed day's records kept for diagnosis (`_rejected/raw_cdrs/`) are in the lake too."""
    key = f"date={DAY1}"
    records = _frames(lake, "raw_cdrs", key)
    with lake.writer("raw_cdrs", key, source=lake.partition_source("raw_cdrs", key)) as copy:
        copy.reject()
        copy.write(records)
    assert lake.rejected_partitions("raw_cdrs") == [key]
    held = {i for _, i in holding(lake, person.token)["raw_cdrs"]}

    result = forget(lake, person.token)

    assert result.tables["raw_cdrs"].rows == 2 * len(held)
    assert result.tables["raw_cdrs"].partitions == 2
    assert result.tables["raw_cdrs"].rejected == 1
    rejected = pl.concat(lake.iter_batches("raw_cdrs", key, rejected=True))
    assert not rejected["record"].str.contains(person.token, literal=True).any()
    assert set(rejected.filter(pl.col(FORGOTTEN))["id"]) == held
    assert rejected.drop(FORGOTTEN).equals(_frames(lake, "raw_cdrs", key).drop(FORGOTTEN, "date"))
    assert lake.rejected_partitions("raw_cdrs") == [key]


def test_normalizing_the_erased_day_again_from_the_lake_keeps_it_erased(
    lake: Lake, person: Person
) -> None:
    """`renormalize_day` rebuilds the typed tables from `raw_cdrs` (no API call): the token
    stays gone and the rows stay flagged (each table's rows of those CDRs, as a landing
    flags them)."""
    before = holding(lake, person.token)
    forget(lake, person.token)

    stats, checks = renormalize_day(lake, DAY1, privacy=POLICY)

    assert checks.whole(stats.rows, None)
    assert not any(holding(lake, person.token).values())
    again = flagged(lake)
    assert again["cdrs"] == before["cdrs"]
    erased = {i for _, i in before["raw_cdrs"]}
    for table in PERSON_TABLES:
        ids = set(_frames(lake, table, f"date={DAY1}")["id"])
        assert again[table] == {(f"date={DAY1}", i) for i in erased & ids}, table


def test_an_erasure_waits_for_a_run_publishing_the_day_and_erases_what_it_published(
    tmp_path: Path,
) -> None:
    # The erasure checks that the partition is still the one it read, then publishes its
    # rewrite. A run publishing the day between the two would have its rows replaced by the
    # older rewrite: now both happen under the day's publish lock, which such a run holds.
    lake = Lake(str(tmp_path))
    key = "date=2026-11-20"
    token = "ab" * 32
    schema = pa.schema([("id", pa.string()), ("caller", pa.string())])

    def publish(ids: list[str], callers: list[str]) -> None:
        with lake.writer("people", key, schema, source="test") as writer:
            writer.write(pl.DataFrame({"id": ids, "caller": callers}))

    publish(["1", "2"], [token, "other"])
    erased: list[int] = []
    erasing = threading.Thread(
        target=lambda: erased.append(erase_partition(lake, "people", key, token))
    )
    with lake.publishing(key):  # another run is publishing the day
        erasing.start()
        wait_until_spooled(tmp_path, key, erasing.is_alive)
        erasing.join(timeout=1.0)
        assert erasing.is_alive()  # its rewrite is written; it waits to check and publish
        publish(["1", "2", "3"], [token, "other", token])  # that run's fetch: a late record
    erasing.join(timeout=60)
    assert not erasing.is_alive()
    people = lake.read("people", key)
    assert people is not None
    assert people.select("id", "caller", FORGOTTEN).rows() == [
        ("1", None, True),
        ("2", "other", False),
        ("3", None, True),
    ]
    assert erased == [2]


def _forget_each(uri: str, prefix: str, n: int, start: Any) -> None:
    lake = Lake(uri)
    start.wait(60)  # both processes imported: their erasures overlap
    for i in range(n):
        lake.forget([hashlib.sha256(f"{prefix}{i}".encode()).hexdigest()])


def test_two_erasures_at_once_keep_both_peoples_tokens_on_the_forget_list(tmp_path: Path) -> None:
    """Two processes adding tokens one at a time (two `privacy forget` runs at once): each
    read the list, added its own and published it, so half the tokens were lost (a re-pull
    would bring those people back: 61-64 of 120 kept, 3 runs of the code before)."""
    uri = (tmp_path / "lake").as_uri()
    spawn = multiprocessing.get_context("spawn")
    start = spawn.Barrier(2)
    workers = [spawn.Process(target=_forget_each, args=(uri, p, 60, start)) for p in ("a", "b")]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(120)
        assert worker.exitcode == 0
    assert len(Lake(uri).forgotten()) == 120


def test_a_forget_on_a_lake_of_raw_days_binds_it_to_the_forget_lists_key(
    tmp_path: Path, person: Person
) -> None:
    """`forget` on a lake of `raw` days only (it says: land them again under `token`) wrote
    key A's token on the forget-list, and nothing tied the lake to key A: the days landed
    again under key B held the person's key-B token, unflagged, and a `raw` landing the
    number in clear. The forget claims the lake for its key: both are refused."""
    lake = Lake(str(tmp_path / "lake"))
    land(lake, DAY1, RAW)
    forget(lake, person.token, POLICY.key_check)
    other = PrivacyPolicy("token", b"another-key-for-the-same-lake-01")
    with pytest.raises(LakeKeyConflict):
        lake.check_landing(other.key_check)
    with pytest.raises(LakeKeyConflict):
        lake.check_landing(None)
    lake.check_landing(POLICY.key_check)  # the forget-list's key lands
