"""Issue 26, one key per lake: a day's tokens are made under one key, and each partition's
footer says which (`cdrhouse.pii_key_check`: an HMAC of a constant under it, not the key).

Tokens made under another key would not join the lake's, and `cdrhouse privacy forget` would
compute a token no partition of the older days holds, report its counts, and leave the person
there. So a key other than the lake's is refused, in one line and before anything is written:
by the day step, by `cdrhouse ingest` before any run, and by `forget`."""

from __future__ import annotations

import logging
import shutil
from datetime import timedelta
from pathlib import Path

import dagster as dg
import pytest

from pipelines.cdr_day import land_day
from pipelines.cli import main
from pipelines.definitions import CDR_JOB
from tests.support.cli import assert_one_line_setup_error, clean_env, run_cdrhouse, tree
from tests.support.paths import LOCAL_INSTANCE_YAML
from tests.support.runs import run_failing_at_once
from tests.support.served import ServedSandbox, suite_defs
from tests.support.token_lake import (
    DAY1,
    DAY2,
    KEY,
    POLICY,
    Person,
    day1_caller,
    digests,
    holding,
    land,
    sandbox,
)
from warehouse.erasure import PERSON_TABLES, forget
from warehouse.lake import META_KEY_CHECK, Lake, LakeKeyConflict
from warehouse.privacy import RAW, PrivacyPolicy, phone_token

OTHER_KEY = b"another-key-of-the-same-team-0042"
OTHER = PrivacyPolicy("token", OTHER_KEY)


@pytest.fixture(scope="module")
def landed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Person]:
    """Day 1 landed under `token` with KEY (built once; each test works on its own copy)."""
    base = tmp_path_factory.mktemp("privacy_key")
    lake = Lake(str(base / "data" / "lake"))
    for day in (DAY1, DAY2):
        land(lake, day)
    raw = Lake(str(base / "raw"))
    land(raw, DAY1, RAW)
    return base / "data", day1_caller(lake, raw)


@pytest.fixture
def data_dir(landed: tuple[Path, Person], tmp_path: Path) -> Path:
    shutil.copytree(landed[0], tmp_path / "data")
    return tmp_path / "data"


def _checks(lake: Lake) -> dict[str, str | None]:
    return {
        f"{table}/{key}": lake.key_check_of(table, key)
        for table in PERSON_TABLES
        for key in lake.partitions(table)
    }


def _assert_keys_not_in(text: str) -> None:
    for key in (KEY, OTHER_KEY):
        assert key.decode() not in text
        assert key.hex() not in text


def test_every_partition_says_which_key_made_its_tokens_and_none_gives_the_key(
    data_dir: Path, landed: tuple[Path, Person]
) -> None:
    lake = Lake(str(data_dir / "lake"))
    checks = _checks(lake)
    assert len(checks) >= 2 * 3, checks  # raw_cdrs, cdrs and the per-type tables, two days
    assert set(checks.values()) == {POLICY.key_check}
    assert POLICY.key_check is not None
    assert POLICY.key_check != OTHER.key_check
    _assert_keys_not_in(POLICY.key_check)
    assert RAW.key_check is None
    raw = Lake(str(landed[0].parent / "raw"))
    footer = raw.partition_footer("raw_cdrs", f"date={DAY1}")
    assert footer is not None
    assert META_KEY_CHECK.encode() not in (footer.metadata or {})


def test_a_day_under_another_key_is_refused_before_anything_is_written(data_dir: Path) -> None:
    lake = Lake(str(data_dir / "lake"))
    before = digests(data_dir)

    with pytest.raises(LakeKeyConflict) as refused:
        land_day(sandbox(), lake, logging.getLogger("test"), DAY1, privacy=OTHER)

    message = str(refused.value)
    assert "CDRHOUSE_PII_KEY" in message
    assert DAY2 in message  # the newest day, landed under the lake's key
    _assert_keys_not_in(message)
    assert digests(data_dir) == before
    # The lake's own key still lands (the refusal is the key's, not the lake's).
    land(lake, DAY1)
    assert set(_checks(lake).values()) == {POLICY.key_check}


