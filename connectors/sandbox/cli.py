"""`cdrhouse sandbox`: serve the emulator on a port (arguments and the run function)."""

from __future__ import annotations

import argparse
import contextlib
import socket
import sys
from collections.abc import Callable
from datetime import UTC, date, datetime, timedelta

from pydantic import ValidationError

from connectors.sandbox.config import ALL_SCOPES, DEFAULT_API_KEY, SandboxConfig
from connectors.sandbox.faults import FaultConfig
from models.timestamps import parse_day

# One flag per FaultConfig field (--latency-ms, --error-429-rate, ...); `paths` is the
# repeatable --fault-path below.
_FAULT_FLAGS = [name for name in FaultConfig.model_fields if name != "paths"]


def _fault_value(name: str) -> Callable[[str], object]:
    """Parse a flag's text as the field would: its type and its bounds, one line on error."""

    def parse(text: str) -> object:
        try:
            return getattr(FaultConfig.model_validate_strings({name: text}), name)
        except ValidationError as exc:
            raise argparse.ArgumentTypeError(exc.errors()[0]["msg"]) from None

    return parse


def _day(text: str) -> date:
    """--start-date: YYYY-MM-DD only (Python also reads 20261101 and 2026-W45)."""
    try:
        return parse_day(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: expected YYYY-MM-DD") from None


def _config_int(name: str) -> Callable[[str], int]:
    """An int flag checked against its SandboxConfig field's bounds, one line on error."""
    field = SandboxConfig.model_fields[name]
    bounds = {type(m).__name__: m for m in field.metadata}

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"invalid int value: {text!r}") from None
        low, high = bounds.get("Ge"), bounds.get("Le")
        if (low is not None and value < low.ge) or (high is not None and value > high.le):
            span = f"{low.ge if low else ''}-{high.le if high else ''}"
            raise argparse.ArgumentTypeError(f"{value} is out of range {span}")
        return value

    return parse


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=port_number, default=8765, help="1-65535 (default 8765)")
    config = SandboxConfig.model_fields  # the defaults are the config's, written once
    parser.add_argument("--seed", type=int, default=config["seed"].default)
    parser.add_argument(
        "--start-date",
        type=_day,
        default=None,
        help="first day of data (default: today - DAYS in UTC, so the data ends today)",
    )
    parser.add_argument("--days", type=_config_int("days"), default=config["days"].default)
    parser.add_argument(
        "--cdrs-per-day", type=_config_int("cdrs_per_day"), default=config["cdrs_per_day"].default
    )
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
    for name in _FAULT_FLAGS:
        field = FaultConfig.model_fields[name]
        flag = "--" + name.replace("_", "-")
        if field.annotation is bool:
            group.add_argument(flag, action="store_true", help=field.description)
        else:
            help_text = f"{field.description} (default: %(default)s)"
            group.add_argument(flag, type=_fault_value(name), default=field.default, help=help_text)
    paths = FaultConfig.model_fields["paths"].description
    group.add_argument(
        "--fault-path",
        action="append",
        default=[],
        dest="fault_paths",
        help=f"{paths} (repeatable)",
    )


def port_number(text: str) -> int:
    """A TCP port, 1-65535: uvicorn took 99999 (and served on another port than printed)."""
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid port {text!r}: expected 1-65535") from None
    if not 1 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"invalid port {port}: expected 1-65535")
    return port


def listen(host: str, port: int) -> socket.socket:
    """The server's socket, bound before anything is printed: a port in use is one line and
    exit 2, not a URL printed as if served, then uvicorn's error."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    return socket.create_server((host, port), family=family, backlog=2048)


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
    faults = {name: getattr(args, name) for name in _FAULT_FLAGS}
    # The data window is chosen here, at the edge: the config itself never reads the clock.
    start = args.start_date or datetime.now(UTC).date() - timedelta(days=args.days)
    key = args.api_key or DEFAULT_API_KEY
    keys: dict[str, frozenset[str]] = {key: ALL_SCOPES, **dict(args.key)}
    return SandboxConfig(
        seed=args.seed,
        start_date=start,
        days=args.days,
        cdrs_per_day=args.cdrs_per_day,
        api_keys=keys,
        dialer_ai=not args.no_dialer_ai,
        dialing_order=not args.no_dialing_order,
        contact_local_time=not args.no_contact_local_time,
        faults=FaultConfig.model_validate({**faults, "paths": tuple(args.fault_paths)}),
    )


def run(args: argparse.Namespace) -> int:
    """Serve until interrupted; prints the base URL and the key first."""
    import uvicorn

    from connectors.sandbox import Sandbox

    try:
        config = build_config(args)
    except ValidationError as exc:
        for error in exc.errors():
            # A check of several fields (the data window) has no single field to name.
            where = f"{error['loc'][0]}: " if error["loc"] else ""
            print(f"cdrhouse sandbox: {where}{error['msg']}", file=sys.stderr)
        return 2
    try:
        sock = listen(args.host, args.port)
    except OSError as exc:
        reason = exc.strerror or str(exc)
        print(
            f"cdrhouse sandbox: error: cannot listen on {args.host}:{args.port}: {reason}; "
            "pick another --port (or --host)",
            file=sys.stderr,
        )
        return 2
    sandbox = Sandbox(config)
    key = next(iter(config.api_keys))
    host = f"[{args.host}]" if ":" in args.host else args.host  # an IPv6 address
    print(f"cdrhouse sandbox: http://{host}:{args.port}/api/v4", flush=True)
    print(f"  API key (Bearer): {key}", flush=True)
    for scoped, scopes in args.key:
        print(f"  scoped key: {scoped} ({', '.join(sorted(scopes))})", flush=True)
    print(
        f"  seed={config.seed} start_date={config.start_date} days={config.days} "
        f"cdrs_per_day={config.cdrs_per_day}",
        flush=True,
    )
    server = uvicorn.Server(uvicorn.Config(sandbox.app, log_level="warning", access_log=False))
    with sock, contextlib.suppress(KeyboardInterrupt):  # Ctrl-C ends it, as uvicorn.run does
        server.run(sockets=[sock])
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="cdrhouse sandbox", description=__doc__)
    add_arguments(parser)
    return run(parser.parse_args(argv))
