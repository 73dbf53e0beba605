"""`cdrhouse ingest` over several accounts, as a user runs it (its own process), against three
sandboxes served on three ports with three seeds: every account's days land exact in its own
sub-lake, an account with a wrong key fails alone, and a mistake in the accounts is one line
before any run."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from zoneinfo import ZoneInfo

import dagster as dg
import polars as pl
import pytest

from connectors.sandbox import SandboxConfig
from connectors.sandbox.config import DEFAULT_API_KEY
from pipelines.partitions import partition_window
from tests.support.cli import assert_one_line_setup_error, clean_env, run_cdrhouse, tree
from tests.support.clock import SessionClock
from tests.support.paths import REPO_ROOT
from tests.support.served import ServedSandbox, serve_sandbox
from warehouse.lake import Lake

SEEDS = {"emea": 31, "apac": 32, "amer": 33}
CDRS_PER_DAY = 120
HISTORY_DAYS = 4
# Three accounts' snapshots and days, each run in a fresh process: generous, never a benchmark.
INGEST_LIMIT_S = 900.0


@dataclass
class Accounts:
    served: dict[str, ServedSandbox]
    first_day: date

    def day(self, n: int) -> date:
        """The sandboxes' n-th day (0: the first)."""
        return self.first_day + timedelta(days=n)


@pytest.fixture(scope="module")
def accounts(clock: SessionClock) -> Iterator[Accounts]:
    first_day = clock.days_ago(HISTORY_DAYS)
    with ExitStack() as stack:
        served = {
            account: stack.enter_context(
                serve_sandbox(
                    SandboxConfig(
                        seed=seed,
                        cdrs_per_day=CDRS_PER_DAY,
                        start_date=first_day,
                        days=HISTORY_DAYS + 1,
                    ),
                    clock,
                )
            )
            for account, seed in SEEDS.items()
        }
        yield Accounts(served, first_day)


# Each account's business day; amer has none: CDRHOUSE_TIMEZONE's (UTC here).
ZONES = {"emea": "Europe/Berlin", "apac": "Australia/Sydney"}


def _write_accounts(path: Path, entries: list[tuple[str, str, str]]) -> Path:
    lines = ["accounts:"]
    for account, base_url, key_env in entries:
        lines += [f"  - id: {account}", f"    base_url: {base_url}", f"    api_key_env: {key_env}"]
        if account in ZONES:
            lines.append(f"    timezone: {ZONES[account]}")
    path.write_text("\n".join(lines) + "\n")
    return path


def _key_var(account: str) -> str:
    return f"CC_KEY_{account.upper()}"


def _env(tmp_path: Path, accounts: Accounts, file: Path, **keys: str) -> dict[str, str]:
    return clean_env(
        PYTHONPATH=str(REPO_ROOT),
        CDRHOUSE_ACCOUNTS_FILE=str(file),
        CDRHOUSE_DATA_DIR=str(tmp_path / "data"),
        CDRHOUSE_START_DATE=accounts.first_day.isoformat(),
        **keys,
    )


def _good(accounts: Accounts) -> list[tuple[str, str, str]]:
    return [(a, s.base_url, _key_var(a)) for a, s in accounts.served.items()]


def _good_keys() -> dict[str, str]:
    return {_key_var(a): DEFAULT_API_KEY for a in SEEDS}


def _landed(lake: Path, account: str, day: date) -> dict[str, Decimal]:
    """The account's `cdrs` partition of the day, read from its sub-lake: id -> exact cost."""
    files = sorted((lake / f"account_id={account}" / "cdrs" / f"date={day}").glob("*.parquet"))
    assert files, f"no cdrs partition of {day} for {account}"
    frame = pl.concat([pl.read_parquet(f, columns=["id", "cost"]) for f in files])
    assert frame.schema["cost"] == pl.Decimal(18, 6)
    return dict(zip(frame["id"].to_list(), frame["cost"].to_list(), strict=True))


def _truth(served: ServedSandbox, day: date) -> dict[str, Decimal]:
    start, end = partition_window(day.isoformat())
    return {i: Decimal(c) for i, c in served.sandbox.truth_cdrs(start, end).items()}


