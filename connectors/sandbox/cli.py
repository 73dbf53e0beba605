"""`cdrhouse sandbox`: serve the emulator on a port (arguments and the run function)."""

from __future__ import annotations

import argparse
import typing
from dataclasses import fields, replace
from datetime import date

from connectors.sandbox.config import ALL_SCOPES, DEFAULT_API_KEY, SandboxConfig
from connectors.sandbox.faults import FaultConfig

FlagKind = type[bool] | type[int] | type[float]
# The command-line kind of each annotation a FaultConfig field may have (`| None` removed).
_FLAG_KINDS: dict[object, FlagKind] = {bool: bool, int: int, float: float}


def _flag_kind(hint: object) -> FlagKind:
    """The flag kind of a resolved FaultConfig annotation: `float | None` -> float."""
    kinds = [arg for arg in typing.get_args(hint) if arg is not type(None)] or [hint]
    if len(kinds) != 1 or kinds[0] not in _FLAG_KINDS:
        raise TypeError(f"no command-line flag for a FaultConfig field of type {hint!r}")
    return _FLAG_KINDS[kinds[0]]


# Fault flags: --latency-ms, --error-429-rate, ... one per FaultConfig field (paths: below).
_FAULT_HINTS = typing.get_type_hints(FaultConfig)
_FAULT_FLAGS: dict[str, FlagKind] = {
    f.name: _flag_kind(_FAULT_HINTS[f.name]) for f in fields(FaultConfig) if f.name != "paths"
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8765)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--start-date", type=date.fromisoformat, default=None)
    parser.add_argument("--days", type=int, default=30)
    parser.add_argument("--cdrs-per-day", type=int, default=20000)
    parser.add_argument("--api-key", default=None, help="full-scope key (default: built-in)")
    parser.add_argument(
        "--key",
        action="append",
        default=[],
        type=scoped_key,
        metavar="KEY=SCOPE[,SCOPE...]",
        help="a key with only these scopes (repeatable; a request beyond them gets 403)",
    )
    for flag in ("dialer-ai", "dialing-order", "contact-local-time"):
        parser.add_argument(f"--no-{flag}", action="store_true", help=f"disable the {flag} flag")
    group = parser.add_argument_group("faults (all off by default)")
    for name, kind in _FAULT_FLAGS.items():
        flag = "--" + name.replace("_", "-")
        if kind is bool:
            group.add_argument(flag, action="store_true")
        else:
            group.add_argument(flag, type=kind, default=None)
    group.add_argument("--fault-path", action="append", default=[], dest="fault_paths")


def scoped_key(text: str) -> tuple[str, frozenset[str]]:
    """`KEY=scope1,scope2` -> (key, scopes); scopes must be the sandbox's own names."""
    key, sep, scopes = text.partition("=")
    names = frozenset(s.strip() for s in scopes.split(",") if s.strip())
    if not sep or not key.strip() or not names:
        raise argparse.ArgumentTypeError("expected KEY=scope1,scope2")
    unknown = sorted(names - ALL_SCOPES)
    if unknown:
        raise argparse.ArgumentTypeError(f"unknown scope(s): {', '.join(unknown)}")
    return key.strip(), names


def build_config(args: argparse.Namespace) -> SandboxConfig:
    fault_values: dict[str, object] = {}
    for name in _FAULT_FLAGS:
        value = getattr(args, name)
        if value is not None and value is not False:
            fault_values[name] = value
    if args.fault_paths:
        fault_values["paths"] = tuple(args.fault_paths)
    key = args.api_key or DEFAULT_API_KEY
    keys: dict[str, frozenset[str]] = {key: ALL_SCOPES, **dict(args.key)}
    config = SandboxConfig(
        seed=args.seed,
        days=args.days,
        cdrs_per_day=args.cdrs_per_day,
        api_keys=keys,
        dialer_ai=not args.no_dialer_ai,
        dialing_order=not args.no_dialing_order,
        contact_local_time=not args.no_contact_local_time,
        faults=FaultConfig.from_json(fault_values),
    )
    if args.start_date is not None:
        config = replace(config, start_date=args.start_date)
    return config


def run(args: argparse.Namespace) -> int:
    """Serve until interrupted; prints the base URL and the key first."""
    import uvicorn

    from connectors.sandbox import Sandbox

    config = build_config(args)
    sandbox = Sandbox(config)
    key = next(iter(config.api_keys))
    print(f"cdrhouse sandbox: http://{args.host}:{args.port}/api/v4", flush=True)
    print(f"  API key (Bearer): {key}", flush=True)
    for scoped, scopes in args.key:
        print(f"  scoped key: {scoped} ({', '.join(sorted(scopes))})", flush=True)
    print(
        f"  seed={config.seed} start_date={config.start_date} days={config.days} "
        f"cdrs_per_day={config.cdrs_per_day}",
        flush=True,
    )
    uvicorn.run(sandbox.app, host=args.host, port=args.port, log_level="warning", access_log=False)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="cdrhouse sandbox", description=__doc__)
    add_arguments(parser)
    return run(parser.parse_args(argv))
