"""Where lake partitions came from: recorded per file, visible in the warehouse, never mixed.

Three sources take part: cluster A and cluster B (two sandboxes served over HTTP on their own
loopback ports, so to the client they are two hosts), and the bundled in-process sandbox.
Each mixing case is refused before anything is written, by `cdrhouse ingest` (exit 2) and by a
Dagster run launched directly (the step fails once, without retries).
"""

from collections.abc import Iterator
from datetime import date, timedelta
from pathlib import Path

import dagster as dg
import pytest

from connectors.sandbox import SandboxConfig
from pipelines.cli import main
from pipelines.definitions import CDR_JOB, SNAPSHOT_JOB
from tests.support.clock import SessionClock
from tests.support.lake import warehouse
from tests.support.privacy import with_raw_numbers
from tests.support.runs import run_failing_at_once
from tests.support.served import ServedSandbox, serve_sandbox
from warehouse.lake import Lake
from warehouse.viewsql import aggregate_names


@pytest.fixture(scope="module")
def cluster_b(served: ServedSandbox, clock: SessionClock) -> Iterator[ServedSandbox]:
    """A second cluster: another sandbox (another seed) on another port."""
    config = SandboxConfig(seed=99, cdrs_per_day=50, start_date=served.first_day, days=11)
    with serve_sandbox(config, clock) as cluster:
        yield cluster


@pytest.fixture
def day(clock: SessionClock) -> date:
    """The day every case ingests: complete, inside every source's data."""
    return clock.days_ago(2)


def _host(served: ServedSandbox) -> str:
    return served.base_url.split("://", 1)[1]


def _sandbox_env(data_dir: Path, first_day: date) -> dict[str, str]:
    return with_raw_numbers(
        {
            "CC_API_BASE_URL": "sandbox",
            "CDRHOUSE_DATA_DIR": str(data_dir),
            "CDRHOUSE_START_DATE": first_day.isoformat(),
            "CDRHOUSE_SANDBOX_CDRS_PER_DAY": "50",
        }
    )


def _ingest(env: dict[str, str], day: date) -> int:
    argv = ["ingest", "--start", day.isoformat(), "--end", (day + timedelta(1)).isoformat()]
    return main([*argv, "--no-snapshots"], env=env)


def _files(data_dir: Path) -> dict[str, tuple[int, int]]:
    """Every file under the data dir with its size and mtime: "nothing written" is equality."""
    return {
        str(p.relative_to(data_dir)): (p.stat().st_size, p.stat().st_mtime_ns)
        for p in sorted(data_dir.rglob("*"))
        if p.is_file()
    }


def test_provenance_is_recorded_per_partition_and_visible_in_the_warehouse(
    served: ServedSandbox, day: date, tmp_path
) -> None:
    assert _ingest(served.env(tmp_path), day) == 0
    lake = Lake((tmp_path / "lake").as_uri())
    assert lake.source() == _host(served)
    assert lake.partition_source("raw_cdrs", f"date={day}") == _host(served)
    # The typed tables inherit the raw partition's source.
    assert lake.partition_source("cdr_calls", f"date={day}") == _host(served)
    with warehouse(tmp_path) as con:
        rows = con.execute(
            "select table_name, partition_key, source, num_rows, written_at is not null "
            "from lake_partitions order by 1"
        ).fetchall()
        info = con.execute("select lake_uri, source from lake_info").fetchall()
    by_table = {r[0]: r for r in rows}
    for table in ("raw_cdrs", "cdrs", "cdr_calls", "cdr_sms"):
        assert by_table[table][1:3] == (f"date={day}", _host(served)), table
        assert by_table[table][4] is True
    assert by_table["raw_cdrs"][3] == served.api_total(day)
    assert info == [(lake.uri, _host(served))]


