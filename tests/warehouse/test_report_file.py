"""`write_report` replaces its file whole, even when two writers race on it; money is written
with thousands separators and 2 decimals, from the exact Decimal."""

from __future__ import annotations

import argparse
import datetime as dt
import os
import stat
import threading
from decimal import Decimal
from pathlib import Path

import pytest

from warehouse.cli import add_report_arguments, run_report
from warehouse.report import write_report
from warehouse.report.data import money, written

from .conftest import DAYS, START, SmallWarehouse


def test_concurrent_report_writers_leave_one_whole_file(
    small: SmallWarehouse, tmp_path: Path
) -> None:
    out = tmp_path / "reports" / "report.html"
    end = START + dt.timedelta(days=DAYS)
    errors: list[BaseException] = []

    def write() -> None:
        try:
            write_report(small.data_dir, START, end, out)
        except BaseException as exc:  # surfaced below
            errors.append(exc)

    writers = [threading.Thread(target=write) for _ in range(3)]
    for w in writers:
        w.start()
    for w in writers:
        w.join(timeout=120)
    assert not errors
    assert [p.name for p in out.parent.iterdir()] == ["report.html"]  # no temp file left
    assert out.read_text(encoding="utf-8").rstrip().endswith("</html>")


@pytest.mark.parametrize(
    ("value", "currency", "text"),
    [
        (Decimal("1234567.125000"), "EUR", "EUR 1,234,567.12"),  # half-even, from the Decimal
        (Decimal("1234567.135000"), "EUR", "EUR 1,234,567.14"),
        (Decimal("0.004999"), None, "0.00"),  # no currency set: no sign
        (Decimal("-1500.5"), "USD", "USD -1,500.50"),
        # Half-even on the Decimal; through a float (…0.0050048…) it would become .01.
        (Decimal("1000000000000.005"), "GBP", "GBP 1,000,000,000,000.00"),
    ],
)
def test_money_has_separators_and_two_decimals(
    value: Decimal, currency: str | None, text: str
) -> None:
    assert money(value, currency) == text
    assert written("money", value, currency) == text


def test_a_period_without_data_is_a_dash() -> None:
    assert {written(kind, None, "EUR") for kind in ("count", "pct", "seconds", "money")} == {"—"}


def test_one_balance_snapshot_is_a_figure_several_are_a_line(small: SmallWarehouse) -> None:
    from warehouse.duck import connect
    from warehouse.report import build_report

    con = connect(small.data_dir, read_only=True)
    try:
        # Snapshots are read from the first day to the morning after the last one.
        whole = build_report(con, START, START + dt.timedelta(days=DAYS), currency="EUR")
        single = build_report(con, START - dt.timedelta(days=1), START, currency="EUR")
    finally:
        con.close()
    (line,) = [c for c in whole.charts if c.chart.key == "balance"]
    assert line.figure is None
    assert line.spec is not None
    assert line.spec["mark"]["type"] == "line"
    assert [Decimal(r["amount_exact"]) for r in line.rows] == [Decimal(b) for b in small.balances]
    (figure,) = [c for c in single.charts if c.chart.key == "balance"]
    assert figure.spec is None
    assert figure.figure == f"EUR {Decimal(small.balances[0]):,.2f} on {START}"


def test_a_report_written_over_a_fifo_or_a_directory_is_refused_before_any_work(
    small: SmallWarehouse, tmp_path: Path
) -> None:
    fifo, folder = tmp_path / "pipe", tmp_path / "folder"
    os.mkfifo(fifo)
    folder.mkdir()
    end = START + dt.timedelta(days=DAYS)
    for out in (fifo, folder):
        with pytest.raises(ValueError, match="exists and is not a regular file"):
            write_report(small.data_dir, START, end, out)
    # The atomic rename would have put a file there (as root, over /dev/full).
    assert stat.S_ISFIFO(fifo.lstat().st_mode)
    assert folder.is_dir()
    assert not list(folder.iterdir())
    assert sorted(p.name for p in tmp_path.iterdir()) == ["folder", "pipe"]  # no temp file


def test_a_report_written_to_a_symlink_goes_to_its_target_and_the_link_stays(
    small: SmallWarehouse, tmp_path: Path
) -> None:
    target, link = tmp_path / "shared" / "report.html", tmp_path / "latest.html"
    target.parent.mkdir()
    link.symlink_to(target)
    write_report(small.data_dir, START, START + dt.timedelta(days=DAYS), link)
    assert link.is_symlink()
    assert target.read_text(encoding="utf-8").rstrip().endswith("</html>")


@pytest.mark.parametrize("out", ["", ".", "..", "{tmp}"])
def test_the_report_command_refuses_an_out_that_is_no_file_with_exit_2(
    small: SmallWarehouse, tmp_path: Path, capsys: pytest.CaptureFixture[str], out: str
) -> None:
    parser = argparse.ArgumentParser()
    add_report_arguments(parser)
    args = parser.parse_args(["--days", "3", "--out", out.format(tmp=tmp_path)])
    assert run_report(args, small.data_dir) == 2
    err = capsys.readouterr().err
    assert err.startswith("cdrhouse report: error: --out "), err
    assert err.count("\n") == 1, err
    assert not list(tmp_path.iterdir())


def test_the_report_command_never_writes_over_the_lake_or_the_warehouse(
    small: SmallWarehouse, capsys: pytest.CaptureFixture[str]
) -> None:
    """A careless `--out` naming a day's partition replaced it with the report's HTML (the day
    then failed every query), and one naming warehouse.duckdb replaced the views."""
    day = next((small.data_dir / "lake" / "cdrs").glob("*/part-0.parquet"))
    views = small.data_dir / "warehouse.duckdb"
    before = {p: p.read_bytes() for p in (day, views)}
    parser = argparse.ArgumentParser()
    add_report_arguments(parser)
    for out, needle in ((day, "inside the lake"), (views, "is the warehouse")):
        args = parser.parse_args(["--days", "3", "--out", str(out)])
        assert run_report(args, small.data_dir) == 2
        err = capsys.readouterr().err
        assert needle in err, err
        assert err.count("\n") == 1, err
    assert {p: p.read_bytes() for p in before} == before
