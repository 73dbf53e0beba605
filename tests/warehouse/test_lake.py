"""Lake layout and atomic partition replacement."""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import random
import shutil
import signal
import threading
import time

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from connectors.sandbox.generator import Dataset
from tests.support.publisher import heard, publisher, say, stop, wait_until_spooled
from tests.warehouse.conftest import write_day
from warehouse.lake import Lake, lake_file, partition_key
from warehouse.snapshots import users_frames
from warehouse.stores import LockTimeout, root_from_uri

FREE_TEXT = {"raw_cdrs": {"record"}, "cdr_sms": {"message"}}


def frame(ids: list[str], day: dt.date) -> pl.DataFrame:
    return pl.DataFrame(
        {
            "id": ids,
            "type": ["call"] * len(ids),
            "started_at_raw": ["x"] * len(ids),
            "record": ["{}"] * len(ids),
            "date": [day] * len(ids),
        }
    )


def test_uri_and_plain_path_give_the_same_root(tmp_path) -> None:
    assert root_from_uri(tmp_path.as_uri()) == tmp_path.resolve()
    assert root_from_uri(str(tmp_path)) == tmp_path.resolve()
    with pytest.raises(ValueError, match="scheme"):
        root_from_uri("s3://bucket/lake")


def test_write_read_roundtrip_hive_layout(tmp_path) -> None:
    lake = Lake(tmp_path.as_uri())
    day = dt.date(2026, 11, 20)
    key = partition_key("date", day)
    assert key == "date=2026-11-20"
    assert lake.write("raw_cdrs", key, frame(["a", "b"], day)) == 2
    path = lake.partition_path("raw_cdrs", key)
    assert path == tmp_path / "raw_cdrs" / "date=2026-11-20" / "part-0.parquet"
    # The partition column is in the path, not in the file; read() adds it back.
    assert "date" not in pl.read_parquet_schema(path)
    back = lake.read("raw_cdrs", key)
    assert back is not None
    assert back.equals(frame(["a", "b"], day))
    assert lake.partitions("raw_cdrs") == [key]
    assert lake.read("raw_cdrs", "date=2026-11-21") is None


def test_failed_write_leaves_previous_partition_whole_and_no_temp(tmp_path) -> None:
    lake = Lake(str(tmp_path))
    day = dt.date(2026, 11, 20)
    key = partition_key("date", day)
    lake.write("raw_cdrs", key, frame(["old1", "old2"], day))

    def killed_run() -> None:
        with lake.writer("raw_cdrs", key) as w:
            w.write(frame(["new1"], day))  # a first row group already went to the temp file
            raise RuntimeError("killed mid-partition")

    with pytest.raises(RuntimeError, match="killed"):
        killed_run()
    back = lake.read("raw_cdrs", key)
    assert back is not None
    assert back["id"].to_list() == ["old1", "old2"]
    assert list((tmp_path / "_tmp").iterdir()) == []


def test_streamed_row_groups_replace_the_partition(tmp_path) -> None:
    lake = Lake(str(tmp_path))
    day = dt.date(2026, 11, 20)
    key = partition_key("date", day)
    lake.write("raw_cdrs", key, frame(["old"], day))
    with lake.writer("raw_cdrs", key) as w:
        for i in range(3):
            w.write(frame([f"n{i}a", f"n{i}b"], day))
    back = lake.read("raw_cdrs", key)
    assert back is not None
    assert back["id"].to_list() == ["n0a", "n0b", "n1a", "n1b", "n2a", "n2b"]


def test_delete_partition_and_stale_temp_cleanup(tmp_path) -> None:
    lake = Lake(str(tmp_path))
    key = "date=2026-11-20"
    lake.write("raw_cdrs", key, frame(["a"], dt.date(2026, 11, 20)))
    assert lake.delete_partition("raw_cdrs", key)
    assert not lake.delete_partition("raw_cdrs", key)
    assert lake.partitions("raw_cdrs") == []
    tmp = tmp_path / "_tmp"
    tmp.mkdir(exist_ok=True)
    stale, fresh = tmp / "stale.parquet", tmp / "fresh.parquet"
    stale.write_bytes(b"x")
    fresh.write_bytes(b"x")
    # A killed aggregation's copy of a day (a directory), as old: removed whole.
    copy = tmp / "aggregate-day-x" / "cdrs" / "date=2026-11-20"
    copy.mkdir(parents=True)
    (copy / "part-0.parquet").write_bytes(b"x")
    old = time.time() - 7 * 3600
    os.utime(stale, (old, old))
    os.utime(tmp / "aggregate-day-x", (old, old))
    assert lake.cleanup_tmp() == 2
    assert not stale.exists()
    assert not (tmp / "aggregate-day-x").exists()
    assert fresh.exists()


