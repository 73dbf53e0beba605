"""The `cdrhouse` command: `sandbox`, `ingest`, `sql`, `lake`, `report` and `demo`.

`ingest` runs the very Dagster jobs the UI and the schedule run (`execute_in_process`, one run
per partition, then one snapshot run), against `DagsterInstance.get()` when `DAGSTER_HOME` is
set (so the runs show in the UI) and an ephemeral instance otherwise. Environment variables are
read here and in `definitions.py` only.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

if TYPE_CHECKING:
    import dagster as dg

# Only the standard library at module level: `cdrhouse --help` and usage errors must answer
# without importing Dagster, polars, DuckDB or pyarrow (tests/pipelines/test_cli_startup.py).
# Each command imports what it needs when it runs.

DEMO_DAYS = 7
# Dagster's own console logs are for the UI; the CLI prints one line per run instead.
QUIET_RUN_CONFIG: Mapping[str, Any] = {
    "loggers": {"console": {"config": {"log_level": "CRITICAL"}}}
}
VERBOSE_RUN_CONFIG: Mapping[str, Any] = {"loggers": {"console": {"config": {"log_level": "DEBUG"}}}}
DEMO_QUERY = """
select type, count(*) as cdrs, sum(cost) as total_cost,
       round(avg(epoch(ended_at) - epoch(started_at)), 1) as avg_seconds
