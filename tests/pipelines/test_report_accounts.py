"""The nightly report over several accounts: one account failing its night does not hold back
the report of the others (issue 25: one account failing fails only its own runs)."""

from __future__ import annotations

from datetime import UTC, date, datetime, time, timedelta
from pathlib import Path

import dagster as dg
import pytest

from connectors.sandbox import SandboxConfig
from connectors.sandbox.config import DEFAULT_API_KEY
from pipelines.definitions import defs_from_env
from pipelines.names import CDR_JOB, REPORT_ASSET, SNAPSHOT_JOB
from pipelines.scope import AccountScope
from tests.support.clock import SessionClock
from tests.support.privacy import with_raw_numbers
from tests.support.served import serve_sandbox

BAD_KEY = "not-the-sandbox-key"


def _env(tmp_path: Path, first_day: date, api_url: str, emea_key: str) -> dict[str, str]:
    accounts = tmp_path / "accounts.yaml"
    accounts.write_text(
        "accounts:\n"
        "  - id: emea\n"
        f"    base_url: {api_url}\n"
        "    api_key_env: CC_KEY_EMEA\n"
        "  - id: apac\n"
        f"    base_url: {api_url}\n"
        "    api_key_env: CC_KEY_APAC\n"
    )
    return with_raw_numbers(
        {
            "CDRHOUSE_ACCOUNTS_FILE": str(accounts),
            "CDRHOUSE_DATA_DIR": str(tmp_path / "data"),
            "CDRHOUSE_START_DATE": first_day.isoformat(),
            "CC_KEY_EMEA": emea_key,
            "CC_KEY_APAC": BAD_KEY,
        }
    )


@pytest.mark.parametrize("emea_lands", [True, False], ids=["apac-fails", "both-fail"])
def test_a_failed_account_night_does_not_hold_back_the_report_of_the_others(
    emea_lands: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, clock: SessionClock
) -> None:
    """apac's API refuses its key (401, fatal: no step retry). The report waits for apac's
    night to end, then reports what landed; when no account landed anything, it does not run."""
    today = clock.today
    first = today - timedelta(days=10)
    config = SandboxConfig(seed=5, start_date=first, days=11, cdrs_per_day=20)
    with serve_sandbox(config, clock) as api:
        env = _env(tmp_path, first, api.base_url, DEFAULT_API_KEY if emea_lands else BAD_KEY)
        for name in ("CC_KEY_EMEA", "CC_KEY_APAC"):  # read by Dagster's EnvVar at run start
            monkeypatch.setenv(name, env[name])
        _night(defs_from_env(env), today, emea_lands)


def _night(defs: dg.Definitions, today: date, emea_lands: bool) -> None:
    yesterday = (today - timedelta(days=1)).isoformat()
    report = dg.AssetKey(REPORT_ASSET)
    parents = defs.resolve_asset_graph().get(report).parent_keys
    assert {k.path[0] for k in parents} == {"emea", "apac"}
    clock = iter(
        datetime.combine(today, time(0, 30), UTC) + timedelta(minutes=20 * i) for i in range(9)
    )

    with dg.DagsterInstance.ephemeral() as instance:
        cursor = None

        def tick() -> int:
            nonlocal cursor
            result = dg.evaluate_automation_conditions(
                defs, instance, evaluation_time=next(clock), cursor=cursor
            )
            cursor = result.cursor
            return result.get_num_requested(report)

        def night(account: str, succeeds: bool) -> None:
            """The account's nightly runs, for real: yesterday's CDR day, then its snapshots."""
            for name, partition in ((CDR_JOB, yesterday), (SNAPSHOT_JOB, None)):
                job = defs.resolve_job_def(AccountScope(account).named(name))
                run = job.execute_in_process(
                    instance=instance, partition_key=partition, raise_on_error=False
                )
                assert run.success is succeeds, (account, name)

        assert tick() == 0  # 00:30: before the nightly tick
        assert tick() == 0  # 00:50
        assert tick() == 0  # 01:10: the tick passed, nothing landed yet
        night("emea", emea_lands)
        assert tick() == 0  # 01:30: apac's night has not run yet: wait for it
        night("apac", False)
        # 01:50: apac's night ended (failed): the report of what landed, if anything did.
        assert tick() == (1 if emea_lands else 0)
        assert tick() == 0  # 02:10: and only one