def test_bad_partition_key_is_rejected(tmp_path) -> None:
    with pytest.raises(ValueError, match="partition key"):
        Lake(str(tmp_path)).partition_path("cdrs", "../../etc")


def test_partition_footer_gives_rows_and_source_without_the_data(tmp_path) -> None:
    lake = Lake(tmp_path.as_uri())
    day = dt.date(2026, 11, 20)
    key = partition_key("date", day)
    lake.write("raw_cdrs", key, frame(["a", "b", "c"], day), source="sandbox:3")
    footer = lake.partition_footer("raw_cdrs", key)
    assert footer is not None
    assert footer.num_rows == 3
    assert lake.partition_source("raw_cdrs", key) == "sandbox:3"
    assert lake.partition_footer("raw_cdrs", "date=2026-11-21") is None
    assert lake.partition_source("raw_cdrs", "date=2026-11-21") is None


def test_a_rejected_partition_is_kept_out_of_every_readers_way(tmp_path) -> None:
    import duckdb

    lake = Lake(tmp_path.as_uri())
    day = dt.date(2026, 11, 20)
    key = partition_key("date", day)
    lake.write("raw_cdrs", key, frame(["old1", "old2"], day), source="sandbox:7")
    published = lake.partition_path("raw_cdrs", key).read_bytes()
    with lake.writer("raw_cdrs", key, source="sandbox:7") as w:
        w.write(frame(["new1", "new1", "new2"], day))
        w.reject()
    # The published partition is untouched; the rejected records are under _rejected/.
    assert lake.partition_path("raw_cdrs", key).read_bytes() == published
    rejected = tmp_path / "_rejected" / "raw_cdrs" / key / "part-0.parquet"
    assert lake.partition_url("raw_cdrs", key, rejected=True) == str(rejected)
    assert lake.exists("raw_cdrs", key, rejected=True)
    back = pl.concat(lake.iter_batches("raw_cdrs", key, rejected=True))
    assert back["id"].to_list() == ["new1", "new1", "new2"]
    # No listing, glob or view reads them as the day's.
    assert lake.partitions("raw_cdrs") == [key]
    assert lake.store.list_all() == {"raw_cdrs": lake.stamps("raw_cdrs")}
    for glob in (lake.table_glob("raw_cdrs"), lake.files_glob()):
        files = duckdb.execute(f"select file from glob('{glob}')").fetchall()
        assert files == [(str(lake.partition_path("raw_cdrs", key)),)], glob
    assert lake.delete_partition("raw_cdrs", key, rejected=True)
    assert not rejected.exists()
    assert lake.partition_path("raw_cdrs", key).read_bytes() == published


def _dictionary_encoded(chunk: pq.ColumnChunkMetaData) -> bool:
    return chunk.dictionary_page_offset is not None or any(
        "DICTIONARY" in encoding for encoding in chunk.encodings
    )


def test_keys_and_timestamps_are_written_plain_with_statistics_and_repeated_values_coded(
    tmp_path,
) -> None:
    """A one-column key and a millisecond timestamp hardly repeat: no dictionary (it would
    be built, then dropped once full), statistics kept; a repeated value keeps its dictionary,
    and free text has neither."""
    lake = Lake(tmp_path.as_uri())
    day = dt.date(2026, 11, 20)
    write_day(lake, Dataset(seed=4, start_date=day, days=1, cdrs_per_day=300), day)
    key = partition_key("date", day)
    for table, plain, coded in (
        (
            "cdrs",
            {"id", "started_at", "ended_at"},
            {"type", "subtype", "user_id", "tags.list.element"},
        ),
        ("raw_cdrs", {"id", "record"}, {"type"}),
        ("cdr_sms", {"id", "started_at", "message"}, {"subtype", "disposition"}),
    ):
        meta = pq.read_metadata(lake.partition_path(table, key))
        group = meta.row_group(0)
        chunks = {group.column(i).path_in_schema: group.column(i) for i in range(group.num_columns)}
        assert plain | coded <= chunks.keys(), (table, sorted(chunks))
        for name in plain:
            assert not _dictionary_encoded(chunks[name]), (table, name, chunks[name].encodings)
        for name in coded:
            assert _dictionary_encoded(chunks[name]), (table, name, chunks[name].encodings)
        for name in (plain | coded) - FREE_TEXT.get(table, set()):
            assert chunks[name].is_stats_set, (table, name)
    # Free text: no dictionary, no statistics (as before).
    raw = pq.read_metadata(lake.partition_path("raw_cdrs", key)).row_group(0)
    record = next(
        raw.column(i) for i in range(raw.num_columns) if raw.column(i).path_in_schema == "record"
    )
    assert not record.is_stats_set


