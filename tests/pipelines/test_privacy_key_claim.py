"""Issue 26, one key per lake, when the footers cannot tell: the first partition published
with tokens claims the key (`_privacy/pii_key.json`: its check, never the key; created
exclusively, as the lake's source marker is), and every later publish with tokens is checked
against it.

Before, the only check read the newest day's footer at the start of the step, so:
* two first landings under different keys into an empty lake both passed it and both landed;
* a lake whose newest day was landed under `raw` (no key in its footer) took another key;
* a reset lake took another key, while its forget-list (kept by the reset) holds tokens of
  the first one, which the new tokens would never match: the erased would come back;
* a lake of tokens took a day under `raw`: numbers in clear beside the tokens, which a
  deployment whose setting was lost or mistyped would land without a word."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from pathlib import Path

import pytest

from connectors.sandbox.faults import FaultConfig
from pipelines.cdr_day import land_day
from pipelines.cli import main
from tests.support.cli import assert_one_line_setup_error, clean_env, run_cdrhouse, tree
from tests.support.paths import LOCAL_INSTANCE_YAML
from tests.support.served import ServedSandbox
from tests.support.token_lake import DAY1, DAY2, KEY, POLICY, digests, land, sandbox
from warehouse.erasure import PERSON_TABLES
from warehouse.lake import KEY_MARKER_FILE, Lake, LakeKeyConflict, LakeSourceConflict
from warehouse.privacy import RAW, PrivacyPolicy

OTHER = PrivacyPolicy("token", b"another-key-of-the-same-team-0042")
DAY3 = "2026-11-04"
# Each answer of the two landings: both have passed the step's start-of-day check long
# before either publishes.
LATENCY_MS = 1500.0


@pytest.fixture
def slow(served: ServedSandbox) -> Iterator[ServedSandbox]:
    served.reset()
    served.sandbox.faults = FaultConfig(latency_ms=LATENCY_MS)
    yield served
    served.reset()


def _checks(lake: Lake) -> set[str | None]:
    return {
        lake.key_check_of(table, key) for table in PERSON_TABLES for key in lake.partitions(table)
    }


def _assert_refused_by_the_claim(refused: BaseException | None) -> None:
    assert isinstance(refused, LakeKeyConflict), refused
    message = str(refused)
    assert KEY_MARKER_FILE in message  # the claim, not a day's footer, refused it
    assert "CDRHOUSE_PII_KEY" in message
    assert "\n" not in message
    for key in (KEY, b"another-key-of-the-same-team-0042"):
        assert key.decode() not in message
        assert key.hex() not in message


def test_two_first_landings_under_different_keys_into_an_empty_lake_one_lands(
    slow: ServedSandbox, tmp_path: Path
) -> None:
    uri = str(tmp_path / "lake")
    log = logging.getLogger("test")
    days = {POLICY.key_check: slow.clock.days_ago(3), OTHER.key_check: slow.clock.days_ago(4)}
    with ThreadPoolExecutor(max_workers=2) as pool:
        # Two processes' worth: each landing has its own Lake (nothing cached is shared).
        runs = {
            policy.key_check: pool.submit(
                land_day,
                slow.resource(),
                Lake(uri),
                log,
                days[policy.key_check].isoformat(),
                privacy=policy,
            )
            for policy in (POLICY, OTHER)
        }
        outcomes = {check: run.exception(timeout=180) for check, run in runs.items()}

    landed = [check for check, error in outcomes.items() if error is None]
    assert len(landed) == 1, outcomes
    (refused,) = [error for error in outcomes.values() if error is not None]
    _assert_refused_by_the_claim(refused)
    lake = Lake(uri)
    assert lake.key_claimed() == landed[0]
    assert _checks(lake) == {landed[0]}
    # The refused day published nothing, in any table, and left no temp file.
    loser = next(day for check, day in days.items() if check != landed[0])
    for table in PERSON_TABLES:
        assert f"date={loser}" not in lake.partitions(table)
    assert not list((tmp_path / "lake" / "_tmp").glob("*"))


def test_a_lake_whose_newest_day_is_raw_still_refuses_another_key(tmp_path: Path) -> None:
    lake = Lake(str(tmp_path / "lake"))
    land(lake, DAY2, RAW)  # switched from raw: the newest day's footer names no key
    land(lake, DAY1)  # tokens under KEY
    before = digests(tmp_path)

    with pytest.raises(LakeKeyConflict) as refused:
        land_day(sandbox(), lake, logging.getLogger("test"), DAY3, privacy=OTHER)

    _assert_refused_by_the_claim(refused.value)
    assert digests(tmp_path) == before
    land(lake, DAY3)  # the lake's own key still lands
    assert _checks(lake) == {POLICY.key_check, None}


def test_a_reset_lake_keeps_its_key_with_its_forget_list(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lake = Lake(str(tmp_path / "lake"))
    land(lake, DAY1)
    lake.forget(["ab" * 32])
    env = {"CDRHOUSE_DATA_DIR": str(tmp_path)}
    assert main(["lake", "reset"], env=env) == 2  # says what it would do, and keep
    assert "keeping _privacy/ (the forget-list and the tokens' key check)" in (
        capsys.readouterr().err
    )
    assert main(["lake", "reset", "--yes"], env=env) == 0
    assert "; kept _privacy/" in capsys.readouterr().out
    lake = Lake(lake.uri)
    assert lake.partitions("raw_cdrs") == []
    assert lake.forgotten() == {"ab" * 32}

    with pytest.raises(LakeKeyConflict) as refused:
        land_day(sandbox(), lake, logging.getLogger("test"), DAY1, privacy=OTHER)

    _assert_refused_by_the_claim(refused.value)
    assert lake.partitions("raw_cdrs") == []
    land(lake, DAY1)
    assert _checks(lake) == {POLICY.key_check}


def test_a_lake_of_tokens_refuses_numbers_in_clear(served: ServedSandbox, tmp_path: Path) -> None:
    """By the day step (a Dagster step fails at once on `LakeKeyConflict`) and by `cdrhouse
    ingest`, before any run, in one line naming the setting, exit 2."""
    day = served.clock.days_ago(4)
    data_dir = tmp_path / "data"
    lake = Lake(str(data_dir / "lake"))
    log = logging.getLogger("test")
    stats, checks = land_day(served.resource(), lake, log, day.isoformat(), privacy=POLICY)
    assert checks.whole(stats.rows, stats.api_total)
    before = digests(data_dir)

    with pytest.raises(LakeKeyConflict) as refused:
        land_day(served.resource(), Lake(lake.uri), log, day.isoformat(), privacy=RAW)
    assert "CDRHOUSE_PHONE_NUMBERS=raw" in str(refused.value)
    assert digests(data_dir) == before

    home = tmp_path / "home"
    home.mkdir()
    (home / "dagster.yaml").write_text(LOCAL_INSTANCE_YAML.read_text())
    env = clean_env(**served.env(data_dir) | {"DAGSTER_HOME": str(home)})  # raw: the default
    argv = ["ingest", "--start", day.isoformat(), "--end", (day + timedelta(1)).isoformat()]
    run = run_cdrhouse(argv, env)

    assert_one_line_setup_error(run, "CDRHOUSE_PHONE_NUMBERS=raw", KEY_MARKER_FILE)
    assert digests(data_dir) == before
    assert tree(home) == ["dagster.yaml"]  # no run was recorded


def test_lake_info_says_which_key_and_how_many_erased(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """What the refusals name, where an operator looks: the key's check (never the key) and the
    forget-list's size; nothing for a lake without tokens."""
    data_dir = tmp_path / "data"
    env = {"CDRHOUSE_DATA_DIR": str(data_dir)}
    lake = Lake(str(data_dir / "lake"))
    land(lake, DAY1, RAW)
    assert main(["lake", "info"], env=env) == 0
    assert "tokens:" not in capsys.readouterr().out

    token_lake = Lake(str(tmp_path / "tokens" / "lake"))
    land(token_lake, DAY1)
    token_lake.forget(["ab" * 32, "cd" * 32])
    assert POLICY.key_check is not None
    env = {"CDRHOUSE_DATA_DIR": str(tmp_path / "tokens")}
    assert main(["lake", "info"], env=env) == 0
    out = capsys.readouterr().out
    line = f"tokens: key check {POLICY.key_check[:12]}… ({KEY_MARKER_FILE}); 2 erased (forget-list)"
    assert line in out.splitlines()
    assert KEY.decode() not in out
    assert KEY.hex() not in out