def test_three_accounts_land_exact_each_in_its_own_lake(tmp_path, accounts: Accounts) -> None:
    file = _write_accounts(tmp_path / "accounts.yaml", _good(accounts))
    days = [accounts.day(1), accounts.day(2)]
    argv = ["ingest", "--start", days[0].isoformat(), "--end", accounts.day(3).isoformat()]
    run = run_cdrhouse(argv, _env(tmp_path, accounts, file, **_good_keys()), INGEST_LIMIT_S)
    assert run.code == 0, str(run)
    lake = tmp_path / "data" / "lake"
    seen: set[str] = set()
    for account, served in accounts.served.items():
        uri = f"{lake.as_uri()}/account_id={account}"
        assert any(uri in line and f"account {account}" in line for line in run.lines), str(run)
        for day in days:
            landed, truth = _landed(lake, account, day), _truth(served, day)
            assert truth, f"the sandbox of {account} has no CDR on {day}"
            assert landed == truth, f"{account} {day}"
            seen |= set(landed)
    # Three seeds, three datasets: no account's rows are another's.
    assert len(seen) == sum(len(_truth(s, d)) for s in accounts.served.values() for d in days)
    assert not (lake / "cdrs").exists()  # nothing in the default account's lake

    # What an analyst reads: `cdrhouse sql`, one account and one day at a time.
    env = _env(tmp_path, accounts, file, **_good_keys())
    for account, served in accounts.served.items():
        for day in days:
            query = (
                "SELECT id, CAST(cost AS VARCHAR) AS cost FROM cdrs "
                f"WHERE account_id = '{account}' AND date = DATE '{day}'"
            )
            answer = run_cdrhouse(["sql", "--format", "json", query], env, INGEST_LIMIT_S)
            assert answer.code == 0, str(answer)
            rows = json.loads(answer.stdout)
            got = {row["id"]: Decimal(row["cost"]) for row in rows}
            assert len(rows) == len(got)  # no id twice
            assert got == _truth(served, day), f"cdrhouse sql: {account} {day}"

    # Each account's local day comes from its own zone: the KPI intervals' local dates.
    _assert_local_days(env)
    # An analyst's machine (a new data dir over the same lake, no accounts file), and the
    # same machine after its warehouse.duckdb is gone (`lake reset` deletes it): the zones
    # are read from the lake. They lived only in warehouse.duckdb: every day became UTC.
    analyst = clean_env(
        PYTHONPATH=str(REPO_ROOT),
        CDRHOUSE_DATA_DIR=str(tmp_path / "analyst"),
        CDRHOUSE_LAKE_URI=lake.as_uri(),
    )
    _assert_local_days(analyst)
    (tmp_path / "analyst" / "warehouse.duckdb").unlink()
    _assert_local_days(analyst)


def _assert_local_days(env: dict[str, str]) -> None:
    query = (
        "SELECT account_id, CAST(interval_start_utc AS VARCHAR) AS utc, "
        "CAST(local_date AS VARCHAR) AS local_date FROM rpt_interval_kpis"
    )
    answer = run_cdrhouse(["sql", "--format", "json", query], env, INGEST_LIMIT_S)
    assert answer.code == 0, str(answer)
    rows = json.loads(answer.stdout)
    assert {r["account_id"] for r in rows} == set(SEEDS)
    shifted: dict[str, int] = dict.fromkeys(SEEDS, 0)
    for row in rows:
        utc = datetime.fromisoformat(row["utc"]).astimezone(UTC)
        zone = ZoneInfo(ZONES.get(row["account_id"], "UTC"))
        assert row["local_date"] == utc.astimezone(zone).date().isoformat(), row
        shifted[row["account_id"]] += row["local_date"] != utc.date().isoformat()
    # Sydney (UTC+11) moves every interval after 13:00 UTC to the next day; UTC moves none.
    # (Berlin moves 23:00-24:00 UTC only, which a small night may not have: not asserted.)
    assert shifted["apac"] > 0, shifted
    assert shifted["amer"] == 0, shifted


def test_a_wrong_key_fails_only_its_account(tmp_path, accounts: Accounts) -> None:
    # A fourth account on emea's sandbox, with a key that sandbox does not accept (401).
    entries = [*_good(accounts), ("bad", accounts.served["emea"].base_url, "CC_KEY_BAD")]
    file = _write_accounts(tmp_path / "accounts.yaml", entries)
    day = accounts.day(2)
    argv = ["ingest", "--start", day.isoformat(), "--end", accounts.day(3).isoformat()]
    env = _env(tmp_path, accounts, file, **_good_keys(), CC_KEY_BAD="not-a-key-it-knows")
    run = run_cdrhouse(argv, env, INGEST_LIMIT_S)
    assert run.code == 1, str(run)
    assert "Traceback" not in run.stdout + run.stderr, str(run)
    named = [line for line in run.lines if "account bad" in line and "CC_KEY_BAD" in line]
    assert any("AuthenticationError" in line for line in named), str(run)
    assert "not-a-key-it-knows" not in run.stdout + run.stderr
    lake = tmp_path / "data" / "lake"
    for account, served in accounts.served.items():
        assert _landed(lake, account, day) == _truth(served, day), account
    assert not (lake / "account_id=bad" / "cdrs").exists()