def test_a_family_written_together_is_replaced_whole_or_not_at_all(tmp_path) -> None:
    # A snapshot's tables (`users` and its bridge tables) used to be written one after the
    # other, each published at once: a failure (a full disk, a bad frame) or a signal after
    # the first left today's `users` from one reading beside bridges from another.
    lake = Lake(str(tmp_path))
    key = "snapshot_date=2026-11-20"
    at = dt.datetime(2026, 11, 20, 1, tzinfo=dt.UTC)
    first = [{"id": "u-1", "name": "Ada", "teams": [{"id": 1, "name": "Sales"}]}]
    lake.write_together(key, users_frames(first, [], at), source="test")
    before = {
        t: (tmp_path / t / key / "part-0.parquet").read_bytes() for t in ("users", "user_teams")
    }

    second = users_frames([{"id": "u-2", "teams": [{"id": 2, "name": "Care"}]}], [], at)
    # The bridge's frame cannot be written (an id that is no integer): nothing is replaced.
    second["user_teams"] = second["user_teams"].with_columns(pl.lit("two").alias("team_id"))
    with pytest.raises(pa.ArrowInvalid, match="'two'"):
        lake.write_together(key, second, source="test")
    for table, content in before.items():
        assert (tmp_path / table / key / "part-0.parquet").read_bytes() == content, table
    assert list((tmp_path / "_tmp").iterdir()) == []

    third = users_frames([{"id": "u-3", "teams": [{"id": 3, "name": "Night"}]}], [], at)
    lake.write_together(key, third, source="test")
    users, teams = lake.read("users", key), lake.read("user_teams", key)
    assert users is not None
    assert teams is not None
    assert users["id"].to_list() == ["u-3"]
    assert teams["team_id"].to_list() == [3]


class _Interrupted(Exception):
    pass


def test_a_signal_at_any_moment_leaves_a_family_from_one_reading(tmp_path) -> None:
    # SIGTERM (a pod's stop) sent at a random moment of the family's write, 100 times: the
    # partition afterwards holds `users` and `user_teams` of the same reading, never `users`
    # of the new one beside `user_teams` of the last.
    lake = Lake(str(tmp_path))
    key = "snapshot_date=2026-11-20"
    at = dt.datetime(2026, 11, 20, 1, tzinfo=dt.UTC)

    def reading(n: int) -> dict[str, pl.DataFrame]:
        users = [{"id": f"u-{n}", "teams": [{"id": n, "name": f"T{n}"}]}]
        return users_frames(users, [], at)

    lake.write_together(key, reading(0), source="test")
    started = time.perf_counter()
    lake.write_together(key, reading(0), source="test")
    took = time.perf_counter() - started
    armed = threading.Event()

    def stop(_signum: int, _frame: object) -> None:
        if armed.is_set():
            raise _Interrupted

    previous = signal.signal(signal.SIGTERM, stop)
    rng = random.Random(7)
    interrupted = 0
    try:
        for n in range(1, 101):
            delay = rng.uniform(0, took)
            sender = threading.Timer(delay, os.kill, (os.getpid(), signal.SIGTERM))
            armed.set()
            try:
                sender.start()  # (under load, the signal may land before the write starts)
                lake.write_together(key, reading(n), source="test")
                sender.join()  # (a signal that lands here, after the write, raises too)
            except _Interrupted:
                interrupted += 1
            finally:
                armed.clear()
                sender.join()
            users, teams = lake.read("users", key), lake.read("user_teams", key)
            assert users is not None
            assert teams is not None
            assert [f"u-{i}" for i in teams["team_id"].to_list()] == users["id"].to_list(), n
    finally:
        signal.signal(signal.SIGTERM, previous)
    assert interrupted == 100  # every signal landed, each while armed


def _family_runs(lake: Lake, key: str) -> set[str]:
    """The runs (`a`, `b`) whose rows the key's users family holds, every table."""
    runs: set[str] = set()
    for table, column in (
        ("users", "id"),
        ("user_teams", "user_id"),
        ("user_queues", "user_id"),
        ("user_skills", "user_id"),
    ):
        frame = lake.read(table, key)
        assert frame is not None, table
        runs |= {v.split("-")[0] for v in frame[column].to_list()}
    return runs


