"""Paginators, one module, one base class (the dlt shape: init, validate, update, has_next).

- `OffsetPaginator`: `limit` + `offset` for every list endpoint, with the endpoint's bound.
- `CursorPaginator`: CDRs. Follows `metadata.next_cursor`, refuses a repeated cursor, always
  sends `offset=<records received>` with the cursor so that the server's invalid-cursor fallback
  to offset paging continues at the right record, detects a fallback that went wrong (the page
  overlaps the previous one), and knows offset paging ends at 10,000 records.

A paginator never touches HTTP: the client asks it for query parameters, reads a `PageInfo`
from the body (`read_page_info`, lazily with simdjson, no Python object per record), lets the
paginator `validate` it inside the retry loop (a bad page is re-requested), then `update`s it.
A whole page that simdjson refuses for one odd value (`1e400`, a non-UTF-8 byte in a string,
3,000-deep nesting) is read by `read_page_info_tolerant` instead (models.jsonpage).
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
from dataclasses import dataclass
from typing import Any

import msgspec
import simdjson

from connectors.contact_center.errors import InvalidBodyError, PaginationError
from models.jsonpage import PageSyntaxError, record_members, split_page

OFFSET_WINDOW = 10_000  # the spec: offset paging (no cursor) covers the first 10,000 CDRs
MAX_EMPTY_PAGES = 3  # empty pages with a cursor followed in a row before the walk ends
_ISO_MS = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")


@dataclass(frozen=True)
class PageInfo:
    """What paging needs from one list response; the records themselves stay in the body."""

    count: int
    total: int | None
    next_cursor: str | None = None
    first_id: str | None = None
    last_id: str | None = None
    first_started_at: str | None = None
    last_started_at: str | None = None


def _as_str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


# One simdjson parser per thread, reused: a new parser allocates ~15x the body for its tape and
# indexes (12 MB for a 1,000-CDR page), page after page (12 GB over a 1M-CDR day, memray).
_local = threading.local()
# A reused parser keeps the buffers of the biggest body it has read: after a page carrying a
# 40 MB record, +80 MB resident for the rest of the day. Bodies past this get their own parser.
SHARED_PARSER_MAX_BYTES = 8 * 2**20


def _parse(body: bytes) -> Any:
    if len(body) > SHARED_PARSER_MAX_BYTES:
        return _parse_alone(body)
    parser: simdjson.Parser | None = getattr(_local, "parser", None)
    if parser is None:
        parser = _local.parser = simdjson.Parser()
    try:
        return parser.parse(body)
    except RuntimeError:
        # The last page's document is still referenced (a traceback holds it): a parser of its
        # own for this page; the next page goes back to a shared one.
        _local.parser = None
    return _parse_alone(body)


def _parse_alone(body: bytes) -> Any:
    """`body` parsed by a parser of its own, freed with the document."""
    try:
        return simdjson.Parser().parse(body)
    except RuntimeError as exc:  # e.g. DEPTH_ERROR: as invalid as a ValueError
        raise ValueError(str(exc)) from None


def _metadata(meta: Any) -> tuple[int | None, str | None]:
    """(total, next_cursor) of a page's metadata object (parsed by simdjson or json)."""
    raw_total = meta.get("total")
    if raw_total is not None and (not isinstance(raw_total, int) or isinstance(raw_total, bool)):
        raise InvalidBodyError(f"metadata.total is not an integer: {raw_total!r}")
    return raw_total, _as_str(meta.get("next_cursor")) or None


def null_list_is_empty(is_null: bool, total: object, received: int = 0) -> bool:
    """Whether a list given as JSON `null` (not in the spec: some servers write an empty list so,
    as Go does a nil slice) is read as an empty page: only when `metadata.total` says no record
    is left (0, or the `received` so far of a cursor walk). With any other total, or none, it
    stays a body to ask again: it could hide records."""
    return is_null and type(total) is int and total == received


def read_page_info(
    body: bytes, list_key: str, *, keys: bool = False, received: int = 0
) -> PageInfo:
    """Read count, total and next_cursor (and the first/last record keys when `keys`).

    Raises InvalidBodyError (retriable) when the body is not JSON or lacks the list array.
    """
    try:
        doc: Any = _parse(body)
    except ValueError as exc:
        raise InvalidBodyError(f"list body is not valid JSON ({str(exc)[:60]})") from None
    if not isinstance(doc, simdjson.Object):
        raise InvalidBodyError("list body is not a JSON object")
    items = doc.get(list_key)
    meta = doc.get("metadata")
    total: int | None = None
    cursor: str | None = None
    if isinstance(meta, simdjson.Object):
        total, cursor = _metadata(meta)
    if not isinstance(items, simdjson.Array):
        if null_list_is_empty(list_key in doc and items is None, total, received):
            return PageInfo(0, total, cursor)
        raise InvalidBodyError(f"200 list body has no {list_key!r} array; retry later")
    count = len(items)
    first_id = last_id = first_at = last_at = None
    if keys and count:
        first: Any = items[0]
        last: Any = items[count - 1]
        if isinstance(first, simdjson.Object) and isinstance(last, simdjson.Object):
            first_id, last_id = _as_str(first.get("id")), _as_str(last.get("id"))
            first_at, last_at = _as_str(first.get("started_at")), _as_str(last.get("started_at"))
    return PageInfo(count, total, cursor, first_id, last_id, first_at, last_at)


