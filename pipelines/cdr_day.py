"""One UTC day of CDRs, landed in one pass: fetched, decoded once, written as every CDR table.

The event loop fetches pages; two decoder threads decode each page once into typed columns
(`decode_page_counted`: one native pyarrow pass, or the tolerant path for a page it refuses);
one writer thread collects them, in page order, into row groups and, for each group, writes
the exact records to `raw_cdrs`, projects the typed tables (`normalize_decoded`) and writes
them, and folds the group into the day's checks. Under `token`, a privacy thread rewrites the
groups' records (`Pseudonymizer.page`) and projects their typed tables, while the writer
writes the groups before them. pyarrow, polars and Parquet release the GIL, so both cores work
while the loop receives. Every table is one atomic partition, and the day replaces the
previous one only when every blocking check passes (`DayChecks.whole`); otherwise nothing of
it is published, and its raw records go to the lake's rejected area. Memory is
bounded by a few row groups, whatever the size of the day, and by bytes, whatever the size of
its records: a row group also ends at `ROW_GROUP_BYTES`, and the pages between the API and the
writer are held within the client's byte budget (`ByteBudget`), so a day whose pages each
carry a 40 MB record holds one or two of them at a time.

A day can also be normalized again from its `raw_cdrs` partition, without the API.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from typing import TypeVar

import dagster as dg
import polars as pl
import polars.selectors as cs

from connectors.contact_center import ByteBudget
from models.tables import RAW_CDRS as RAW_SPEC
from models.tables import landed
from pipelines.aio import run_interruptible
from pipelines.checks import RAW_CDRS, DayChecks
from pipelines.memory import release_free_memory
from pipelines.partitions import partition_window
from pipelines.progress import progress_lines
from pipelines.resources import ContactCenterResource
from pipelines.settings import DEFAULT_MAX_DAY_SHRINK
from warehouse.decode import decode_page_counted, narrow, with_decoded
from warehouse.erasure import erase_partition
from warehouse.lake import Lake, PartitionWriter, PublishGroup
from warehouse.normalize import NormalizedTables, normalize_decoded
from warehouse.privacy import (
    FORGOTTEN,
    RAW,
    SIDES,
    TOKEN_COLUMNS,
    PrivacyPolicy,
    Pseudonymizer,
)

# Typed tables written per day, and the NormalizedTables attribute each comes from.
NORMALIZED_TABLES: Mapping[str, str] = {
    "cdrs": "cdrs",
    "cdr_calls": "cdr_calls",
    "cdr_conversations": "cdr_conversations",
    "cdr_sms": "cdr_sms",
    "cdr_hlr_lookups": "cdr_hlr_lookups",
    "cdr_quarantine": "quarantine",
}
# Records per row group (~4-8 MB of JSON): the unit of writing and of normalization. Half of
# 10k cuts ~40 MB of a day's peak RSS for ~5% more CPU (bench/RESULTS.md).
ROW_GROUP_ROWS = 5_000
# ...and bytes per row group (the decoded frames' estimated size, ~3x the records' JSON): a
# 5,000-row group of ordinary records is ~15 MB, so only big records end a group early. A
# frame that would take the group past it ends the group before it; a frame bigger than it
# is a group of its own.
ROW_GROUP_BYTES = 48 * 2**20
# A group this big (big records) gives glibc's free pages back after each table it writes, not
# only once at its end: the Parquet buffers of a 40 MB value (~110 MB) would otherwise stay
# resident under the next table's. Ordinary groups (~6 MB) never pay for the extra trims.
BIG_GROUP_BYTES = 16 * 2**20
# glibc's free pages are given back after this many ordinary groups (and after each big one):
# every trim makes the next groups fault their pages in again. After each group: +1.4 us of
# CPU per CDR against none, after every 4th: +0.6 (bench/RESULTS.md).
RELEASE_EVERY_GROUPS = 4
# Under `token`, row groups are rewritten (`Pseudonymizer.page`) this many rows at a time, up
# to PRIVACY_BATCH_BYTES (no more than one group could be before), a big group alone: much of
# its cost is per call (a few dozen polars expressions), so 2 groups at once cost less CPU
# than one by one; each is still written alone. 4 at once cost less CPU again but ~100 MB
# more RSS and no less wall (bench/RESULTS.md).
PRIVACY_BATCH_ROWS = 2 * ROW_GROUP_ROWS
PRIVACY_BATCH_BYTES = 2 * BIG_GROUP_BYTES
PREVIEW_ROWS = 5
PREVIEW_CHARS = 64  # a preview's text values are cut: it must not keep a 40 MB record alive
# A customer's values (numbers or their tokens, channel identities, SMS bodies, unknown
# fields): never in a preview.
PERSON_PREVIEW_COLUMNS = (
    *TOKEN_COLUMNS,
    *(f"{side}_channel_account_id" for side in SIDES),
    "message",
    "data",
    "extra",
)
# Pages being decoded or written at once (bounds memory, with the client's byte budget): enough
# to keep both decoder threads busy while the writer writes.
WRITE_AHEAD_PAGES = 4
# Threads decoding pages: the native pass releases the GIL, so two use both cores.
DECODE_THREADS = 2
# With `pii_forgotten`, which a page has under `token` only (`Pseudonymizer.page`): a record
# that lost a forgotten value says so in `raw_cdrs` too.
RAW_COLUMNS = landed(RAW_SPEC).column_names
_LOG = logging.getLogger(__name__)
T = TypeVar("T")
R = TypeVar("R")


class NoRawPartition(Exception):
    """The typed tables were asked for from the lake, and the day has no published `raw_cdrs`
    (never landed, or rejected): normalizing nothing would publish an empty day."""


class Withheld(Exception):
    """The day failed a blocking check: raised inside the writers, it aborts them, so nothing
    of the day is published (`raw_cdrs` goes to the rejected area)."""


class PageCountMismatch(Exception):
    """A page's records as the connector counted them and as the decoder split them differ (a
    list key given twice, which JSON readers resolve differently): nothing of the day lands."""


@dataclass
class DayStats:
    """What landing one day did, for the assets' metadata."""

    rows: int = 0
    received: int = 0  # records in the pages received (rows: those landed)
    pages: int = 0
    native_pages: int = 0  # decoded in the one native pass (the others: the tolerant path)
    bytes: int = 0
    api_total: int = 0
    windows: set[tuple[str, str]] = field(default_factory=set)
    counts: dict[str, int] = field(default_factory=dict)
    previews: dict[str, pl.DataFrame] = field(default_factory=dict)


