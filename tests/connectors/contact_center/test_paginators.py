"""Paginator state machines, driven by hand-made page infos and bodies."""

from __future__ import annotations

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
