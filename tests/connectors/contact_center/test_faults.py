"""The connector under the sandbox's fault knobs: retries, exactly-once CDRs, no duplicate SMS."""

from __future__ import annotations

import asyncio
import logging
import traceback
from collections import Counter
from datetime import datetime, timedelta
from typing import Any

import httpx
import orjson
import pytest

from connectors.contact_center import (
    AuthenticationError,
    CdrPage,
    ContactCenterClient,
    ListingChangedError,
    PaginationError,
    RateLimitedError,
    RetriableAPIError,
    ServerError,
)
from connectors.sandbox import Sandbox
from connectors.sandbox.faults import FaultConfig
from models.resources import SendSms
from warehouse.decode import decode_page_counted

from .conftest import day, make_client, make_sandbox

PHONE = "31612345678"
CDRS_PATH = "/api/v4/reporting/cdrs"


async def _collect(client: ContactCenterClient, start: datetime, end: datetime) -> list[CdrPage]:
    return [page async for page in client.fetch_cdr_pages(start, end)]


def fetch_ids(
    sandbox: Sandbox, start: datetime, end: datetime, **kw: Any
) -> tuple[Counter[str], dict[str, int], list[CdrPage]]:
    """CDR ids (with multiplicity) read from the raw page bodies, plus client stats."""

    async def main() -> tuple[list[CdrPage], dict[str, int]]:
        async with make_client(sandbox, **kw) as client:
            return await _collect(client, start, end), dict(client.stats)

    pages, stats = asyncio.run(main())
    ids: Counter[str] = Counter()
    for page in pages:
        records = orjson.loads(page.body)["cdrs"] or []  # `null`: an empty page
        assert len(records) == page.count
        ids.update(r["id"] for r in records)
    return ids, stats, pages


KNOBS = [
    "error_429_rate",
    "error_5xx_rate",
    "reset_rate",
    "truncate_rate",
    "html_rate",
    "empty_body_rate",
    "missing_key_rate",
    "cursor_invalid_rate",
]


@pytest.mark.parametrize("knob", KNOBS)
def test_cdr_fetch_is_exact_under_each_fault(knob: str) -> None:
    sandbox = make_sandbox(cdrs_per_day=3000, days=1)
    start, end = day()
    truth = set(sandbox.truth_cdrs(start, end))
    faults: dict[str, Any] = {knob: 0.3}
    sandbox.faults = FaultConfig(**faults)
    ids, stats, _ = fetch_ids(sandbox, start, end, page_size=200, sub_window=timedelta(hours=3))
    assert set(ids) == truth
    assert max(ids.values()) == 1
    if knob == "cursor_invalid_rate":
        assert stats["cursor_fallbacks"] > 0
    else:
        assert stats["retries"] > 0


@pytest.mark.parametrize("knob", ["error_429_rate", "error_5xx_rate", "reset_rate", "html_rate"])
def test_dimension_lists_survive_each_fault(knob: str) -> None:
    sandbox = make_sandbox(cdrs_per_day=10, days=1)
    faults: dict[str, Any] = {knob: 0.3}
    sandbox.faults = FaultConfig(**faults)

    async def main() -> tuple[int, int]:
        async with make_client(sandbox) as client:
            users = await client.list_all_users()
            for _ in range(5):
                await client.get_balance()
            return len(users), client.stats["retries"]

    count, retries = asyncio.run(main())
    assert count == len(sandbox.dataset.users)
    assert retries > 0