def test_two_processes_publishing_one_key_at_once_leave_it_of_one_run(tmp_path) -> None:
    # Two runs of one day (a UI backfill over the nightly's lookback days) finish together:
    # each publishes its tables one after the other, and their renames used to take turns,
    # leaving the day's tables some of one run and some of the other. 30 rounds, both told
    # at once to publish; after each, every table of the family is of one run.
    lake = Lake(str(tmp_path))
    key = "snapshot_date=2026-11-20"
    a, b = publisher(tmp_path, key, "a"), publisher(tmp_path, key, "b")
    try:
        mixed = []
        for n in range(30):
            say(a, str(n))
            say(b, str(n))
            assert (heard(a), heard(b)) == ("done", "done")
            runs = _family_runs(lake, key)
            if len(runs) != 1:
                mixed.append((n, sorted(runs)))
        assert mixed == []
    finally:
        stop(a, b)


def test_a_publish_waits_while_another_process_publishes_the_same_key(tmp_path) -> None:
    lake = Lake(str(tmp_path))
    key, other = "snapshot_date=2026-11-20", "snapshot_date=2026-11-21"
    at = dt.datetime(2026, 11, 20, 1, tzinfo=dt.UTC)
    holder = publisher(tmp_path, key, "h")
    try:
        say(holder, "hold")
        assert heard(holder) == "held"
        # Another key is not held back.
        lake.write_together(other, users_frames([{"id": "o-1"}], [], at), source="test")
        assert lake.exists("users", other)
        writing = threading.Thread(
            target=lake.write_together,
            args=(key, users_frames([{"id": "w-1"}], [], at)),
            kwargs={"source": "test"},
        )
        writing.start()
        writing.join(timeout=2.0)
        assert writing.is_alive()  # waiting for the holder's publish to end
        assert not lake.exists("users", key)
        say(holder, "release")
        assert heard(holder) == "done"
        writing.join(timeout=30)
        assert not writing.is_alive()
        users = lake.read("users", key)
        assert users is not None
        assert users["id"].to_list() == ["w-1"]
    finally:
        stop(holder)
    # The lock file is the lake's own: a reset takes it with the rest.
    assert (tmp_path / "_locks" / f"{key}.lock").exists()
    assert lake_file(f"_locks/{key}.lock")
    assert lake_file(f"account_id=east/_locks/{key}.lock")


def test_ctrl_c_while_waiting_to_publish_stops_at_once_and_publishes_nothing(tmp_path) -> None:
    # A run waiting for another's publish of the day (hung, say) must still stop on Ctrl-C
    # or SIGTERM: a blocking flock was not interrupted by a signal another thread took.
    key = "snapshot_date=2026-11-20"
    holder = publisher(tmp_path, key, "h")
    waiter = publisher(tmp_path, key, "w")
    try:
        say(holder, "hold")
        assert heard(holder) == "held"
        say(waiter, "1")
        wait_until_spooled(tmp_path, key, lambda: waiter.poll() is None)
        time.sleep(0.5)  # in the wait for the lock
        waiter.send_signal(signal.SIGINT)
        assert waiter.wait(timeout=10) != 0
        assert not (tmp_path / "users" / key).exists()
        assert list((tmp_path / "_tmp").glob(f"*.{key}.*")) == []
    finally:
        stop(holder, waiter)


def test_a_key_taken_again_by_the_thread_holding_it_is_refused_not_waited_for(tmp_path) -> None:
    lake = Lake(str(tmp_path))
    key = "date=2026-11-20"
    with lake.publishing(key):
        with pytest.raises(RuntimeError, match="already held by this thread"), lake.lock(key):
            pass
        with lake.lock("date=2026-11-21"):  # another key: taken at once
            pass
    with lake.lock(key):  # released: taken again
        pass


def _publish_within(lake: Lake, key: str, users: pl.DataFrame, wait_s: float) -> None:
    """`users` written into `key`, then published as a day is: under the key's lock."""
    publishing = contextlib.ExitStack()
    with publishing, lake.writer("users", key, source="test") as writer:
        writer.write(users)
        publishing.enter_context(lake.publishing(key, wait_s=wait_s))