from cdrs group by type order by cdrs desc
""".strip()


class CliError(Exception):
    """A user-facing error: printed as one line, exit code 2, no traceback."""


@dataclass
class RunLine:
    """What one run did, for the progress display and the tests."""

    label: str
    success: bool
    seconds: float
    rows: dict[str, int] = field(default_factory=dict)
    checks_failed: list[str] = field(default_factory=list)
    checks_warned: list[str] = field(default_factory=list)
    checks_total: int = 0
    retries: list[str] = field(default_factory=list)
    failure: str | None = None


@dataclass
class IngestReport:
    runs: list[RunLine] = field(default_factory=list)

    @property
    def success(self) -> bool:
        return all(r.success and not r.checks_failed for r in self.runs)


def parse_day(text: str, flag: str) -> date:
    try:
        return date.fromisoformat(text)
    except ValueError:
        raise CliError(f"{flag} {text!r} is not a date; use YYYY-MM-DD, e.g. 2026-11-20") from None


def validate_range(start: date, end: date, today: date) -> None:
    """`[start, end)` must hold at least one complete UTC day, none of them today or later."""
    if end <= start:
        raise CliError(f"--end {end} must be after --start {start} (the range is [start, end))")
    if end > today:
        raise CliError(
            f"--end {end} is beyond today ({today} UTC): only complete days can be ingested, "
            f"so the latest possible --end is {today}"
        )


def _summarize(label: str, result: dg.ExecuteInProcessResult, seconds: float) -> RunLine:
    import dagster as dg

    line = RunLine(label=label, success=result.success, seconds=seconds)
    for event in result.get_asset_materialization_events():
        mat = event.step_materialization_data.materialization
        rows = mat.metadata.get("dagster/row_count")
        if rows is not None:
            line.rows[mat.asset_key.to_user_string()] = int(rows.value)  # type: ignore[arg-type]
    for event in result.all_events:
        if event.event_type == dg.DagsterEventType.STEP_UP_FOR_RETRY:
            # Say why a step was retried, or a slow run would look merely slow.
            data = event.event_specific_data
            error = getattr(data, "error", None)
            inner = error.cause if error is not None and error.cause is not None else error
            reason = f"{inner.cls_name}: {inner.message.strip()[:200]}" if inner else "unknown"
            line.retries.append(f"{event.step_key} ({reason})")
    for check in result.get_asset_check_evaluations():
        line.checks_total += 1
        if not check.passed:
            name = f"{check.asset_key.to_user_string()}:{check.check_name}"
            if check.severity == dg.AssetCheckSeverity.WARN:
                line.checks_warned.append(name)
            else:
                line.checks_failed.append(name)
    return line


def _format(line: RunLine) -> str:
    main = [k for k in ("raw_cdrs", "cdrs", "cdr_quarantine") if k in line.rows]
    shown = main or sorted(line.rows)[:4]
    rows = "  ".join(f"{k}={line.rows[k]:,}" for k in shown)
    passed = line.checks_total - len(line.checks_failed) - len(line.checks_warned)
    checks = f"checks {passed}/{line.checks_total} passed" if line.checks_total else ""
    status = "ok  " if line.success and not line.checks_failed else "FAIL"
    text = f"{status} {line.label:<12} {rows}  {checks}  {line.seconds:.1f}s"
    for retry in line.retries:
        text += f"\n     retried {retry}"
    if line.checks_warned:
        text += f"\n     warning: {', '.join(line.checks_warned)}"
    if line.checks_failed:
        text += f"\n     failed checks: {', '.join(line.checks_failed)}"
    if line.failure:
        text += f"\n     {line.failure}"
    return text


def run_ingest(
    defs: dg.Definitions,
    keys: Sequence[str],
    *,
    instance: dg.DagsterInstance,
    data_dir: Path,
    snapshots: bool = True,
    verbose: bool = False,
    out: TextIO | None = None,
    on_run: Callable[[RunLine], None] | None = None,
) -> IngestReport:
    """Materialize each CDR partition (one run each), then the snapshots; stop at a failure."""
    from pipelines.definitions import CDR_JOB, SNAPSHOT_JOB
    from pipelines.sensors import (
        failure_summary,
        source_not_configured,
        summary_line,
        write_failure_summary,
    )

    run_config = VERBOSE_RUN_CONFIG if verbose else QUIET_RUN_CONFIG
    report = IngestReport()
    out = out or sys.stdout
    # Snapshots first: the CDR checks look CDR users up in the users dimension.
    plan: list[tuple[str, str, str | None]] = (
        [("snapshots", SNAPSHOT_JOB, None)] if snapshots else []
    )
    plan += [(k, CDR_JOB, k) for k in keys]
    for label, job_name, partition in plan:
        begun = time.perf_counter()
        result = defs.resolve_job_def(job_name).execute_in_process(
            run_config=dict(run_config),
            instance=instance,
            partition_key=partition,
            raise_on_error=False,
        )
        line = _summarize(label, result, time.perf_counter() - begun)
        if not result.success:
            run = instance.get_run_by_id(result.run_id)
            assert run is not None
            failures = [e for e in result.all_events if e.is_step_failure]
            summary = failure_summary(run, failures)
            line.failure = summary_line(summary)
            # Like the sensor: with no source configured nothing is written, not even this.
            if not source_not_configured(summary):
                path = write_failure_summary(data_dir, summary)
                line.failure += f"\n     details: {path}"
            for step in summary["failed_steps"]:
                line.failure += f"\n     {step['message']}"
        report.runs.append(line)
        print(_format(line), file=out, flush=True)
        if on_run is not None:
            on_run(line)
        if not result.success:
            break
    return report


def ensure_pool(instance: dg.DagsterInstance, pool: str | None = None, attempts: int = 5) -> None:
    """Create the API pool's limit row (at the instance's default limit) before any run.

    `pool` defaults to `pipelines.assets.API_POOL` (looked up here, not at import time).

    Dagster creates it lazily inside the first step that claims a slot. On PostgreSQL, pods
    whose first runs start together race on that insert and the losers' runs fail (an
    IntegrityError, then InFailedSqlTransaction inside Dagster). The daemon's run queue does
    this before it launches a run; `cdrhouse ingest` runs in-process, so it does it here."""
    from sqlalchemy.exc import SQLAlchemyError

    if pool is None:
        from pipelines.assets import API_POOL

        pool = API_POOL
    storage = instance.event_log_storage
    if not storage.supports_global_concurrency_limits:
        return
    for attempt in range(attempts):
        if pool in storage.get_concurrency_keys():
            return
        try:
            storage.initialize_concurrency_limit_to_default(pool)
        except SQLAlchemyError:
            if attempt == attempts - 1:
                raise
            time.sleep(0.2 * (attempt + 1))  # another pod is creating it: look again
        else:
            return


def _instance(env: Mapping[str, str]) -> dg.DagsterInstance:
    import dagster as dg

    if env.get("DAGSTER_HOME"):
        return dg.DagsterInstance.get()
    return dg.DagsterInstance.ephemeral()


def _data_dir(env: Mapping[str, str]) -> Path:
    return Path(env.get("CDRHOUSE_DATA_DIR") or "data").resolve()


def cmd_ingest(
    start: date,
    end: date,
    env: Mapping[str, str],
    *,
    snapshots: bool = True,
    verbose: bool = False,
    out: TextIO | None = None,
) -> int:
    out = out or sys.stdout
    today = datetime.now(UTC).date()
    validate_range(start, end, today)  # before the heavy imports: a bad range answers at once
    import dagster as dg

    from pipelines.settings import SettingsError

    try:
        # Importing the code location reads the environment: a bad value stops it here.
        from pipelines.definitions import build_defs, resources_from_env, start_date_from_env
    except SettingsError as exc:
        raise CliError(str(exc)) from None
    from pipelines.partitions import partition_keys
    from pipelines.resources import is_sandbox, source_problem
    from pipelines.schedules import DEFAULT_LOOKBACK_DAYS
    from warehouse.lake import LakeSourceConflict

    # Before anything is built or written: never fall back to fake data, never half-start.
    problem = source_problem(env.get("CC_API_BASE_URL"), env.get("CC_API_KEY"))
    if problem is not None:
        raise CliError(problem)
    try:
        # The partitions must reach back to --start, whatever CDRHOUSE_START_DATE says.
        first_day = min(start_date_from_env(env), start)
        contact_center, warehouse = resources_from_env(env, first_day, as_env_vars=False)
    except SettingsError as exc:
        raise CliError(str(exc)) from None
    # A lake holding another source's data is refused here, before any run or write.
    try:
        wanted = contact_center.source_id  # validates the settings too (e.g. HTTPS required)
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
    data_dir = _data_dir(env)
    print(
        f"cdrhouse ingest: {len(keys)} day(s) [{start}, {end}) from {source} into {data_dir}",
        file=out,
        flush=True,
    )
    with _instance(env) as instance:
        ensure_pool(instance)
        report = run_ingest(
            defs,
            keys,
            instance=instance,
            data_dir=data_dir,
            snapshots=snapshots,
            verbose=verbose,
            out=out,
        )
    if not warehouse.lake().is_local:
        warehouse.build_views()  # the runs refreshed only the lake (see refresh_views)
    if not report.success:
        failed = [r.label for r in report.runs if not r.success or r.checks_failed]
        print(f"cdrhouse ingest: FAILED ({', '.join(failed)}); see the lines above", file=out)
        return 1
    rows = sum(r.rows.get("cdrs", 0) for r in report.runs)
    print(f"cdrhouse ingest: done, {rows:,} CDRs in {data_dir / 'warehouse.duckdb'}", file=out)
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
    """Ingest the last `days` complete days from the sandbox, show what landed, and end with
    the path of the contact-center report of those days."""
    import duckdb

    from pipelines.resources import SANDBOX

    out = out or sys.stdout
    today = datetime.now(UTC).date()
    # Always the sandbox: a demo must not touch a cluster the shell happens to point at.
    demo_env = {k: v for k, v in env.items() if k not in ("CC_API_BASE_URL", "CC_API_KEY")}
    demo_env["CC_API_BASE_URL"] = SANDBOX
    code = cmd_ingest(today - timedelta(days=days), today, demo_env, out=out)
    if code != 0:
        return code
    database = _data_dir(env) / "warehouse.duckdb"
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
    from warehouse.report import write_report

    report_path = _data_dir(env) / "report.html"
    write_report(_data_dir(env), today - timedelta(days=days), today, report_path)
    print(f"\ncontact-center report (open it in a browser, works offline): {report_path}", file=out)
    return 0


def build_parser(*, sandbox_args: bool = True) -> argparse.ArgumentParser:
    """The argument parser; `sandbox_args=False` leaves the sandbox package unimported."""
    parser = argparse.ArgumentParser(prog="cdrhouse", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)

    ingest = sub.add_parser("ingest", help="materialize CDR days [start, end) and the snapshots")
    ingest.add_argument("--start", required=True, help="first day, YYYY-MM-DD (UTC)")
    ingest.add_argument("--end", required=True, help="day after the last one, YYYY-MM-DD")
    ingest.add_argument(
        "--no-snapshots", action="store_true", help="only the CDR partitions, no snapshots"
    )
    ingest.add_argument("--verbose", action="store_true", help="show Dagster's run logs")

    demo = sub.add_parser("demo", help="ingest the last 7 days from the sandbox and query them")
    demo.add_argument("--days", type=int, default=DEMO_DAYS, help="days to ingest (default 7)")

    sandbox = sub.add_parser("sandbox", help="run the bundled API sandbox on a port")
    if sandbox_args:
        from connectors.sandbox import cli as sandbox_cli  # type: ignore[attr-defined,unused-ignore]

        sandbox_cli.add_arguments(sandbox)

    lake = sub.add_parser("lake", help="inspect the lake, rebuild its views, or reset it")
    from warehouse import cli as lake_cli

    lake_cli.add_lake_arguments(lake)

    report = sub.add_parser(
        "report", help="write the contact-center report: one offline HTML file of charts"
    )
    lake_cli.add_report_arguments(report)

    sql = sub.add_parser("sql", help="query the warehouse with SQL")
    try:
        from warehouse import cli as warehouse_cli  # type: ignore[attr-defined,unused-ignore]

        warehouse_cli.add_arguments(sql)
    except ImportError:  # pragma: no cover
        pass
    return parser


def main(argv: list[str] | None = None, env: Mapping[str, str] | None = None) -> int:
    env = os.environ if env is None else env
    argv = sys.argv[1:] if argv is None else argv
    # The sandbox's flags only for `cdrhouse sandbox`: ingesting from a cluster never imports it.
    args = build_parser(sandbox_args=argv[:1] == ["sandbox"]).parse_args(argv)
    try:
        if args.command == "ingest":
            start = parse_day(args.start, "--start")
            end = parse_day(args.end, "--end")
            return cmd_ingest(
                start, end, env, snapshots=not args.no_snapshots, verbose=args.verbose
            )
        if args.command == "demo":
            return cmd_demo(env, days=args.days)
        if args.command == "sandbox":
            from connectors.sandbox import cli as sandbox_cli  # type: ignore[attr-defined,unused-ignore]

            return int(sandbox_cli.run(args))
        if args.command == "sql":
            from warehouse import cli as warehouse_cli  # type: ignore[attr-defined,unused-ignore]

            return int(warehouse_cli.run(args, _data_dir(env), env.get("CDRHOUSE_LAKE_URI")))
        if args.command == "report":
            from warehouse import cli as warehouse_cli

            return warehouse_cli.run_report(args, _data_dir(env), env.get("CDRHOUSE_LAKE_URI"))
        if args.command == "lake":
            from warehouse import cli as warehouse_cli

            return warehouse_cli.run_lake(args, _data_dir(env), env.get("CDRHOUSE_LAKE_URI"))
    except CliError as exc:
        print(f"cdrhouse: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("cdrhouse: interrupted", file=sys.stderr)
        return 130
    return 2


if __name__ == "__main__":
    sys.exit(main())