def test_parallel_day_fetch_exact_with_429_storm_and_latency() -> None:
    sandbox = make_sandbox(cdrs_per_day=4000, days=2)
    start, _ = day(0)
    end = start + timedelta(days=2)
    truth = sandbox.truth_cdrs(start, end)
    sandbox.faults = FaultConfig(error_429_rate=0.3, retry_after_s=0.01, latency_ms=2, jitter_ms=3)
    ids, stats, pages = fetch_ids(sandbox, start, end, concurrency=8, page_size=250)
    assert set(ids) == set(truth)
    assert sum(ids.values()) == len(truth)  # no duplicates
    assert stats["retries"] > 0
    # The day-edge records (00:00:00.000 and 23:59:59.999) arrive exactly once.
    edges = []
    for page in pages:
        for rec in orjson.loads(page.body)["cdrs"]:
            if rec["started_at"].endswith(("T00:00:00.000Z", "T23:59:59.999Z")):
                edges.append(rec["id"])
    assert len(edges) == len(set(edges)) >= 4
    # Every sub-window's pages carry its total, and the last page says so.
    by_window: dict[datetime, list[CdrPage]] = {}
    for page in pages:
        by_window.setdefault(page.window_start, []).append(page)
    assert len(by_window) == 48
    for window_pages in by_window.values():
        window_pages.sort(key=lambda p: p.page_index)
        assert [p.page_index for p in window_pages] == list(range(len(window_pages)))
        assert window_pages[-1].last
        assert sum(p.count for p in window_pages) == window_pages[-1].total


def test_cursor_paging_past_the_offset_window() -> None:
    # One sub-window of 12,000 CDRs: offset paging alone would stop at 10,000.
    sandbox = make_sandbox(cdrs_per_day=12_000, days=1)
    start, end = day()
    truth = set(sandbox.truth_cdrs(start, end))
    assert len(truth) > 10_000
    sandbox.faults = FaultConfig(cursor_invalid_rate=0.3)
    ids, stats, pages = fetch_ids(sandbox, start, end, sub_window=timedelta(days=1))
    assert set(ids) == truth
    assert max(ids.values()) == 1
    assert len(pages) == 12
    assert stats["cursor_fallbacks"] > 0


def test_a_cursor_rejected_past_the_offset_window_has_a_budget_per_sub_window() -> None:
    # Every cursor taken as invalid: past 10,000 records the offset fallback is refused (400).
    sandbox = make_sandbox(cdrs_per_day=12_000, days=1)
    start, end = day()
    sandbox.faults = FaultConfig(cursor_invalid_rate=1.0)
    before = sandbox.counters.get(CDRS_PATH, 0)
    with pytest.raises(PaginationError, match="cursor rejected 3 times after 10000 records"):
        fetch_ids(sandbox, start, end, sub_window=timedelta(days=1), max_attempts=3)
    # 10 pages, then the rejected one asked 3 times in all (the budget's max_attempts).
    assert sandbox.counters.get(CDRS_PATH, 0) - before == 10 + 3


def test_total_mismatch_is_a_pagination_error() -> None:
    sandbox = make_sandbox(cdrs_per_day=500, days=1)
    sandbox.faults = FaultConfig(total_mismatch=3)
    start, end = day()
    with pytest.raises(PaginationError, match="metadata"):
        fetch_ids(sandbox, start, end)


def test_sms_is_never_sent_twice_under_resets_and_5xx() -> None:
    sandbox = make_sandbox(cdrs_per_day=10, days=1)
    sandbox.faults = FaultConfig(
        reset_rate=0.3, error_5xx_rate=0.3, paths=("/api/v4/messaging/sms",)
    )
    attempts = 40

    async def main() -> tuple[int, int, int]:
        ok = failed = 0
        async with make_client(sandbox) as client:
            for i in range(attempts):
                try:
                    await client.send_sms(SendSms.text(PHONE, f"message {i}"))
                    ok += 1
                except RetriableAPIError:
                    failed += 1
            return ok, failed, client.stats["requests"]

    ok, failed, requests = asyncio.run(main())
    assert failed > 0
    assert requests == attempts  # one request per SMS: nothing was retried
    assert sandbox.counters["sms_received"] == ok


def test_sms_is_retried_when_it_never_left() -> None:
    sandbox = make_sandbox(cdrs_per_day=10, days=1)
    inner = sandbox.transport()
    refused = {"left": 2}

    class RefuseTwice(httpx.AsyncBaseTransport):
        # A connect error happens before any byte is sent: provably safe to retry.
        async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
            if refused["left"]:
                refused["left"] -= 1
                raise httpx.ConnectError("connection refused", request=request)
            return await inner.handle_async_request(request)

    async def main() -> str:
        async with make_client(sandbox, transport=RefuseTwice()) as client:
            return (await client.send_sms(SendSms.text(PHONE, "hi"))).id

    assert asyncio.run(main())
    assert sandbox.counters["sms_received"] == 1