def test_a_lake_landed_under_raw_takes_tokens_and_records_their_key(tmp_path: Path) -> None:
    lake = Lake(str(tmp_path / "lake"))
    land(lake, DAY1, RAW)
    land(lake, DAY2)  # no day of the lake says another key
    assert lake.key_check_of("raw_cdrs", f"date={DAY1}") is None
    assert lake.key_check_of("raw_cdrs", f"date={DAY2}") == POLICY.key_check
    with pytest.raises(LakeKeyConflict):
        land(lake, DAY1, OTHER)


def test_forget_under_another_key_is_refused_and_writes_nothing(
    data_dir: Path, landed: tuple[Path, Person]
) -> None:
    person = landed[1]
    lake = Lake(str(data_dir / "lake"))
    before = digests(data_dir)
    wrong = phone_token(OTHER_KEY, person.number)
    assert wrong != person.token

    with pytest.raises(LakeKeyConflict) as refused:
        forget(lake, wrong, OTHER.key_check)

    assert DAY1 in str(refused.value)
    assert DAY2 in str(refused.value)
    assert digests(data_dir) == before  # not even the forget-list
    assert sum(len(rows) for rows in holding(lake, person.token).values()) > 0


def test_an_erased_partition_keeps_the_key_that_made_its_tokens(
    data_dir: Path, landed: tuple[Path, Person]
) -> None:
    person = landed[1]
    lake = Lake(str(data_dir / "lake"))
    before = digests(data_dir)

    result = forget(lake, person.token, POLICY.key_check)

    assert result.partitions > 0
    changed = {p for p, digest in digests(data_dir).items() if before.get(p) != digest}
    assert any(p.startswith("lake/raw_cdrs/") for p in changed), changed
    assert set(_checks(lake).values()) == {POLICY.key_check}
    with pytest.raises(LakeKeyConflict):
        land(lake, DAY2, OTHER)


def test_cdrhouse_privacy_forget_under_another_key_is_one_line_exit_2(
    data_dir: Path, landed: tuple[Path, Person], capsys: pytest.CaptureFixture[str]
) -> None:
    person = landed[1]
    before = digests(data_dir)
    env = {"CDRHOUSE_DATA_DIR": str(data_dir), "CDRHOUSE_PII_KEY": OTHER_KEY.decode()}

    code = main(["privacy", "forget", person.number], env=env)

    out, err = capsys.readouterr()
    assert code == 2
    assert out == ""
    assert err.count("\n") == 1, err
    assert "another key" in err
    assert "CDRHOUSE_PII_KEY" in err
    assert person.number.removeprefix("+")[2:] not in err
    _assert_keys_not_in(err)
    assert digests(data_dir) == before
    # With the lake's key the same command erases.
    env["CDRHOUSE_PII_KEY"] = KEY.decode()
    assert main(["privacy", "forget", person.number], env=env) == 0
    assert holding(Lake(str(data_dir / "lake")), person.token) == {t: set() for t in PERSON_TABLES}


def test_cdrhouse_ingest_under_another_key_exits_2_before_any_run(
    served: ServedSandbox, tmp_path: Path
) -> None:
    day = served.clock.days_ago(4)
    data_dir = tmp_path / "data"
    lake = Lake(str(data_dir / "lake"))
    stats, checks = land_day(
        served.resource(), lake, logging.getLogger("test"), day.isoformat(), privacy=POLICY
    )
    assert checks.whole(stats.rows, stats.api_total)
    home = tmp_path / "home"
    home.mkdir()
    (home / "dagster.yaml").write_text(LOCAL_INSTANCE_YAML.read_text())
    files = digests(data_dir)
    env = clean_env(
        **served.env(data_dir)
        | {
            "DAGSTER_HOME": str(home),
            "CDRHOUSE_PHONE_NUMBERS": "token",
            "CDRHOUSE_PII_KEY": OTHER_KEY.decode(),
        }
    )
    argv = ["ingest", "--start", day.isoformat(), "--end", (day + timedelta(1)).isoformat()]

    run = run_cdrhouse(argv, env)

    line = assert_one_line_setup_error(run, "CDRHOUSE_PII_KEY", "another key", day.isoformat())
    _assert_keys_not_in(run.stdout + run.stderr)
    assert digests(data_dir) == files
    assert tree(home) == ["dagster.yaml"]  # no run was recorded
    assert line


