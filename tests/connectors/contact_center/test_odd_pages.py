"""Issue 22: a whole CDR page that the strict parser refuses for one odd value is asked again
once; the same records twice are the data's, so the page is read tolerantly and paging goes on.
A body that is not a whole page (cut, HTML, empty) stays a retriable error, as before."""

from __future__ import annotations

import asyncio
import re
from datetime import datetime, timedelta

import httpx
import pytest

from connectors.contact_center import CdrPage, InvalidBodyError
from tests.support.oddserver import CDRS_PATH, Receive, RewritingApp, Scope, Send, record_id

from .conftest import day, make_client, make_sandbox

DEEP = 3000
# A record's id: records start `{"id":"...","type"` (a user object has a name after its id).
RECORD_ID = re.compile(rb'\{"id":"([0-9a-f-]{36})","type"')


def _ids(pages: list[CdrPage]) -> list[bytes]:
    return [i for p in pages for i in RECORD_ID.findall(p.body)]


def _odd(record: bytes) -> bytes:
    """`1e400` as the cost, and a byte that is not UTF-8 inside the subtype string."""
    record = re.sub(rb'"cost":[^,}]+', b'"cost":1e400', record, count=1)
    return record.replace(b'"subtype":"', b'"subtype":"\xff', 1)


def _deep(record: bytes) -> bytes:
    return record[:-1] + b',"nested":' + b"[" * DEEP + b"]" * DEEP + b"}"


def test_a_page_refused_twice_the_same_is_read_tolerantly_and_a_cut_one_is_still_retried() -> None:
    sandbox = make_sandbox(cdrs_per_day=120, days=1)
    start, end = day(0)
    targets: dict[str, bytes] = {}

    def rewrite(record: bytes) -> bytes:
        kind = targets.get(record_id(record))
        return record if kind is None else (_odd(record) if kind == b"odd" else _deep(record))

    app = RewritingApp(sandbox.app, rewrite)

    async def fetch(
        transport: httpx.AsyncBaseTransport, until: datetime = end
    ) -> tuple[list[CdrPage], dict[str, int]]:
        async with make_client(sandbox, transport=transport, page_size=20) as client:
            pages = [page async for page in client.fetch_cdr_pages(start, until)]
            return pages, dict(client.stats)

    clean, _ = asyncio.run(fetch(httpx.ASGITransport(app=app)))
    ids = [i.decode() for i in _ids(clean)]
    assert len(ids) == sum(p.count for p in clean) > 100
    # Two odd records on two pages of different sub-windows.
    first, second = ids[3], ids[-3]
    targets.update({first: b"odd", second: b"deep"})
    app.pages.clear()
    pages, stats = asyncio.run(fetch(httpx.ASGITransport(app=app)))

    assert sum(p.count for p in pages) == len(ids)
    got = [i.decode() for i in _ids(pages)]
    assert sorted(got) == sorted(ids), "every record, once, the odd ones included"
    bodies = b"".join(p.body for p in pages)
    assert b'"cost":1e400' in bodies
    assert b"\xff" in bodies
    assert b"[" * DEEP in bodies
    # Bounded: each odd page was asked for twice, every other page once.
    assert sorted(app.pages.values(), reverse=True)[:3] == [2, 2, 1]
    assert sum(app.pages.values()) == len(app.pages) + 2
    assert stats["odd_pages"] == 2

    # A cut body stays a transient fault, also when it comes back the same: retried to the end.
    requests: list[int] = []

    async def cut(scope: Scope, receive: Receive, send: Send) -> None:
        assert scope["path"] == CDRS_PATH
        requests.append(1)
        body = b'{"cdrs":[{"id":"x","cost":1e400}'
        headers = [(b"content-type", b"application/json")]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": body})

    with pytest.raises(InvalidBodyError, match="not valid JSON"):
        asyncio.run(fetch(httpx.ASGITransport(app=cut), start + timedelta(hours=1)))
    assert len(requests) == 15  # conftest's max_attempts