def test_client_rate_limit_prevents_server_429s() -> None:
    # A slow server bucket (5/s after a burst of 5): unthrottled, 15 calls exceed it unless
    # they take over 2 s to arrive, a margin a loaded machine keeps (the bucket used to be
    # 40/s: 30 calls then had to arrive within 0.6 s, and on a busy machine did not).
    sandbox = make_sandbox(cdrs_per_day=10, days=1)
    sandbox.faults = FaultConfig(rate_limit_rps=5, rate_limit_burst=5)

    async def burst(**kw: Any) -> tuple[int, int]:
        async with make_client(sandbox, **kw) as client:
            calls = (client.get_balance() for _ in range(15))
            results = await asyncio.gather(*calls, return_exceptions=True)
            failures = sum(isinstance(r, BaseException) for r in results)
            return client.stats["retries"], failures

    retries, _ = asyncio.run(burst())
    assert retries > 0  # unthrottled: the server answers 429
    # Re-setting the faults gives the server a fresh bucket.
    sandbox.faults = FaultConfig(rate_limit_rps=5, rate_limit_burst=5)
    assert asyncio.run(burst(rate_limit_rps=3.75, rate_limit_burst=5)) == (0, 0)


class _Throttled(httpx.AsyncBaseTransport):
    """The sandbox, except that one path always answers 429 with the given Retry-After."""

    def __init__(self, inner: httpx.AsyncBaseTransport, path: str, retry_after: str) -> None:
        self.inner, self.path, self.retry_after = inner, path, retry_after

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if request.url.path == self.path:
            body = b'{"error": "Too many requests"}'
            return httpx.Response(429, headers={"Retry-After": self.retry_after}, content=body)
        return await self.inner.handle_async_request(request)


@pytest.mark.parametrize("retry_after", ["86400", "Infinity", "1e999"])
def test_a_retry_after_past_the_budget_fails_its_request_and_holds_no_other(
    retry_after: str,
) -> None:
    # Retry-After is not in the spec. A server (or a proxy's quota) asking for a day, or for
    # a wait with no end, used to pause the client's shared bucket for that long: the request
    # gave up, and every other request of the client then waited a day, or forever, silently.
    sandbox = make_sandbox(cdrs_per_day=10, days=1)
    throttled = _Throttled(sandbox.transport(), "/api/v4/numbers", retry_after)

    async def main() -> None:
        async with make_client(sandbox, transport=throttled, max_attempts=3) as client:
            with pytest.raises(RateLimitedError) as info:
                await asyncio.wait_for(client.list_numbers(), 10)
            if retry_after == "86400":
                assert "server asks to wait 86400s" in str(info.value)
            balance = await asyncio.wait_for(client.get_balance(), 10)
            assert balance.amount is not None

    asyncio.run(main())


class _IgnoresOffset(httpx.AsyncBaseTransport):
    """A cache or proxy in front of the sandbox keyed without the query's offset: every page
    of a list is its first (`limit` capped at 5, as a server may cap it)."""

    def __init__(self, inner: httpx.AsyncBaseTransport) -> None:
        self.inner = inner

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if "offset" in request.url.params:
            params = request.url.params.set("offset", "0").set("limit", "5")
            request = httpx.Request(request.method, request.url.copy_with(params=params),
                                    headers=request.headers)  # fmt: skip
        return await self.inner.handle_async_request(request)


def test_a_list_whose_pages_repeat_is_refused_not_landed_with_duplicates() -> None:
    # The walk stopped at metadata.total with the first 5 users over and over: a users
    # snapshot with duplicates, and every user past the fifth missing, without a word.
    sandbox = make_sandbox(cdrs_per_day=10, days=1)

    async def main() -> list[str]:
        async with make_client(sandbox) as client:
            honest = [u.id for u in await client.list_all_users()]
        async with make_client(sandbox, transport=_IgnoresOffset(sandbox.transport())) as client:
            with pytest.raises(ListingChangedError, match="came twice while paging by offset"):
                await client.list_all_users()
        return honest

    honest = asyncio.run(main())
    assert len(honest) == len(set(honest)) > 5  # the honest walk: every user once


