"""Mistakes an analyst or an operator makes with the commands that read the lake, each of which
did harm before: a report written over a partition of the lake the views read, views repointed
for good at a mistyped lake, an erasure "done" on an empty data dir, good views deleted by a
reset of a mistyped lake, a lake URI's secret echoed, a private export made world-readable,
tracebacks for a key that is not UTF-8 or a data dir that is a file. Each is refused in one
line (exit 2), with nothing written."""

from __future__ import annotations

import hashlib
import shutil
import stat
from pathlib import Path

import pytest

from pipelines.cli import main
from tests.support.token_lake import DAY1, DAY2, land
from warehouse.lake import Lake
from warehouse.privacy import RAW

SECRET = "supersecretpass"


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A lake holding one day (300 CDRs), as a team's shared lake."""
    lake = tmp_path_factory.mktemp("shared") / "lake"
    land(Lake(str(lake)), DAY1, RAW)
    return lake


@pytest.fixture
def lake(shared: Path, tmp_path: Path) -> Path:
    """This test's copy of the shared lake."""
    shutil.copytree(shared, tmp_path / "shared" / "lake")
    return tmp_path / "shared" / "lake"


def _count(env: dict[str, str], capsys: pytest.CaptureFixture[str]) -> str:
    assert main(["sql", "--format", "csv", "SELECT count(*) AS n FROM cdrs"], env=env) == 0
    return capsys.readouterr().out.splitlines()[-1]