@dataclass
class _Ready:
    """A row group made ready to write: its `raw_cdrs` columns and its typed tables as the
    lake holds them (`normalized`, for the checks, and `landed`)."""

    raw: pl.DataFrame | None
    rows: int
    normalized: NormalizedTables | None
    landed: dict[str, pl.DataFrame] | None
    big: bool


class DayWriter:
    """Collects typed page frames into row groups; writes and checks each group (one thread)."""

    def __init__(
        self,
        raw: PartitionWriter | None,
        tables: Mapping[str, PartitionWriter],
        checks: DayChecks,
        stats: DayStats,
        rows: int = ROW_GROUP_ROWS,
        max_bytes: int = ROW_GROUP_BYTES,
        privacy: Pseudonymizer | None = None,
        batch_rows: int = PRIVACY_BATCH_ROWS,
    ) -> None:
        self._privacy = privacy or Pseudonymizer(RAW)
        self._raw = raw
        self._tables = tables
        self._checks = checks
        self._stats = stats
        self._rows = rows
        self._max_bytes = max_bytes
        self._batch_rows_max = batch_rows
        self._frames: list[pl.DataFrame] = []
        self._held = 0
        self._bytes = 0
        self._ahead: ThreadPoolExecutor | None = None
        # Under `token`: groups waiting for their batch's rewrite, and the batch being rewritten.
        self._batch: list[tuple[pl.DataFrame, bool]] = []
        self._batch_rows = 0
        self._batch_bytes = 0
        self._pending: Future[list[pl.DataFrame | _Ready]] | None = None
        self._written = 0  # groups written

    def add(self, frame: pl.DataFrame) -> None:
        size = int(frame.estimated_size())
        if self._frames and self._bytes + size > self._max_bytes:
            self._cut()  # the group so far, without this frame
        self._frames.append(frame)
        self._held += frame.height
        self._bytes += size
        del frame  # the group holds it: flushed, its buffers can go
        if self._held >= self._rows or self._bytes >= self._max_bytes:
            self._cut()

    def flush(self) -> None:
        """Write every row group held so far."""
        self._cut()
        self._submit()
        self._drain()
        release_free_memory()  # the last groups' buffers

    def close(self) -> None:
        """Stop the privacy thread (a group it still holds is dropped: the day failed)."""
        if self._ahead is not None:
            self._ahead.shutdown(wait=True, cancel_futures=True)
            self._ahead, self._pending, self._batch = None, None, []

    def _cut(self) -> None:
        """The group held so far is complete: it is written now, or, under `token`, its
        records are rewritten on the privacy thread while the previous group is written."""
        if not self._frames:
            return
        big = self._bytes >= BIG_GROUP_BYTES
        size = self._bytes
        frames, self._frames, self._held, self._bytes = self._frames, [], 0, 0
        group = frames[0] if len(frames) == 1 else pl.concat(frames, how="vertical_relaxed")
        del frames
        if self._privacy.landed:  # records read back from raw_cdrs (already rewritten)
            self._privacy.learn(group)
        elif self._privacy.policy.tokens:
            # Before anything of the group is written, its records and values lose the
            # people's numbers and names (`Pseudonymizer.page`), a batch of groups at a time
            # on a thread of its own: the rewrite of a batch overlaps the writes of the one
            # before it.
            if big:
                self._submit()  # a big group (big records) is rewritten alone, as it is written
            self._batch.append((group, big))
            self._batch_rows += group.height
            self._batch_bytes += size
            del group
            if (
                big
                or self._batch_rows >= self._batch_rows_max
                or self._batch_bytes >= PRIVACY_BATCH_BYTES
            ):
                self._submit()
            return
        self._write(group, big)

    def _submit(self) -> None:
        """Start the rewrite of the groups batched so far (after the previous batch's writes)."""
        if not self._batch:
            return
        batch, self._batch, self._batch_rows, self._batch_bytes = self._batch, [], 0, 0
        if self._ahead is None:
            self._ahead = ThreadPoolExecutor(max_workers=1, thread_name_prefix="cdr-privacy")
        groups = [g for g, _ in batch]
        whole = groups[0] if len(groups) == 1 else pl.concat(groups, how="vertical_relaxed")
        shape = [(g.height, big) for g, big in batch]
        rewritten = self._ahead.submit(self._rewrite, whole, shape)
        del batch, groups, whole
        self._drain()
        self._pending = rewritten

    def _rewrite(
        self, whole: pl.DataFrame, shape: list[tuple[int, bool]]
    ) -> list[pl.DataFrame | _Ready]:
        """On the privacy thread: a batch's records rewritten (`Pseudonymizer.page`), then
        each ordinary group normalized there too, so the write thread only writes (it bounds
        the day's wall time). A big group is normalized on the write thread after its raw
        write, as without `token`: its records' buffers go before its typed tables are made."""
        rewritten = self._privacy.page(whole)
        del whole
        out: list[pl.DataFrame | _Ready] = []
        offset = 0
        for height, big in shape:
            group = rewritten.slice(offset, height)
            out.append(group if big else self._ready(group, big))
            offset += height
        return out

    def _drain(self) -> None:
        if self._pending is None:
            return
        # Taken before its result: a failed batch is raised once, and the future (which
        # holds the list too) is not kept.
        pending, self._pending = self._pending, None
        groups = pending.result()
        del pending
        groups.reverse()
        while groups:  # each group's buffers can go once it is written
            group = groups.pop()
            if isinstance(group, _Ready):
                self._put(group)
            else:
                self._write(group, big=True)
            del group

    def _ready(self, group: pl.DataFrame, big: bool, *, raw_written: bool = False) -> _Ready:
        """The group's raw columns (unless written already) and typed tables
        (`normalize_decoded`, then the privacy stage's columns), ready to write."""
        raw = narrow(group, RAW_COLUMNS) if self._raw is not None and not raw_written else None
        if not self._tables:
            return _Ready(raw, group.height, None, None, big)
        erased = (
            group.filter(pl.col(FORGOTTEN).fill_null(False)).get_column("id").drop_nulls()
            if FORGOTTEN in group.columns
            else pl.Series(dtype=pl.String())
        )
        normalized = normalize_decoded(group)
        landed = self._privacy.tables(normalized.tables(), erased.to_list())
        return _Ready(raw, group.height, normalized, landed, big)

    def _write(self, group: pl.DataFrame, big: bool) -> None:
        """A group written as it comes (`raw`, a big group, records read back): its raw
        columns first, their buffers given back before its typed tables are made."""
        if self._raw is not None:
            self._put_raw(narrow(group, RAW_COLUMNS), big)
        ready = self._ready(group, big, raw_written=True)
        del group
        self._put(ready)

    def _put_raw(self, raw: pl.DataFrame, big: bool) -> None:
        # Only with a raw writer: `_ready` and `_write` make no raw columns without one.
        assert self._raw is not None
        self._raw.write(raw)
        self._note(RAW_CDRS, raw)
        del raw
        if big:
            release_free_memory()  # the raw write's buffers, before the next write's

    def _put(self, ready: _Ready) -> None:
        """Write a group made ready (its raw columns, unless written already, then its typed
        tables) and fold it into the day's checks."""
        if ready.raw is not None:
            raw, ready.raw = ready.raw, None
            self._put_raw(raw, ready.big)
            del raw
        if ready.normalized is not None and ready.landed is not None:
            for table in NORMALIZED_TABLES:
                frame: pl.DataFrame = ready.landed[table]
                if table in self._tables and frame.height:
                    self._tables[table].write(frame)
                    if ready.big:
                        release_free_memory()
                if table in self._tables:
                    self._note(table, frame)
            self._checks.add(ready.rows, ready.normalized)
            del frame
        ready.normalized = ready.landed = None  # released below, whoever holds `ready`
        self._done(ready.big)

    def _done(self, big: bool) -> None:
        # The groups' buffers are freed: release them, or the day's RSS grows with its size.
        self._written += 1
        if big or self._written % RELEASE_EVERY_GROUPS == 0:
            release_free_memory()

    def _note(self, table: str, frame: pl.DataFrame) -> None:
        self._stats.counts[table] = self._stats.counts.get(table, 0) + frame.height
        if table not in self._stats.previews and frame.height:
            # Cut and copied (through Arrow): a slice of the group would keep all its buffers.
            # Without customers' values: Dagster's event log keeps previews, where an
            # erasure (`cdrhouse privacy forget`) cannot reach them.
            head = frame.head(PREVIEW_ROWS).drop(PERSON_PREVIEW_COLUMNS, strict=False)
            head = head.with_columns(cs.string().str.slice(0, PREVIEW_CHARS))
            self._stats.previews[table] = pl.DataFrame(pl.from_arrow(head.to_arrow()))