@pytest.mark.parametrize(
    ("problem", "needles"),
    [
        ("duplicate", ["accounts[1].id 'emea'", "already"]),
        ("unknown_account", ["unknown account 'nope'", "emea"]),
        ("unset_key", ["account apac", "CC_KEY_APAC", "not set"]),
    ],
)
def test_account_mistakes_exit_2_with_one_line_before_any_run(
    tmp_path, accounts: Accounts, problem: str, needles: list[str]
) -> None:
    entries = _good(accounts)
    keys = _good_keys()
    argv = ["ingest", "--start", accounts.day(2).isoformat(), "--end", accounts.day(3).isoformat()]
    if problem == "duplicate":
        entries = [entries[0], entries[0]]
    elif problem == "unknown_account":
        argv += ["--account", "emea", "--account", "nope"]
    else:
        del keys["CC_KEY_APAC"]
    file = _write_accounts(tmp_path / "accounts.yaml", entries)
    run = run_cdrhouse(argv, _env(tmp_path, accounts, file, **keys))
    assert_one_line_setup_error(run, *needles)
    assert tree(tmp_path / "data") == []  # no run, no lake, not even the data dir


def test_one_selected_account_needs_only_its_own_key(tmp_path, accounts: Accounts) -> None:
    file = _write_accounts(tmp_path / "accounts.yaml", _good(accounts))
    home = tmp_path / "dagster_home"
    home.mkdir()
    shutil.copy(REPO_ROOT / "dagster.yaml", home / "dagster.yaml")
    day = accounts.day(2)
    argv = ["ingest", "--start", day.isoformat(), "--end", accounts.day(3).isoformat()]
    argv += ["--account", "apac", "--no-snapshots"]
    env = _env(tmp_path, accounts, file, CC_KEY_APAC=DEFAULT_API_KEY, DAGSTER_HOME=str(home))
    run = run_cdrhouse(argv, env, 600)
    assert run.code == 0, str(run)
    lake = tmp_path / "data" / "lake"
    assert _landed(lake, "apac", day) == _truth(accounts.served["apac"], day)
    assert sorted(p.name for p in lake.iterdir() if p.name.startswith("account_id=")) == [
        "account_id=apac"
    ]
    # Every configured account's pool exists, at dagster.yaml's default limit, and the run
    # is recorded with its account's tag.
    with dg.DagsterInstance.from_config(str(home)) as instance:
        storage = instance.event_log_storage
        pools = {f"contact_center_api__{a}" for a in SEEDS}
        assert pools <= storage.get_concurrency_keys()
        assert {storage.get_concurrency_info(p).slot_count for p in pools} == {2}
        (record,) = instance.get_run_records()
        assert record.dagster_run.tags.get("cdrhouse/account") == "apac"
        assert record.dagster_run.job_name == "cdr_daily__apac"


def test_an_account_whose_lake_refuses_is_left_out_and_the_others_land(
    tmp_path, accounts: Accounts
) -> None:
    """apac's sub-lake holds another cluster's data: apac is refused in one line, having
    written nothing, and emea and amer land, as their runs would in Dagster; exit 2. Before,
    the one refusal stopped every account before any run."""
    lake = tmp_path / "data" / "lake"
    Lake(lake.as_uri()).account("apac").claim("https://other-cluster.example.com")
    marker = lake / "account_id=apac" / "_cdrhouse_lake.json"
    before = tree(lake / "account_id=apac"), marker.read_bytes()
    file = _write_accounts(tmp_path / "accounts.yaml", _good(accounts))
    day = accounts.day(2)
    argv = ["ingest", "--start", day.isoformat(), "--end", accounts.day(3).isoformat()]
    run = run_cdrhouse(argv, _env(tmp_path, accounts, file, **_good_keys()), INGEST_LIMIT_S)
    assert run.code == 2, str(run)
    assert "Traceback" not in run.stdout + run.stderr, str(run)
    refusals = [line for line in run.stderr.splitlines() if "account 'apac'" in line]
    assert len(refusals) == 1, str(run)
    assert "other-cluster.example.com" in refusals[0]
    assert "REFUSED account(s) apac" in run.stdout, str(run)
    for account in ("emea", "amer"):
        assert _landed(lake, account, day) == _truth(accounts.served[account], day), account
    assert (tree(lake / "account_id=apac"), marker.read_bytes()) == before
