"""Two runs of one day on one host, the lake on object storage (moto's S3 server over HTTP):
the second's publish waits for the first's, as on disk (`Lake.publishing`); the lock is a file
of the host's temp dir, one per lake, since the bucket has none."""

from __future__ import annotations

import datetime as dt
import threading

import pytest

from tests.deploy._services import MotoS3
from warehouse.lake import Lake
from warehouse.snapshots import users_frames

KEY = "snapshot_date=2026-11-20"
AT = dt.datetime(2026, 11, 20, 1, tzinfo=dt.UTC)


@pytest.fixture
def aws(s3: MotoS3, monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in s3.env().items():
        monkeypatch.setenv(name, value)


def test_a_publish_to_an_object_store_waits_for_another_of_the_same_key(
    aws: None, new_bucket: str
) -> None:
    first, second = Lake(f"s3://{new_bucket}/lake"), Lake(f"s3://{new_bucket}/lake")
    other_lake = Lake(f"s3://{new_bucket}/other")
    writing = threading.Thread(
        target=second.write_together,
        args=(KEY, users_frames([{"id": "second"}], [], AT)),
        kwargs={"source": "test"},
    )
    with first.publishing(KEY):
        # Another lake (or account) of the same bucket is not held back.
        other_lake.write_together(KEY, users_frames([{"id": "o"}], [], AT), source="test")
        writing.start()
        writing.join(timeout=3.0)
        assert writing.is_alive()
        assert not second.exists("users", KEY)
    writing.join(timeout=60)
    assert not writing.is_alive()
    users = second.read("users", KEY)
    assert users is not None
    assert users["id"].to_list() == ["second"]
