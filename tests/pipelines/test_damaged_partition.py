"""A partition file damaged on disk (its Parquet footer unreadable), as a failing disk or a
bad copy leaves it.

Before: DuckDB's error named no file ("TProtocolException: Invalid data"), every run of any
other day failed when it refreshed the views, each of its steps retried for minutes by its
RetryPolicy (an ingest of one small day took ~6 minutes to fail), and the command the error
would suggest, a re-ingest of the damaged day, failed the same way before reaching the day.
Now the runs land (the views stay as they were), the command ends at once naming the file and
the command that replaces it, `cdrhouse sql` names it too, and that command does replace it.
"""

from __future__ import annotations

from datetime import UTC, date, datetime, time, timedelta
from pathlib import Path

import pyarrow.parquet as pq

from tests.support.cli import CliRun, clean_env, run_cdrhouse
from tests.support.damage import damage_footer
from tests.support.paths import LOCAL_INSTANCE_YAML
from tests.support.served import ServedSandbox
from warehouse.lake import Lake

# Deadlines, not waits: a small day's ingest takes ~10 s; before, ~6 minutes of retries.
INGEST_LIMIT_S = 120.0


def _ingest(env: dict[str, str], day: date, *flags: str) -> CliRun:
    argv = ["ingest", "--start", day.isoformat(), "--end", (day + timedelta(1)).isoformat()]
    return run_cdrhouse([*argv, *flags], env, INGEST_LIMIT_S)


def test_a_damaged_partition_is_named_at_once_and_re_ingesting_its_day_replaces_it(
    served: ServedSandbox, tmp_path: Path
) -> None:
    damaged_day, other_day = served.clock.days_ago(4), served.clock.days_ago(3)
    data_dir, home = tmp_path / "data", tmp_path / "home"
    home.mkdir()
    (home / "dagster.yaml").write_text(LOCAL_INSTANCE_YAML.read_text())
    env = clean_env(**served.env(data_dir) | {"DAGSTER_HOME": str(home)})
    # Without the snapshots: their first partitions, landed next, make the views rebuild,
    # which reads every footer (as would a new table, new code or new KPI settings).
    first = _ingest(env, damaged_day, "--no-snapshots")
    assert first.code == 0, str(first)
    lake = Lake(str(data_dir / "lake"))
    damaged = Path(lake.partition_url("cdrs", f"date={damaged_day}"))
    damage_footer(damaged)

    other = _ingest(env, other_day)

    assert other.code == 1, str(other)
    assert "Traceback" not in other.stdout + other.stderr, str(other)
    remedy = f"cdrhouse ingest --start {damaged_day} --end {damaged_day + timedelta(1)}"
    [named] = [line for line in other.lines if str(damaged) in line]
    assert "cannot be read" in named, named
    assert remedy in named, named
    # The other day's runs landed all the same.
    assert f"date={other_day}" in lake.partitions("cdrs")
    assert pq.read_metadata(lake.partition_url("cdrs", f"date={other_day}")).num_rows > 0

    query = run_cdrhouse(["sql", "SELECT count(*) FROM cdrs"], env)
    assert query.code == 1, str(query)
    assert str(damaged) in query.stderr, str(query)
    assert remedy in query.stderr, str(query)

    repaired = _ingest(env, damaged_day)

    assert repaired.code == 0, str(repaired)
    start = datetime.combine(damaged_day, time(), UTC)
    expected = len(served.sandbox.truth_cdrs(start, start + timedelta(days=2)))
    answer = run_cdrhouse(["sql", "--format", "csv", "SELECT count(*) AS n FROM cdrs"], env)
    assert answer.code == 0, str(answer)
    assert answer.stdout.split() == ["n", str(expected)], str(answer)
