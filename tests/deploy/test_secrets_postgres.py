"""The API key is in no store of a production pod: Dagster on PostgreSQL, the lake on S3.

`cdrhouse ingest` runs against a server that echoes the key in its 500, 422 and 401 bodies
(tests.support.echoing), then `SecretSearch` (tests.support.secrets) reads every column of every
PostgreSQL table (job snapshots are zlib-compressed `bytea`, and PostgreSQL may compress large
values itself: a `pg_dump` would not show them), every object of the bucket with its
metadata and tags, DAGSTER_HOME, the data directory and everything printed or logged.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from connectors.sandbox import Sandbox, SandboxConfig
from connectors.sandbox.config import ALL_SCOPES
from tests.deploy._services import MotoS3, Postgres, deploy_env, search_pod
from tests.support.clock import SessionClock
from tests.support.echoing import KeyEcho, ingest_through_echo, serve_app

SECRET_KEY = "sk-DEPLOY-3f9d0c7be21a4e58"
LAKE_PREFIX = "lake"


def test_the_api_key_is_in_no_store_after_ingests_on_postgresql_and_s3(
    tmp_path: Path,
    postgres: Postgres,
    s3: MotoS3,
    new_bucket: str,
    clock: SessionClock,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    days = 5
    config = SandboxConfig(
        seed=31,
        cdrs_per_day=120,
        start_date=clock.days_ago(days),
        days=days,
        api_keys={SECRET_KEY: ALL_SCOPES},
    )
    sandbox = Sandbox(config)
    clock.freeze(sandbox)
    day = clock.days_ago(4)
    stub = KeyEcho(
        sandbox.app,
        invalid_days=frozenset({clock.days_ago(3).isoformat()}),
        unauthorized_days=frozenset({clock.days_ago(2).isoformat()}),
    )
    database = postgres.create_database()
    with serve_app(stub) as base_url:
        env = deploy_env(
            tmp_path,
            api_base_url=base_url,
            api_key=SECRET_KEY,
            start_date=config.start_date,
            postgres_env=postgres.env(database),
            aws_env=s3.env(),
            lake_uri=f"s3://{new_bucket}/{LAKE_PREFIX}",
        )
        # What this process resolves from `os.environ` is the pod's: DAGSTER_HOME, the
        # instance file's DAGSTER_PG_*, s3fs's AWS_*.
        for name, value in env.items():
            if name.startswith(("DAGSTER_", "AWS_")):
                monkeypatch.setenv(name, value)
        # Without the snapshot job (the SQLite test runs it): its runs only add S3 writes.
        ingest = ingest_through_echo(env, day, snapshots=False)

    assert ingest.codes == [1, 1], ingest.output
    assert "ok   " + day.isoformat() in ingest.output, ingest.output
    assert "ValidationFailedError" in ingest.output
    assert "AuthenticationError" in ingest.output
    assert {500, 422, 401} <= set(stub.answered)
    [(runs,)] = postgres.query(database, "select count(*) from runs")
    assert runs == 3
    home, data = Path(env["DAGSTER_HOME"]), Path(env["CDRHOUSE_DATA_DIR"])
    assert not list(home.rglob("*.db")), "the runs are in PostgreSQL, not in SQLite"
    # The connector's retry warnings of the echoed 500s are in the run's log (the instance's
    # managed loggers), so the search below reads them too.
    [(retries,)] = postgres.query(
        database, "select count(*) from event_logs where event like '%error=ServerError%'"
    )
    assert isinstance(retries, int)
    assert retries > 0

    search = search_pod(SECRET_KEY, postgres, database, s3, new_bucket, env)
    search.text("stdout and stderr", ingest.output)
    search.texts("log record", ingest.logs)
    print(search.summary())
    # It read the stores, and inside them: the job snapshots are zlib blobs in PostgreSQL.
    assert search.places["PostgreSQL cells"] > 100
    assert search.places["S3 objects"] > 0 < search.places["Parquet columns"]
    assert search.places["S3 metadata"] > 0 < search.places["Parquet metadata"]
    assert len(list((data / "failures").glob("*.json"))) == 2
    assert search.blobs > 0
    search.assert_clean()