async def pull_day(
    contact_center: ContactCenterResource,
    log: logging.Logger | dg.DagsterLogManager,
    partition: str,
    write: Callable[[pl.DataFrame], None],
    stats: DayStats,
) -> None:
    """Fetch one day, decode every page and hand it to `write`, in page order.

    The event loop receives pages, two threads decode them and one writes (`write`), each
    page's write waiting for the previous one. Decoding and writing are mostly pyarrow, polars
    and Parquet, which release the GIL, so both cores stay busy."""
    start, end = partition_window(partition)
    loop = asyncio.get_running_loop()
    landing: deque[asyncio.Task[int]] = deque()
    with (
        ThreadPoolExecutor(max_workers=DECODE_THREADS, thread_name_prefix="cdr-decode") as decoder,
        ThreadPoolExecutor(max_workers=1, thread_name_prefix="cdr-write") as writer,
    ):

        async def land(
            body: list[bytes], count: int, previous: asyncio.Task[int] | None, budget: ByteBudget
        ) -> int:
            # `body` is a box emptied into the decoder: nothing here keeps the page's bytes
            # once decoded, nor the frame once written (a 40 MB record is held once, not thrice).
            size = len(body[0])
            try:
                decoded = await loop.run_in_executor(decoder, _take_and, decode_page_counted, body)
                frame, native = [decoded.frame], decoded.native
                del decoded

                if previous is not None:
                    await previous  # page order: the previous page is written first
                height = frame[0].height
                if height != count:
                    raise PageCountMismatch(
                        f"a CDR page of {partition}: the connector read {count} records, the "
                        f"decoder {height} (a list key given twice?); the day is not landed"
                    )
                stats.native_pages += native
                if height:
                    await loop.run_in_executor(writer, _take_and, write, frame)
                return height
            finally:
                # The page's bytes count until it is written (or dropped): while a big page is
                # decoded and written, no other big page is received.
                budget.release(size)

        async with progress_lines(log, contact_center.progress_every_s, _day_progress(stats)):
            try:
                async with contact_center.client(log) as client:
                    budget = ByteBudget(client.settings.page_bytes_in_flight)
                    async for page in client.fetch_cdr_pages(start, end, budget=budget):
                        previous = landing[-1] if landing else None
                        landing.append(
                            asyncio.create_task(land([page.body], page.count, previous, budget))
                        )
                        stats.pages += 1
                        stats.received += page.count
                        stats.bytes += len(page.body)
                        window = (page.window_start.isoformat(), page.window_end.isoformat())
                        # metadata.total is per sub-window: count it once per window, not per page.
                        if window not in stats.windows:
                            stats.windows.add(window)
                            stats.api_total += page.total
                        del page  # its body is the landing task's alone
                        if len(landing) >= WRITE_AHEAD_PAGES:
                            stats.rows += await landing.popleft()
                while landing:
                    stats.rows += await landing.popleft()
            finally:
                # On failure: pending pages are dropped (a task waiting on a failed one fails too)
                # and the pools' shutdown waits for the running decode and write, so `write` is
                # never called after we return.
                for task in landing:
                    task.cancel()
                await asyncio.gather(*landing, return_exceptions=True)