def _text(raw: bytes | None) -> str | None:
    """A record member's raw value as a string, when it is a JSON string."""
    if raw is None or not raw.startswith(b'"'):
        return None
    try:
        value = json.loads(raw)
    except ValueError:
        return None
    return value if isinstance(value, str) else None


_MEMBERS = msgspec.json.Decoder(dict[str, msgspec.Raw])
_ELEMENTS = msgspec.json.Decoder(list[msgspec.Raw])


def _split_fast(body: bytes, list_key: str) -> tuple[list[bytes], bytes | None]:
    """(records, metadata text) by msgspec, which skips values without judging their range or
    their bytes (1e400, a non-UTF-8 byte); it raises on what only `split_page` reads (NaN, a
    3,000-deep array), and on what is no page."""
    found = _MEMBERS.decode(body)
    if list_key not in found:
        raise ValueError(f"no {list_key!r} array")
    records = [bytes(r) for r in _ELEMENTS.decode(found[list_key])]
    meta = found.get("metadata")
    return records, None if meta is None else bytes(meta)


@dataclass(frozen=True)
class TolerantPage:
    """What `read_page_info_tolerant` read: the page info and a digest of the records' bytes."""

    info: PageInfo
    digest: bytes


def read_page_info_tolerant(body: bytes, list_key: str, *, keys: bool = False) -> TolerantPage:
    """`read_page_info` for a page simdjson refuses because of a value inside one record.

    The page's structure must be whole (`models.jsonpage`); the records are only split, never
    parsed, so whatever one holds cannot stop the walk. Raises InvalidBodyError when the body
    is not a whole page (truncated, HTML, empty), like `read_page_info`."""
    try:
        records, meta_text = _split_fast(body, list_key)
    except (msgspec.MsgspecError, ValueError, RecursionError):
        try:
            page = split_page(body, list_key)
        except PageSyntaxError as exc:
            raise InvalidBodyError(f"list body is not a JSON page ({exc})") from None
        records, meta_text = page.records, page.others.get("metadata")
    total: int | None = None
    cursor: str | None = None
    if meta_text is not None:
        try:
            meta = json.loads(meta_text)
        except (ValueError, RecursionError):
            raise InvalidBodyError("the page's metadata is not valid JSON") from None
        if isinstance(meta, dict):
            total, cursor = _metadata(meta)
    first_id = last_id = first_at = last_at = None
    if keys and records:
        first, last = record_members(records[0]), record_members(records[-1])
        first_id, last_id = _text(first.get("id")), _text(last.get("id"))
        first_at, last_at = _text(first.get("started_at")), _text(last.get("started_at"))
    digest = hashlib.blake2b(digest_size=16)
    for record in records:
        digest.update(len(record).to_bytes(8, "little"))
        digest.update(record)
    info = PageInfo(len(records), total, cursor, first_id, last_id, first_at, last_at)
    return TolerantPage(info, digest.digest())


class Paginator:
    """Base class: query parameters out, page info in, `has_next` decides."""

    def __init__(self, limit: int) -> None:
        if limit < 1:
            raise ValueError("limit must be >= 1")
        self.limit = limit
        self.received = 0
        self.pages = 0
        self.total: int | None = None
        self.has_next = True

    def params(self) -> dict[str, str | int]:
        """Query parameters for the next request."""
        raise NotImplementedError

    def validate(self, info: PageInfo) -> None:
        """Raise before the page is accepted; a RetriableAPIError makes the client re-request."""
        if info.count > self.limit:
            raise PaginationError(f"page holds {info.count} records, more than limit={self.limit}")
        if info.total is not None and info.total < 0:
            raise PaginationError(f"metadata.total is negative ({info.total})")

    def update(self, info: PageInfo) -> None:
        """Accept the page and decide whether there is another one."""
        self.received += info.count
        self.pages += 1
        if info.total is not None:
            self.total = info.total


