"""Issue 26 on a production pod: Dagster on PostgreSQL, the lake on S3, numbers as tokens.

The canary test (tests/pipelines/test_privacy_canary.py) searches a laptop's stores: the run
storage in SQLite, the lake on disk. A production pod keeps its runs, event logs and job
snapshots in PostgreSQL and its lake in a bucket, and a failed day leaves records in the
bucket's `_rejected/` and a failure file. So here, with `CDRHOUSE_PHONE_NUMBERS=token`:

1. a call to the canary number is placed through the sandbox's write API;
2. `cdrhouse ingest` runs while the API miscounts its totals (every day is withheld: its
   records go to `_rejected/`, searched then, a failure file is written, the exit code is 1);
3. it runs again against an API that adds a field the spec does not name to every CDR (the
   records take the path that searches unknown fields), and lands;
4. `cdrhouse report` and `cdrhouse privacy forget <canary>` run.

Then `SecretSearch` reads every column of every PostgreSQL table (job snapshots decompressed),
every object of the bucket with its metadata, DAGSTER_HOME, the data directory, the report and
everything printed, for the canary's digits and for the privacy key: each is found 0 times.
"""

from __future__ import annotations

import hashlib
import hmac
from datetime import UTC, datetime, time, timedelta
from pathlib import Path

import httpx
import pytest

from connectors.sandbox.config import DEFAULT_API_KEY
from tests.deploy._services import MotoS3, Postgres, deploy_env, search_pod
from tests.support.cli import run_cdrhouse
from tests.support.clock import SessionClock
from tests.support.sandboxes import make_sandbox, place_call
from tests.support.secrets import SecretSearch

CANARY = "4915199988877"
PII_KEY = "pii-key-on-a-pod-7c2e91d04b5a4f38"
TOKEN = hmac.new(PII_KEY.encode(), CANARY.encode(), hashlib.sha256).hexdigest()
LIMIT_S = 600.0


def test_the_canary_and_the_privacy_key_are_in_no_store_of_a_pod(
    tmp_path: Path,
    postgres: Postgres,
    s3: MotoS3,
    new_bucket: str,
    clock: SessionClock,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    day = clock.days_ago(3)
    sandbox = make_sandbox(start_date=day - timedelta(1), days=3, cdrs_per_day=300, now=clock.now)
    database = postgres.create_database()
    argv = ["ingest", "--start", day.isoformat(), "--end", (day + timedelta(1)).isoformat()]
    with sandbox.serve() as handle:
        call_id = place_call(handle.base_url, sandbox, CANARY, datetime.combine(day, time(9), UTC))
        clock.freeze(sandbox)
        env = deploy_env(
            tmp_path,
            api_base_url=handle.base_url,
            api_key=DEFAULT_API_KEY,
            start_date=day - timedelta(1),
            postgres_env=postgres.env(database),
            aws_env=s3.env(),
            lake_uri=f"s3://{new_bucket}/lake",
            extra={"CDRHOUSE_PHONE_NUMBERS": "token", "CDRHOUSE_PII_KEY": PII_KEY},
        )
        for name, value in env.items():  # this process reads the bucket and PostgreSQL too
            if name.startswith(("DAGSTER_", "AWS_")):
                monkeypatch.setenv(name, value)

        faults = f"{handle.base_url}/_sandbox/faults"
        httpx.put(faults, json={"total_mismatch": 1}, timeout=10).raise_for_status()
        withheld = run_cdrhouse(argv, env, limit_s=LIMIT_S)
        # The withheld day's records, in `_rejected/` until the day lands: searched now.
        rejected = [k for k in s3.keys(new_bucket, "lake/") if "/_rejected/" in k]
        for secret in (CANARY, PII_KEY):
            early = SecretSearch(secret)
            early.s3(s3.client(), new_bucket)
            early.assert_clean()
        httpx.put(faults, json={"drift_extra_field": True}, timeout=10).raise_for_status()
        landed = run_cdrhouse(argv, env, limit_s=LIMIT_S)
        report = run_cdrhouse(["report", "--out", str(tmp_path / "report.html")], env, limit_s=300)
        rows = run_cdrhouse(
            ["sql", "--format", "csv", f"SELECT to_phone_number FROM cdrs WHERE id = '{call_id}'"],
            env,
            limit_s=120,
        )
        forget = run_cdrhouse(["privacy", "forget", CANARY], env, limit_s=300)

    assert withheld.code == 1, str(withheld)
    assert landed.code == 0, str(landed)
    assert report.code == 0, str(report)
    assert rows.code == 0, str(rows)
    assert rows.stdout.split() == ["to_phone_number", TOKEN], str(rows)
    assert forget.code == 0, str(forget)
    assert any(k.endswith(".parquet") for k in rejected), rejected
    data = Path(env["CDRHOUSE_DATA_DIR"])
    assert list((data / "failures").glob("*.json")), "the withheld day's failure file"
    [(runs,)] = postgres.query(database, "select count(*) from runs")
    assert isinstance(runs, int)
    assert runs >= 2

    output = "\n".join(str(r) for r in (withheld, landed, report, rows, forget))
    for secret in (CANARY, PII_KEY):
        search = search_pod(secret, postgres, database, s3, new_bucket, env)
        search.path(tmp_path / "report.html", "report")
        search.text("every command's output", output)
        print(search.summary())
        assert search.places["PostgreSQL cells"] > 100
        assert search.places["S3 objects"] > 0 < search.places["Parquet columns"]
        assert search.blobs > 0
        search.assert_clean()