def _day_progress(stats: DayStats) -> Callable[[float], str]:
    """The day's progress line, given the seconds since its fetch began."""

    def line(elapsed: float) -> str:
        if not stats.pages:
            return f"no page yet after {elapsed:,.0f} s"
        rate = stats.received / elapsed
        # `api_total` sums the totals of the sub-windows heard from so far: a floor.
        return (
            f"{stats.received:,} CDRs received of {stats.api_total:,} announced so far, "
            f"{stats.pages:,} pages ({stats.bytes / 2**20:,.1f} MiB), {rate:,.0f} CDRs/s"
        )

    return line


def _take_and(fn: Callable[[T], R], box: list[T]) -> R:
    """`fn(box.pop())`: the box's owner keeps no reference to what `fn` gets."""
    return fn(box.pop())


@contextmanager
def _table_writers(
    lake: Lake,
    key: str,
    tables: Collection[str],
    source: str | None,
    key_check: str | None,
    group: PublishGroup,
) -> Iterator[dict[str, PartitionWriter]]:
    with ExitStack() as stack:
        yield {
            t: stack.enter_context(
                lake.writer(t, key, source=source, key_check=key_check, group=group)
            )
            for t in tables
        }


def published_counts(
    lake: Lake,
    key: str,
    tables: Collection[str],
    log: logging.Logger | dg.DagsterLogManager,
) -> tuple[int | None, dict[str, int]]:
    """The records of the day the lake holds (None: not published), and the rows of each of
    its published `tables` but the quarantine, from the partitions' footers (the footer only,
    also from an object store, all at once: a few ranged reads each there). A damaged file
    (`Lake.unreadable`; fetching the day again is its remedy) counts as not published, except
    `raw_cdrs`, then counted by its `cdrs` and `cdr_quarantine` (raw = cdrs + quarantine for
    every day published): nothing readable is left unguarded."""

    def rows(table: str) -> int | None:
        try:
            footer = lake.partition_footer(table, key)
        except (OSError, ValueError) as exc:  # ArrowInvalid is a ValueError
            where = lake.partition_url(table, key)
            log.warning(f"{where} cannot be read ({exc}); it is replaced as if absent")
            return _DAMAGED
        return None if footer is None else footer.num_rows

    names = sorted({RAW_CDRS, "cdrs", "cdr_quarantine", *tables})
    with ThreadPoolExecutor(len(names), thread_name_prefix="cdr-footers") as pool:
        counted = {t: n for t, n in zip(names, pool.map(rows, names), strict=True) if n != _DAMAGED}
    # Fewer quarantined rows is a mend, not a loss.
    typed = {
        t: n for t, n in counted.items() if t in tables and t != "cdr_quarantine" and n is not None
    }
    if RAW_CDRS in counted:
        return counted[RAW_CDRS], typed
    cdrs = counted.get("cdrs")  # raw_cdrs damaged: its records are cdrs + quarantine
    return (None if cdrs is None else cdrs + (counted.get("cdr_quarantine") or 0)), typed


