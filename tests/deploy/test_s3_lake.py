"""The lake on object storage: moto's S3 server over HTTP, only the standard AWS_* variables.

What a writer of an `s3://` lake must guarantee: a partition is replaced whole or not at all,
a failed or killed writer leaves no visible object and no multipart upload, and writers of
different partitions never clash. (Reading the lake from other processes and engines is in
test_no_shared_disk.py.)
"""

from __future__ import annotations

import contextlib
import datetime as dt
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import polars as pl
import pytest

from connectors.sandbox import SandboxConfig
from connectors.sandbox.config import DEFAULT_API_KEY
from pipelines.cdr_day import NORMALIZED_TABLES, RAW_COLUMNS, published_counts
from tests.deploy._services import MotoS3
from tests.support.clock import SessionClock
from tests.support.paths import REPO_ROOT
from tests.support.processes import stop_process
from tests.support.served import serve_sandbox
from tests.support.sms_records import decoded_page, sms_record
from warehouse.decode import narrow
from warehouse.lake import MARKER_FILE, Lake, LakeSourceConflict, PublishGroup
from warehouse.normalize import normalize_decoded

DAY = dt.date(2026, 11, 20)
KEY = f"date={DAY}"


@pytest.fixture
def aws(s3: MotoS3, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """This process sees the S3 server through the standard variables only."""
    env = s3.env()
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return env


def raw_frame(ids: list[str]) -> pl.DataFrame:
    return pl.DataFrame(
        {
            "id": ids,
            "type": ["call"] * len(ids),
            "started_at_raw": ["x"] * len(ids),
            "record": ["{}"] * len(ids),
            "date": [DAY] * len(ids),
        }
    )


def multipart_uploads(s3: MotoS3, bucket: str) -> list[str]:
    listed = s3.client().list_multipart_uploads(Bucket=bucket)
    return sorted(u["Key"] for u in listed.get("Uploads", []))


def test_partition_roundtrip_and_provenance_on_s3(aws, s3: MotoS3, new_bucket: str) -> None:
    lake = Lake(f"s3://{new_bucket}/lake")
    assert lake.write("raw_cdrs", KEY, raw_frame(["a", "b"]), source="acme.example.com") == 2
    assert s3.keys(new_bucket) == [
        "lake/_cdrhouse_lake.json",
        f"lake/raw_cdrs/{KEY}/part-0.parquet",
    ]
    back = lake.read("raw_cdrs", KEY)
    assert back is not None
    assert back.equals(raw_frame(["a", "b"]))
    assert lake.partitions("raw_cdrs") == [KEY]
    assert lake.source() == "acme.example.com"
    assert lake.partition_source("raw_cdrs", KEY) == "acme.example.com"

    # Another source is refused before anything is written.
    before = s3.keys(new_bucket)
    with pytest.raises(LakeSourceConflict, match=r"'sandbox:7'.*'acme\.example\.com'"):
        lake.write("raw_cdrs", "date=2026-11-21", raw_frame(["x"]), source="sandbox:7")
    assert s3.keys(new_bucket) == before


def test_of_two_first_writers_of_different_sources_exactly_one_claims_the_lake(
    aws, s3: MotoS3, new_bucket: str
) -> None:
    uri = f"s3://{new_bucket}/lake"
    first, second = Lake(uri), Lake(uri)
    # Both looked before either wrote: neither saw a source.
    assert first.source() is None
    assert second.source() is None
    first.claim("acme.example.com")
    # The loser's marker write is a conditional PUT that the store refuses, silently...
    second.store.create_exclusive(MARKER_FILE, b'{"source": "sandbox:7"}')
    assert Lake(uri).source() == "acme.example.com"
    # ...and its claim reads the winner back and refuses.
    with pytest.raises(LakeSourceConflict, match="acme"):
        second.claim("sandbox:7")
    second.claim("acme.example.com")  # the same source is welcome


def test_a_rejected_partition_is_kept_out_of_every_readers_way_on_s3(
    aws, s3: MotoS3, new_bucket: str
) -> None:
    lake = Lake(f"s3://{new_bucket}/lake")
    lake.write("raw_cdrs", KEY, raw_frame(["old1", "old2"]), source="sandbox:7")
    published = s3.client().get_object(Bucket=new_bucket, Key=f"lake/raw_cdrs/{KEY}/part-0.parquet")
    with lake.writer("raw_cdrs", KEY, source="sandbox:7") as w:
        w.write(raw_frame(["new1", "new1", "new2"]))
        w.reject()
    rejected = f"lake/_rejected/raw_cdrs/{KEY}/part-0.parquet"
    assert s3.keys(new_bucket) == [
        "lake/_cdrhouse_lake.json",
        rejected,
        f"lake/raw_cdrs/{KEY}/part-0.parquet",
    ]
    now = s3.client().get_object(Bucket=new_bucket, Key=f"lake/raw_cdrs/{KEY}/part-0.parquet")
    assert now["ETag"] == published["ETag"]
    assert lake.partition_url("raw_cdrs", KEY, rejected=True) == f"s3://{new_bucket}/{rejected}"
    back = pl.concat(lake.iter_batches("raw_cdrs", KEY, rejected=True))
    assert back["id"].to_list() == ["new1", "new1", "new2"]
    # No listing or glob reads them as the day's.
    assert lake.partitions("raw_cdrs") == [KEY]
    assert set(lake.store.list_all()) == {"raw_cdrs"}
    for glob in (lake.table_glob("raw_cdrs"), lake.files_glob()):
        assert lake.fs.glob(glob) == [f"{new_bucket}/lake/raw_cdrs/{KEY}/part-0.parquet"]
    assert lake.delete_partition("raw_cdrs", KEY, rejected=True)
    assert rejected not in s3.keys(new_bucket)


def test_failed_write_leaves_the_previous_object_and_nothing_else(
    aws, s3: MotoS3, new_bucket: str
) -> None:
    lake = Lake(f"s3://{new_bucket}/lake")
    lake.write("raw_cdrs", KEY, raw_frame(["old1", "old2"]), source="sandbox:7")
    before = s3.keys(new_bucket)

    def failing_run() -> None:
        with lake.writer("raw_cdrs", KEY) as w:
            w.write(raw_frame(["new1"]))  # a first row group is already spooled
            raise RuntimeError("killed mid-partition")

    with pytest.raises(RuntimeError, match="killed"):
        failing_run()

    assert s3.keys(new_bucket) == before
    back = lake.read("raw_cdrs", KEY)
    assert back is not None
    assert back["id"].to_list() == ["old1", "old2"]
    assert multipart_uploads(s3, new_bucket) == []


def test_a_group_whose_publish_fails_midway_puts_the_replaced_object_back(
    aws, s3: MotoS3, new_bucket: str
) -> None:
    """A day's files are published as one (`PublishGroup`): a failure on one puts back the
    objects already replaced, from their copies kept on the store (server-side)."""
    lake = Lake(f"s3://{new_bucket}/lake")
    lake.write("raw_cdrs", KEY, raw_frame(["old1", "old2"]), source="sandbox:7")
    before = set(s3.keys(new_bucket))
    group = PublishGroup(lake)
    with lake.writer("raw_cdrs", KEY, group=group) as w:
        w.write(raw_frame(["new1"]))
    # Published second: its spooled file is gone (a cleanup of a full disk, say).
    group.files.append((lake.store.spool_dir() / "gone.parquet", "cdrs/date=x/p.parquet"))
    with pytest.raises(FileNotFoundError):
        group.__exit__(None, None, None)
    assert set(s3.keys(new_bucket)) == before
    back = lake.read("raw_cdrs", KEY)
    assert back is not None
    assert back["id"].to_list() == ["old1", "old2"]

    # Published whole: the new version, and no kept copy left.
    with PublishGroup(lake) as group, lake.writer("raw_cdrs", KEY, group=group) as w:
        w.write(raw_frame(["new1"]))
    assert set(s3.keys(new_bucket)) == before
    again = lake.read("raw_cdrs", KEY)
    assert again is not None
    assert again["id"].to_list() == ["new1"]


def test_a_stale_multipart_upload_of_the_key_is_aborted_when_it_is_rewritten(
    aws, s3: MotoS3, new_bucket: str
) -> None:
    # What a writer SIGKILLed during a big (multipart) upload leaves behind.
    key = f"lake/raw_cdrs/{KEY}/part-0.parquet"
    s3.client().create_multipart_upload(Bucket=new_bucket, Key=key)
    other = s3.client().create_multipart_upload(Bucket=new_bucket, Key="elsewhere/x.parquet")
    assert multipart_uploads(s3, new_bucket) == ["elsewhere/x.parquet", key]

    Lake(f"s3://{new_bucket}/lake").write("raw_cdrs", KEY, raw_frame(["a"]), source="sandbox:7")

    # Only the rewritten key's upload is aborted; another key's upload is none of ours.
    assert multipart_uploads(s3, new_bucket) == ["elsewhere/x.parquet"]
    s3.client().abort_multipart_upload(
        Bucket=new_bucket, Key="elsewhere/x.parquet", UploadId=other["UploadId"]
    )


def test_concurrent_writers_never_clash_and_readers_see_old_or_new(
    aws, s3: MotoS3, new_bucket: str
) -> None:
    uri = f"s3://{new_bucket}/lake"
    Lake(uri).write("raw_cdrs", KEY, raw_frame(["v0"] * 500), source="sandbox:7")
    days = [DAY + dt.timedelta(days=i) for i in range(1, 9)]
    seen: set[tuple[str, ...]] = set()
    stop = threading.Event()
    replaced = threading.Event()

    read_v0 = threading.Event()  # the reader has read before the writers start
    read_after = threading.Event()  # ... and again, wholly after the last replacement

    def reader() -> None:
        lake = Lake(uri)
        while not stop.is_set():
            after_replace = replaced.is_set()
            frame = lake.read("raw_cdrs", KEY)
            assert frame is not None
            seen.add((*sorted(set(frame["id"].to_list())), str(frame.height)))
            read_v0.set()
            if after_replace:
                read_after.set()

    def write_day(day: dt.date) -> None:
        Lake(uri).write(
            "raw_cdrs",
            f"date={day}",
            raw_frame([f"{day}-{i}" for i in range(300)]),
            source="sandbox:7",
        )

    def replace() -> None:
        for version in range(1, 6):
            Lake(uri).write("raw_cdrs", KEY, raw_frame([f"v{version}"] * 500), source="sandbox:7")
        replaced.set()

    with ThreadPoolExecutor(max_workers=6) as pool:
        read = pool.submit(reader)
        # Deadlines only: each wait ends when the reader gets there (a read that fails ends
        # the reader, hence the check that it is still running).
        assert read_v0.wait(120) or read.done(), "the reader never read"
        futures = [pool.submit(write_day, d) for d in days] + [pool.submit(replace)]
        for f in futures:
            f.result()
        assert replaced.is_set()
        assert read_after.wait(120) or read.done(), "the reader never read after the writers"
        stop.set()
        read.result()

    lake = Lake(uri)
    assert lake.partitions("raw_cdrs") == sorted([KEY, *(f"date={d}" for d in days)])
    for day in days:
        frame = lake.read("raw_cdrs", f"date={day}")
        assert frame is not None
        assert frame.height == 300
    # Every read saw exactly one whole version: 500 rows of a single id.
    assert seen, "the reader never read"
    assert all(len(s) == 2 and s[1] == "500" for s in seen), seen
    assert ("v0", "500") in seen
    assert ("v5", "500") in seen


def _cli(args: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pipelines.cli", *args],
        env={**env, "PYTHONPATH": str(REPO_ROOT)},
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=180,
    )


@pytest.fixture
def slow_api(clock: SessionClock) -> Iterator[str]:
    """A sandbox slow enough (latency per request) that a kill lands mid-partition."""
    config = SandboxConfig(seed=5, cdrs_per_day=600, start_date=clock.days_ago(3), days=3)
    with serve_sandbox(config, clock) as served:  # frozen: the run and the rerun see the same calls
        yield served.base_url
        served.reset()


def test_sigkill_while_writing_an_s3_partition_then_rerun_is_exact(
    aws, s3: MotoS3, new_bucket: str, slow_api: str, clock: SessionClock, tmp_path
) -> None:
    day = clock.days_ago(2)
    spool = tmp_path / "tmp"
    spool.mkdir()
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("CC_", "CDRHOUSE_", "AWS_"))},
        **s3.env(),
        "CC_API_BASE_URL": slow_api,
        "CC_API_KEY": DEFAULT_API_KEY,
        "CDRHOUSE_DATA_DIR": str(tmp_path / "data"),
        "CDRHOUSE_LAKE_URI": f"s3://{new_bucket}/lake",
        "CDRHOUSE_START_DATE": (day - dt.timedelta(days=1)).isoformat(),
        "TMPDIR": str(spool),  # where partitions bound for S3 are spooled
        "CDRHOUSE_PHONE_NUMBERS": "raw",
    }
    args = ["ingest", "--start", day.isoformat(), "--end", str(day + dt.timedelta(1))]
    args.append("--no-snapshots")
    first = _cli(args, env, tmp_path)
    assert first.returncode == 0, first.stderr
    key = f"lake/raw_cdrs/date={day}/part-0.parquet"
    client = s3.client()
    before = {
        k: client.get_object(Bucket=new_bucket, Key=k)["Body"].read() for k in s3.keys(new_bucket)
    }
    assert key in before

    # Slow every request, start a re-run, and kill it while raw_cdrs is spooling the day.
    httpx.put(
        f"{slow_api}/_sandbox/faults", json={"latency_ms": 150}, timeout=10
    ).raise_for_status()
    proc = subprocess.Popen(
        [sys.executable, "-m", "pipelines.cli", *args],
        env={**env, "PYTHONPATH": str(REPO_ROOT)},
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    spooled = spool / "cdrhouse-spool"

    def spooled_bytes() -> int:
        total = 0
        for file in spooled.glob("raw_cdrs.*.parquet"):
            with contextlib.suppress(FileNotFoundError):  # published meanwhile
                total += file.stat().st_size
        return total

    # Kill once a page is in the spooled file (past the 4-byte Parquet header): what the
    # file holds decides, not how long the machine took to get there.
    deadline = time.monotonic() + 120
    try:
        while spooled_bytes() <= len(b"PAR1"):
            assert proc.poll() is None, "the run ended before it wrote a page"
            assert time.monotonic() < deadline, "raw_cdrs never wrote a page"
            time.sleep(0.01)
        assert proc.poll() is None
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()  # SIGKILL: this returns
    finally:
        stop_process(proc)  # when an assertion failed first
    assert proc.returncode == -signal.SIGKILL

    # The previous partition is still there, byte for byte; nothing partial is visible.
    after = {
        k: client.get_object(Bucket=new_bucket, Key=k)["Body"].read() for k in s3.keys(new_bucket)
    }
    assert after == before
    assert multipart_uploads(s3, new_bucket) == []

    httpx.put(f"{slow_api}/_sandbox/faults", json={}, timeout=10).raise_for_status()
    rerun = _cli(args, env, tmp_path)
    assert rerun.returncode == 0, rerun.stderr
    frame = Lake(f"s3://{new_bucket}/lake").read("cdrs", f"date={day}")
    assert frame is not None
    truth = httpx.get(
        f"{slow_api}/api/v4/reporting/cdrs",
        params={
            "started_at[gte]": f"{day}T00:00:00Z",
            "started_at[lt]": f"{day + dt.timedelta(1)}T00:00:00Z",
            "limit": 1,
        },
        headers={"Authorization": f"Bearer {DEFAULT_API_KEY}"},
        timeout=30,
    ).json()["metadata"]["total"]
    assert frame["id"].n_unique() == frame.height == truth


def test_the_days_counts_of_the_shrink_check_are_read_from_s3_footers(aws, new_bucket: str) -> None:
    """`cdrs_day_not_shrunk` reads the published day's footers at once (threads over s3fs);
    a damaged raw_cdrs object is counted by its cdrs and quarantine, as on disk."""
    lake = Lake(f"s3://{new_bucket}/lake")
    group = decoded_page(sms_record(1), sms_record(2), sms_record(3, cost="1.0"))
    lake.write("raw_cdrs", KEY, narrow(group, RAW_COLUMNS), source="sandbox:7")
    for table, frame in normalize_decoded(group).tables().items():
        lake.write(table, KEY, frame, source="sandbox:7")
    tables, log = tuple(NORMALIZED_TABLES), logging.getLogger("test")
    typed = {"cdrs": 2, "cdr_sms": 2, "cdr_calls": 0, "cdr_conversations": 0, "cdr_hlr_lookups": 0}
    assert published_counts(lake, KEY, tables, log) == (3, typed)
    assert published_counts(lake, "date=2026-11-21", tables, log) == (None, {})
    lake.fs.pipe_file(lake.partition_url("raw_cdrs", KEY), b"PAR1 not a footer PAR1")
    assert published_counts(lake, KEY, tables, log) == (3, typed)
