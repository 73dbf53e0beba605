"""Paginator state machines, driven by hand-made page infos and bodies."""

from __future__ import annotations

import asyncio

import httpx
import orjson
import pytest

from connectors.contact_center.errors import InvalidBodyError, PaginationError
from connectors.contact_center.paginators import (
    OFFSET_WINDOW,
    CursorPaginator,
    OffsetPaginator,
    PageInfo,
    read_page_info,
)

from .conftest import day, make_client, make_sandbox


def _cdrs(ids: list[int], total: int | None, cursor: str | None) -> bytes:
    recs = [{"id": f"id-{i:06d}", "started_at": f"2024-01-01T00:00:{i % 60:02d}.000Z"} for i in ids]
    meta: dict[str, object] = {"next_cursor": cursor}
    if total is not None:
        meta["total"] = total
    return orjson.dumps({"cdrs": recs, "metadata": meta})


def test_read_page_info_is_lazy_but_complete() -> None:
    info = read_page_info(_cdrs([1, 2, 3], 10, "c1"), "cdrs", keys=True)
    assert info == PageInfo(
        3,
        10,
        "c1",
        "id-000001",
        "id-000003",
        "2024-01-01T00:00:01.000Z",
        "2024-01-01T00:00:03.000Z",
    )


@pytest.mark.parametrize(
    "body",
    [
        b"",
        b"<html></html>",
        b'{"cdrs": [',
        b'{"metadata": {"total": 3}}',
        b'{"cdrs": {}}',
        b'{"cdrs": [], "metadata": {"total": "3"}}',
    ],
    ids=["empty", "html", "truncated", "missing-key", "not-array", "string-total"],
)
def test_read_page_info_rejects_bad_bodies(body: bytes) -> None:
    with pytest.raises(InvalidBodyError):
        read_page_info(body, "cdrs")


def test_a_page_is_read_while_an_earlier_bad_page_is_still_held_by_its_traceback() -> None:
    # The parser is reused from page to page; a retry loop that keeps the last error keeps
    # its frames, and with them a document of that parser.
    try:
        read_page_info(b'{"cdrs": [], "metadata": {"total": "3"}}', "cdrs")
    except InvalidBodyError as exc:
        kept = exc
    assert kept.__traceback__ is not None
    first = read_page_info(_cdrs([1, 2], 2, None), "cdrs", keys=True)
    second = read_page_info(_cdrs([7], 9, "c9"), "cdrs", keys=True)
    assert (first.count, first.last_id) == (2, "id-000002")
    assert (second.count, second.total, second.next_cursor, second.first_id) == (
        1,
        9,
        "c9",
        "id-000007",
    )


def test_offset_paginator_bounds_and_walk() -> None:
    pager = OffsetPaginator(5000, 100)
    assert pager.limit == 100  # capped at the endpoint's bound
    seen = []
    for count in (100, 100, 50):
        seen.append(pager.params())
        info = PageInfo(count, 250)
        pager.validate(info)
        pager.update(info)
    assert [p["offset"] for p in seen] == [0, 100, 200]
    assert not pager.has_next
    assert pager.received == 250


def test_offset_paginator_stops_on_empty_page_even_if_total_lies() -> None:
    pager = OffsetPaginator(None, 100)
    pager.update(PageInfo(100, 205))
    pager.update(PageInfo(100, 205))
    assert pager.has_next
    pager.update(PageInfo(0, 205))
    assert not pager.has_next


def test_offset_paginator_without_total_stops_on_short_page() -> None:
    pager = OffsetPaginator(10, 100)
    pager.update(PageInfo(10, None))
    assert pager.has_next
    pager.update(PageInfo(3, None))
    assert not pager.has_next


def test_page_larger_than_limit_is_refused() -> None:
    with pytest.raises(PaginationError):
        OffsetPaginator(10, 100).validate(PageInfo(11, 20))


def _info(ids: list[int], total: int, cursor: str | None) -> PageInfo:
    return read_page_info(_cdrs(ids, total, cursor), "cdrs", keys=True)


def test_cursor_paginator_follows_cursors_and_sends_offset() -> None:
    pager = CursorPaginator(3)
    assert pager.params() == {"limit": 3, "offset": 0}
    for ids, cursor in (([1, 2, 3], "a"), ([4, 5, 6], "b"), ([7], None)):
        info = _info(ids, 7, cursor)
        pager.validate(info)
        pager.update(info)
        if cursor:
            # Offset travels with the cursor so an invalid-cursor fallback continues here.
            assert pager.params() == {"limit": 3, "offset": pager.received, "cursor": cursor}
    assert not pager.has_next
    assert pager.received == 7


def _accepted(first: PageInfo) -> CursorPaginator:
    """A limit-3 cursor paginator that has validated and accepted its first page."""
    pager = CursorPaginator(3)
    pager.validate(first)
    pager.update(first)
    return pager


def test_cursor_paginator_refuses_a_repeated_cursor() -> None:
    pager = _accepted(_info([1, 2, 3], 9, "same"))
    with pytest.raises(PaginationError, match="twice"):
        pager.validate(_info([4, 5, 6], 9, "same"))