class _EmptyFrom(httpx.AsyncBaseTransport):
    """The sandbox with `limit` capped at 5, whose users pages from offset `at` on come back
    empty the first `times` times (None: always); `total` (when given) is what their metadata
    then says."""

    def __init__(
        self, inner: httpx.AsyncBaseTransport, at: int, total: int | None, times: int | None
    ) -> None:
        self.inner, self.at, self.total, self.times = inner, at, total, times
        self.emptied = 0

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if not request.url.path.endswith("/users") or "offset" not in request.url.params:
            return await self.inner.handle_async_request(request)
        params = request.url.params.set("limit", "5")
        request = httpx.Request(request.method, request.url.copy_with(params=params),
                                headers=request.headers)  # fmt: skip
        response = await self.inner.handle_async_request(request)
        body = await response.aread()
        if int(params["offset"]) >= self.at and (self.times is None or self.emptied < self.times):
            self.emptied += 1
            page = orjson.loads(body)
            page["users"] = []
            if self.total is not None:
                page["metadata"]["total"] = self.total
            body = orjson.dumps(page)
        return httpx.Response(response.status_code, headers=response.headers, content=body)


def test_a_list_page_that_comes_back_empty_before_its_total_is_asked_again_then_said(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # The walk ended at an empty page, without a word: a users snapshot of the first 10 of
    # 50 users (the snapshot step then holds a users list that much smaller:
    # tests/pipelines/test_snapshot_empty_lists.py).
    sandbox = make_sandbox(cdrs_per_day=10, days=1)

    async def walk(transport: httpx.AsyncBaseTransport | None) -> list[str]:
        async with make_client(sandbox, transport=transport) as client:
            return [u.id for u in await client.list_all_users()]

    honest = asyncio.run(walk(None))
    assert len(honest) > 10
    # A page the server lost for a moment: asked again, the walk is whole.
    once = _EmptyFrom(sandbox.transport(), at=10, total=None, times=1)
    with caplog.at_level(logging.WARNING, logger="connectors.contact_center"):
        assert asyncio.run(walk(once)) == honest
        assert once.emptied == 1
        assert not caplog.records
        # Empty again (or a total that over-counts): read as received, and said.
        always = _EmptyFrom(sandbox.transport(), at=10, total=None, times=None)
        assert asyncio.run(walk(always)) == honest[:10]
        assert always.emptied == 2
        (warning,) = [r.getMessage() for r in caplog.records]
    assert warning == (
        f"GET /api/v4/users: the page at offset 10 came back empty twice while metadata.total "
        f"says {len(honest)}; the list is read as the 10 received"
    )
    # A list that shrank during the walk (its total now says 10): whole as it is now, unsaid.
    caplog.clear()
    shrank = _EmptyFrom(sandbox.transport(), at=10, total=10, times=None)
    assert asyncio.run(walk(shrank)) == honest[:10]
    assert shrank.emptied == 1
    assert not caplog.records


def test_key_never_leaks_into_logs_errors_or_reprs(caplog: pytest.LogCaptureFixture) -> None:
    key = "sk-RECOGNIZABLE-SECRET-4242"
    sandbox = make_sandbox(cdrs_per_day=10, days=1)
    caplog.set_level(logging.DEBUG)
    texts: list[str] = []

    async def fail_401() -> None:
        async with make_client(sandbox, key=key) as client:
            texts.append(repr(client))
            texts.append(repr(client.settings))
            await client.get_balance()

    with pytest.raises(AuthenticationError) as unauthorized:
        asyncio.run(fail_401())
    # 5xx on every request (the fault middleware answers before the key is checked).
    sandbox.faults = FaultConfig(error_5xx_rate=1.0)

    async def fail_5xx() -> None:
        async with make_client(sandbox, key=key, max_attempts=3) as client:
            await client.list_all_users()

    with pytest.raises(ServerError) as exhausted:
        asyncio.run(fail_5xx())
    for exc in (unauthorized.value, exhausted.value):
        texts.append(str(exc))
        texts.append(repr(exc))
        texts.append("".join(traceback.format_exception(exc)))
    texts.extend(r.getMessage() for r in caplog.records)
    texts.append(caplog.text)
    assert caplog.records  # the run did log
    assert sum(text.count(key) for text in texts) == 0


def test_over_a_real_loopback_socket_with_resets() -> None:
    sandbox = make_sandbox(cdrs_per_day=2000, days=1)
    start, end = day()
    truth = set(sandbox.truth_cdrs(start, end))
    sandbox.faults = FaultConfig(reset_rate=0.2, error_5xx_rate=0.2)
    with sandbox.serve() as server:

        async def main() -> tuple[list[CdrPage], int]:
            client = make_client(
                sandbox, base_url=server.base_url, transport=httpx.AsyncHTTPTransport()
            )
            async with client:
                return await _collect(client, start, end), client.stats["retries"]

        pages, retries = asyncio.run(main())
    ids = [r["id"] for page in pages for r in orjson.loads(page.body)["cdrs"]]
    assert sorted(ids) == sorted(truth)
    assert retries > 0


class _OwnPaging(httpx.AsyncBaseTransport):
    """A server that pages the sandbox's CDRs its own way: a window's records (read whole
    from the sandbox) newest first when `newest_first`, `limit` a page, with its own cursors;
    with `empty_between`, an empty page carrying a cursor between any two (a server paging
    by time slices)."""

    def __init__(
        self, inner: httpx.AsyncBaseTransport, *, newest_first: bool, empty_between: bool
    ) -> None:
        self.inner, self.newest_first, self.empty_between = inner, newest_first, empty_between
        self.empty_pages = 0

    async def _window(self, request: httpx.Request) -> list[Any]:
        records: list[Any] = []
        while True:
            params = request.url.params.remove("cursor").set("limit", "1000")
            params = params.set("offset", str(len(records)))
            asked = httpx.Request("GET", request.url.copy_with(params=params),
                                  headers=request.headers)  # fmt: skip
            response = await self.inner.handle_async_request(asked)
            page = orjson.loads(await response.aread())
            records += page["cdrs"]
            if not page["cdrs"] or len(records) >= page["metadata"]["total"]:
                return records[::-1] if self.newest_first else records

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if request.url.path != CDRS_PATH:
            return await self.inner.handle_async_request(request)
        records = await self._window(request)
        limit = min(int(request.url.params.get("limit", "100")), 7)
        cursor = request.url.params.get("cursor", "n:0")
        kind, at = cursor.split(":")
        offset = int(at)
        after: str | None
        if kind == "e":
            self.empty_pages += 1
            page, after = [], f"n:{offset}"
        else:
            page = records[offset : offset + limit]
            more = offset + limit < len(records)
            after = f"{'e' if self.empty_between else 'n'}:{offset + limit}" if more else None
        body = {"cdrs": page, "metadata": {"total": len(records), "next_cursor": after}}
        return httpx.Response(200, json=body)


@pytest.mark.parametrize(
    ("newest_first", "empty_between"),
    [(True, False), (False, True)],
    ids=["newest-first", "empty-page-with-a-cursor"],
)
def test_a_server_paging_its_own_way_gives_every_cdr_once(
    newest_first: bool, empty_between: bool
) -> None:
    """The spec states no order for a CDR list: a server sending the newest first had every
    page after the first refused as an overlap ("cursor fallback to a wrong offset"), asked
    again and again, and the day never landed. An empty page carrying a cursor ended the walk:
    the day's count short of its total, withheld on every run."""
    sandbox = make_sandbox(cdrs_per_day=120, days=1)
    start, end = day()
    expected, _, _ = fetch_ids(sandbox, start, end)
    server = _OwnPaging(sandbox.transport(), newest_first=newest_first, empty_between=empty_between)
    ids, _, _ = fetch_ids(sandbox, start, end, transport=server)
    assert ids == expected
    assert set(ids.values()) == {1}
    assert (server.empty_pages > 0) == empty_between


class _WithBom(httpx.AsyncBaseTransport):
    """The sandbox's answers, each body starting with a UTF-8 byte order mark."""

    def __init__(self, inner: httpx.AsyncBaseTransport) -> None:
        self.inner = inner

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        response = await self.inner.handle_async_request(request)
        body = b"\xef\xbb\xbf" + await response.aread()
        headers = [(k, v) for k, v in response.headers.items() if k.lower() != "content-length"]
        return httpx.Response(response.status_code, headers=headers, content=body)


def test_bodies_starting_with_a_byte_order_mark_are_read() -> None:
    """RFC 8259 lets a JSON reader ignore a BOM; every page of such a server failed as
    "non-JSON body", retried, and the day never landed."""
    sandbox = make_sandbox(cdrs_per_day=120, days=1)
    start, end = day()
    expected, _, _ = fetch_ids(sandbox, start, end)
    ids, _, _ = fetch_ids(sandbox, start, end, transport=_WithBom(sandbox.transport()))
    assert ids == expected

    async def users(transport: httpx.AsyncBaseTransport) -> int:
        async with make_client(sandbox, transport=transport) as client:
            return len(await client.list_all_users())

    assert asyncio.run(users(_WithBom(sandbox.transport()))) == asyncio.run(
        users(sandbox.transport())
    )


class _NullLists(httpx.AsyncBaseTransport):
    """The sandbox's answers with every list written as JSON `null` when it is empty (as a Go
    server writes a nil slice), or, with `always`, the CDR list `null` whatever it holds."""

    def __init__(self, inner: httpx.AsyncBaseTransport, *, always: bool = False) -> None:
        self.inner, self.always = inner, always
        self.nulls = 0

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        response = await self.inner.handle_async_request(request)
        body = await response.aread()
        if response.status_code == 200 and body.startswith(b"{"):
            doc = orjson.loads(body)
            for key, value in doc.items():
                if isinstance(value, list) and (self.always or not value) and key != "errors":
                    doc[key] = None
                    self.nulls += 1
            body = orjson.dumps(doc)
        headers = [(k, v) for k, v in response.headers.items() if k.lower() != "content-length"]
        return httpx.Response(response.status_code, headers=headers, content=body)


def test_an_empty_list_written_as_null_is_read_as_an_empty_page() -> None:
    """`"cdrs": null` (and `"users": null`) with `metadata.total` 0: an empty window, not a
    body to ask again until the day fails. A window with CDRs reads the same as before."""
    sandbox = make_sandbox(cdrs_per_day=120, days=1)

    async def pages(transport: httpx.AsyncBaseTransport, offset: int) -> list[CdrPage]:
        async with make_client(sandbox, transport=transport) as client:
            return await _collect(client, *day(offset))

    async def listed(transport: httpx.AsyncBaseTransport) -> tuple[int, int]:
        async with make_client(sandbox, transport=transport) as client:
            cdrs, total, _ = await client.list_cdrs(*day(3))
            users = await client.list_all_users(name="no such agent")
            return len(cdrs) + len(users), total or 0

    nulls = _NullLists(sandbox.transport())
    empty = asyncio.run(pages(nulls, 3))  # after the sandbox's only day
    assert nulls.nulls > 0
    assert empty
    assert all(p.count == 0 for p in empty)
    assert empty[-1].last
    for page in empty:  # the day's decoder reads the page as the connector did
        assert decode_page_counted(page.body).frame.height == 0
    assert asyncio.run(listed(_NullLists(sandbox.transport()))) == (0, 0)

    expected, _, _ = fetch_ids(sandbox, *day())
    ids, _, _ = fetch_ids(sandbox, *day(), transport=_NullLists(sandbox.transport()))
    assert ids == expected
    assert sum(expected.values()) > 0


def test_a_null_list_whose_total_says_records_is_asked_again_then_fails() -> None:
    """`null` with a total above 0 could hide records: never read as an empty day."""
    sandbox = make_sandbox(cdrs_per_day=120, days=1)

    async def main() -> list[CdrPage]:
        transport = _NullLists(sandbox.transport(), always=True)
        async with make_client(sandbox, transport=transport, max_attempts=2) as client:
            return await _collect(client, *day())

    with pytest.raises(RetriableAPIError, match="no 'cdrs' array"):
        asyncio.run(main())
