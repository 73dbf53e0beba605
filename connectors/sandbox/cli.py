"""`cdrhouse sandbox`: serve the emulator on a port (arguments and the run function)."""

from __future__ import annotations

import argparse
from dataclasses import fields
from datetime import date

from connectors.sandbox.config import ALL_SCOPES, DEFAULT_API_KEY, SandboxConfig
from connectors.sandbox.faults import FaultConfig

# Fault flags: --latency-ms, --error-429-rate, ... one per FaultConfig field.
_FAULT_FIELDS = [f for f in fields(FaultConfig) if f.name != "paths"]


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
    for f in _FAULT_FIELDS:
        kind = {"bool": None, "int": int, "float": float}.get(str(f.type).split(" ")[0])
        flag = "--" + f.name.replace("_", "-")
        if f.type == "bool":
            group.add_argument(flag, action="store_true")
        else:
            group.add_argument(flag, type=kind or float, default=None)
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
    for f in _FAULT_FIELDS:
        value = getattr(args, f.name)
        if value is not None and value is not False:
            fault_values[f.name] = value
    if args.fault_paths:
        fault_values["paths"] = tuple(args.fault_paths)
    key = args.api_key or DEFAULT_API_KEY
    keys: dict[str, frozenset[str]] = {key: ALL_SCOPES}
    for scoped, scopes in args.key:
        keys[scoped] = scopes
    extra: dict[str, object] = {}
    if args.start_date is not None:
        extra["start_date"] = args.start_date
    return SandboxConfig(
        seed=args.seed,
        days=args.days,
        cdrs_per_day=args.cdrs_per_day,
        api_keys=keys,
        dialer_ai=not args.no_dialer_ai,
        dialing_order=not args.no_dialing_order,
        contact_local_time=not args.no_contact_local_time,
        faults=FaultConfig.from_json(fault_values),
        **extra,  # type: ignore[arg-type]
    )


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