def test_cursor_paginator_detects_an_overlapping_fallback_page() -> None:
    pager = _accepted(_info([10, 11, 12], 9, "a"))
    # The server fell back to offset 0: the same first record again. Retriable, so re-asked.
    with pytest.raises(InvalidBodyError, match="overlaps"):
        pager.validate(_info([10, 11, 12], 9, "b"))
    with pytest.raises(InvalidBodyError, match="overlaps"):
        pager.validate(_info([5, 6, 7], 9, "b"))  # earlier started_at than the last one seen


def test_cursor_paginator_checks_the_total() -> None:
    pager = CursorPaginator(3)
    info = _info([1, 2], 5, None)  # total says 5, no cursor: offset continuation
    pager.update(info)
    assert pager.has_next
    assert pager.params() == {"limit": 3, "offset": 2}
    with pytest.raises(PaginationError, match=r"metadata\.total"):
        pager.update(_info([], 5, None))


def test_cursor_paginator_knows_the_offset_window() -> None:
    pager = CursorPaginator(1000, verify_totals=False)
    for _ in range(OFFSET_WINDOW // 1000):
        pager.update(PageInfo(1000, 20_000, None))
    assert pager.has_next
    with pytest.raises(PaginationError, match="10000"):
        pager.params()


def test_cursor_paginator_stops_a_server_that_hands_out_cursors_forever() -> None:
    # New ids and a new cursor on every page: neither a repeated cursor nor an overlap, so
    # only the total can tell the fetch has gone past the window's records.
    pager = CursorPaginator(3)
    pager.update(_info([1, 2, 3], 5, "c1"))
    pager.update(_info([4, 5, 6], 5, "c2"))  # past the total, within a page: late arrivals
    assert pager.has_next
    with pytest.raises(PaginationError, match="endless"):
        pager.update(_info([7, 8, 9], 5, "c3"))


def test_cursor_paginator_without_verified_totals_follows_the_cursors() -> None:
    pager = CursorPaginator(3, verify_totals=False)
    for n in range(5):
        pager.update(_info([3 * n + 1, 3 * n + 2, 3 * n + 3], 5, f"c{n}"))
    assert pager.has_next


class _EndlessCursors(httpx.AsyncBaseTransport):
    """The sandbox's first page of each window again and again, each time with new ids and a
    new cursor (a broken server's paging), its records at the window's start so no page
    overlaps the one before."""

    def __init__(self, inner: httpx.AsyncBaseTransport) -> None:
        self.inner = inner
        self.pages = 0

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if not request.url.path.endswith("/reporting/cdrs"):
            return await self.inner.handle_async_request(request)
        params = {k: v for k, v in request.url.params.items() if k not in ("cursor", "offset")}
        first = httpx.Request("GET", request.url.copy_with(params=params), headers=request.headers)
        response = await self.inner.handle_async_request(first)
        body = orjson.loads(await response.aread())
        self.pages += 1
        for record in body["cdrs"]:
            record["id"] = f"{record['id']}-{self.pages}"
            record["started_at"] = params["started_at[gte]"]
        body["metadata"]["next_cursor"] = f"endless-{self.pages}"
        return httpx.Response(200, json=body)


@pytest.mark.parametrize("verify", [True, False], ids=["verified", "unverified"])
def test_a_server_handing_out_cursors_forever_fails_the_fetch_in_a_few_pages(verify: bool) -> None:
    # Unverified is how the pipeline's resource runs the client (its day checks compare the
    # totals): the guard covered only the verified client, and `cdrhouse ingest` still
    # followed the cursors without end.
    sandbox = make_sandbox(cdrs_per_day=2_000, days=1)
    transport = _EndlessCursors(sandbox.transport())
    start, end = day()

    async def fetch() -> int:
        client = make_client(sandbox, transport=transport, page_size=100, verify_totals=verify)
        async with client:
            return sum([1 async for _ in client.fetch_cdr_pages(start, end)])

    with pytest.raises(PaginationError, match="endless"):
        asyncio.run(asyncio.wait_for(fetch(), 60))
    # Each sub-window stops a page past its total (verified), or at twice it and ten pages:
    # far from the thousands of pages before.
    assert transport.pages < (2 * 2_000 // 100 + 100 if verify else 4 * 2_000 // 100 + 300)


@pytest.mark.parametrize(
    ("body", "received", "empty"),
    [
        (b'{"cdrs":null,"metadata":{"total":0}}', 0, True),
        # The page after the last record of a cursor walk (the total received already).
        (b'{"cdrs":null,"metadata":{"total":5,"next_cursor":"c2"}}', 5, True),
        # Records could hide behind it: asked again.
        (b'{"cdrs":null,"metadata":{"total":5}}', 4, False),
        (b'{"cdrs":null,"metadata":{"total":0.0}}', 0, False),
        (b'{"cdrs":null,"metadata":{}}', 0, False),
        (b'{"cdrs":null}', 0, False),
        (b'{"metadata":{"total":0}}', 0, False),
    ],
)
def test_a_null_list_is_an_empty_page_only_when_no_record_is_left(
    body: bytes, received: int, empty: bool
) -> None:
    if empty:
        info = read_page_info(body, "cdrs", keys=True, received=received)
        assert info.count == 0
        assert info.first_id is None
    else:
        with pytest.raises(InvalidBodyError):
            read_page_info(body, "cdrs", keys=True, received=received)
