"""The `cdrhouse` command: `sandbox`, `ingest`, `sql`, `lake`, `report`, `privacy` and `demo`.

This module parses the arguments and hands each command to its implementation: `ingest` and
`demo` in `pipelines.cli_ingest` (whose runs are `pipelines.cli_runs`), `sql`, `lake` and
`report` in `warehouse.cli`, `privacy` in `pipelines.cli_privacy`, `sandbox` in
`connectors.sandbox.cli`. Environment variables are
read here, in those command modules and in `definitions.py` only.
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import sys
import threading
from collections.abc import Callable, Mapping
from datetime import date
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from pipelines import cli_privacy
from pipelines.cli_ingest import (
    DEMO_DAYS,
    CliError,
    cmd_demo,
    cmd_ingest,
    env_data_dir,
    validate_range,
)
from warehouse import cli as warehouse_cli
from warehouse.kpi import KpiSettings

if TYPE_CHECKING:
    from pipelines.cli_runs import IngestReport, run_ingest

# Only the standard library at module level (and the command modules, which keep to it too):
# `cdrhouse --help` and usage errors must answer without importing Dagster, polars, DuckDB or
# pyarrow, and `cdrhouse sql` with DuckDB alone (tests/pipelines/test_cli_startup.py). Each
# command imports what it needs when it runs; the runs' names below are loaded when asked for.
_LAZY = {"IngestReport", "run_ingest"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        from pipelines import cli_runs

        return getattr(cli_runs, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "CliError",
    "IngestReport",
    "build_parser",
    "cmd_demo",
    "cmd_ingest",
    "main",
    "parse_day",
    "run_ingest",
    "validate_range",
]


# `cdrhouse sql`, `report` and `lake`: each takes (args, data dir, lake URI or None).
WAREHOUSE_COMMANDS: Mapping[str, Callable[[argparse.Namespace, Path, str | None], int]] = {
    "sql": warehouse_cli.run,
    "report": warehouse_cli.run_report,
    "lake": warehouse_cli.run_lake,
}


def parse_day(text: str, flag: str) -> date:
    from models.timestamps import parse_day as strict_day

    try:
        return strict_day(text)
    except ValueError:
        raise CliError(f"{flag} {text!r} is not a date; use YYYY-MM-DD, e.g. 2026-11-20") from None


class _Parser(argparse.ArgumentParser):
    """argparse, except that an argument it did not take is not echoed with its digits: a
    number given to `privacy forget` unquoted and split by an option (`+49 151 --account emea
    12345678`) left its last part in the error line (a terminal's scrollback, a CI log)."""

    def error(self, message: str) -> NoReturn:
        if message.startswith("unrecognized arguments:"):
            message = re.sub(r"[0-9]{3,}", "…", message)
        super().error(message)


def build_parser(*, sandbox_args: bool = True) -> argparse.ArgumentParser:
    """The argument parser; `sandbox_args=False` leaves the sandbox package unimported."""
    parser = _Parser(prog="cdrhouse", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)

    ingest = sub.add_parser("ingest", help="materialize CDR days [start, end) and the snapshots")
    ingest.add_argument("--start", required=True, help="first day, YYYY-MM-DD (UTC)")
    ingest.add_argument("--end", required=True, help="day after the last one, YYYY-MM-DD")
    ingest.add_argument(
        "--no-snapshots", action="store_true", help="only the CDR partitions, no snapshots"
    )
    ingest.add_argument("--verbose", action="store_true", help="show Dagster's run logs")
    ingest.add_argument(
        "--account",
        action="append",
        default=[],
        metavar="ID",
        help="only this account of CDRHOUSE_ACCOUNTS_FILE (repeatable; default: every "
        "account). Each account's days land in its own lake, <lake>/account_id=<ID>/ (the "
        "account `default`, of CC_API_BASE_URL/CC_API_KEY, in the lake root); one account "
        "failing fails only its own runs, and the exit code is 1",
    )

    demo = sub.add_parser("demo", help="ingest the last 7 days from the sandbox and query them")
    demo.add_argument("--days", type=int, default=DEMO_DAYS, help="days to ingest (default 7)")

    sandbox = sub.add_parser("sandbox", help="run the bundled API sandbox on a port")
    if sandbox_args:
        from connectors.sandbox import cli as sandbox_cli  # type: ignore[attr-defined,unused-ignore]

        sandbox_cli.add_arguments(sandbox)

    lake = sub.add_parser("lake", help="inspect the lake, rebuild its views, or reset it")
    warehouse_cli.add_lake_arguments(lake)
    report = sub.add_parser(
        "report", help="write the contact-center report: one offline HTML file of charts"
    )
    warehouse_cli.add_report_arguments(report)
    sql = sub.add_parser("sql", help="query the warehouse with SQL")
    warehouse_cli.add_arguments(sql)
    privacy = sub.add_parser("privacy", help="erase a person's number from the lake")
    cli_privacy.add_arguments(privacy)
    return parser


def _check_lake_uri(lake_uri: str | None) -> None:
    """The shape `ingest` checks, for `sql`, `report` and `lake` too: one line, not a traceback."""
    if lake_uri is None:
        return
    from warehouse.stores import lake_uri_problem, shown_uri

    if (problem := lake_uri_problem(lake_uri)) is not None:
        raise CliError(f"CDRHOUSE_LAKE_URI={shown_uri(lake_uri)!r}: {problem}")
    from warehouse.stores import is_local_uri, root_from_uri

    if is_local_uri(lake_uri) and root_from_uri(lake_uri).is_file():
        raise CliError(f"CDRHOUSE_LAKE_URI={lake_uri!r} names a file, not the lake's directory")


# The names `pipelines.kpi_settings.KPI_NAMES` validates (a test holds the two equal), spelled
# here so that `cdrhouse sql` without any of them set loads no pydantic.
KPI_VARIABLES = frozenset(
    {
        "CDRHOUSE_TIMEZONE",
        "CDRHOUSE_SL_THRESHOLD_S",
        "CDRHOUSE_SHORT_ABANDON_S",
        "CDRHOUSE_INBOUND_SUBTYPES",
        "CDRHOUSE_OUTBOUND_SUBTYPES",
        "CDRHOUSE_ANSWERED_DISPOSITIONS",
        "CDRHOUSE_UNANSWERED_DISPOSITIONS",
        "CDRHOUSE_ABANDON_END_REASONS",
        "CDRHOUSE_OTHER_END_REASONS",
    }
)


def _kpi_settings(env: Mapping[str, str]) -> KpiSettings | None:
    """The KPI variables, checked like `ingest` checks them: one line, exit 2. None when none
    is set (an empty value counts as unset): the views keep the settings they were built with,
    so an analyst's shell without them never resets the business day the pipeline set."""
    if not any(env.get(name) for name in KPI_VARIABLES):
        return None
    from pipelines.kpi_settings import SettingsError, kpi_from_env

    try:
        return kpi_from_env(env)
    except SettingsError as exc:
        raise CliError(str(exc)) from None


def _report_currency(env: Mapping[str, str]) -> str | None:
    """`CDRHOUSE_CURRENCY`, checked like the other variables: one line, exit 2."""
    from pipelines.kpi_settings import SettingsError, currency_from_env

    try:
        return currency_from_env(env)
    except SettingsError as exc:
        raise CliError(str(exc)) from None


def _lake_moved(data_dir: Path, lake_uri: str | None, recorded: str | None) -> str | None:
    """The lake the views must be rebuilt over when it is not the one they were built over
    (`recorded`): CDRHOUSE_LAKE_URI when set; else, for views built over a local lake, the
    data dir's own lake when it holds data (a data dir copied or moved: its views kept reading
    the old path's files, or failed with "No files found" there). None to keep the file's: an
    analyst's file over another lake, or over an object store (CDRHOUSE_LAKE_URI left unset
    beside an old local lake is not taken for a move)."""
    if recorded is None:
        return None
    from warehouse.analyst import default_lake_uri, same_lake
    from warehouse.stores import is_local_uri

    if lake_uri is not None:
        return None if same_lake(lake_uri, recorded) else lake_uri
    own = default_lake_uri(data_dir)
    if not is_local_uri(recorded) or same_lake(own, recorded) or not (data_dir / "lake").is_dir():
        return None
    from warehouse.lake import Lake

    # Any account's data: a lake of several accounts holds it in its sub-lakes only.
    return own if Lake(own).accounts() else None


def _views_follow_kpi_settings(
    data_dir: Path, lake_uri: str | None, kpi: KpiSettings | None
) -> KpiSettings:
    """`sql`, `report` and `lake` read views built with the KPI settings configured now: a
    warehouse built with others (another CDRHOUSE_TIMEZONE, say) is rebuilt first, over the lake
    it was built over, and a missing one is built when the lake has data. No KPI variable set
    (`kpi` None) keeps the file's settings. One small read when they agree. Returns the
    settings the views answer with."""
    exists = (data_dir / "warehouse.duckdb").exists()
    if not exists and lake_uri is None and not (data_dir / "lake").is_dir():
        return kpi or KpiSettings()  # no views, no lake: nothing to build (usage errors stay light)
    from warehouse.analyst import built_kpi_and_lake

    built, recorded = built_kpi_and_lake(data_dir) if exists else (None, None)
    moved = _lake_moved(data_dir, lake_uri, recorded)
    if built is not None and (kpi is None or built == kpi) and moved is None:
        return built  # (a file older than the KPI views has none: it is rebuilt)
    from warehouse.duck import build_warehouse
    from warehouse.lake import Lake

    if moved is not None and lake_uri is not None and not Lake(moved).accounts():
        # A mistyped URI: rebuilt over it, every later answer (with or without the variable)
        # would have been empty, and said nothing.
        raise CliError(
            f"CDRHOUSE_LAKE_URI={moved} holds no data; the views stay over {recorded}, the "
            "lake they were built over (check the URI, or unset it to query them)"
        )
    if moved is not None:
        print(
            f"cdrhouse: the views were built over {recorded}; rebuilding them over {moved} "
            f"({'CDRHOUSE_LAKE_URI' if lake_uri else 'the lake of CDRHOUSE_DATA_DIR'})",
            file=sys.stderr,
        )
    lake_uri = moved or lake_uri or recorded
    if not exists:
        lake = Lake(lake_uri or (data_dir.resolve() / "lake").as_uri())
        if not lake.accounts():  # (a lake of several accounts: in its sub-lakes only)
            return kpi or KpiSettings()  # nothing to build over: the command says so itself
    try:
        build_warehouse(data_dir, lake_uri, kpi=kpi)
    except OSError as exc:
        # An analyst who may read the data dir but not write it: answer from the views as
        # they are, and say so, rather than fail a read over a rebuild.
        print(
            f"cdrhouse: warning: the views could not be rebuilt with the KPI settings and lake "
            f"set now ({type(exc).__name__}: {exc.strerror or exc}); answering with those they "
            "were built with",
            file=sys.stderr,
        )
        return built or KpiSettings()
    return kpi or built or KpiSettings()


def main(argv: list[str] | None = None, env: Mapping[str, str] | None = None) -> int:
    env = os.environ if env is None else env
    argv = sys.argv[1:] if argv is None else argv
    # The sandbox's flags only for `cdrhouse sandbox`: ingesting from a cluster never imports it.
    serve_sandbox = argv[:1] == ["sandbox"]
    if serve_sandbox:
        from pipelines.preflight import sandbox_extra_problem

        # A production install has no emulator (the `sandbox` extra): say so, not ImportError.
        if (problem := sandbox_extra_problem("`cdrhouse sandbox`")) is not None:
            print(f"cdrhouse: error: {problem}", file=sys.stderr)
            return 2
    args = build_parser(sandbox_args=serve_sandbox).parse_args(argv)
    previous = None
    if not serve_sandbox and threading.current_thread() is threading.main_thread():
        # A pod's SIGTERM stops a command as Ctrl-C does (Dagster maps it so during its runs
        # only): runs recorded as ended, views over what landed, exit 130.
        previous = signal.signal(signal.SIGTERM, signal.default_int_handler)
    try:
        return _command(args, env)
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


def _command(args: argparse.Namespace, env: Mapping[str, str]) -> int:
    try:
        if args.command == "ingest":
            start = parse_day(args.start, "--start")
            end = parse_day(args.end, "--end")
            return cmd_ingest(
                start,
                end,
                env,
                snapshots=not args.no_snapshots,
                verbose=args.verbose,
                accounts=args.account,
            )
        if args.command == "demo":
            return cmd_demo(env, days=args.days)
        if args.command == "sandbox":
            from connectors.sandbox import cli as sandbox_cli  # type: ignore[attr-defined,unused-ignore]

            return int(sandbox_cli.run(args))
        if args.command == "privacy":
            lake_uri = env.get("CDRHOUSE_LAKE_URI") or None
            _check_lake_uri(lake_uri)
            return cli_privacy.run(args, env, env_data_dir(env), lake_uri)
        if args.command in WAREHOUSE_COMMANDS:
            run = WAREHOUSE_COMMANDS[args.command]
            lake_uri = env.get("CDRHOUSE_LAKE_URI") or None
            _check_lake_uri(lake_uri)
            kpi = _kpi_settings(env)
            currency = _report_currency(env) if args.command == "report" else None
            data_dir = env_data_dir(env)
            if args.command != "lake" or args.lake_command == "views":
                # (`lake views` rebuilds keeping the file's settings: these, after this.)
                kpi = _views_follow_kpi_settings(data_dir, lake_uri, kpi)
            if args.command == "report":
                # The report's money sign, and its zone: `--days` counts business days.
                args.currency = currency
                args.timezone = (kpi or KpiSettings()).timezone
            return run(args, data_dir, lake_uri)
    except CliError as exc:
        print(f"cdrhouse: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("cdrhouse: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return _reader_gone(str(args.command))
    except Exception as exc:
        # A lake that refuses (another source, another key, a damaged marker) is named in one
        # line wherever it is met. Looked up, not imported: `sql` starts without the lake.
        lake_module = sys.modules.get("warehouse.lake")
        if lake_module is None or not isinstance(exc, lake_module.LakeSourceConflict):
            raise
        print(f"cdrhouse {args.command}: error: {exc}", file=sys.stderr)
        return 2
    return 2


# The shell's status of a command ended by SIGPIPE (128 + 13), as `head` leaves `cat` with.
SIGPIPE_EXIT = 141


# The commands that write: stopped by a closed pipe, they say so (a query just ends).
WRITING_COMMANDS = frozenset({"ingest", "demo", "privacy"})


def _reader_gone(command: str) -> int:
    """Output piped into a reader that stopped (`cdrhouse sql … | head`): end as a Unix filter
    does, not with a traceback; what is left unprinted goes nowhere (the exit's flush would
    raise again). A command that writes says on stderr that it stopped: `ingest | less`, quit
    early, must not look like an ingest that finished."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):  # stdout is not a file (a test's capture)
        pass
    if command in WRITING_COMMANDS:
        print(
            f"cdrhouse {command}: stopped: its output was closed (the reader of the pipe "
            "exited); what was published before stays, run it again to finish",
            file=sys.stderr,
        )
    return SIGPIPE_EXIT


if __name__ == "__main__":
    sys.exit(main())
