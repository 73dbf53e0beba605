"""`write_report` replaces its file whole, even when two writers race on it."""

from __future__ import annotations

import datetime as dt
import threading
from pathlib import Path

from warehouse.report import write_report

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
