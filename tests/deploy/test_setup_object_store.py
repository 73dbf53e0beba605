"""Object-store setup mistakes: `cdrhouse ingest` exits 2 within 10 s, in one line, writing nothing.

Against moto's S3 server with authentication enforced, as AWS does: an IAM user with an `s3:*`
policy owns the one existing bucket; unknown access keys and wrong secrets are refused
(`InvalidAccessKeyId`, `SignatureDoesNotMatch`). moto counts the first requests as
unauthenticated (`INITIAL_NO_AUTH_ACTION_COUNT`); the fixture creates the user and the bucket
then, and turns authentication on with `/moto-api/reset-auth`, before any test runs.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import boto3
import httpx
import pytest

from tests.deploy._services import AWS_TEST_ENV, start_moto
from tests.support.cli import (
    SETUP_ERROR_LIMIT_S,
    CliRun,
    assert_one_line_setup_error,
    clean_env,
    run_cdrhouse,
    tree,
)
from tests.support.clock import SessionClock
from warehouse.stores import ObjectStore

BUCKET = "acme-cdr-lake"
ALLOW_S3 = {
    "Version": "2012-10-17",
    "Statement": [{"Effect": "Allow", "Action": "s3:*", "Resource": "*"}],
}


@dataclass(frozen=True)
class AuthS3:
    """moto with authentication on: the endpoint, a valid key pair, its one bucket."""

    endpoint_url: str
    key_id: str
    secret: str

    def env(self, key_id: str | None = None, secret: str | None = None) -> dict[str, str]:
        return {
            "AWS_REGION": AWS_TEST_ENV["AWS_REGION"],
            "AWS_ENDPOINT_URL": self.endpoint_url,
            "AWS_ACCESS_KEY_ID": self.key_id if key_id is None else key_id,
            "AWS_SECRET_ACCESS_KEY": self.secret if secret is None else secret,
        }

    def client(self) -> Any:
        return boto3.client(
            "s3",
            endpoint_url=self.endpoint_url,
            region_name=AWS_TEST_ENV["AWS_REGION"],
            aws_access_key_id=self.key_id,
            aws_secret_access_key=self.secret,
        )

    def keys(self, bucket: str = BUCKET) -> list[str]:
        listed = self.client().list_objects_v2(Bucket=bucket)
        return sorted(o["Key"] for o in listed.get("Contents", []))

    def buckets(self) -> list[str]:
        return sorted(b["Name"] for b in self.client().list_buckets()["Buckets"])


@pytest.fixture(scope="module")
def auth_s3(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AuthS3]:
    with start_moto(tmp_path_factory.mktemp("moto-auth")) as server:
        admin = {
            "endpoint_url": server.endpoint_url,
            "region_name": AWS_TEST_ENV["AWS_REGION"],
            "aws_access_key_id": "bootstrap",
            "aws_secret_access_key": "bootstrap",
        }
        iam = boto3.client("iam", **admin)
        iam.create_user(UserName="cdrhouse")
        iam.put_user_policy(
            UserName="cdrhouse", PolicyName="lake", PolicyDocument=json.dumps(ALLOW_S3)
        )
        key = iam.create_access_key(UserName="cdrhouse")["AccessKey"]
        boto3.client("s3", **admin).create_bucket(Bucket=BUCKET)
        # From here on every request must be signed by a key moto's IAM knows.
        httpx.post(f"{server.endpoint_url}/moto-api/reset-auth", content=b"0").raise_for_status()
        s3 = AuthS3(server.endpoint_url, key["AccessKeyId"], key["SecretAccessKey"])
        with pytest.raises(Exception, match="InvalidAccessKeyId"):
            boto3.client("s3", **admin).list_objects_v2(Bucket=BUCKET)
        assert s3.keys() == []
        yield s3


def _ingest(
    clock: SessionClock,
    workdir: Path,
    aws_env: dict[str, str],
    lake_uri: str,
    limit_s: float = SETUP_ERROR_LIMIT_S,
) -> CliRun:
    day = clock.days_ago(2)
    env = clean_env(
        CC_API_BASE_URL="sandbox",
        CDRHOUSE_DATA_DIR=str(workdir / "data"),
        CDRHOUSE_SANDBOX_CDRS_PER_DAY="20",
        CDRHOUSE_LAKE_URI=lake_uri,
        # No credentials from this machine's files or instance metadata: only what the test sets.
        AWS_SHARED_CREDENTIALS_FILE=str(workdir / "no-credentials"),
        AWS_CONFIG_FILE=str(workdir / "no-config"),
        AWS_EC2_METADATA_DISABLED="true",
        **aws_env,
    )
    argv = ["ingest", "--start", str(day), "--end", str(day + timedelta(1)), "--no-snapshots"]
    return run_cdrhouse(argv, env, limit_s)


def test_missing_bucket_is_named_in_one_line(
    auth_s3: AuthS3, clock: SessionClock, tmp_path: Path
) -> None:
    run = _ingest(clock, tmp_path, auth_s3.env(), "s3://no-such-bucket-7f3a/lake")
    assert_one_line_setup_error(run, "'no-such-bucket-7f3a'", "does not exist")
    assert auth_s3.buckets() == [BUCKET]  # nothing created
    assert auth_s3.keys() == []
    assert tree(tmp_path) == []  # no warehouse.duckdb, no spool file, no failure file


def test_the_probe_passes_valid_credentials_and_leaves_nothing(
    auth_s3: AuthS3, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The control: with the right key and bucket the same probe (list, write, delete a temp
    key, under enforced authentication) passes, and the bucket is as empty as before."""
    for name, value in auth_s3.env().items():
        monkeypatch.setenv(name, value)
    ObjectStore(f"s3://{BUCKET}/lake").probe()
    assert auth_s3.keys() == []


@pytest.mark.parametrize(
    ("credentials", "needles"),
    [
        ({"AWS_ACCESS_KEY_ID": "", "AWS_SECRET_ACCESS_KEY": ""}, ("no S3 credentials",)),
        (
            {"AWS_ACCESS_KEY_ID": "AKIAUNKNOWN000000000", "AWS_SECRET_ACCESS_KEY": "x" * 40},
            ("InvalidAccessKeyId", "AWS_ACCESS_KEY_ID"),
        ),
        ({"AWS_SECRET_ACCESS_KEY": "wrong-secret"}, ("SignatureDoesNotMatch",)),
    ],
    ids=["absent", "unknown-key-id", "wrong-secret"],
)
def test_absent_or_wrong_credentials_fail_in_one_line(
    auth_s3: AuthS3,
    clock: SessionClock,
    tmp_path: Path,
    credentials: dict[str, str],
    needles: tuple[str, ...],
) -> None:
    aws_env = {**auth_s3.env(), **credentials}
    aws_env = {k: v for k, v in aws_env.items() if v}  # "" = not set at all
    run = _ingest(clock, tmp_path, aws_env, f"s3://{BUCKET}/lake")
    line = assert_one_line_setup_error(run, f"s3://{BUCKET}/lake", *needles)
    assert "wrong-secret" not in line
    assert auth_s3.keys() == []  # no marker, no partition, no probe object left behind
    assert tree(tmp_path) == []
