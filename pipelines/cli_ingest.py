"""`cdrhouse ingest` and `cdrhouse demo`: check the range and the setup, then run the jobs.

`ingest` runs the very Dagster jobs the UI and the schedule run (`pipelines.cli_runs`), against
`DagsterInstance.get()` when `DAGSTER_HOME` is set (so the runs show in the UI) and an ephemeral
instance otherwise. Before any run it checks, cheapest first, and stops at the first mistake
with one line (exit 2): the range, the variables' shapes (before Dagster is even imported), the
source, then the lake (can it be written now: bucket, credentials, disk) and the instance
database (`pipelines.preflight`). Only the standard library at module level (`cdrhouse` imports
this module for every command, `sql` too): each command imports what it needs when it runs,
the preflight and the runs included.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Mapping
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import TextIO

DEMO_DAYS = 7
DEMO_QUERY = """
select type, count(*) as cdrs, sum(cost) as total_cost,
       round(avg(epoch(ended_at) - epoch(started_at)), 1) as avg_seconds
from cdrs group by type order by cdrs desc
""".strip()


class CliError(Exception):
    """A user-facing error: printed as one line, exit code 2, no traceback."""


def validate_range(start: date, end: date, today: date) -> None:
    """`[start, end)` must hold at least one complete UTC day, none of them today or later,
    none before `pipelines.preflight.EARLIEST_DAY`."""
    from pipelines.preflight import start_problem

    problem = start_problem(start, today)
    if problem is not None:
        raise CliError(problem)
    if end <= start:
        raise CliError(f"--end {end} must be after --start {start} (the range is [start, end))")
    if end > today:
        raise CliError(
            f"--end {end} is beyond today ({today} UTC): only complete days can be ingested, "
            f"so the latest possible --end is {today}"
        )


def env_shape_problem(env: Mapping[str, str]) -> str | None:
    """A variable whose value cannot work, told from its shape alone (no Dagster): the source
    (CC_API_BASE_URL, then the key it needs), CDRHOUSE_LAKE_URI, DAGSTER_HOME and
    CDRHOUSE_START_DATE. Never falls back to fake data, never half-starts."""
    from pipelines.preflight import source_problem, start_date_problem

    problem = source_problem(env.get("CC_API_BASE_URL"), env.get("CC_API_KEY"))
    if problem is not None:
        return problem
    lake_uri = env.get("CDRHOUSE_LAKE_URI")
    if lake_uri:
        from warehouse.stores import lake_uri_problem

        problem = lake_uri_problem(lake_uri)
        if problem is not None:
            return f"CDRHOUSE_LAKE_URI={lake_uri!r}: {problem}"
    home = env.get("DAGSTER_HOME")
    if home and not Path(home).is_dir():
        return (
            f"DAGSTER_HOME={home!r} is not a directory: create it (it holds dagster.yaml, e.g. "
            "pipelines/deploy/dagster.yaml) or unset it to run on a throwaway instance"
        )
    first = env.get("CDRHOUSE_START_DATE")
    with contextlib.suppress(ValueError):  # not a date: the settings say so, in their words
        problem = start_date_problem(date.fromisoformat(first)) if first else None
    return f"CDRHOUSE_START_DATE={first!r}: {problem}" if problem else None


def env_data_dir(env: Mapping[str, str]) -> Path:
    return Path(env.get("CDRHOUSE_DATA_DIR") or "data").resolve()


def cmd_ingest(
    start: date,
    end: date,
    env: Mapping[str, str],
    *,
    snapshots: bool = True,
    verbose: bool = False,
    out: TextIO | None = None,
    report_days: int | None = None,
) -> int:
    """`cdrhouse ingest`; with `report_days`, the runs end with one of the
    `contact_center_report` asset over that many days (`cdrhouse demo`)."""
    out = out or sys.stdout
    today = datetime.now(UTC).date()
    validate_range(start, end, today)  # before the heavy imports: a bad range answers at once
    problem = env_shape_problem(env)  # so does a variable that cannot work, whatever its use
    if problem is not None:
        raise CliError(problem)
    data_dir = env_data_dir(env)
    from pipelines.preflight import SetupError, probe_instance_database, probe_lake

    try:
        # Can the lake be written now (the bucket, the credentials, the disk)? Writes nothing.
        probe_lake(env.get("CDRHOUSE_LAKE_URI") or (data_dir / "lake").as_uri(), data_dir)
        # And can the instance's database (PostgreSQL) be reached, with a timeout?
        probe_instance_database(env, data_dir)
    except SetupError as exc:
        raise CliError(str(exc)) from None
    import dagster as dg

    from pipelines.cli_runs import ensure_pool, run_ingest
    from pipelines.settings import SettingsError

    try:
        # Importing the code location reads the environment: a bad value stops it here.
        from pipelines.definitions import (
            api_environ,
            build_defs,
            resources_from_env,
            start_date_from_env,
        )
    except SettingsError as exc:
        raise CliError(str(exc)) from None
    from pipelines.partitions import partition_keys
    from pipelines.preflight import fail_fast_storage, open_instance, uses_postgres
    from pipelines.resources import is_sandbox
    from pipelines.settings import DEFAULT_LOOKBACK_DAYS
    from warehouse.lake import LakeSourceConflict
    from warehouse.viewsql import WAREHOUSE_FILE

    try:
        # The partitions must reach back to --start, whatever CDRHOUSE_START_DATE says.
        first_day = min(start_date_from_env(env), start)
        contact_center, warehouse = resources_from_env(env, first_day)
    except SettingsError as exc:
        raise CliError(str(exc)) from None
    # A lake holding another source's data is refused here, before any run or write.
    try:
        with api_environ(env):  # the key is passed by reference: EnvVar("CC_API_KEY")
            resolved = contact_center.process_config_and_initialize()
        wanted = resolved.source_id  # validates the settings too (e.g. HTTPS required)
    except dg.Failure as exc:
        raise CliError(exc.description or "invalid Contact Center API settings") from None
    try:
        warehouse.lake().check_source(wanted)
    except LakeSourceConflict as exc:
        raise CliError(str(exc)) from None
    defs = build_defs(
        contact_center=contact_center,
        warehouse=warehouse,
        start_date=first_day,
        lookback_days=DEFAULT_LOOKBACK_DAYS,
    )
    keys = partition_keys(start, end)
    source = (
        "the bundled sandbox (in-process; set CC_API_BASE_URL to your cluster URL for real data)"
        if is_sandbox(env.get("CC_API_BASE_URL"))
        else env["CC_API_BASE_URL"]
    )
    try:
        with (
            fail_fast_storage(uses_postgres(env)),
            open_instance(env, data_dir, ensure_pool) as instance,
            api_environ(env),
        ):
            print(
                f"cdrhouse ingest: {len(keys)} day(s) [{start}, {end}) from {source} "
                f"into {data_dir}",
                file=out,
                flush=True,
            )
            report = run_ingest(
                defs,
                keys,
                instance=instance,
                data_dir=data_dir,
                snapshots=snapshots,
                verbose=verbose,
                out=out,
                report_days=report_days,
            )
    except SetupError as exc:
        raise CliError(str(exc)) from None
    if report.setup_error is not None:
        raise CliError(report.setup_error)  # the views are left as they were
    if not warehouse.lake().is_local:
        warehouse.build_views()  # the runs refreshed only the lake (see refresh_views)
    if not report.success:
        failed = [r.label for r in report.runs if not r.success or r.checks_failed]
        print(f"cdrhouse ingest: FAILED ({', '.join(failed)}); see the lines above", file=out)
        return 1
    rows = sum(r.rows.get("cdrs", 0) for r in report.runs)
    print(f"cdrhouse ingest: done, {rows:,} CDRs in {data_dir / WAREHOUSE_FILE}", file=out)
    return 0


def _table_counts(database: Path) -> list[tuple[str, int]]:
    import duckdb

    from models.tables import ALL_TABLES

    with duckdb.connect(str(database), read_only=True) as con:
        return [
            (t.name, int(con.execute(f'select count(*) from "{t.name}"').fetchone()[0]))  # type: ignore[index]
            for t in ALL_TABLES
        ]


def cmd_demo(env: Mapping[str, str], *, days: int = DEMO_DAYS, out: TextIO | None = None) -> int:
    """Ingest the last `days` complete days from the sandbox and materialize the
    `contact_center_report` asset of those days, all as Dagster runs in the instance at
    `DAGSTER_HOME` (the UI shows the report materialized); show what landed, and end with the
    path of the report, the file `cdrhouse report` writes by default."""
    import duckdb

    from pipelines.resources import SANDBOX
    from warehouse.analyst import WAREHOUSE_FILE, report_path

    out = out or sys.stdout
    today = datetime.now(UTC).date()
    # Always the sandbox: a demo must not touch a cluster the shell happens to point at.
    demo_env = {k: v for k, v in env.items() if k not in ("CC_API_BASE_URL", "CC_API_KEY")}
    demo_env["CC_API_BASE_URL"] = SANDBOX
    code = cmd_ingest(today - timedelta(days=days), today, demo_env, out=out, report_days=days)
    if code != 0:
        return code
    database = env_data_dir(env) / WAREHOUSE_FILE
    print("\nrow counts per table:", file=out)
    for name, rows in _table_counts(database):
        print(f"  {name:<24} {rows:>10,}", file=out)
    print(f"\nexample analyst query:\n{DEMO_QUERY}\n", file=out)
    with duckdb.connect(str(database), read_only=True) as con:
        cursor = con.execute(DEMO_QUERY)
        names = [d[0] for d in cursor.description or []]
        result = cursor.fetchall()
    widths = [max(len(str(x)) for x in [n, *(r[i] for r in result)]) for i, n in enumerate(names)]
    print("  ".join(n.ljust(w) for n, w in zip(names, widths, strict=True)), file=out)
    for row in result:
        print("  ".join(str(v).ljust(w) for v, w in zip(row, widths, strict=True)), file=out)
    report = report_path(env_data_dir(env))  # written by the asset's run above
    print(f"\ncontact-center report (open it in a browser, works offline): {report}", file=out)
    return 0