def _one_line(capsys: pytest.CaptureFixture[str], *needles: str) -> str:
    out, err = capsys.readouterr()
    assert out == "", out
    assert err.count("\n") == 1, err
    for needle in needles:
        assert needle in err, err
    return err


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_a_report_never_writes_into_the_lake_the_views_read(
    lake: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    env = {"CDRHOUSE_DATA_DIR": str(tmp_path / "analyst")}
    # Views built once over the shared lake; the variable is not set in the next shell.
    assert _count(env | {"CDRHOUSE_LAKE_URI": lake.as_uri()}, capsys) == "300"
    day = lake / "cdrs" / f"date={DAY1}" / "part-0.parquet"
    before = _digest(day)

    argv = ["report", "--start", DAY1, "--end", DAY2, "--out", str(day)]
    assert main(argv, env=env) == 2
    _one_line(capsys, "inside the lake")
    assert _digest(day) == before
    assert _count(env, capsys) == "300"


def test_a_mistyped_lake_uri_leaves_the_views_over_their_lake(
    lake: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    env = {"CDRHOUSE_DATA_DIR": str(tmp_path / "analyst")}
    assert _count(env | {"CDRHOUSE_LAKE_URI": lake.as_uri()}, capsys) == "300"
    views = tmp_path / "analyst" / "warehouse.duckdb"
    before = _digest(views)
    typo = (lake.parent / "lak").as_uri()

    for argv in (["sql", "SELECT count(*) FROM cdrs"], ["lake", "views"], ["report"]):
        assert main(argv, env=env | {"CDRHOUSE_LAKE_URI": typo}) == 2, argv
        _one_line(capsys, f"CDRHOUSE_LAKE_URI={typo} holds no data", lake.as_uri())
    assert _digest(views) == before
    assert _count(env, capsys) == "300"  # still the shared lake's answer


def test_an_erasure_in_a_data_dir_without_data_is_refused_and_creates_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    typo = tmp_path / "dta"
    env = {"CDRHOUSE_DATA_DIR": str(typo), "CDRHOUSE_PII_KEY": "a-key-of-at-least-16-bytes"}
    for how in (["+4915112345678"], ["--token", "a" * 64]):
        argv = ["privacy", "forget", *how]
        assert main(argv, env=env) == 2
        _one_line(capsys, "no data in the lake", "nothing to erase")
    assert not typo.exists()


def test_a_reset_of_a_mistyped_lake_keeps_the_views_of_the_real_one(
    lake: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    env = {"CDRHOUSE_DATA_DIR": str(tmp_path / "analyst")}
    assert _count(env | {"CDRHOUSE_LAKE_URI": lake.as_uri()}, capsys) == "300"
    typo = (lake.parent / "lak").as_uri()
    assert main(["lake", "reset", "--yes"], env=env | {"CDRHOUSE_LAKE_URI": typo}) == 0
    out = capsys.readouterr().out
    assert "deleted 0 file(s)" in out
    assert "source was none" in out, out
    assert (tmp_path / "analyst" / "warehouse.duckdb").exists()
    assert _count(env, capsys) == "300"


@pytest.mark.parametrize(
    "argv",
    [
        ["sql", "SELECT 1"],
        ["lake", "info"],
        ["report"],
        ["privacy", "forget", "--token", "a" * 64],
        ["ingest", "--start", DAY1, "--end", DAY2],
    ],
    ids=["sql", "lake-info", "report", "privacy", "ingest"],
)
def test_a_lake_uri_carrying_credentials_is_refused_without_showing_them(
    argv: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    env = {
        "CDRHOUSE_DATA_DIR": str(tmp_path / "data"),
        "CDRHOUSE_LAKE_URI": f"s3://AKIAEXAMPLE:{SECRET}@bucket/lake?X-Amz-Signature=sig{SECRET}",
        "CC_API_BASE_URL": "sandbox",
        "CDRHOUSE_PHONE_NUMBERS": "raw",
    }
    assert main(argv, env=env) == 2
    err = _one_line(capsys, "must not carry credentials")
    assert SECRET not in err
    assert "AKIAEXAMPLE" not in err
    assert not (tmp_path / "data").exists()


def test_an_export_over_a_private_file_stays_private(
    lake: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    env = {"CDRHOUSE_DATA_DIR": str(tmp_path / "analyst"), "CDRHOUSE_LAKE_URI": lake.as_uri()}
    export = tmp_path / "numbers.csv"
    export.write_text("old\n")
    export.chmod(0o600)
    query = "SELECT from_phone_number FROM cdrs LIMIT 3"
    assert main(["sql", "--format", "csv", "--output", str(export), query], env=env) == 0
    assert export.read_text().startswith("from_phone_number")
    assert stat.S_IMODE(export.stat().st_mode) == 0o600


@pytest.mark.parametrize(
    "argv",
    [["privacy", "forget", "+4915112345678"], ["ingest", "--start", DAY1, "--end", DAY2]],
    ids=["privacy", "ingest"],
)
def test_a_privacy_key_that_is_not_utf8_is_one_line(
    argv: list[str], lake: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # What os.environ holds for a variable whose bytes are not UTF-8 (surrogateescape).
    env = {
        "CDRHOUSE_DATA_DIR": str(lake.parent),
        "CDRHOUSE_PII_KEY": "a-key-of-at-least-16-bytes-\udcff",
        "CC_API_BASE_URL": "sandbox",
        "CDRHOUSE_PHONE_NUMBERS": "token",
    }
    assert main(argv, env=env) == 2
    _one_line(capsys, "CDRHOUSE_PII_KEY is not UTF-8 text")


@pytest.mark.parametrize("variable", ["CDRHOUSE_DATA_DIR", "CDRHOUSE_LAKE_URI"])
@pytest.mark.parametrize(
    "argv",
    [["lake", "info"], ["lake", "reset", "--yes"], ["privacy", "forget", "--token", "a" * 64]],
    ids=["lake-info", "lake-reset", "privacy"],
)
def test_a_data_dir_or_lake_that_is_a_file_is_one_line(
    variable: str, argv: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    afile = tmp_path / "report.html"
    afile.write_text("<html></html>")
    env = {"CDRHOUSE_DATA_DIR": str(tmp_path / "data"), variable: str(afile)}
    assert main(argv, env=env) == 2
    _one_line(capsys, "file")
    assert afile.read_text() == "<html></html>"


def test_a_query_and_a_query_file_together_are_refused(
    lake: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The positional query was dropped without a word, and the file's answered.
    env = {"CDRHOUSE_DATA_DIR": str(tmp_path / "analyst"), "CDRHOUSE_LAKE_URI": lake.as_uri()}
    query = tmp_path / "q.sql"
    query.write_text("SELECT 42")
    assert main(["sql", "SELECT count(*) FROM cdrs", "--file", str(query)], env=env) == 1
    _one_line(capsys, "give the query or --file, not both")


def test_a_row_count_past_what_duckdb_takes_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    env = {"CDRHOUSE_DATA_DIR": str(tmp_path / "data")}
    with pytest.raises(SystemExit) as usage:
        main(["sql", "--max-rows", "99999999999999999999", "SELECT 1"], env=env)
    assert usage.value.code == 2
    assert "at most 1,000,000,000" in capsys.readouterr().err


def test_an_output_under_a_file_names_that_file(
    lake: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    env = {"CDRHOUSE_DATA_DIR": str(tmp_path / "analyst"), "CDRHOUSE_LAKE_URI": lake.as_uri()}
    afile = tmp_path / "report.html"
    afile.write_text("<html></html>")
    argv = ["sql", "--format", "csv", "--output", str(afile / "x.csv"), "SELECT 1"]
    assert main(argv, env=env) == 1
    _one_line(capsys, f"{afile} is a file, not a folder")
    assert main(["report", "--out", str(afile / "r.html")], env=env) == 2
    _one_line(capsys, f"{afile} is a file, not a folder")
    assert afile.read_text() == "<html></html>"