def test_a_cdr_run_under_another_key_fails_at_once_naming_the_key_variable(
    served: ServedSandbox, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    day = served.clock.days_ago(4).isoformat()
    data_dir = tmp_path / "data"
    lake = Lake(str(data_dir / "lake"))
    stats, checks = land_day(
        served.resource(), lake, logging.getLogger("test"), day, privacy=POLICY
    )
    assert checks.whole(stats.rows, stats.api_total)
    files = digests(data_dir)
    monkeypatch.setenv("CDRHOUSE_PII_KEY", OTHER_KEY.decode())  # resolved in the run (EnvVar)
    resource = served.resource(phone_numbers="token", pii_key=dg.EnvVar("CDRHOUSE_PII_KEY"))
    defs = suite_defs(resource, data_dir, served.first_day)

    with dg.DagsterInstance.ephemeral() as instance:
        result, failures = run_failing_at_once(defs, CDR_JOB, day, instance)

    message = failures[0].description or ""
    assert "\n" not in message
    assert "another key" in message
    assert "CDRHOUSE_PII_KEY" in message
    assert failures[0].metadata["error_class"].value == "LakeKeyConflict"
    _assert_keys_not_in(message)
    assert not result.get_asset_materialization_events()
    assert digests(data_dir) == files


def test_forget_on_a_lake_with_days_landed_under_raw_exits_1_naming_them(
    tmp_path: Path, landed: tuple[Path, Person], capsys: pytest.CaptureFixture[str]
) -> None:
    """Switched from `raw` to `token`: the raw day holds the number itself, which no token
    erasure finds. The command says so, and does not report success."""
    person = landed[1]
    data_dir = tmp_path / "data"
    lake = Lake(str(data_dir / "lake"))
    land(lake, DAY1, RAW)
    land(lake, DAY2)
    env = {"CDRHOUSE_DATA_DIR": str(data_dir), "CDRHOUSE_PII_KEY": KEY.decode()}
    digits = person.number.removeprefix("+")

    code = main(["privacy", "forget", person.number], env=env)

    out, err = capsys.readouterr()
    assert code == 1
    assert err.count("\n") == 1, err
    assert "incomplete" in err
    assert f"1 day(s) ({DAY1})" in err
    assert "CDRHOUSE_PHONE_NUMBERS=raw" in err
    assert digits[2:] not in out + err
    # The remedy the line gives: the day ingested again under token lands the person erased.
    land(lake, DAY1)
    assert holding(lake, person.token) == {t: set() for t in PERSON_TABLES}
    assert main(["privacy", "forget", person.number], env=env) == 0


def test_forget_keys_each_account_with_its_own_key_and_refuses_a_wrong_one_in_any(
    tmp_path: Path, landed: tuple[Path, Person], capsys: pytest.CaptureFixture[str]
) -> None:
    """Accounts with keys of their own (`pii_key_env`): each account's token is made with its
    key, and one account's wrong key stops the command before any account is written."""
    person = landed[1]
    data_dir = tmp_path / "data"
    root = Lake(str(data_dir / "lake"))
    land(root, DAY1)
    land(root.account("emea"), DAY1, OTHER)
    accounts = tmp_path / "accounts.yaml"
    accounts.write_text(
        "accounts:\n  - id: emea\n    base_url: https://emea1.cc.example.com\n"
        "    api_key_env: CC_KEY_EMEA\n    pii_key_env: PII_KEY_EMEA\n"
    )
    env = {
        "CDRHOUSE_DATA_DIR": str(data_dir),
        "CDRHOUSE_ACCOUNTS_FILE": str(accounts),
        "CDRHOUSE_PII_KEY": KEY.decode(),
        "PII_KEY_EMEA": KEY.decode(),  # the default's key, not the one emea landed with
    }
    before = digests(data_dir)

    assert main(["privacy", "forget", person.number], env=env) == 2

    _, err = capsys.readouterr()
    assert "account 'emea'" in err
    assert "another key" in err
    assert digests(data_dir) == before  # the default account was not written either
    env["PII_KEY_EMEA"] = OTHER_KEY.decode()
    assert main(["privacy", "forget", person.number], env=env) == 0
    out, _ = capsys.readouterr()
    assert f"account default: token {person.token[:12]}" in out
    emea_token = phone_token(OTHER_KEY, person.number)
    assert f"account emea: token {emea_token[:12]}" in out
    for lake, token in ((root, person.token), (root.account("emea"), emea_token)):
        assert holding(lake, token) == {t: set() for t in PERSON_TABLES}
