"""Non-idempotent writes are never sent twice, and the API key is never written anywhere, even
when the server echoes it back (tests.support.echoing), compressed or not
(tests.support.secrets)."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import traceback
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from pathlib import Path

import dagster as dg
import pytest

from connectors.contact_center import ContactCenterClient
from connectors.contact_center.errors import (
    ContactCenterError,
    ResponseShapeError,
    RetriableAPIError,
)
from connectors.sandbox import FaultConfig
from models.resources import SendSms, StartCall
from pipelines.cli import run_ingest
from tests.reliability.conftest import LEDGER, SECRET_KEY
from tests.support.echoing import EchoedIngest, KeyEcho, ingest_through_echo, serve_app
from tests.support.secrets import SecretSearch
from tests.support.served import ServedSandbox

SMS_PATH = "/api/v4/messaging/sms"
CALLS_PATH = "/api/v4/voice/calls"
SENDS = 20
SKILLS_PATH = "/api/v4/routing/skills"


def test_sms_and_calls_are_never_sent_twice_under_resets_and_5xx(served: ServedSandbox) -> None:
    async def scenario() -> tuple[int, int, list[str]]:
        async with ContactCenterClient(served.resource().settings()) as client:
            user_id = (await client.list_users(limit=1)).items[0].id
            served.sandbox.faults = FaultConfig(
                reset_rate=0.3, error_5xx_rate=0.3, paths=(SMS_PATH, CALLS_PATH)
            )
            ok_sms = ok_calls = 0
            errors: list[str] = []
            for n in range(SENDS):
                try:
                    await client.send_sms(SendSms.text("4915112345678", f"reminder {n}"))
                    ok_sms += 1
                except RetriableAPIError as exc:
                    errors.append(type(exc).__name__)
                try:
                    await client.start_call(
                        StartCall(phone_number="4915112345678", user_id=user_id)
                    )
                    ok_calls += 1
                except ContactCenterError as exc:
                    errors.append(type(exc).__name__)
            return ok_sms, ok_calls, errors

    before = served.sandbox.counters
    ok_sms, ok_calls, errors = asyncio.run(scenario())
    after = served.sandbox.counters

    def delta(key: str) -> int:
        return after.get(key, 0) - before.get(key, 0)

    # Each send reached the server exactly once: no retry of a request that may have acted.
    assert delta(SMS_PATH) == SENDS
    assert delta(CALLS_PATH) == SENDS
    # The server acted at most once per send; every success was acted on.
    assert ok_sms <= delta("sms_received") <= SENDS
    assert ok_calls <= delta("calls_started") <= SENDS
    assert {"ServerError", "TransportFailure"} <= set(errors)
    assert 0 < ok_sms < SENDS
    LEDGER.faults.add("non-idempotent-writes")


# --- the API key is in no store, compressed or not --------------------------------------------


@dataclass
class Echoed:
    """One pair of ingests through the key-echoing stub, on a SQLite DAGSTER_HOME."""

    home: Path
    data: Path
    day: date
    stub: KeyEcho
    ingest: EchoedIngest


@pytest.fixture(scope="module")
def echoed(
    served_session: ServedSandbox, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Echoed]:
    """`cdrhouse ingest` through a server that echoes the key in 500, 422 and 401 bodies
    (tests.support.echoing): a good day, a day refused with a 422, and the snapshots (a 401,
    and a 403 since SECRET_KEY lacks the balance scope). Shared by the tests below."""
    served_session.reset()
    root = tmp_path_factory.mktemp("echoed")
    home, data = root / "dagster_home", root / "data"
    home.mkdir()
    day = served_session.clock.days_ago(4)
    stub = KeyEcho(
        served_session.sandbox.app,
        invalid_days=frozenset({(day + timedelta(1)).isoformat()}),
        unauthorized=(SKILLS_PATH,),
    )
    with serve_app(stub) as base_url, pytest.MonkeyPatch.context() as mp:
        mp.setenv("DAGSTER_HOME", str(home))  # DagsterInstance.get() reads it from os.environ
        env = {
            **served_session.env(data, key=SECRET_KEY),
            "CC_API_BASE_URL": base_url,
            "DAGSTER_HOME": str(home),
        }
        ingest = ingest_through_echo(env, day, snapshots=True)
    yield Echoed(home, data, day, stub, ingest)
    served_session.reset()


def test_an_echoed_422_is_masked_in_stdout_and_in_the_failure_file(echoed: Echoed) -> None:
    assert echoed.ingest.codes == [1, 1], echoed.ingest.output
    assert echoed.stub.answered[422] > 0
    summaries = [json.loads(p.read_text()) for p in (echoed.data / "failures").glob("*.json")]
    refused = [
        step
        for summary in summaries
        if summary["partition"] == (echoed.day + timedelta(1)).isoformat()
        for step in summary["failed_steps"]
    ]
    assert [s["error_class"] for s in refused] == ["ValidationFailedError"], summaries
    message = refused[0]["message"]
    # The field errors still say what was wrong, with the key masked wherever it was echoed.
    assert "unknown field" in message
    assert "not allowed for API key ***" in message
    assert SECRET_KEY not in message
    assert "ValidationFailedError" in echoed.ingest.output
    assert "unknown field" in echoed.ingest.output
    assert SECRET_KEY not in echoed.ingest.output


def test_the_api_key_is_in_no_store_after_ingests_through_echoing_errors(
    echoed: Echoed,
) -> None:
    ingest = echoed.ingest
    assert "ok   " + echoed.day.isoformat() in ingest.output, ingest.output
    assert "billing.balance.read" in ingest.output  # the snapshot run failed too (403)
    assert {500, 422, 401} <= set(echoed.stub.answered)
    assert len(ingest.logs) > 50, "the logs were really captured"
    assert os.environ.get("CC_API_KEY") != SECRET_KEY, "the CLI restores the environment"

    search = SecretSearch(SECRET_KEY)
    search.path(echoed.home, "DAGSTER_HOME")
    search.path(echoed.data, "data")
    search.text("stdout and stderr", ingest.output)
    search.texts("log record", ingest.logs)
    print(search.summary())
    LEDGER.key_hits += search.found
    LEDGER.key_places += search.searched
    # It did read the stores, and inside them: the run storage, the job snapshots (zlib),
    # the lake's values and metadata, the warehouse, the failure files.
    assert any(p.name == "runs.db" for p in echoed.home.rglob("*")), "the sqlite run storage"
    assert search.places["SQLite cells"] > 100
    assert search.places["Parquet columns"] > 0 < search.places["Parquet metadata"]
    assert any(p.suffix == ".duckdb" for p in echoed.data.iterdir())
    assert len(list((echoed.data / "failures").glob("*.json"))) == 2
    assert search.blobs > 0
    search.assert_clean()


def test_errors_echoing_the_key_carry_no_piece_of_it(served: ServedSandbox) -> None:
    """401, 422 and 500 bodies that echo the key: no text of the exception (message, args,
    field errors, repr, traceback with its chain) holds it, or any 8 characters of it."""
    stub = KeyEcho(
        served.sandbox.app,
        invalid_days=frozenset({served.clock.days_ago(2).isoformat()}),
        unauthorized=(SKILLS_PATH,),
    )
    texts: list[str] = []
    errors: list[ContactCenterError] = []

    async def calls(base_url: str) -> None:
        settings = served.resource(SECRET_KEY, base_url=base_url, max_attempts=1).settings()
        async with ContactCenterClient(settings) as client:
            texts.append(repr(client))
            for call in (
                client.list_users,  # the first attempt: a 500
                client.list_all_skills,  # a 401
                lambda: _first_page(client, served.clock.days_ago(2)),  # a 422
            ):
                try:
                    await call()
                except ContactCenterError as exc:
                    errors.append(exc)
            # Whatever leaves the client's block leaves without the key, the caller's own too.
            raise ResponseShapeError(f"field {SECRET_KEY}: not a number")

    with serve_app(stub) as base_url, pytest.raises(ResponseShapeError) as left:
        asyncio.run(calls(base_url))
    errors.append(left.value)
    assert [type(e).__name__ for e in errors] == [
        "ServerError",
        "AuthenticationError",
        "ValidationFailedError",
        "ResponseShapeError",
    ]
    assert errors[2].errors, "the field errors are kept"  # type: ignore[attr-defined]
    for exc in errors:
        texts += [str(exc), repr(exc), repr(exc.args), repr(vars(exc))]
        texts += traceback.format_exception(exc)
    resource = served.resource(SECRET_KEY)
    texts += [repr(resource), repr(resource.settings()), repr(served.sandbox.config)]
    pieces = {SECRET_KEY[i : i + 8] for i in range(len(SECRET_KEY) - 7)}
    leaked = [(piece, t) for t in texts for piece in pieces if piece in t]
    LEDGER.key_places += len(texts)
    LEDGER.key_hits += len(leaked)
    assert not leaked, leaked[:3]
    assert "***" in str(errors[0])
    assert "***" in str(errors[2])
    assert str(errors[3]) == "field ***: not a number"


async def _first_page(client: ContactCenterClient, day: date) -> None:
    start = datetime.combine(day, time(), tzinfo=UTC)
    async for _page in client.fetch_cdr_pages(start, start + timedelta(hours=1)):
        break


def test_a_key_given_by_value_is_refused_on_a_persistent_instance(
    served: ServedSandbox, echoed: Echoed, tmp_path: Path
) -> None:
    """Each run would save it in the run storage, inside its job snapshot."""
    defs = served.defs(tmp_path, key=SECRET_KEY)
    with dg.DagsterInstance.from_config(str(echoed.home)) as instance:
        runs = len(instance.get_runs())
        with pytest.raises(ValueError, match=r"EnvVar\('CC_API_KEY'\)"):
            run_ingest(
                defs,
                [echoed.day.isoformat()],
                instance=instance,
                data_dir=tmp_path,
                snapshots=False,
            )
        assert len(instance.get_runs()) == runs


def test_the_secret_search_looks_inside_compressed_and_encoded_stores(tmp_path: Path) -> None:
    """The search itself: the key hidden where raw bytes do not show it is found, and named."""
    import gzip
    import sqlite3
    import zlib

    import duckdb
    import pyarrow as pa
    import pyarrow.parquet as pq

    key = SECRET_KEY
    # Larger than a SQLite page: the zlib stream spans overflow pages.
    snapshot = zlib.compress(json.dumps({"default": key, "pad": os.urandom(6000).hex()}).encode())
    with sqlite3.connect(tmp_path / "runs.db") as con:
        con.execute("create table snapshots (id integer, snapshot_body blob)")
        con.execute("insert into snapshots values (1, ?)", [snapshot])
    con.close()
    (tmp_path / "log.gz").write_bytes(gzip.compress(f"echoed {key}".encode()))
    blob = base64.b64encode(zlib.compress(f'{{"key": "{key}"}}'.encode())).decode()
    (tmp_path / "event.json").write_text(json.dumps({"payload": blob}))
    values = pa.table({"record": [f"{key} {'x' * 200}"] * 50})
    pq.write_table(values, tmp_path / "values.parquet", compression="zstd")
    meta = pa.table({"n": [1]}).replace_schema_metadata({"source": key})
    pq.write_table(meta, tmp_path / "meta.parquet", compression="zstd")
    with duckdb.connect(str(tmp_path / "warehouse.duckdb")) as db:
        # Rows enough for DuckDB to compress the strings: the raw file no longer shows the key.
        db.execute("create table t as select ? || range::varchar as v from range(12000)", [key])
        db.execute("checkpoint")
    planted = {p.name for p in tmp_path.iterdir()} - {"runs.db-journal"}
    raw = {p.name for p in tmp_path.iterdir() if key.encode() in p.read_bytes()}
    # Raw bytes show only Parquet's footer (key-value metadata, column statistics).
    assert raw <= {"meta.parquet", "values.parquet"}, raw

    search = SecretSearch(key)
    search.path(tmp_path, "planted")
    found = {h.where.split("/", 1)[1].split(":")[0].split(" ")[0] for h in search.hits}
    assert found == planted, search.hits
    wheres = " | ".join(h.where for h in search.hits)
    assert "runs.db: snapshots[0].snapshot_body > zlib@0" in wheres
    assert "> base64@" in wheres
    assert search.blobs >= 3

    clean = SecretSearch("sk-NOT-THERE-0000")
    clean.path(tmp_path, "planted")
    assert clean.found == 0
    assert clean.searched > 0
