"""A sandbox whose CDR pages carry chosen odd records: an ASGI wrapper around its app.

The sandbox writes only well-formed, ordinary records. `RewritingApp` passes every request to
the sandbox's app and rewrites the records of each CDR list page with a function of the
record's bytes (a 7-decimal cost, `1e400`, a byte that is not UTF-8, a 40 MB summary, ...):
the same bytes on every request, as a server holding that data would send. It counts the
requests of each page, so a caller can tell a retry loop from one re-request. `serve_app` puts
any ASGI app on a loopback port (uvicorn in a thread). Used by the tests and the benches.
"""

from __future__ import annotations

import random
import re
import socket
import threading
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Iterator, MutableMapping
from contextlib import contextmanager
from typing import Any

import msgspec

from connectors.sandbox.server import SERVER_THREAD_LOOP

CDRS_PATH = "/api/v4/reporting/cdrs"

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
App = Callable[[Scope, Receive, Send], Awaitable[None]]
Rewrite = Callable[[bytes], bytes]
RewriteQuery = Callable[[bytes], bytes]

_ID = re.compile(rb'^\{"id":"([^"]*)"')
_SUMMARY = re.compile(rb'"summary":(?:null|"(?:[^"\\]|\\.)*")')
# 256 bytes -> 32 symbols (letters and spaces): any random byte becomes a plain JSON character.
_LETTERS = bytes.maketrans(bytes(range(256)), b"abcdefghijklmnopqrstuvwxyz      " * 8)


class _Page(msgspec.Struct):
    cdrs: list[msgspec.Raw]
    metadata: msgspec.Raw


def page_records(body: bytes) -> list[bytes]:
    """The records of a (well-formed) sandbox page, as their exact bytes."""
    return [bytes(r) for r in msgspec.json.decode(body, type=_Page).cdrs]


def record_id(record: bytes) -> str:
    """The id of a sandbox record (it is written first)."""
    found = _ID.match(record)
    if found is None:
        raise ValueError(f"not a sandbox record: {record[:80]!r}")
    return found.group(1).decode()


def big_text(seed: str, size: int) -> bytes:
    """`size` bytes of letters and spaces, the same for the same seed (e.g. a CDR id)."""
    return random.Random(seed).randbytes(size).translate(_LETTERS)


def with_summary(record: bytes, text: bytes) -> bytes:
    """A call record with its `data.summary` (null or a string) replaced by `text` (which
    must need no JSON escaping, as `big_text`'s does not)."""
    found = _SUMMARY.search(record)
    if found is None:
        raise ValueError(f"no summary in {record[:80]!r}")
    return record[: found.start()] + b'"summary":"' + text + b'"' + record[found.end() :]


async def answer_of(app: App, scope: Scope, receive: Receive) -> tuple[Message, bytes]:
    """`app`'s answer to one request, whole: its start message and its body."""
    start: Message = {}
    chunks: list[bytes] = []

    async def collect(message: Message) -> None:
        if message["type"] == "http.response.start":
            start.update(message)
        else:
            chunks.append(message.get("body", b""))

    await app(scope, receive, collect)
    return start, b"".join(chunks)


async def send_answer(send: Send, start: Message, body: bytes) -> None:
    """An answer `answer_of` read (its body rewritten, maybe), its Content-Length made right."""
    headers = [(k, v) for k, v in start.get("headers", []) if k.lower() != b"content-length"]
    headers.append((b"content-length", str(len(body)).encode()))
    await send({**start, "headers": headers})
    await send({"type": "http.response.body", "body": body})


class RewritingApp:
    """The sandbox's app, with each CDR page's records passed through `rewrite`."""

    def __init__(self, app: App, rewrite: Rewrite, query: RewriteQuery | None = None) -> None:
        self.app = app
        self.rewrite = rewrite
        # Rewrites each CDR request's query string before the sandbox reads it (a server that
        # reads `started_at[lt]` as `started_at[lte]`: an inclusive upper bound).
        self.query = query
        # Requests per page (its query string) and times each record id was served.
        self.pages: Counter[str] = Counter()
        self.served: Counter[str] = Counter()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] != CDRS_PATH:
            await self.app(scope, receive, send)
            return
        self.pages[scope["query_string"].decode()] += 1
        if self.query is not None:
            scope = {**scope, "query_string": self.query(scope["query_string"])}
        start, body = await answer_of(self.app, scope, receive)
        if start.get("status") == 200:
            body = self._page(body)
        await send_answer(send, start, body)

    def _page(self, body: bytes) -> bytes:
        page = msgspec.json.decode(body, type=_Page)
        records = [bytes(r) for r in page.cdrs]
        self.served.update(record_id(r) for r in records)
        out = [self.rewrite(r) for r in records]
        return b'{"cdrs":[' + b",".join(out) + b'],"metadata":' + bytes(page.metadata) + b"}"


@contextmanager
def serve_app(app: App) -> Iterator[str]:
    """`app` on a free loopback port (uvicorn in a thread); yields its base URL."""
    import uvicorn

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    host, port = sock.getsockname()[:2]
    config = uvicorn.Config(
        app,
        log_level="warning",
        lifespan="off",
        access_log=False,
        log_config=None,
        loop=SERVER_THREAD_LOOP,
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 60  # a deadline: the loop ends once it serves
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("the rewriting server failed to start")
        time.sleep(0.01)
    try:
        yield f"http://{host}:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()