@pytest.mark.parametrize(
    ("first", "second"),
    [
        pytest.param("sandbox", "cluster_a", id="cluster-into-sandbox-lake"),
        pytest.param("cluster_a", "sandbox", id="sandbox-into-cluster-lake"),
        pytest.param("cluster_b", "cluster_a", id="cluster-a-into-cluster-b-lake"),
    ],
)
def test_mixing_sources_is_refused_before_anything_is_written(
    served: ServedSandbox, cluster_b: ServedSandbox, day: date, tmp_path, capsys, first, second
) -> None:
    sources = {
        "sandbox": (_sandbox_env(tmp_path, served.first_day), "sandbox:7"),
        "cluster_a": (served.env(tmp_path), _host(served)),
        "cluster_b": (cluster_b.env(tmp_path), _host(cluster_b)),
    }
    env_first, name_first = sources[first]
    env_second, name_second = sources[second]
    assert _ingest(env_first, day) == 0
    before = _files(tmp_path)
    capsys.readouterr()

    assert _ingest(env_second, day) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert repr(name_first) in err, err
    assert repr(name_second) in err, err
    assert _files(tmp_path) == before


def test_a_dagster_run_into_another_sources_lake_fails_once_and_writes_nothing(
    served: ServedSandbox, day: date, tmp_path
) -> None:
    assert _ingest(_sandbox_env(tmp_path, served.first_day), day) == 0
    before = _files(tmp_path)
    # Step retries on: the refusal must not use them.
    defs = served.defs(tmp_path, step_retries=2)
    for job, partition in ((CDR_JOB, day.isoformat()), (SNAPSHOT_JOB, None)):
        with dg.DagsterInstance.ephemeral() as instance:
            _, failures = run_failing_at_once(defs, job, partition, instance)
        for failure in failures:
            message = failure.description
            assert message is not None
            assert "'sandbox:7'" in message
            assert repr(_host(served)) in message
    assert _files(tmp_path) == before


def test_lake_reset_needs_yes_then_empties_the_lake_for_another_source(
    served: ServedSandbox, day: date, tmp_path, capsys
) -> None:
    assert _ingest(_sandbox_env(tmp_path, served.first_day), day) == 0
    env = served.env(tmp_path)
    before = _files(tmp_path)
    assert main(["lake", "reset"], env=env) == 2
    assert "--yes" in capsys.readouterr().err
    assert _files(tmp_path) == before

    assert main(["lake", "reset", "--yes"], env=env) == 0
    assert "source was sandbox:7" in capsys.readouterr().out
    assert Lake((tmp_path / "lake").as_uri()).source() is None
    assert not (tmp_path / "warehouse.duckdb").exists()
    assert _ingest(env, day) == 0
    assert Lake((tmp_path / "lake").as_uri()).source() == _host(served)


def test_a_marker_damaged_during_a_run_fails_the_step_once_in_one_line(
    served: ServedSandbox, day: date, tmp_path
) -> None:
    """The refusal met after a step's start check (here by the aggregates, which publish last)
    was an ordinary exception: the retry policy ran the step again 30 s later, and again, to
    fail the same way. Now it fails once, naming the file, as the start check does."""
    assert _ingest(_sandbox_env(tmp_path, served.first_day), day) == 0
    (tmp_path / "lake" / "_cdrhouse_lake.json").write_text('{"source": ')
    defs = served.defs(tmp_path, step_retries=2)
    with dg.DagsterInstance.ephemeral() as instance:
        result = defs.resolve_job_def(CDR_JOB).execute_in_process(
            partition_key=day.isoformat(),
            instance=instance,
            asset_selection=[dg.AssetKey(name) for name in aggregate_names()],
            raise_on_error=False,
        )
    assert not result.success
    events = result.all_events
    assert [
        e.step_key for e in events if e.event_type == dg.DagsterEventType.STEP_UP_FOR_RETRY
    ] == []
    (failure,) = [e for e in events if e.is_step_failure]
    user = failure.step_failure_data.user_failure_data
    assert user is not None, failure.step_failure_data.error
    assert user.description is not None
    assert "_cdrhouse_lake.json is not the JSON object cdrhouse wrote" in user.description
    assert "\n" not in user.description
