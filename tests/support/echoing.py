"""A careless API: the sandbox behind a stub that echoes the caller's key in its error bodies.

`KeyEcho` wraps the sandbox's ASGI app and answers, for the key of the request's
`Authorization` header:

- 500 to the first attempt of every request to the paths in `flaky` (`{"error":
  "<padding><key>"}`: the key is cut by any 300-character limit a message applies, so a
  redactor that runs after the cut leaves a piece of it), then passes the retry through: a
  run still succeeds;
- 422 to the CDR list of the days in `invalid_days`, the key in the `error` text, in a field
  error's message and as a field name;
- 401 to the paths in `unauthorized` and to the CDR list of the days in `unauthorized_days`,
  the key in the `error` text.

`serve_app(app)` serves any ASGI app with uvicorn on a loopback port (a real socket), so the
client sees these answers exactly as it would from a server. `ingest_through_echo(env, day)`
runs `cdrhouse ingest` through such a stub twice (a good day and a 422, then a 401) and keeps
everything it printed and logged.
"""

from __future__ import annotations

import io
import logging
import traceback
from collections import Counter
from collections.abc import Awaitable, Callable, Iterator, Mapping, MutableMapping
from contextlib import contextmanager, redirect_stderr, redirect_stdout
from dataclasses import dataclass, field
from datetime import date, timedelta
from typing import Any
from urllib.parse import parse_qs

import orjson

from connectors.sandbox.rewriting import serve_app as serve_app
from tests.support.privacy import with_raw_numbers

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
App = Callable[[Scope, Receive, Send], Awaitable[None]]

CDRS_PATH = "/api/v4/reporting/cdrs"
# The length limit connectors/contact_center/errors.py applies to a server's text.
DETAIL_LIMIT = 300


def echo_500(key: str) -> dict[str, Any]:
    # The key straddles the limit: cut first and redacted second, its first half survives.
    pad = "upstream failure while serving ".ljust(DETAIL_LIMIT - len(key) // 2, ".")
    return {"error": pad + key}


def echo_422(key: str) -> dict[str, Any]:
    return {
        "error": f"validation failed for API key {key}",
        "errors": {"started_at[gte]": [f"not allowed for API key {key}"], key: ["unknown field"]},
    }


def echo_401(key: str) -> dict[str, Any]:
    return {"error": f"API key {key} is not valid on this cluster"}


@dataclass
class KeyEcho:
    """The ASGI stub (see the module docstring); `answered` counts its own answers by status."""

    app: App
    invalid_days: frozenset[str] = frozenset()
    unauthorized: tuple[str, ...] = ()
    unauthorized_days: frozenset[str] = frozenset()
    flaky: tuple[str, ...] = (CDRS_PATH, "/api/v4/users")
    answered: Counter[int] = field(default_factory=Counter)
    _seen: set[tuple[str, str, bytes]] = field(default_factory=set)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "")
        if scope["type"] != "http" or not path.startswith("/api/v4"):
            await self.app(scope, receive, send)
            return
        headers = dict(scope.get("headers") or [])
        key = headers.get(b"authorization", b"").decode().removeprefix("Bearer ").strip()
        query: bytes = scope.get("query_string", b"")
        day = parse_qs(query.decode()).get("started_at[gte]", [""])[0][:10]
        request = (scope["method"], path, query)
        cdrs = path == CDRS_PATH
        if path.startswith(self.unauthorized) or (cdrs and day in self.unauthorized_days):
            await self._answer(send, 401, echo_401(key))
        elif cdrs and day in self.invalid_days:
            await self._answer(send, 422, echo_422(key))
        elif path.startswith(self.flaky) and request not in self._seen:
            self._seen.add(request)
            await self._answer(send, 500, echo_500(key))
        else:
            await self.app(scope, receive, send)

    async def _answer(self, send: Send, status: int, body: dict[str, Any]) -> None:
        self.answered[status] += 1
        content = orjson.dumps(body)
        await send(
            {
                "type": "http.response.start",
                "status": status,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(content)).encode()),
                ],
            }
        )
        await send({"type": "http.response.body", "body": content})


class _Records(logging.Handler):
    """Every log record, as text: message, raw arguments and exception."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.texts: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        text = f"{record.name} {record.getMessage()} {record.args!r}"
        if record.exc_info and record.exc_info[1] is not None:
            text += "".join(traceback.format_exception(record.exc_info[1]))
        self.texts.append(text)


# The object store's clients, at INFO: their DEBUG (every S3 request, signed) is thousands of
# records per run, slows the run several fold, and never sees the API's key.
_OBJECT_STORE_LOGGERS = ("botocore", "aiobotocore", "s3fs", "fsspec", "urllib3")


@contextmanager
def captured_logs() -> Iterator[list[str]]:
    """Every record any logger emits meanwhile, DEBUG included (object-store clients: INFO)."""
    root = logging.getLogger()
    handler = _Records()
    levels = {name: logging.getLogger(name).level for name in ("", *_OBJECT_STORE_LOGGERS)}
    root.addHandler(handler)
    root.setLevel(logging.DEBUG)
    for name in _OBJECT_STORE_LOGGERS:
        logging.getLogger(name).setLevel(logging.INFO)
    try:
        yield handler.texts
    finally:
        root.removeHandler(handler)
        for name, level in levels.items():
            logging.getLogger(name).setLevel(level)


@dataclass
class EchoedIngest:
    """What `ingest_through_echo` saw: exit codes, what the commands printed, every log."""

    codes: list[int]
    output: str
    logs: list[str]


def ingest_through_echo(env: Mapping[str, str], day: date, *, snapshots: bool) -> EchoedIngest:
    """Two `cdrhouse ingest --verbose` through a `KeyEcho` (`env` points at it; DAGSTER_HOME
    and the instance's variables must be in `os.environ` too):

    1. `day` (the stub's 500s are retried: ok) and the next day, refused (422: invalid day);
       without snapshots;
    2. with `snapshots`, `day` with the snapshots, the run that comes first (a 401 on a
       snapshot's path); else the day after the 422 (a 401: unauthorized day)."""
    from pipelines.cli import main

    def ingest(first: date, days: int, *flags: str) -> list[str]:
        end = first + timedelta(days)
        return ["ingest", "--start", first.isoformat(), "--end", end.isoformat(), *flags]

    commands = [
        ingest(day, 2, "--no-snapshots", "--verbose"),
        ingest(day, 1, "--verbose")
        if snapshots
        else ingest(day + timedelta(2), 1, "--no-snapshots", "--verbose"),
    ]
    output = io.StringIO()
    with captured_logs() as logs, redirect_stdout(output), redirect_stderr(output):
        codes = [main(argv, env=with_raw_numbers(env)) for argv in commands]
    return EchoedIngest(codes, output.getvalue(), list(logs))
