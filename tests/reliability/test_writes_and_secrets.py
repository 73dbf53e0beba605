"""Non-idempotent writes are never sent twice, and the API key is never written anywhere."""

from __future__ import annotations

import asyncio
import logging
from datetime import timedelta
from pathlib import Path

import dagster as dg
import pytest

from connectors.contact_center import ContactCenterClient
from connectors.contact_center.errors import ContactCenterError, RetriableAPIError
from connectors.sandbox import FaultConfig
from models.resources import SendSms, StartCall
from pipelines.cli import main, run_ingest
from tests.reliability.conftest import CDRS_PATH, LEDGER, SECRET_KEY
from tests.support.served import ServedSandbox

SMS_PATH = "/api/v4/messaging/sms"
CALLS_PATH = "/api/v4/voice/calls"
SENDS = 20


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


def _files_with_key(root: Path, key: bytes) -> tuple[int, int]:
    """(files searched, occurrences of the key) under `root`, binary files included."""
    files = hits = 0
    for path in root.rglob("*"):
        if path.is_file():
            files += 1
            hits += path.read_bytes().count(key)
    return files, hits


def test_the_api_key_appears_nowhere(
    served: ServedSandbox, tmp_path, monkeypatch, capsys, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    home, data = tmp_path / "dagster_home", tmp_path / "data"
    home.mkdir()
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    day = served.clock.days_ago(4)
    env = {**served.env(data, key=SECRET_KEY), "DAGSTER_HOME": str(home)}
    texts: list[str] = []

    # 1. `cdrhouse ingest --verbose`: the CDR day succeeds; with the snapshots it fails (the
    #    key lacks billing.balance.read: a 403 whose message names the scope).
    argv = ["ingest", "--start", day.isoformat(), "--end", (day + timedelta(1)).isoformat()]
    assert main([*argv, "--verbose", "--no-snapshots"], env=env) == 0
    assert main([*argv, "--verbose"], env=env) == 1
    out = capsys.readouterr()
    assert "ok   " + day.isoformat() in out.out, out.out
    assert "billing.balance.read" in out.out
    texts += [out.out, out.err]

    # 2. The same key through the CLI's run loop, on the persistent instance, under a 5xx wall.
    served.sandbox.faults = FaultConfig(error_5xx_rate=1.0, paths=(CDRS_PATH,))
    defs = served.defs(data, key=SECRET_KEY, max_attempts=2, max_retry_s=2.0)
    with dg.DagsterInstance.get() as instance:
        report = run_ingest(
            defs,
            [(day - timedelta(1)).isoformat()],
            instance=instance,
            data_dir=data,
            snapshots=False,
            verbose=True,
        )
    assert not report.success
    texts += [r.failure or "" for r in report.runs]

    # 3. Exceptions and reprs of everything holding the key.
    async def refused() -> None:
        async with ContactCenterClient(served.resource(SECRET_KEY).settings()) as client:
            texts.append(repr(client))
            await client.get_balance()

    with pytest.raises(ContactCenterError) as info:
        asyncio.run(refused())
    texts += [str(info.value), repr(info.value), repr(served.resource(SECRET_KEY))]
    texts += [repr(served.resource(SECRET_KEY).settings()), repr(served.sandbox.config)]
    out = capsys.readouterr()
    texts += [out.out, out.err, caplog.text]
    texts += [repr(r.args) for r in caplog.records]

    key = SECRET_KEY.encode()
    home_files, home_hits = _files_with_key(home, key)
    data_files, data_hits = _files_with_key(data, key)
    text_hits = sum(t.count(SECRET_KEY) for t in texts)
    LEDGER.key_hits += home_hits + data_hits + text_hits
    LEDGER.key_places += home_files + data_files + len(texts)
    assert any(p.suffix == ".db" for p in home.rglob("*")), "the sqlite run/event storage"
    assert any(p.suffix == ".parquet" for p in data.rglob("*"))
    assert (data / "warehouse.duckdb").exists()
    assert len(caplog.records) > 50, "the logs were really captured"
    assert (home_hits, data_hits, text_hits) == (0, 0, 0)
