"""The CDR bulk fetch: a time window split into sub-windows, walked in parallel, as raw pages.

The hot path never builds a Python object per CDR: it yields the raw page bytes with the
metadata read by simdjson (`paginators.read_page_info`). Every request goes through the core's
`_send` and its one retry loop. A cursor the server rejects past the offset window (a 400 that
is the fallback offset's, not the cursor's) is retried there too, under `CursorRejections`: a
budget shared by the pages of one sub-window, `max_attempts` rejections in all.

A page simdjson refuses is asked again once (a cut or garbled body is transient). When the
page is whole (`read_page_info_tolerant`) and its records come back byte for byte the same,
the odd value is the data's, not the network's: the page is taken as it is, and the decoder
sends the one record it cannot read to quarantine. A body that is not a whole page (truncated,
HTML, empty) stays an `InvalidBodyError`, retried as before.

Bytes, not only pages, are bounded: each page's body is admitted against a `ByteBudget`
(`settings.page_bytes_in_flight`) before it is read, so a day whose pages carry 40 MB records
holds one or two of them at a time, not `concurrency` x the queue's depth.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

import httpx

from connectors.contact_center.budget import ByteBudget
from connectors.contact_center.endpoints import ENDPOINTS
from connectors.contact_center.errors import (
    BadRequestError,
    ContactCenterError,
    InvalidBodyError,
    PaginationError,
)
from connectors.contact_center.paginators import (
    OFFSET_WINDOW,
    CursorPaginator,
    PageInfo,
    read_page_info,
    read_page_info_tolerant,
)
from connectors.contact_center.retry import RetryPolicy, SharedBudget
from models.timestamps import iso_ms

if TYPE_CHECKING:
    from connectors.contact_center.core import ClientCore

logger = logging.getLogger("connectors.contact_center")

# The sandbox's documented signal of an invalid-cursor fallback (docs/sandbox.md); a real
# server gives none, so the paginator also checks for page overlap.
FALLBACK_HEADER = "X-Sandbox-Cursor-Fallback"

Filters = Mapping[str, str | int | Sequence[str]]


@dataclass(frozen=True)
class CdrPage:
    """One raw CDR page of one sub-window [window_start, window_end)."""

    window_start: datetime
    window_end: datetime
    body: bytes  # the page JSON exactly as received
    count: int  # records in this page
    total: int  # the sub-window's metadata.total
    page_index: int  # 0-based within the sub-window
    last: bool  # no further page in this sub-window


def split_window(
    start: datetime, end: datetime, step: timedelta
) -> list[tuple[datetime, datetime]]:
    """Half-open sub-windows [a, b) covering [start, end) exactly: adjacent ones share a bound,
    so a record on a boundary belongs to exactly one of them."""
    for moment in (start, end):
        if moment.tzinfo is None:
            raise ValueError("start and end must be timezone-aware (UTC)")
        if moment.microsecond % 1000:
            raise ValueError("start and end must have millisecond precision (the API's)")
    start, end = start.astimezone(UTC), end.astimezone(UTC)
    out: list[tuple[datetime, datetime]] = []
    cursor = start
    while cursor < end:
        nxt = min(cursor + step, end)
        out.append((cursor, nxt))
        cursor = nxt
    return out


# The CDR filters the spec shows as "single or array"; an array is written `key[]=v` repeated.
ARRAY_FILTERS = frozenset({"type", "subtype", "disposition", "account_id"})


def cdr_filter_params(filters: Filters | None) -> list[tuple[str, str]]:
    """Query pairs for CDR filters in the spec's form: a sequence is sent as `key[]=v` repeated
    for the four array filters only; every other filter (tag, user_id, ...) takes one value, so
    a one-element sequence is sent as `key=v` and a longer one is refused before sending."""
    pairs: list[tuple[str, str]] = []
    for key, value in (filters or {}).items():
        if key.startswith("started_at") or key in ("cursor", "offset", "limit"):
            raise ValueError(f"{key} is set by fetch_cdr_pages itself")
        if isinstance(value, str | int):
            pairs.append((key, str(value)))
        elif key in ARRAY_FILTERS:
            pairs.extend((f"{key}[]", str(v)) for v in value)
        else:
            values = list(value)
            if len(values) != 1:
                raise ValueError(
                    f"the CDR filter {key!r} takes one value (only "
                    f"{', '.join(sorted(ARRAY_FILTERS))} take several); got {len(values)}"
                )
            pairs.append((key, str(values[0])))
    return pairs


async def fetch_cdr_pages(
    client: ClientCore,
    start: datetime,
    end: datetime,
    filters: Filters | None = None,
    budget: ByteBudget | None = None,
) -> AsyncIterator[CdrPage]:
    """Every CDR with started_at in [start, end), as raw pages.

    The window is split into `settings.sub_window` pieces fetched by up to
    `settings.concurrency` workers under the client's shared rate limiter; pages of one
    sub-window arrive in order, sub-windows interleave. Each sub-window yields at least one
    page (an empty one if it has no CDRs); its last page has `last=True`.

    Page bodies are read only when their length fits in `budget`. Without one, the bytes of
    the pages received and not yet yielded are bounded by `settings.page_bytes_in_flight`;
    with one, a yielded page's `len(page.body)` stays held until the caller releases it (when
    it is done with the page), so the bound covers what the caller does with the pages too.
    """
    own = budget is None
    held = ByteBudget(client.settings.page_bytes_in_flight) if budget is None else budget
    windows = deque(split_window(start, end, client.settings.sub_window))
    if not windows:
        return
    base = cdr_filter_params(filters)
    workers = min(client.settings.concurrency, len(windows))
    # Unbounded queue + a semaphore for back-pressure: the end marker never blocks.
    queue: asyncio.Queue[CdrPage | None] = asyncio.Queue()
    slots = asyncio.Semaphore(2 * workers)
    failures: list[BaseException] = []

    async def worker() -> None:
        while windows:
            ws, we = windows.popleft()
            async for page in window_pages(client, ws, we, base, held):
                await slots.acquire()
                queue.put_nowait(page)
                del page  # queued: this worker must not keep its body while it waits

    async def run() -> None:
        try:
            async with asyncio.TaskGroup() as group:
                for _ in range(workers):
                    group.create_task(worker())
        except BaseExceptionGroup as eg:
            failures.append(_first_leaf(eg))
        finally:
            queue.put_nowait(None)

    producer = asyncio.create_task(run())
    try:
        while (page := await queue.get()) is not None:
            slots.release()
            if own:
                held.release(len(page.body))
            # Popped as it is yielded: while the caller works on the page (its body decoded
            # and dropped), this frame keeps no reference to it.
            box = [page]
            del page
            yield box.pop()
        await producer
        if failures:
            raise failures[0]
    finally:
        if not producer.done():
            producer.cancel()
            await asyncio.gather(producer, return_exceptions=True)


async def window_pages(
    client: ClientCore,
    ws: datetime,
    we: datetime,
    base: Sequence[tuple[str, str]],
    budget: ByteBudget | None = None,
) -> AsyncIterator[CdrPage]:
    """The pages of one sub-window [ws, we), in order, by cursor (offset as the fallback)."""
    endpoint = ENDPOINTS["list_cdrs"]
    pager = CursorPaginator(client.settings.page_size, verify_totals=client.settings.verify_totals)
    window = [("started_at[gte]", iso_ms(ws)), ("started_at[lt]", iso_ms(we)), *base]
    # Digests of the records of whole pages the strict parser refused once.
    refused: set[bytes] = set()

    def read(body: bytes) -> PageInfo:
        try:
            return read_page_info(body, "cdrs", keys=True, received=pager.received)
        except InvalidBodyError as strict:
            try:
                tolerant = read_page_info_tolerant(body, "cdrs", keys=True)
            except InvalidBodyError:
                raise strict from None  # not a whole page: transient, as before
            if tolerant.digest not in refused:
                refused.add(tolerant.digest)
                raise InvalidBodyError(
                    f"{strict}; the page is whole, so it is asked again: the same records "
                    "twice are the data's, not the network's"
                ) from None
            client.stats["odd_pages"] = client.stats.get("odd_pages", 0) + 1
            logger.warning(
                "CDR page %d of %s: the same records twice, refused by the strict parser "
                "(%s); paging on, the decoder quarantines the odd record",
                pager.pages,
                iso_ms(ws),
                strict,
            )
            return tolerant.info

    def parse(response: httpx.Response) -> tuple[bytes, PageInfo]:
        if response.headers.get(FALLBACK_HEADER):
            # The server took our cursor as invalid and paged by our offset instead:
            # harmless (offset = records received), but worth counting.
            client.stats["cursor_fallbacks"] += 1
            logger.info("cursor fallback to offset=%d in %s", pager.received, iso_ms(ws))
        body = response.content
        info = read(body)
        if info.total is None:
            raise InvalidBodyError("CDR page has no metadata.total; retry later")
        pager.validate(info)  # inside the retry loop: an overlapping page is re-requested
        return body, info

    rejections = CursorRejections(client.retry_policy, pager)
    while pager.has_next:
        params = [*window, *pager.params().items()]
        body, info = await client._send(
            endpoint, parse, params=params, shared=rejections, budget=budget
        )
        index = pager.pages
        pager.update(info)
        assert info.total is not None
        page = [CdrPage(ws, we, body, info.count, info.total, index, not pager.has_next)]
        del body  # suspended at the yield, this frame must not keep the body alive
        yield page.pop()


class CursorRejections(SharedBudget):
    """A cursor the server took as invalid past the offset window: the fallback offset is
    invalid too (400), but the cursor itself is fine, so it is asked again. Counted per
    sub-window, across its pages; spent, it is a PaginationError."""

    def __init__(self, policy: RetryPolicy, pager: CursorPaginator) -> None:
        super().__init__(policy)
        self.pager = pager

    def covers(self, error: ContactCenterError) -> bool:
        pager = self.pager
        rejected = pager.cursor is not None and pager.received >= OFFSET_WINDOW
        return rejected and isinstance(error, BadRequestError)

    def exhausted(self) -> PaginationError:
        return PaginationError(
            f"cursor rejected {self.failures} times after {self.pager.received} records; the "
            "offset fallback cannot go past 10,000 - use a smaller sub_window"
        )


def _first_leaf(group: BaseExceptionGroup[BaseException]) -> BaseException:
    """The first real error inside a (nested) exception group."""
    for exc in group.exceptions:
        if isinstance(exc, BaseExceptionGroup):
            return _first_leaf(exc)
        if not isinstance(exc, asyncio.CancelledError):
            return exc
    return group.exceptions[0]
