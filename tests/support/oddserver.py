"""A test-side API whose CDR pages carry chosen odd records: an ASGI wrapper around the sandbox.

The sandbox writes only well-formed records with costs of at most 4 decimals. `RewritingApp`
passes every request to the sandbox's app and rewrites the records of each CDR list page with
a function of the record's bytes (a 7-decimal cost, `1e400`, a byte that is not UTF-8, a
3,000-deep array, ...): the same bytes on every request, as a server holding that data would
send. It counts the requests of each page, so a test can tell a retry loop from one re-request.
`serve_app` puts any ASGI app on a loopback port (uvicorn in a thread), for the real pipeline.
"""

from __future__ import annotations

import re
import socket
import threading
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Iterator, MutableMapping
from contextlib import contextmanager
from decimal import Decimal
from typing import Any

import msgspec
import uvicorn

CDRS_PATH = "/api/v4/reporting/cdrs"

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
App = Callable[[Scope, Receive, Send], Awaitable[None]]
Rewrite = Callable[[bytes], bytes]

_ID = re.compile(rb'^\{"id":"([^"]*)"')
_COST = re.compile(rb'"cost":(-?[0-9][0-9.eE+-]*)')


class _Page(msgspec.Struct):
    cdrs: list[msgspec.Raw]
    metadata: msgspec.Raw


def page_records(body: bytes) -> list[bytes]:
    """The records of a (well-formed) sandbox page, as their exact bytes."""
    return [bytes(r) for r in msgspec.json.decode(body, type=_Page).cdrs]


def record_id(record: bytes) -> str:
    """The id of a sandbox record (it is written first)."""
    found = _ID.match(record)
    assert found is not None, record[:80]
    return found.group(1).decode()


def cost_token(record: bytes) -> bytes:
    """The record's top-level cost token as written (a sandbox record has one `"cost":`)."""
    found = _COST.search(record)
    assert found is not None, record[:80]
    return found.group(1)


def with_cost(record: bytes, token: bytes) -> bytes:
    """The record with its cost token replaced by `token`, every other byte kept."""
    return _COST.sub(lambda _: b'"cost":' + token, record, count=1)


def seven_decimals(token: bytes) -> bytes:
    """A cost 0.0000004 above `token`: 7 decimals, e.g. 0.6984 -> 0.6984004."""
    return format(Decimal(token.decode()) + Decimal("0.0000004"), "f").encode()


class RewritingApp:
    """The sandbox's app, with each CDR page's records passed through `rewrite`."""

    def __init__(self, app: App, rewrite: Rewrite) -> None:
        self.app = app
        self.rewrite = rewrite
        # Requests per page (its query string) and times each record id was served.
        self.pages: Counter[str] = Counter()
        self.served: Counter[str] = Counter()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] != CDRS_PATH:
            await self.app(scope, receive, send)
            return
        self.pages[scope["query_string"].decode()] += 1
        start: Message = {}
        chunks: list[bytes] = []

        async def collect(message: Message) -> None:
            if message["type"] == "http.response.start":
                start.update(message)
            else:
                chunks.append(message.get("body", b""))

        await self.app(scope, receive, collect)
        body = self._page(b"".join(chunks)) if start.get("status") == 200 else b"".join(chunks)
        headers = [(k, v) for k, v in start.get("headers", []) if k.lower() != b"content-length"]
        headers.append((b"content-length", str(len(body)).encode()))
        await send({**start, "headers": headers})
        await send({"type": "http.response.body", "body": body})

    def _page(self, body: bytes) -> bytes:
        page = msgspec.json.decode(body, type=_Page)
        records = [bytes(r) for r in page.cdrs]
        self.served.update(record_id(r) for r in records)
        out = [self.rewrite(r) for r in records]
        return b'{"cdrs":[' + b",".join(out) + b'],"metadata":' + bytes(page.metadata) + b"}"


@contextmanager
def serve_app(app: App) -> Iterator[str]:
    """`app` on a free loopback port (uvicorn in a thread); yields its base URL."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    host, port = sock.getsockname()[:2]
    config = uvicorn.Config(
        app, log_level="warning", lifespan="off", access_log=False, log_config=None
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 60  # a deadline: the loop ends once it serves
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("test server failed to start")
        time.sleep(0.01)
    try:
        yield f"http://{host}:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()