_DAMAGED = -1  # `published_counts`: a footer that cannot be read


def land_day(
    contact_center: ContactCenterResource,
    lake: Lake,
    log: logging.Logger | dg.DagsterLogManager,
    partition: str,
    tables: Collection[str] = tuple(NORMALIZED_TABLES),
    privacy: PrivacyPolicy = RAW,
    max_shrink: float = DEFAULT_MAX_DAY_SHRINK,
) -> tuple[DayStats, DayChecks]:
    """Pull one UTC day from the API and replace its `raw_cdrs` and typed partitions.

    All or nothing: the day is published only when every blocking check passes
    (`DayChecks.whole`: rows = the API's totals, ids unique across the day, every started_at
    in the window, raw = cdrs + quarantine, and no more than `max_shrink` fewer records than
    the published day's `raw_cdrs`, nor fewer rows in one of the typed `tables` than its
    published one). Otherwise every published byte of the day stays
    as it was, and the records received go to `<lake>/_rejected/raw_cdrs/date=<day>/` for
    inspection, where no reader takes them for the day. A lake holding another source's data
    refuses the write before the API is called. The one code path for the asset and
    `bench.ingest`, so the bench measures what users run."""
    key = f"date={partition}"
    source = contact_center.source_id
    stats = DayStats()
    checks = DayChecks(partition, max_shrink=max_shrink)
    # Tokens under another key than the lake's, or numbers in clear into a lake of tokens:
    # refused before the API is called.
    lake.check_landing(privacy.key_check)
    pz = Pseudonymizer.for_lake(privacy, lake)
    # Exited last: from the checks' pass until every table of the day is renamed into place,
    # Ctrl-C or SIGTERM waits (between two renames, it would leave the day's tables from two
    # fetches; a step retry used to mend that, an interrupted `cdrhouse ingest` no longer
    # retries), and so does another run's publish of the day (`Lake.publishing`).
    publishing = ExitStack()
    # Every file of the day is published at the group's exit, after the writers': one that
    # fails puts the others back (`PublishGroup`).
    group = PublishGroup(lake)
    raw_writer = lake.writer(RAW_CDRS, key, source=source, key_check=privacy.key_check, group=group)
    with publishing, group, raw_writer as raw:
        try:
            with _table_writers(lake, key, tables, source, privacy.key_check, group) as writers:
                day = DayWriter(raw, writers, checks, stats, privacy=pz)

                def receive(frame: pl.DataFrame) -> None:
                    checks.receive(frame)  # before any row group's dedupe
                    day.add(frame)

                try:
                    run_interruptible(pull_day(contact_center, log, partition, receive, stats))
                    day.flush()
                finally:
                    day.close()
                # The day as the lake holds it when this one would replace it: read under the
                # publish lock, so another run's publish cannot come between count and rename.
                publishing.enter_context(lake.publishing(key))
                checks.landed_rows, checks.landed_tables = published_counts(lake, key, tables, log)
                if not checks.whole(stats.rows, stats.api_total):
                    raise Withheld  # noqa: TRY301 - raised inside the writers to abort them
        except Withheld:
            raw.reject()
            for table in tables:
                stats.counts.pop(table, None)
    if checks.whole(stats.rows, stats.api_total):
        # The rejected copy of an earlier run no longer describes the day.
        lake.delete_partition(RAW_CDRS, key, rejected=True)
        if privacy.tokens:
            _forget_late(lake, key, (RAW_CDRS, *tables), pz.forgotten)
    elif privacy.tokens:
        # The rejected copy is kept for diagnosis: an erasure meanwhile reaches it too.
        _forget_late(lake, key, (RAW_CDRS,), pz.forgotten, rejected=True)
    return stats, checks