def test_a_lock_held_past_the_wait_fails_naming_it_and_publishes_nothing(tmp_path) -> None:
    # A holder that never lets go (a run hung on a dead mount): the waiting run fails after
    # the wait, saying which lock, and its written files are dropped.
    lake = Lake(str(tmp_path))
    key = "snapshot_date=2026-11-20"
    at = dt.datetime(2026, 11, 20, 1, tzinfo=dt.UTC)
    holder = publisher(tmp_path, key, "h")
    try:
        say(holder, "hold")
        assert heard(holder) == "held"
        started = time.monotonic()
        with pytest.raises(LockTimeout, match=rf"_locks/{key}\.lock for over 0\.5 s"):
            _publish_within(lake, key, users_frames([{"id": "w-1"}], [], at)["users"], 0.5)
        assert 0.5 <= time.monotonic() - started < 10
        assert not lake.exists("users", key)
        assert list((tmp_path / "_tmp").glob(f"*.{key}.*")) == []
    finally:
        stop(holder)


def test_a_lock_folder_that_cannot_be_made_fails_the_publish_and_keeps_the_last_one(
    tmp_path,
) -> None:
    # A careless hand (or a sync tool) left a file named `_locks` in the lake: the publish
    # fails, the partition published before stays byte for byte, no temp file is left.
    lake = Lake(str(tmp_path))
    key = "snapshot_date=2026-11-20"
    at = dt.datetime(2026, 11, 20, 1, tzinfo=dt.UTC)
    lake.write_together(key, users_frames([{"id": "u-1"}], [], at), source="test")
    before = (tmp_path / "users" / key / "part-0.parquet").read_bytes()
    shutil.rmtree(tmp_path / "_locks")
    (tmp_path / "_locks").write_text("not a folder")
    with pytest.raises(OSError, match="_locks"):
        lake.write_together(key, users_frames([{"id": "u-2"}], [], at), source="test")
    assert (tmp_path / "users" / key / "part-0.parquet").read_bytes() == before
    assert list((tmp_path / "_tmp").glob(f"*.{key}.*")) == []


@pytest.mark.parametrize(
    "damage", [b"{not json", b"[1]", b'{"timezone": "Europe/Berln"}', b'{"timezone": 7}']
)
def test_a_damaged_zone_file_is_not_used_and_the_next_landing_replaces_it(
    tmp_path, damage: bytes
) -> None:
    """A zone file edited by hand (a typo in the zone, not JSON): read as none, so the views
    keep their zone instead of failing every KPI query, and the next landing writes it."""
    from warehouse.lake import ZONE_FILE

    lake = Lake((tmp_path / "lake").as_uri()).account("emea")
    lake.record_zone("Australia/Sydney")
    assert lake.zone() == "Australia/Sydney"
    path = tmp_path / "lake" / "account_id=emea" / ZONE_FILE
    path.write_bytes(damage)
    assert lake.zone() is None
    lake.record_zone("Australia/Sydney")
    assert lake.zone() == "Australia/Sydney"
    assert not list((tmp_path / "lake").rglob("record-*"))  # no spool file left in the lake


def test_a_family_whose_publish_fails_midway_gets_its_replaced_files_back(tmp_path) -> None:
    # Each file was renamed into place as its writer finished: a rename refused midway (a full
    # disk, a read-only folder, an object store's error) left the tables published before it
    # from the new reading and the rest from the old, for good.
    lake = Lake(str(tmp_path))
    key = "snapshot_date=2026-11-20"
    at = dt.datetime(2026, 11, 20, 1, tzinfo=dt.UTC)
    first = [{"id": "u-1", "name": "Ada", "teams": [{"id": 1, "name": "Sales"}]}]
    lake.write_together(key, users_frames(first, [], at), source="test")
    files = {
        p.relative_to(tmp_path).as_posix(): p.read_bytes() for p in tmp_path.glob(f"*/{key}/*")
    }
    assert len(files) >= 2
    # The users partition's folder is now a file: its publish, the last of the family's, fails.
    shutil.rmtree(tmp_path / "users" / key)
    (tmp_path / "users" / key).write_text("in the way")

    second = users_frames([{"id": "u-2", "teams": [{"id": 2, "name": "Care"}]}], [], at)
    with pytest.raises(OSError):  # the platform's own error for the path
        lake.write_together(key, second, source="test")
    for rel, content in files.items():
        if not rel.startswith("users/"):
            assert (tmp_path / rel).read_bytes() == content, rel
    assert (tmp_path / "users" / key).read_text() == "in the way"
    assert list((tmp_path / "_tmp").iterdir()) == []
