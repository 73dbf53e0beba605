"""Issue 26 end to end, through the commands a user runs: a canary number placed through the
sandbox's write API (`POST /voice/calls`: a German mobile number no generator produces) is
landed by `cdrhouse ingest` under `token`, then erased by `cdrhouse privacy forget`.

After the ingest and `cdrhouse report`, the canary's digits are found 0 times in the lake
(every Parquet value and key-value metadata, `raw_cdrs` included), `warehouse.duckdb`,
DAGSTER_HOME (decompressed: `SecretSearch`), the report, the output and any failure file,
while its token, computed here by HMAC from the number, is in `cdrs`. After the erasure no row
holds the token, the partitions that never held it keep their bytes, and a re-ingest of the
day does not bring it back."""

from __future__ import annotations

import csv
import hashlib
import hmac
import io
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from pathlib import Path

import pytest

from connectors.sandbox import Sandbox
from connectors.sandbox.config import DEFAULT_API_KEY
from tests.support.cli import clean_env, run_cdrhouse
from tests.support.clock import SessionClock
from tests.support.paths import LOCAL_INSTANCE_YAML
from tests.support.sandboxes import make_sandbox, place_call
from tests.support.secrets import SecretSearch

CANARY = "4915199988877"
KEY = "canary-pii-key-3c1e9b7a5d2f4e6a8b0c"
TOKEN = hmac.new(KEY.encode(), CANARY.encode(), hashlib.sha256).hexdigest()
LIMIT_S = 600.0


@dataclass
class Landed:
    sandbox: Sandbox
    base_url: str
    day: date
    call_id: str
    data_dir: Path
    home: Path
    env: dict[str, str]
    output: str


def _ingest(landed: Landed) -> str:
    day = landed.day
    argv = ["ingest", "--start", day.isoformat(), "--end", (day + timedelta(1)).isoformat()]
    run = run_cdrhouse(argv, landed.env, limit_s=LIMIT_S)
    assert run.code == 0, str(run)
    return run.stdout + run.stderr


def _sql(landed: Landed, query: str) -> list[dict[str, str]]:
    run = run_cdrhouse(["sql", "--format", "csv", query], landed.env, limit_s=120)
    assert run.code == 0, str(run)
    return list(csv.DictReader(io.StringIO(run.stdout)))


@pytest.fixture(scope="module")
def landed(clock: SessionClock, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Landed]:
    day = clock.days_ago(3)
    sandbox = make_sandbox(start_date=day - timedelta(1), days=3, cdrs_per_day=800, now=clock.now)
    root = tmp_path_factory.mktemp("canary")
    data_dir, home = root / "data", root / "home"
    home.mkdir()
    (home / "dagster.yaml").write_text(LOCAL_INSTANCE_YAML.read_text())
    with sandbox.serve() as handle:
        call_id = place_call(handle.base_url, sandbox, CANARY, datetime.combine(day, time(9), UTC))
        clock.freeze(sandbox)
        env = clean_env(
            CC_API_BASE_URL=handle.base_url,
            CC_API_KEY=DEFAULT_API_KEY,
            CDRHOUSE_DATA_DIR=str(data_dir),
            CDRHOUSE_START_DATE=(day - timedelta(1)).isoformat(),
            DAGSTER_HOME=str(home),
            CDRHOUSE_PHONE_NUMBERS="token",
            CDRHOUSE_PII_KEY=KEY,
        )
        landed = Landed(sandbox, handle.base_url, day, call_id, data_dir, home, env, "")
        landed.output = _ingest(landed)
        report = run_cdrhouse(["report", "--out", str(root / "report.html")], env, limit_s=300)
        assert report.code == 0, str(report)
        landed.output += report.stdout + report.stderr
        yield landed


def test_the_canary_is_nowhere_after_ingest_and_report_and_its_token_is_in_cdrs(
    landed: Landed,
) -> None:
    search = SecretSearch(CANARY)
    search.path(landed.data_dir, "data dir")  # the lake, warehouse.duckdb, failure files
    search.path(landed.home, "DAGSTER_HOME")
    search.path(landed.data_dir.parent / "report.html", "report")
    search.text("ingest and report output", landed.output)
    print(search.summary())
    assert search.places["Parquet columns"] > 0
    assert search.places["SQLite cells"] > 100  # the run storage, job snapshots decompressed
    assert search.blobs > 0
    search.assert_clean()
    rows = _sql(
        landed,
        "SELECT to_phone_number, to_phone_country, to_phone_calling_code, pii_forgotten "
        f"FROM cdrs WHERE id = '{landed.call_id}'",
    )
    assert rows == [
        {
            "to_phone_number": TOKEN,
            "to_phone_country": "DE",
            "to_phone_calling_code": "49",
            "pii_forgotten": "false",
        }
    ]


def _lake_parquet(landed: Landed) -> dict[str, bytes]:
    lake = landed.data_dir / "lake"
    return {str(p.relative_to(lake)): p.read_bytes() for p in sorted(lake.rglob("*.parquet"))}


def _holds_token(rel: str, data: bytes) -> bool:
    search = SecretSearch(TOKEN)
    search.parquet(data, rel)  # values and metadata: the pages are compressed
    return search.found > 0


def test_forget_erases_the_canary_and_a_re_ingest_does_not_bring_it_back(
    landed: Landed,
) -> None:
    before = _lake_parquet(landed)
    holding = {rel for rel, data in before.items() if _holds_token(rel, data)}
    assert any("raw_cdrs" in rel for rel in holding)
    forget = run_cdrhouse(["privacy", "forget", "+49 151 99988877"], landed.env, limit_s=300)
    assert forget.code == 0, str(forget)
    assert CANARY not in forget.stdout + forget.stderr
    assert TOKEN[:12] in forget.stdout
    after = _lake_parquet(landed)
    # Partitions that never held the token keep their bytes.
    assert {r: d for r, d in after.items() if r not in holding} == {
        r: d for r, d in before.items() if r not in holding
    }
    search = SecretSearch(TOKEN)
    for rel, data in after.items():
        search.parquet(data, rel)
    search.assert_clean()
    erased = f"SELECT to_phone_number, pii_forgotten FROM cdrs WHERE id = '{landed.call_id}'"
    assert _sql(landed, erased) == [{"to_phone_number": "", "pii_forgotten": "true"}]

    _ingest(landed)  # the day pulled from the API again, whole

    search = SecretSearch(TOKEN)
    for rel, data in _lake_parquet(landed).items():
        search.parquet(data, rel)
    search.assert_clean()
    assert _sql(landed, erased) == [{"to_phone_number": "", "pii_forgotten": "true"}]
