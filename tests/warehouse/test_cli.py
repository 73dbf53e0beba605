"""`cdrhouse sql` output formats and clear errors (through the real `cdrhouse` parser)."""

from __future__ import annotations

import argparse
import datetime as dt
import io
import json
import os
import stat
import threading
import tracemalloc
from decimal import Decimal
from pathlib import Path

import polars as pl
import pytest

from models.timestamps import EARLIEST_DAY
from pipelines.cli import main
from tests.support.disk import FILLER, small_filesystem
from warehouse.cli import add_report_arguments, report_range, run_report

from .conftest import DAYS, START, SmallWarehouse


def run(small: SmallWarehouse, *argv: str) -> int:
    return main(["sql", *argv], env={"CDRHOUSE_DATA_DIR": str(small.data_dir)})


def test_aligned_table(small: SmallWarehouse, capsys) -> None:
    assert (
        run(
            small,
            "SELECT date, sum(cdrs) AS cdrs FROM rpt_daily_volume GROUP BY date ORDER BY date",
        )
        == 0
    )
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["date", "|", "cdrs"]
    assert set(lines[1]) <= {"-", "+"}
    assert lines[2].startswith("2026-11-01")
    assert lines[2].endswith("800")
    assert lines[-1] == "(3 rows)"
    assert len({line.index("|") for line in lines[2:-1]}) == 1  # columns aligned


def test_csv_json_parquet_and_file(small: SmallWarehouse, tmp_path, capsys) -> None:
    query = "SELECT date, cost FROM rpt_sms_delivery ORDER BY date"
    assert run(small, query, "--format", "csv") == 0
    csv = capsys.readouterr().out.splitlines()
    assert csv[0] == "date,cost"
    assert len(csv) == 4
    qfile = tmp_path / "q.sql"
    qfile.write_text(query)
    out = tmp_path / "r.json"
    assert run(small, "--file", str(qfile), "--format", "json", "--output", str(out)) == 0
    data = json.loads(out.read_text())
    assert [r["date"] for r in data] == ["2026-11-01", "2026-11-02", "2026-11-03"]
    pq = tmp_path / "r.parquet"
    assert run(small, query, "--format", "parquet", "--output", str(pq)) == 0
    frame = pl.read_parquet(pq)
    assert isinstance(frame.schema["cost"], pl.Decimal)
    want = small.tables["cdr_sms"].group_by("date").agg(pl.col("cost").sum()).sort("date")
    assert [Decimal(str(c)) for c in frame["cost"]] == want["cost"].to_list()


def test_bad_query_is_a_clear_error_without_traceback(small: SmallWarehouse, capsys) -> None:
    assert run(small, "SELECT * FROM no_such_view") == 1
    err = capsys.readouterr().err
    assert err.startswith("cdrhouse sql: error:")
    assert "no_such_view" in err
    assert "Traceback" not in err


def test_writes_are_refused_read_only(small: SmallWarehouse, capsys) -> None:
    assert run(small, "CREATE TABLE t AS SELECT 1") == 1
    assert "read-only" in capsys.readouterr().err.lower()


def test_missing_warehouse(tmp_path, capsys) -> None:
    code = main(["sql", "SELECT 1"], env={"CDRHOUSE_DATA_DIR": str(tmp_path)})
    assert code == 1
    assert "no warehouse" in capsys.readouterr().err


def test_lake_info_lists_every_table_with_partitions(small: SmallWarehouse, capsys) -> None:
    assert main(["lake", "info"], env={"CDRHOUSE_DATA_DIR": str(small.data_dir)}) == 0
    out = capsys.readouterr().out
    assert f"lake:   {small.lake.uri}" in out
    last = START + dt.timedelta(days=DAYS - 1)
    assert f"  {'cdrs':<24} {DAYS:>5} partitions  date={START} .. date={last}" in out
    assert f"  {'users':<24} " in out


def test_the_last_complete_business_day_ended_by_todays_utc_midnight() -> None:
    """Only whole UTC days are ingested: at 12:00 UTC on the 20th, New York's 19th is not
    whole yet (its last 5 hours are the 20th in UTC), Sydney's 19th and UTC's 19th are."""
    import datetime as dt
    from zoneinfo import ZoneInfo

    from warehouse.cli import last_complete_local_end

    now = dt.datetime(2026, 11, 20, 12, 0, tzinfo=dt.UTC)
    assert last_complete_local_end(now, ZoneInfo("America/New_York")) == dt.date(2026, 11, 19)
    assert last_complete_local_end(now, ZoneInfo("Australia/Sydney")) == dt.date(2026, 11, 20)
    assert last_complete_local_end(now, dt.UTC) == dt.date(2026, 11, 20)
    # Just after UTC midnight: the day that just ended is whole in UTC and in Sydney too.
    late = dt.datetime(2026, 11, 20, 0, 1, tzinfo=dt.UTC)
    assert last_complete_local_end(late, ZoneInfo("Australia/Sydney")) == dt.date(2026, 11, 20)


