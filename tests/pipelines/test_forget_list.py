"""The forget-list edited by hand (issue 26): a line that is not a token (a number typed in,
a truncated token) stops every landing and erasure of that lake with one line naming the line
by its number, never its text; line endings and blank lines are not damage."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipelines.cli import main
from tests.support.token_lake import DAY1, DAY2, KEY, digests, land
from warehouse.lake import FORGET_LIST, ForgetListDamaged, Lake
from warehouse.privacy import phone_token

NUMBER = "+4915112345678"  # what a careless operator types into the list
TOKEN = phone_token(KEY, NUMBER)


def _lake(tmp_path: Path) -> Lake:
    lake = Lake(str(tmp_path / "data" / "lake"))
    land(lake, DAY1)
    return lake


def _env(tmp_path: Path) -> dict[str, str]:
    return {"CDRHOUSE_DATA_DIR": str(tmp_path / "data"), "CDRHOUSE_PII_KEY": KEY.decode()}


def test_a_line_that_is_no_token_stops_landings_and_erasures_and_is_never_shown(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lake = _lake(tmp_path)
    lake.forget([TOKEN])
    listed = tmp_path / "data" / "lake" / FORGET_LIST
    listed.write_bytes(listed.read_bytes() + NUMBER.encode() + b"\n")

    with pytest.raises(ForgetListDamaged) as refused:
        land(lake, DAY2)
    message = str(refused.value)
    assert f"line 2 of {FORGET_LIST}" in message, message
    assert NUMBER[3:] not in message
    assert DAY2 not in {k.removeprefix("date=") for k in lake.partitions("cdrs")}

    files = digests(tmp_path / "data")
    code = main(["privacy", "forget", "--token", "a" * 64], env=_env(tmp_path))
    out, err = capsys.readouterr()
    assert code == 2
    assert err.count("\n") == 1, err
    assert f"line 2 of {FORGET_LIST}" in err, err
    assert NUMBER[3:] not in out + err
    assert digests(tmp_path / "data") == files  # the refusal wrote nothing

    assert main(["lake", "info"], env=_env(tmp_path)) == 0
    out, _ = capsys.readouterr()
    assert f"(damaged: line 2 of {FORGET_LIST}" in out, out
    assert NUMBER[3:] not in out


def test_line_endings_and_blank_lines_are_read_as_the_same_tokens(tmp_path: Path) -> None:
    lake = Lake(str(tmp_path / "lake"))
    lake.forget([TOKEN])
    listed = tmp_path / "lake" / FORGET_LIST
    other = "b" * 64
    listed.write_bytes(f"\r\n{TOKEN}\r\n\n  {other}  \r\n".encode())
    assert lake.forgotten() == {TOKEN, other}
