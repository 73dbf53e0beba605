"""Issue 26: `cdrhouse privacy forget NUMBER | --token HEX [--account ID]` on a lake landed
under `token` by the day step: what it prints (never the number), what it changes, and its
one-line refusals, which write nothing."""

from __future__ import annotations

import shutil
from pathlib import Path

import duckdb
import pytest

from pipelines.cli import main
from tests.support.token_lake import (
    DAY1,
    DAY2,
    KEY,
    Person,
    day1_caller,
    digests,
    flagged,
    holding,
    land,
)
from warehouse.duck import WAREHOUSE_FILE, build_warehouse
from warehouse.lake import Lake
from warehouse.privacy import RAW

EMEA = "emea"


@pytest.fixture(scope="module")
def landed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Person]:
    """A data dir: the default account's two days and account `emea`'s day 1, landed under
    `token`, and the views over them (built once; each test works on its own copy)."""
    base = tmp_path_factory.mktemp("cli_privacy")
    data_dir = base / "data"
    lake = Lake(str(data_dir / "lake"))
    for day in (DAY1, DAY2):
        land(lake, day)
    land(lake.account(EMEA), DAY1)
    build_warehouse(data_dir)
    raw = Lake(str(base / "raw"))
    land(raw, DAY1, RAW)
    return data_dir, day1_caller(lake, raw)


@pytest.fixture
def data_dir(landed: tuple[Path, Person], tmp_path: Path) -> Path:
    shutil.copytree(landed[0], tmp_path / "data")
    return tmp_path / "data"


@pytest.fixture
def person(landed: tuple[Path, Person]) -> Person:
    return landed[1]


def _env(data_dir: Path, *, key: bool = True) -> dict[str, str]:
    env = {"CDRHOUSE_DATA_DIR": str(data_dir)}
    if key:
        env["CDRHOUSE_PII_KEY"] = KEY.decode()
    return env


def _counts(lake: Lake, token: str) -> tuple[int, int]:
    """(rows, partitions) holding `token`, over every table."""
    held = holding(lake, token)
    rows = sum(len(r) for r in held.values())
    return rows, sum(len({k for k, _ in r}) for r in held.values())


def test_forget_by_number_in_any_form_erases_it_from_every_account_and_prints_counts(
    data_dir: Path, person: Person, capsys: pytest.CaptureFixture[str]
) -> None:
    root = Lake(str(data_dir / "lake"))
    emea = root.account(EMEA)
    expected = {"default": holding(root, person.token), EMEA: holding(emea, person.token)}
    rows = sum(len(r) for held in expected.values() for r in held.values())
    parts = sum(len({k for k, _ in r}) for held in expected.values() for r in held.values())
    assert expected[EMEA]["cdrs"], "the caller is in both accounts' day 1"
    digits = person.number.removeprefix("+")
    written = ["00" + digits[:2], digits[2:5], digits[5:]]  # 0049 151 … unquoted

    code = main(["privacy", "forget", *written], env=_env(data_dir))

    out, err = capsys.readouterr()
    assert code == 0, err
    assert err == ""
    assert digits not in out
    assert digits[2:] not in out.replace(" ", "")  # not even without its country code
    assert person.token not in out  # only its first characters
    lines = out.splitlines()
    assert lines[0] == f"account default: token {person.token[:12]}…"
    for account, held in expected.items():
        start = lines.index(f"account {account}: token {person.token[:12]}…")
        for table, table_rows in held.items():
            n, m = len(table_rows), len({k for k, _ in table_rows})
            assert f"  {table:<20} {n} rows in {m} partitions changed" in lines[start:], table
    assert lines[-1] == f"total: {rows} rows in {parts} partitions changed"
    assert _counts(root, person.token) == (0, 0)
    assert _counts(emea, person.token) == (0, 0)
    assert flagged(root) == expected["default"]
    assert flagged(emea) == expected[EMEA]
    assert root.forgotten() == emea.forgotten() == {person.token}
    # `cdrhouse sql` sees it: the flagged rows of both accounts, the token nowhere.
    with duckdb.connect(str(data_dir / WAREHOUSE_FILE), read_only=True) as con:
        row = con.execute(
            "SELECT count(*) FILTER (WHERE pii_forgotten), count(*) FILTER (WHERE ? IN "
            "(from_phone_number, to_phone_number, from_identifier, to_identifier)) FROM cdrs",
            [person.token],
        ).fetchone()
    assert row == (len(expected["default"]["cdrs"]) + len(expected[EMEA]["cdrs"]), 0)