class OffsetPaginator(Paginator):
    """`limit`/`offset` paging, bounded by the endpoint's `max_limit`."""

    def __init__(self, limit: int | None, max_limit: int, *, offset: int = 0) -> None:
        super().__init__(min(limit or max_limit, max_limit))
        if offset < 0:
            raise ValueError("offset must be >= 0")
        self.offset = offset

    def params(self) -> dict[str, str | int]:
        return {"limit": self.limit, "offset": self.offset + self.received}

    def update(self, info: PageInfo) -> None:
        super().update(info)
        if info.count == 0:
            self.has_next = False
        elif self.total is not None:
            # total wins over a short page: a server may cap limit below what we asked.
            self.has_next = self.offset + self.received < self.total
        else:
            self.has_next = info.count >= self.limit


class CursorPaginator(Paginator):
    """CDR paging by `metadata.next_cursor`, with offset as the fallback's continuation."""

    def __init__(self, limit: int, *, verify_totals: bool = True) -> None:
        super().__init__(limit)
        self.cursor: str | None = None
        self.verify_totals = verify_totals
        self._seen: set[str] = set()
        self._window_first_id: str | None = None
        self._last_id: str | None = None
        self._last_started_at: str | None = None
        self._descending: bool | None = None  # the window's order, once a page shows it
        self._empty_pages = 0  # in a row

    def params(self) -> dict[str, str | int]:
        if self.cursor is None and self.received >= OFFSET_WINDOW:
            raise PaginationError(
                f"the server stopped returning cursors after {self.received} records and offset "
                f"paging ends at {OFFSET_WINDOW}; use a smaller sub_window"
            )
        params: dict[str, str | int] = {"limit": self.limit, "offset": self.received}
        if self.cursor is not None:
            params["cursor"] = self.cursor
        return params

    def validate(self, info: PageInfo) -> None:
        super().validate(info)
        if info.next_cursor is not None and info.next_cursor in self._seen:
            raise PaginationError(
                # Not quoted: a server's cursor is opaque, and a hostile one could be the key.
                f"the server returned the same cursor twice (after {self.pages} pages); "
                "stopping to avoid an endless loop"
            )
        if self._overlaps(info):
            # Invalid-cursor fallback that did not continue where we were: ask again.
            raise InvalidBodyError(
                "CDR page overlaps the previous page (cursor fallback to a wrong offset)"
            )

    def _overlaps(self, info: PageInfo) -> bool:
        if self.pages == 0 or info.count == 0:
            return False
        if info.first_id is not None and info.first_id in (self._window_first_id, self._last_id):
            return True
        before, after = self._last_started_at, info.first_started_at
        # Only compare well-formed timestamps: corrupt records must not look like an overlap.
        if self._descending is None or not (before and after):
            return False
        if not (_ISO_MS.match(before) and _ISO_MS.match(after)):
            return False
        # The spec states no order: a page goes back only against the order the first
        # page showed (newest first is an order too).
        return after > before if self._descending else after < before

    def _endless_past(self, total: int) -> int:
        return total + self.limit if self.verify_totals else 2 * total + 10 * self.limit

    def update(self, info: PageInfo) -> None:
        super().update(info)
        # A server handing out new cursors forever (each page new ids) would be followed
        # without end. Verified, past the total by more than a page (records that arrived
        # while we paged) is not the window's records any more. Unverified (the pipeline's
        # day checks compare the totals after the fetch), a server may under-count: the walk
        # stops only at twice the total plus ten pages.
        if self.total is not None and self.received > self._endless_past(self.total):
            raise PaginationError(
                f"received {self.received} CDRs and the server still returns cursors, but "
                f"metadata.total says {self.total}; stopping to avoid an endless fetch"
            )
        if self.pages == 1:
            self._window_first_id = info.first_id
        if self._descending is None and info.count > 1:
            first, last = info.first_started_at, info.last_started_at
            if first and last and _ISO_MS.match(first) and _ISO_MS.match(last) and first != last:
                self._descending = first > last
        if info.count:
            self._last_id = info.last_id
            self._last_started_at = info.last_started_at
        if info.next_cursor is not None:
            self._seen.add(info.next_cursor)
        self.cursor = info.next_cursor
        self._empty_pages = self._empty_pages + 1 if info.count == 0 else 0
        if info.count == 0:
            # An empty page with a cursor, short of the total (a server that pages by time
            # slices), is followed; a few in a row end the walk (the total check says so).
            self.has_next = (
                self.cursor is not None
                and self.total is not None
                and self.received < self.total
                and self._empty_pages < MAX_EMPTY_PAGES
            )
        elif self.cursor is not None:
            self.has_next = True
        else:
            # No cursor: offset paging continues while the total says there is more.
            self.has_next = self.total is not None and self.received < self.total
        if not self.has_next:
            self._check_total()

    def _check_total(self) -> None:
        if self.verify_totals and self.total is not None and self.received != self.total:
            raise PaginationError(
                f"received {self.received} CDRs but metadata.total says {self.total}; the "
                "server's metadata is inconsistent (retry the window, or set verify_totals=False)"
            )
