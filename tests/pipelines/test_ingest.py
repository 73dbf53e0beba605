"""`cdrhouse ingest` end to end against a real sandbox on a loopback port.

The issue's first "Done when": 3 days via CC_API_BASE_URL/CC_API_KEY, then per day the distinct
CDR ids in DuckDB equal the API's metadata.total, the per-type tables add up to `cdrs`, every
snapshot table is non-empty, and a second run over the same range leaves identical tables.
"""

from collections.abc import Iterator
from datetime import date, timedelta

import polars as pl
import pytest

from connectors.sandbox import Sandbox
from models.tables import CDR_TABLES, SNAPSHOT_TABLES, TYPE_TABLES
from pipelines.cli import CliError, main, validate_range
from pipelines.partitions import DEFAULT_START_DATE, partition_window
from pipelines.resources import ContactCenterResource
from tests.support.clock import FAR_FUTURE, SessionClock
from tests.support.lake import one_row, read_table, warehouse
from tests.support.served import ServedSandbox


@pytest.fixture
def days(clock: SessionClock) -> list[date]:
    return [clock.days_ago(n) for n in (4, 3, 2)]


def _cdr_counts(data_dir) -> dict[str, tuple[int, int]]:
    with warehouse(data_dir) as con:
        rows = con.execute(
            "select date::varchar, count(distinct id), count(*) from cdrs group by 1"
        ).fetchall()
    return {day: (distinct, total) for day, distinct, total in rows}


def _all_tables(data_dir) -> dict[str, pl.DataFrame]:
    # snapshot_at is when the snapshot was read: the only column allowed to move.
    names = [t.name for t in CDR_TABLES] + [
        "balance" if t.name == "balance_snapshots" else t.name for t in SNAPSHOT_TABLES
    ]
    return {name: read_table(data_dir, name, drop=("snapshot_at",)) for name in names}


def test_ingest_three_days_matches_the_api_and_is_idempotent(
    clean_faults: ServedSandbox, days: list[date], tmp_path, capsys
) -> None:
    env = clean_faults.env(tmp_path)
    argv = [
        "ingest",
        "--start",
        days[0].isoformat(),
        "--end",
        (days[-1] + timedelta(1)).isoformat(),
    ]
    assert main(argv, env=env) == 0
    out = capsys.readouterr().out
    # The progress display: one line per partition, then the snapshots.
    for day in days:
        assert f"ok   {day.isoformat()}" in out
    assert "ok   snapshots" in out

    counts = _cdr_counts(tmp_path)
    for day in days:
        total = clean_faults.api_total(day)
        assert total > 0
        assert counts[day.isoformat()] == (total, total), day

    with warehouse(tmp_path) as con:
        by_type = dict(con.execute("select type, count(*) from cdrs group by 1").fetchall())
        for kind, spec in TYPE_TABLES.items():
            (rows,) = one_row(con, f"select count(*) from {spec.name}")
            assert rows == by_type.get(kind, 0), spec.name
        assert sum(by_type.values()) == sum(counts[d.isoformat()][0] for d in days)
        (quarantined,) = one_row(con, "select count(*) from cdr_quarantine")
        assert quarantined == 0
        for spec in SNAPSHOT_TABLES:
            (rows,) = one_row(con, f"select count(*) from {spec.name}")
            assert rows > 0, f"snapshot table {spec.name} is empty"

    first = _all_tables(tmp_path)
    assert main(argv, env=env) == 0
    second = _all_tables(tmp_path)
    for name, frame in first.items():
        assert frame.equals(second[name]), f"{name} changed on a re-run"


@pytest.fixture
def bundled_sandbox(clock: SessionClock) -> Iterator[Sandbox]:
    """The CLI's sandbox for `CC_API_BASE_URL=sandbox` (process-wide for its shape), frozen at
    the session's clock while the test runs, so its truth and the ingest see the same calls."""
    sandbox = ContactCenterResource(
        base_url="sandbox",
        sandbox_cdrs_per_day=300,
        sandbox_start_date=DEFAULT_START_DATE.isoformat(),
    ).sandbox()
    clock.freeze(sandbox)
    yield sandbox
    sandbox.clock.set(None)


def test_sandbox_base_url_runs_the_bundled_sandbox_in_process(
    bundled_sandbox: Sandbox, clock: SessionClock, tmp_path, capsys
) -> None:
    env = {
        "CC_API_BASE_URL": "sandbox",
        "CDRHOUSE_DATA_DIR": str(tmp_path),
        "CDRHOUSE_SANDBOX_CDRS_PER_DAY": "300",
        "CDRHOUSE_PHONE_NUMBERS": "raw",
    }
    day = clock.days_ago(1)
    argv = [
        "ingest",
        "--start",
        day.isoformat(),
        "--end",
        clock.today.isoformat(),
        "--no-snapshots",
    ]
    assert main(argv, env=env) == 0
    assert "bundled sandbox" in capsys.readouterr().out
    sandbox = bundled_sandbox
    truth = sandbox.truth_cdrs(*partition_window(day.isoformat()))
    assert len(truth) > 0
    assert _cdr_counts(tmp_path)[day.isoformat()] == (len(truth), len(truth))


@pytest.mark.parametrize(
    ("start", "end", "message"),
    [
        ("2026-13-01", "2026-11-02", "is not a date"),
        ("2026-11-05", "2026-11-05", "must be after --start"),
        ("2026-11-05", "2026-11-01", "must be after --start"),
        ("2026-11-01", FAR_FUTURE, "beyond today"),
    ],
    ids=["bad-date", "empty-range", "end-before-start", "beyond-today"],
)
def test_ingest_rejects_bad_ranges_with_a_clear_message(
    tmp_path, capsys, start: str, end: str, message: str
) -> None:
    code = main(
        ["ingest", "--start", start, "--end", end], env={"CDRHOUSE_DATA_DIR": str(tmp_path)}
    )
    err = capsys.readouterr().err
    assert code == 2
    assert message in err
    assert "Traceback" not in err
    assert not (tmp_path / "lake").exists()


def test_the_latest_end_is_today(clock: SessionClock) -> None:
    """The boundary of "beyond today", on the injected date rather than the wall clock."""
    start = clock.days_ago(3)
    validate_range(start, clock.today, clock.today)
    with pytest.raises(CliError, match="beyond today"):
        validate_range(start, clock.today + timedelta(days=1), clock.today)