def test_forget_by_token_in_one_account_leaves_the_others_byte_identical(
    data_dir: Path, person: Person, capsys: pytest.CaptureFixture[str]
) -> None:
    root = Lake(str(data_dir / "lake"))
    emea = root.account(EMEA)
    held = _counts(emea, person.token)
    default_files = {
        rel: d for rel, d in digests(root.root).items() if not rel.startswith("account_id=")
    }

    code = main(
        ["privacy", "forget", "--token", person.token.upper(), "--account", EMEA],
        env=_env(data_dir, key=False),  # a token needs no key
    )

    out, err = capsys.readouterr()
    assert code == 0, err
    assert out.splitlines()[0] == f"account {EMEA}: token {person.token[:12]}…"
    assert "account default" not in out
    assert out.splitlines()[-1] == f"total: {held[0]} rows in {held[1]} partitions changed"
    assert _counts(emea, person.token) == (0, 0)
    assert _counts(root, person.token) != (0, 0)
    assert root.forgotten() == frozenset()
    assert {
        rel: d for rel, d in digests(root.root).items() if not rel.startswith("account_id=")
    } == default_files


@pytest.mark.parametrize(
    ("args", "key", "message"),
    [
        (["+{n}"], False, "CDRHOUSE_PII_KEY is not set"),
        (["+{n}", "--token", "{t}"], True, "exactly one of NUMBER and --token"),
        ([], True, "exactly one of NUMBER and --token"),
        (["+{n}x"], True, "NUMBER is not a phone number"),
        (["+{n}", "+{n}"], True, "NUMBER is not a phone number"),  # two numbers
        (["0{n}"], True, "national form"),
        (["+{n}99999"], True, "an international number has 7 to 15"),
        (["--token", "{t}0"], True, "--token must be 64 hex characters"),
        (["--token", "{t}", "--account", "nope"], True, "--account nope: no such account"),
    ],
)
def test_a_refusal_is_one_line_exit_2_and_writes_nothing(
    data_dir: Path,
    person: Person,
    capsys: pytest.CaptureFixture[str],
    args: list[str],
    key: bool,
    message: str,
) -> None:
    digits = person.number.removeprefix("+")
    argv = ["privacy", "forget", *(a.format(n=digits, t=person.token) for a in args)]
    files = digests(data_dir)

    code = main(argv, env=_env(data_dir, key=key))

    out, err = capsys.readouterr()
    assert code == 2
    assert out == ""
    assert err.count("\n") == 1, err
    assert message in err
    assert digits[2:] not in err  # the number is never echoed
    assert digests(data_dir) == files


def test_a_number_split_by_an_option_is_not_echoed_by_the_usage_error(
    data_dir: Path, person: Person, capsys: pytest.CaptureFixture[str]
) -> None:
    """`privacy forget +49 151 --account emea 12345678`, unquoted: argparse refused the part
    after the option and echoed it ("unrecognized arguments: 12345678")."""
    digits = person.number.removeprefix("+")
    argv = ["privacy", "forget", "+" + digits[:2], digits[2:5], "--account", "x", digits[5:]]
    files = digests(data_dir)
    with pytest.raises(SystemExit) as exit_:
        main(argv, env=_env(data_dir))
    assert exit_.value.code == 2
    _, err = capsys.readouterr()
    assert "unrecognized arguments" in err
    assert digits[5:] not in err
    assert digests(data_dir) == files