def test_max_rows_shows_that_many_and_a_negative_count_is_a_usage_error(
    small: SmallWarehouse, capsys: pytest.CaptureFixture[str]
) -> None:
    query = "SELECT * FROM range(5) t(n)"
    assert run(small, "--max-rows", "2", query) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.strip() for line in lines[2:]] == ["0", "1", "(5 rows, showing 2)"]
    # -1 sliced the rows from the end: every row but the last, "showing -1".
    with pytest.raises(SystemExit) as usage:
        run(small, "--max-rows", "-1", query)
    assert usage.value.code == 2
    assert "--max-rows: invalid count -1: expected 0 or more" in capsys.readouterr().err


def test_an_output_that_meets_a_full_disk_leaves_the_previous_file_and_no_part(
    small: SmallWarehouse, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--output` is written beside and renamed: a write that meets a full disk (a real
    tmpfs) fails with one line, and yesterday's export is still whole (it was truncated
    first, then half-written)."""
    # ~4 MB of hashes (~2 MB compressed in Parquet): more than the 1 MiB tmpfs holds.
    big = "SELECT a.id, md5(a.id || b.id) AS h FROM cdrs a, cdrs b LIMIT 100000"
    with small_filesystem(free_bytes=64 * 1024) as fs:
        out = fs / "export.csv"
        assert run(small, "SELECT 1 AS x", "--format", "csv", "--output", str(out)) == 0
        before = out.read_bytes()
        assert before == b"x\n1\n"
        capsys.readouterr()
        for fmt in ("csv", "json", "parquet", "table"):
            assert run(small, big, "--format", fmt, "--output", str(out)) == 1, fmt
            err = capsys.readouterr().err
            assert err.startswith("cdrhouse sql: error:"), err
            assert err.count("\n") == 1, err
            assert out.read_bytes() == before, fmt
        assert sorted(p.name for p in fs.iterdir()) == sorted([FILLER, "export.csv"])


def test_an_output_fifo_is_streamed_into_and_stays_a_fifo(
    small: SmallWarehouse, tmp_path: Path
) -> None:
    """A device or a named pipe (`--output /dev/stdout`) is written in place: renaming a file
    onto it would replace it (as root, /dev/full became a regular file)."""
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)

    def through_fifo(fmt: str) -> bytes:
        got: list[bytes] = []
        reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()))
        reader.start()
        try:
            assert run(small, "SELECT 1 AS x", "--format", fmt, "--output", str(fifo)) == 0
        finally:
            reader.join(timeout=30)
        assert stat.S_ISFIFO(fifo.lstat().st_mode)
        [data] = got
        return data

    assert through_fifo("csv") == b"x\n1\n"
    # Parquet too: pyarrow's own file opening seeks, which a FIFO refused ("lseek failed").
    assert pl.read_parquet(io.BytesIO(through_fifo("parquet"))).to_dicts() == [{"x": 1}]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pipe"]


@pytest.mark.parametrize("out", ["", ".", "{tmp}"])
def test_an_output_that_is_no_file_is_refused_before_the_query(
    small: SmallWarehouse, tmp_path: Path, capsys: pytest.CaptureFixture[str], out: str
) -> None:
    assert run(small, "SELECT 1 AS x", "--format", "csv", "--output", out.format(tmp=tmp_path)) == 1
    err = capsys.readouterr().err
    assert err.startswith("cdrhouse sql: error: --output "), err
    assert err.count("\n") == 1, err
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--days", "100000"], "--days 100000 reaches back before 2000-01-01"),
        (["--days", "10000000"], "--days 10000000 reaches back before 2000-01-01"),
        (["--start", "0001-01-01", "--end", "2026-11-02"], "before 2000-01-01"),
        (["--start", "2026-11-01", "--end", "9999-12-31"], "more than a year after today"),
        (["--start", "2026-W45", "--end", "2026-11-09"], "use YYYY-MM-DD"),
    ],
    ids=["centuries", "past-the-calendar", "year-1", "year-9999", "week-date"],
)
def test_a_report_range_typo_exits_2_with_one_line_before_any_work(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    """`--days 10000000` raised OverflowError (a traceback) and `--days 100000` charted
    centuries of empty days; a week date was read as its Monday."""
    parser = argparse.ArgumentParser()
    add_report_arguments(parser)
    out = tmp_path / "r.html"
    assert run_report(parser.parse_args([*argv, "--out", str(out)]), tmp_path) == 2
    err = capsys.readouterr().err
    assert err.startswith("cdrhouse report: error: "), err
    assert message in err, err
    assert err.count("\n") == 1, err
    assert not list(tmp_path.iterdir())


def test_the_longest_report_range_starts_on_the_earliest_day() -> None:
    today = dt.date(2026, 11, 27)
    days = (today - EARLIEST_DAY).days
    args = argparse.Namespace(days=days, start=None, end=None)
    assert report_range(args, today) == (EARLIEST_DAY, today)
    with pytest.raises(ValueError, match="reaches back before"):
        report_range(argparse.Namespace(days=days + 1, start=None, end=None), today)


def test_a_table_of_millions_of_rows_holds_only_the_rows_shown(
    small: SmallWarehouse, capsys: pytest.CaptureFixture[str]
) -> None:
    """The terminal table fetched every row into Python to print `--max-rows` of them:
    `SELECT * FROM cdrs` over a big lake could take the analyst's memory. Now it fetches
    the rows shown and lets DuckDB count the rest; the count is still exact."""
    query = "SELECT a.id, b.id AS other FROM cdrs a, cdrs b LIMIT 3000000"
    tracemalloc.start()
    try:
        assert run(small, query, "--max-rows", "3") == 0
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    lines = capsys.readouterr().out.splitlines()
    assert lines[-1] == "(3000000 rows, showing 3)"
    assert len(lines) == 2 + 3 + 1
    # 3M rows of two 36-character strings are > 500 MB as Python tuples.
    assert peak < 50 * 2**20, f"{peak / 2**20:.0f} MiB"


@pytest.mark.parametrize(("max_rows", "shown"), [("0", 0), ("2399", 2399), ("2400", 2400)])
def test_the_row_count_is_exact_at_the_edges_of_max_rows(
    small: SmallWarehouse, capsys: pytest.CaptureFixture[str], max_rows: str, shown: int
) -> None:
    assert run(small, "SELECT id FROM cdrs", "--max-rows", max_rows) == 0
    lines = capsys.readouterr().out.splitlines()
    total = 800 * DAYS
    more = f", showing {shown}" if total > shown else ""
    assert lines[-1] == f"({total} rows{more})"
    assert len(lines) == 2 + min(shown, total) + 1


def test_every_table_exports_to_csv_with_lists_and_maps_as_json(
    small: SmallWarehouse, capsys: pytest.CaptureFixture[str]
) -> None:
    """`cdrhouse sql --format csv "SELECT * FROM cdrs"` was a polars traceback: `tags` (like
    `users.channels` and the maps of the campaign views) is a list, which CSV cannot hold."""
    for table in ("cdrs", "users", "numbers", "rpt_campaign_outcomes", "agg_call_intervals"):
        assert run(small, f"SELECT * FROM {table}", "--format", "csv") == 0, table
        out = capsys.readouterr().out
        assert out.count("\n") > 1, table
    assert (
        run(small, "SELECT id, tags FROM cdrs WHERE len(tags) > 1 LIMIT 1", "--format", "csv") == 0
    )
    [header, row] = capsys.readouterr().out.splitlines()
    assert header == "id,tags"
    tags = json.loads(row.split(",", 1)[1].strip('"').replace('""', '"'))
    assert isinstance(tags, list)
    assert len(tags) > 1


def _cdrs_by_day(data_dir: Path, capsys, env: dict[str, str] | None = None) -> tuple[str, str]:
    query = "SELECT CAST(date AS VARCHAR) AS d, count(*) AS n FROM cdrs GROUP BY 1 ORDER BY 1"
    code = main(
        ["sql", "--format", "csv", query], env={"CDRHOUSE_DATA_DIR": str(data_dir), **(env or {})}
    )
    assert code == 0
    captured = capsys.readouterr()
    return captured.out, captured.err


def _copy_without_last_day(small: SmallWarehouse, to: Path) -> Path:
    """A copy of the data dir whose lake lacks the last day: answers tell the two lakes apart."""
    import shutil

    shutil.copytree(small.data_dir, to)
    last = START + dt.timedelta(days=DAYS - 1)
    for table in (to / "lake").iterdir():
        shutil.rmtree(table / f"date={last}", ignore_errors=True)
    return to


def test_a_copied_data_dir_is_answered_from_its_own_lake(
    small: SmallWarehouse, tmp_path: Path, capsys
) -> None:
    # Its views were built over the original's lake: they kept reading that one.
    original, _ = _cdrs_by_day(small.data_dir, capsys)
    copy = _copy_without_last_day(small, tmp_path / "copy")
    out, err = _cdrs_by_day(copy, capsys)
    assert out != original
    assert out.splitlines() == original.splitlines()[:DAYS]  # header and the first days
    assert f"rebuilding them over {(copy / 'lake').as_uri()}" in err
    assert _cdrs_by_day(copy, capsys) == (out, "")  # once
    assert _cdrs_by_day(small.data_dir, capsys) == (original, "")  # the original untouched


def test_the_lake_set_in_cdrhouse_lake_uri_is_the_one_answered_from(
    small: SmallWarehouse, tmp_path: Path, capsys
) -> None:
    original, _ = _cdrs_by_day(small.data_dir, capsys)
    other = _copy_without_last_day(small, tmp_path / "other")
    views = tmp_path / "views"  # a data dir of views only, built over the original's lake
    views.mkdir()
    (views / "warehouse.duckdb").write_bytes((small.data_dir / "warehouse.duckdb").read_bytes())
    assert _cdrs_by_day(views, capsys) == (original, "")  # an analyst's file: its own lake
    lake_env = {"CDRHOUSE_LAKE_URI": (other / "lake").as_uri()}
    out, err = _cdrs_by_day(views, capsys, lake_env)
    assert out.splitlines() == original.splitlines()[:DAYS]
    assert "(CDRHOUSE_LAKE_URI)" in err


def test_which_lake_the_views_follow(small: SmallWarehouse, tmp_path: Path) -> None:
    from pipelines.cli import _lake_moved

    copy = _copy_without_last_day(small, tmp_path / "copy")
    own, old = (copy / "lake").as_uri(), (small.data_dir / "lake").as_uri()
    assert _lake_moved(copy, None, old) == own  # copied: its own lake
    assert _lake_moved(copy, None, own) is None
    assert _lake_moved(copy, None, None) is None  # a file older than the record: as it was
    # Views over an object store beside an old local lake: CDRHOUSE_LAKE_URI forgotten, not
    # a move; the file keeps its lake.
    assert _lake_moved(copy, None, "s3://acme/lake") is None
    assert _lake_moved(copy, "s3://acme/lake/", "s3://acme/lake") is None
    assert _lake_moved(copy, old, own) == old  # set: always the one set
    assert _lake_moved(tmp_path / "views-only", None, old) is None  # no lake of its own
    # A lake of several accounts: its data is in its sub-lakes only.
    accounts = tmp_path / "accounts"
    (accounts / "lake").mkdir(parents=True)
    (copy / "lake").rename(accounts / "lake" / "account_id=emea")
    assert _lake_moved(accounts, None, old) == (accounts / "lake").as_uri()


def test_a_lake_of_several_accounts_gets_its_views_on_a_machine_without_them(
    small: SmallWarehouse, tmp_path: Path, capsys
) -> None:
    """An analyst's first `cdrhouse sql` over a lake whose data is all in account sub-lakes:
    it said "no data in the lake" (the root has no data of its own)."""
    import shutil

    data_dir = tmp_path / "analyst"
    (data_dir / "lake").mkdir(parents=True)
    shutil.copytree(small.data_dir / "lake", data_dir / "lake" / "account_id=emea")
    out, _ = _cdrs_by_day(data_dir, capsys)
    assert out == _cdrs_by_day(small.data_dir, capsys)[0]
    assert (data_dir / "warehouse.duckdb").exists()


def test_lake_views_over_no_data_is_refused_and_writes_nothing(tmp_path: Path, capsys) -> None:
    """A typo in CDRHOUSE_DATA_DIR: `lake views` made the directory and empty views there."""
    typo = tmp_path / "dtaa"
    assert main(["lake", "views"], env={"CDRHOUSE_DATA_DIR": str(typo)}) == 1
    err = capsys.readouterr().err
    assert err.startswith("cdrhouse lake views: error: no warehouse at "), err
    assert "no data in the lake" in err
    assert not typo.exists()
