"""`cdrhouse ingest` and `cdrhouse demo`: check the range and the setup, then run the jobs.

`ingest` runs the very Dagster jobs the UI and the schedule run (`pipelines.cli_runs`), against
`DagsterInstance.get()` when `DAGSTER_HOME` is set (so the runs show in the UI) and an ephemeral
instance otherwise. Before any run it checks, cheapest first, and stops at the first mistake
with one line (exit 2): the range, the variables' shapes (before Dagster is even imported), the
source, then the lake (can it be written now: bucket, credentials, disk) and the instance
database (`pipelines.preflight`), then each account's settings, how its callers' numbers land
included (`pipelines.privacy_settings`). Only the standard library at module level (`cdrhouse`
imports this module for every command, `sql` too): each command imports what it needs when it
runs, the preflight and the runs included.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Mapping, Sequence
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

if TYPE_CHECKING:
    from pipelines.accounts import Account
    from pipelines.resources import WarehouseResource

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
    none before `models.timestamps.EARLIEST_DAY`."""
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
    (CC_API_BASE_URL, then the key it needs; with an accounts file, the accounts say it),
    CDRHOUSE_LAKE_URI, DAGSTER_HOME and CDRHOUSE_START_DATE. Never falls back to fake data,
    never half-starts."""
    from pipelines.accounts import ACCOUNTS_FILE_VAR
    from pipelines.preflight import source_problem, start_date_problem

    if not env.get(ACCOUNTS_FILE_VAR, "").strip():
        problem = source_problem(env.get("CC_API_BASE_URL"), env.get("CC_API_KEY"))
        if problem is not None:
            return problem
    lake_uri = env.get("CDRHOUSE_LAKE_URI")
    if lake_uri:
        from warehouse.stores import lake_uri_problem, shown_uri

        problem = lake_uri_problem(lake_uri)
        if problem is not None:
            return f"CDRHOUSE_LAKE_URI={shown_uri(lake_uri)!r}: {problem}"
    home = env.get("DAGSTER_HOME")
    if home and not Path(home).is_dir():
        return (
            f"DAGSTER_HOME={home!r} is not a directory: create it (it holds dagster.yaml, e.g. "
            "pipelines/deploy/dagster.yaml) or unset it to run on a throwaway instance"
        )
    if home and _sqlite_url_problem(Path(home)):
        return (
            f"DAGSTER_HOME={home!r}: Dagster's SQLite storage puts this path in a database URL, "
            "where ? starts a query and %XX is decoded (it wrote a database outside the home, "
            "then failed): use a path without ? or %XX, or PostgreSQL storage"
        )
    first = env.get("CDRHOUSE_START_DATE")
    with contextlib.suppress(ValueError):  # not a date: the settings say so, in their words
        problem = start_date_problem(date.fromisoformat(first)) if first else None
    return f"CDRHOUSE_START_DATE={first!r}: {problem}" if problem else None


def _sqlite_url_problem(home: Path) -> bool:
    """Whether the instance at `home` keeps its storage in SQLite files (no `storage`
    in its dagster.yaml naming another database) whose URL its path would garble."""
    import re

    path = str(home.resolve())
    if "?" not in path and not re.search(r"%[0-9A-Fa-f]{2}", path):
        return False
    try:
        text = (home / "dagster.yaml").read_text()
    except OSError:
        return True  # no file: Dagster's default, SQLite
    import yaml

    try:
        config = yaml.safe_load(text)
    except yaml.YAMLError:
        return False  # Dagster names what is wrong with the file
    keys = ("storage", "run_storage", "event_log_storage", "schedule_storage")
    stores = [str(config.get(k)) for k in keys] if isinstance(config, dict) else []
    return not any("postgres" in s or "mysql" in s for s in stores)


def env_data_dir(env: Mapping[str, str]) -> Path:
    """The data dir, absolute; a path DuckDB cannot be pointed at is a `CliError`."""
    from warehouse.stores import pattern_problem

    path = Path(env.get("CDRHOUSE_DATA_DIR") or "data").resolve()
    if (problem := pattern_problem(str(path))) is not None:
        raise CliError(f"the data dir {path} (CDRHOUSE_DATA_DIR, default ./data): {problem}")
    if path.exists() and not path.is_dir():
        raise CliError(
            f"the data dir {path} (CDRHOUSE_DATA_DIR, default ./data) is a file, not a "
            "directory; point it at a directory"
        )
    return path


def selected_accounts(env: Mapping[str, str], ids: Sequence[str]) -> tuple[Account, ...]:
    """The accounts `--account` names (all by default), each ready to run: a bad accounts
    file, an unknown id, or a selected account whose key variable is unset is one line."""
    from pipelines.accounts import ACCOUNTS_FILE_VAR, accounts_from_env, select
    from pipelines.preflight import sandbox_extra_problem
    from pipelines.settings import SettingsError
    from pipelines.varnames import shown_var

    try:
        # Keys are checked for the selected accounts only: `--account emea` needs no APAC key.
        chosen = select(accounts_from_env(env, require_keys=False), ids)
    except SettingsError as exc:
        raise CliError(str(exc)) from None
    path = env.get(ACCOUNTS_FILE_VAR, "").strip()
    for account in chosen if path else ():
        key_env = account.api_key_env
        if key_env is not None and not env.get(key_env):
            raise CliError(
                f"{path}: account {account.id}: api_key_env: {shown_var(key_env)} is not set"
            )
        if account.is_sandbox:
            problem = sandbox_extra_problem(f"account {account.id} (base_url sandbox)")
            if problem is not None:
                raise CliError(problem)
    return chosen


def cmd_ingest(
    start: date,
    end: date,
    env: Mapping[str, str],
    *,
    snapshots: bool = True,
    verbose: bool = False,
    out: TextIO | None = None,
    report_days: int | None = None,
    accounts: Sequence[str] = (),
) -> int:
    """`cdrhouse ingest` of the accounts named by `accounts` (every configured one when
    empty); with `report_days`, the runs end with one of the `contact_center_report` asset
    over that many days (`cdrhouse demo`).

    Every account's problems are found before any run (exit 2, one line). Then each account's
    snapshots and days run, in its own runs: an account whose run fails stops only its own
    runs; the others go on, and the exit code is 1."""
    out = out or sys.stdout
    today = datetime.now(UTC).date()
    validate_range(start, end, today)  # before the heavy imports: a bad range answers at once
    problem = env_shape_problem(env)  # so does a variable that cannot work, whatever its use
    if problem is not None:
        raise CliError(problem)
    chosen = selected_accounts(env, accounts)
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

    from pipelines.cli_runs import ensure_pools, run_ingest
    from pipelines.settings import SettingsError

    try:
        # Importing the code location reads the environment: a bad value stops it here.
        from pipelines.definitions import (
            account_resources,
            api_environ,
            build_defs,
            resources_from_env,
            start_date_from_env,
        )
    except SettingsError as exc:
        raise CliError(str(exc)) from None
    from pipelines.accounts import accounts_from_env
    from pipelines.partitions import partition_keys
    from pipelines.preflight import fail_fast_storage, open_instance, uses_postgres
    from pipelines.scope import AccountScope
    from pipelines.settings import DEFAULT_LOOKBACK_DAYS
    from warehouse.lake import LakeSourceConflict
    from warehouse.stores import UnreadablePartitions
    from warehouse.viewsql import WAREHOUSE_FILE

    try:
        # The partitions must reach back to --start, whatever CDRHOUSE_START_DATE says.
        first_day = min(start_date_from_env(env), start)
        # The views once, after the runs (below), not in each step of them.
        contact_center, warehouse = resources_from_env(env, first_day, views_in_runs=False)
    except SettingsError as exc:
        raise CliError(str(exc)) from None
    apis = account_resources(chosen, env, first_day, contact_center)
    # The API keys' and the tokens' keys' variables: each resolves from `env` in the runs.
    key_vars = [a.api_key_env for a in chosen if a.api_key_env] + [a.pii_key_env for a in chosen]
    # A lake holding another source's data is refused here, before any run or write; each
    # account's lake is its own (its sub-lake), claimed by its own source.
    # Every account's settings first, so that a bad one stops before any lake is claimed; with
    # them how its callers' numbers land (`ContactCenterResource.privacy`): not chosen, or
    # `token` without its key, is one line naming both variables, before any run.
    wanted: dict[str, str] = {}
    key_checks: dict[str, str | None] = {}  # which key each account's tokens are made with
    for account in chosen:
        try:
            with api_environ(env, key_vars):  # keys are passed by reference: EnvVar(...)
                resolved = apis[account.id].read_env()
            wanted[account.id] = resolved.source_id  # validates the settings (HTTPS, ...)
            key_checks[account.id] = resolved.privacy().key_check
        except dg.Failure as exc:
            raise CliError(exc.description or "invalid Contact Center API settings") from None
    # An account whose lake refuses (another source, another key, a damaged marker) is left
    # out, in one line; the others go on, as their runs do in Dagster, and the exit is 2.
    refused: dict[str, str] = {}
    for account in chosen:
        lake = warehouse.lake(account.id)
        try:
            lake.check_source(wanted[account.id])
            lake.check_landing(key_checks[account.id])  # LakeKeyConflict: another key
        except LakeSourceConflict as exc:
            refused[account.id] = str(exc)
    if len(refused) == len(chosen):
        for message in list(refused.values())[:-1]:
            print(f"cdrhouse: error: {message}", file=sys.stderr)
        raise CliError(list(refused.values())[-1])
    for message in refused.values():
        print(f"cdrhouse ingest: error: {message}", file=sys.stderr, flush=True)
    chosen = tuple(a for a in chosen if a.id not in refused)
    defs = build_defs(
        warehouse=warehouse,
        start_date=first_day,
        lookback_days=DEFAULT_LOOKBACK_DAYS,
        accounts=chosen,
        api_resources=apis,
    )
    keys = partition_keys(start, end)
    # Every configured account's pool, not only the selected ones': the instance is shared
    # with the daemon, whose runs of the others must not race on creating theirs.
    configured = accounts_from_env(env, require_keys=False)
    pools = [AccountScope.of(a).pool for a in configured or chosen]
    several = len(chosen) != 1 or not AccountScope.of(chosen[0]).is_default
    cdrs = 0
    failed: list[str] = []
    try:
        with (
            fail_fast_storage(uses_postgres(env)),
            open_instance(env, data_dir, ensure_pools(pools)) as instance,
            api_environ(env, key_vars),
        ):
            for account in chosen:
                scope = AccountScope.of(account)
                lake_uri = warehouse.lake(account.id).uri
                who = f"account {account.id}: " if several else ""
                print(
                    f"cdrhouse ingest: {who}{len(keys)} day(s) [{start}, {end}) from "
                    f"{_source(account.base_url)} into {lake_uri}",
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
                    scope=scope,
                )
                if report.setup_error is not None:
                    _views_of_what_landed(warehouse)
                    raise CliError(report.setup_error)
                rows = sum(r.rows.get("cdrs", 0) for r in report.runs)
                if report.success:
                    cdrs += rows
                    if several:
                        print(f"  account {account.id}: ok, {rows:,} CDRs in {lake_uri}", file=out)
                else:
                    labels = [r.label for r in report.runs if not r.success or r.checks_failed]
                    failed.append(account.id)
                    if several:
                        print(
                            f"  account {account.id}: FAILED ({', '.join(labels)}); "
                            f"{lake_uri} keeps what landed before",
                            file=out,
                        )
                    else:
                        print(
                            f"cdrhouse ingest: FAILED ({', '.join(labels)}); see the lines above",
                            file=out,
                        )
    except SetupError as exc:
        _views_of_what_landed(warehouse)
        raise CliError(str(exc)) from None
    except KeyboardInterrupt:
        # Ctrl-C: the days that landed before it are queryable at once too.
        _views_of_what_landed(warehouse)
        raise
    try:
        if warehouse.lake().is_local:
            warehouse.refresh_views()  # the runs left the views to this (`views_in_runs`)
        else:
            warehouse.build_views()  # the runs refreshed only the lake (see refresh_views)
    except UnreadablePartitions as exc:
        print(f"cdrhouse ingest: FAILED to build the views: {exc}", file=out)
        return 1
    if refused:
        print(
            f"cdrhouse ingest: REFUSED account(s) {', '.join(refused)} (nothing of theirs "
            f"was written; see the lines above)"
            + (f"; FAILED for {', '.join(failed)}" if failed else "")
            + "; the others landed",
            file=out,
        )
        return 2
    if failed:
        if several:
            print(
                f"cdrhouse ingest: FAILED for account(s) {', '.join(failed)}; the others "
                "landed; see the lines above",
                file=out,
            )
        return 1
    views = data_dir / WAREHOUSE_FILE
    print(
        f"cdrhouse ingest: done, {cdrs:,} CDRs in {warehouse.resolved_lake_uri} (views: {views})",
        file=out,
    )
    return 0


def _source(base_url: str) -> str:
    from pipelines.resources import is_sandbox

    if is_sandbox(base_url):
        return (
            "the bundled sandbox (in-process; set CC_API_BASE_URL to your cluster URL for "
            "real data)"
        )
    return base_url


def show_warehouse(data_dir: Path, out: TextIO) -> None:
    """The demo's look at what landed: each table's rows, and an example analyst query.
    Through the warehouse's own connection: no progress bar in this output, and the views of
    an object-store lake read (`CDRHOUSE_LAKE_URI=s3://...`)."""
    from models.tables import ALL_TABLES
    from warehouse.duck import connect

    with connect(data_dir) as con:
        print("\nrow counts per table:", file=out)
        for table in ALL_TABLES:
            [(rows,)] = con.execute(f'select count(*) from "{table.name}"').fetchall()
            print(f"  {table.name:<24} {rows:>10,}", file=out)
        print(f"\nexample analyst query:\n{DEMO_QUERY}\n", file=out)
        cursor = con.execute(DEMO_QUERY)
        names = [d[0] for d in cursor.description or []]
        result = cursor.fetchall()
    widths = [max(len(str(x)) for x in [n, *(r[i] for r in result)]) for i, n in enumerate(names)]
    print("  ".join(n.ljust(w) for n, w in zip(names, widths, strict=True)), file=out)
    for row in result:
        print("  ".join(str(v).ljust(w) for v, w in zip(row, widths, strict=True)), file=out)


def cmd_demo(env: Mapping[str, str], *, days: int = DEMO_DAYS, out: TextIO | None = None) -> int:
    """Ingest the last `days` complete days from the sandbox and materialize the
    `contact_center_report` asset of those days, all as Dagster runs in the instance at
    `DAGSTER_HOME` (the UI shows the report materialized); show what landed, and end with the
    path of the report, the file `cdrhouse report` writes by default."""
    from pipelines.privacy_settings import DEMO_PII_KEY, PHONE_NUMBERS_VAR, PII_KEY_VAR
    from pipelines.resources import SANDBOX
    from warehouse.analyst import report_path

    out = out or sys.stdout
    today = datetime.now(UTC).date()
    # Always the sandbox: a demo must not touch a cluster the shell happens to point at.
    dropped = ("CC_API_BASE_URL", "CC_API_KEY", "CDRHOUSE_ACCOUNTS_FILE")
    demo_env = {k: v for k, v in env.items() if k not in dropped}
    demo_env["CC_API_BASE_URL"] = SANDBOX
    # The sandbox's callers land as tokens under the demo's own key: a real key in the shell
    # is not used for made-up data (README "Callers' privacy").
    demo_env |= {PHONE_NUMBERS_VAR: "token", PII_KEY_VAR: DEMO_PII_KEY}
    code = cmd_ingest(today - timedelta(days=days), today, demo_env, out=out, report_days=days)
    if code != 0:
        return code
    show_warehouse(env_data_dir(env), out)
    report = report_path(env_data_dir(env))  # written by the asset's run above
    print(f"\ncontact-center report (open it in a browser, works offline): {report}", file=out)
    return 0


def _views_of_what_landed(warehouse: WarehouseResource) -> None:
    """Before a setup error (or Ctrl-C) ends the command: the runs left the views to it
    (`views_in_runs`), and what they landed before the error is queryable too. Nothing
    landed (a full disk at the first write, say): nothing is written, no views either."""
    from models.tables import TABLES

    lake = warehouse.lake()
    if lake.is_local and any(lake.holders(name) for name in TABLES):
        # Best effort: the setup error (a full disk, say, which fails this too) is the line.
        with contextlib.suppress(Exception):
            warehouse.refresh_views()