def _forget_late(
    lake: Lake, key: str, tables: Sequence[str], read: frozenset[str], *, rejected: bool = False
) -> None:
    """Erase from the day just published (`rejected`: its rejected copy just written) the
    tokens `cdrhouse privacy forget` added to the forget-list after the day read it (`read`).
    Read after publishing: a `forget` that wrote the list later scans the day after it was
    published, so one of the two erases it."""
    late = lake.forgotten() - read
    for token in sorted(late):
        for table in tables:
            erase_partition(lake, table, key, token, rejected=rejected)


def renormalize_day(
    lake: Lake,
    partition: str,
    tables: Collection[str] = tuple(NORMALIZED_TABLES),
    privacy: PrivacyPolicy = RAW,
    max_shrink: float = DEFAULT_MAX_DAY_SHRINK,
    log: logging.Logger | dg.DagsterLogManager = _LOG,
) -> tuple[DayStats, DayChecks]:
    """Replace the typed partitions of one day from its `raw_cdrs` partition (no API call),
    by the same rule as `land_day`: only when every blocking check but the API's row count
    passes (the shrink check on the typed `tables` alone); otherwise every typed partition of
    the day stays as it was."""
    key = f"date={partition}"
    if not lake.exists(RAW_CDRS, key):
        raise NoRawPartition(
            f"day {partition} has no published raw_cdrs partition to normalize again (it never "
            "landed, or its last fetch was rejected): materialize raw_cdrs for the day, which "
            "fetches it from the API; nothing of the day was changed"
        )
    # The typed tables come from the raw partition, so they carry its source.
    source = lake.partition_source(RAW_CDRS, key)
    # The day's tokens were made when it landed; the typed tables are made under that key.
    lake.check_landing(privacy.key_check)
    stats = DayStats()
    checks = DayChecks(partition, max_shrink=max_shrink)
    publishing = ExitStack()  # as in `land_day`: exited once every table is published
    group = PublishGroup(lake)
    try:
        with (
            publishing,
            group,
            _table_writers(lake, key, tables, source, privacy.key_check, group) as writers,
        ):
            # The records were rewritten when they landed; the typed values follow them (and
            # the forget-list, if it grew since).
            pz = Pseudonymizer.for_lake(privacy, lake, landed=True)
            day = DayWriter(None, writers, checks, stats, privacy=pz)
            for batch in lake.iter_batches(RAW_CDRS, key, rows=ROW_GROUP_ROWS):
                stats.rows += batch.height
                frame = with_decoded(batch)
                checks.receive(frame)
                day.add(frame)
            day.flush()
            publishing.enter_context(lake.publishing(key))  # as in `land_day`: counted under it
            checks.landed_tables = published_counts(lake, key, tables, log)[1]
            if not checks.whole(stats.rows, None):
                raise Withheld  # noqa: TRY301 - raised inside the writers to abort them
    except Withheld:
        for table in tables:
            stats.counts.pop(table, None)
        return stats, checks
    if privacy.tokens:
        _forget_late(lake, key, tuple(tables), pz.forgotten)
    return stats, checks