@pytest.mark.parametrize("marker", [KEY_MARKER_FILE, "_cdrhouse_lake.json"])
def test_a_damaged_marker_is_refused_in_one_line_and_nothing_is_written(
    tmp_path: Path, marker: str
) -> None:
    """A marker cut short (a partial copy, an edit by hand) refused every landing with a
    JSONDecodeError; now it is a setup failure naming the file, as a conflict is."""
    lake = Lake(str(tmp_path / "lake"))
    land(lake, DAY1)
    (tmp_path / "lake" / marker).write_text('{"pii_key_check": ')
    before = digests(tmp_path)

    with pytest.raises(LakeSourceConflict) as refused:
        land_day(sandbox(), Lake(lake.uri), logging.getLogger("test"), DAY2, privacy=POLICY)

    assert marker in str(refused.value)
    assert "\n" not in str(refused.value)
    assert digests(tmp_path) == before


def test_a_damaged_marker_is_shown_by_the_readers_and_removed_by_a_reset(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`lake info`, `lake views` and `lake reset` ended in a traceback on a damaged marker,
    and `privacy forget <number>` in one from the key's check. Reading needs no claim: they
    say what is damaged; the reset removes the source's marker (not the key's claim, kept
    with the forget-list); the erasure is refused in one line, its forget-list unchanged."""
    lake = Lake(str(tmp_path / "lake"))
    land(lake, DAY1)
    lake.forget(["ab" * 32])
    (tmp_path / "lake" / "_cdrhouse_lake.json").write_text("not json")
    (tmp_path / "lake" / KEY_MARKER_FILE).write_text("[1]")
    env = {"CDRHOUSE_DATA_DIR": str(tmp_path)}
    damaged = "(damaged: {} is not the JSON object cdrhouse wrote"

    assert main(["lake", "info"], env=env) == 0
    out = capsys.readouterr().out
    assert f"source: {damaged.format('_cdrhouse_lake.json')})" in out.splitlines()
    assert f"tokens: {damaged.format(KEY_MARKER_FILE)}" in out
    assert "cdrs" in out  # the partitions are listed all the same

    assert main(["lake", "views"], env=env) == 0
    capsys.readouterr()
    assert main(["sql", "SELECT source FROM lake_info"], env=env) == 0
    assert damaged.format("_cdrhouse_lake.json") in capsys.readouterr().out

    forget_list = (tmp_path / "lake" / "_privacy" / "forgotten_tokens.txt").read_bytes()
    token_env = env | {"CDRHOUSE_PHONE_NUMBERS": "token", "CDRHOUSE_PII_KEY": KEY.decode()}
    assert main(["privacy", "forget", "+4915112345678"], env=token_env) == 2
    err = capsys.readouterr().err
    assert err.startswith("cdrhouse privacy: error: refusing to write into the lake")
    assert KEY_MARKER_FILE in err
    assert err.count("\n") == 1
    assert KEY.decode() not in err
    assert (tmp_path / "lake" / "_privacy" / "forgotten_tokens.txt").read_bytes() == forget_list

    assert main(["lake", "reset", "--yes"], env=env) == 0
    assert "source was (damaged" in capsys.readouterr().out
    assert Lake(lake.uri).source() is None
    assert sorted(p.name for p in (tmp_path / "lake").iterdir()) == ["_privacy"]


def test_a_damaged_account_marker_names_that_accounts_reset(tmp_path: Path) -> None:
    """The hint is a command that works: the account's own reset, which keeps the others."""
    sub = Lake(str(tmp_path / "lake")).account("emea")
    marker = tmp_path / "lake" / "account_id=emea" / "_cdrhouse_lake.json"
    marker.parent.mkdir(parents=True)
    marker.write_text("[]")
    with pytest.raises(LakeSourceConflict) as refused:
        sub.source()
    assert "account 'emea'" in str(refused.value)
    assert "`cdrhouse lake reset --account emea --yes`" in str(refused.value)
    assert (
        sub.source_shown() == "(damaged: _cdrhouse_lake.json is not the JSON object cdrhouse wrote)"
    )
