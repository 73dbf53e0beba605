"""The CDR assets (daily partitions) and the normalization assets built on them.

`raw_cdrs` pulls one UTC day through the connector's parallel sub-window fetch and streams every
page into one atomic lake partition: memory stays flat in the size of the day. The normalization
multi-asset reads that partition back batch by batch and writes the typed tables for the same
day. Every API-calling asset is in the `contact_center_api` pool (limit in dagster.yaml).
"""

import asyncio
import logging
import time
from collections import deque
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import dagster as dg
import polars as pl

from connectors.contact_center.errors import (
    AuthenticationError,
    ContactCenterError,
    FatalAPIError,
    PermissionDeniedError,
    ValidationFailedError,
)
from models.tables import TABLES
from pipelines.partitions import partition_window
from pipelines.resources import (
    ContactCenterResource,
    WarehouseResource,
    config_failure,
    utc_now,
)
from warehouse import snapshots
from warehouse.lake import LakeSourceConflict
from warehouse.normalize import decode_page, normalize

API_POOL = "contact_center_api"
CDR_GROUP = "cdrs"
SNAPSHOT_GROUP = "snapshots"
CDRS_ENDPOINT = "/api/v4/reporting/cdrs"

RAW_CDRS = "raw_cdrs"
# Normalized tables written per partition, and the NormalizedTables attribute each comes from.
NORMALIZED_TABLES: Mapping[str, str] = {
    "cdrs": "cdrs",
    "cdr_calls": "cdr_calls",
    "cdr_conversations": "cdr_conversations",
    "cdr_sms": "cdr_sms",
    "cdr_hlr_lookups": "cdr_hlr_lookups",
    "cdr_quarantine": "quarantine",
}
# The per-type tables and the CDR `type` whose rows each holds.
TYPE_TABLES: Mapping[str, str] = {
    "cdr_calls": "call",
    "cdr_conversations": "conversation",
    "cdr_sms": "sms",
    "cdr_hlr_lookups": "hlr_lookup",
}
ROW_COUNT_CHECK = "row_count_matches_api_total"
# Raw rows are re-read in batches of this many for normalization (bounded memory).
NORMALIZE_BATCH_ROWS = 10_000
# Raw pages are written in row groups of about this many records (~10-20 MB of JSON).
RAW_ROW_GROUP_ROWS = 10_000
PREVIEW_ROWS = 5
# Decoded pages handed to the writer thread and not yet written: bounds memory.
WRITE_AHEAD_PAGES = 4


def api_retry_policy(max_retries: int = 3, delay_s: float = 30.0) -> dg.RetryPolicy:
    """Step retries for retriable API failures: 30 s, 60 s, 120 s, each +/- random jitter.

    The client already retries single requests within its own budget; this covers an outage
    longer than that budget. Fatal errors raise `dg.Failure(allow_retries=False)` and skip it.
    """
    return dg.RetryPolicy(
        max_retries=max_retries,
        delay=delay_s,
        backoff=dg.Backoff.EXPONENTIAL,
        jitter=dg.Jitter.PLUS_MINUS,
    )


def nightly_freshness() -> dg.FreshnessPolicy:
    """Fresh if materialized between the 01:00 UTC schedule and 03:00 UTC each day."""
    return dg.FreshnessPolicy.cron(
        deadline_cron="0 3 * * *", lower_bound_delta=timedelta(hours=2), timezone="UTC"
    )


def api_failure(exc: ContactCenterError, *, partition: str | None) -> dg.Failure:
    """A Dagster failure that says what went wrong, where, and what to fix.

    Fatal errors (401/403/422 and the rest of `FatalAPIError`) are not retried: the same
    request would fail the same way until someone changes the key or the request.
    """
    fatal = isinstance(exc, FatalAPIError)
    if isinstance(exc, AuthenticationError):
        fix = "CC_API_KEY is missing, wrong or not a v4 key: generate a v4 API key and set it."
    elif isinstance(exc, PermissionDeniedError):
        scope = exc.scope or "the endpoint's scope"
        fix = f"the API key lacks the scope {scope!r}: add it to the key on the API keys page."
    elif isinstance(exc, ValidationFailedError):
        fix = f"the API rejected the request parameters ({exc.errors}); check the filters."
    elif fatal:
        fix = "the request or configuration must change before a retry can succeed."
    else:
        fix = "transient; the step is retried with exponential backoff."
    endpoint = f"{exc.method} {exc.path}".strip() or CDRS_ENDPOINT
    return dg.Failure(
        description=f"{type(exc).__name__} on {endpoint}: {exc} -> {fix}",
        metadata={
            "error_class": type(exc).__name__,
            "endpoint": endpoint,
            "status": exc.status if exc.status is not None else -1,
            "partition": partition or "",
            "fatal": fatal,
        },
        allow_retries=not fatal,
    )


def markdown_preview(df: pl.DataFrame, rows: int = PREVIEW_ROWS, max_cols: int = 8) -> str:
    """A small markdown table of the first rows, values cut short, for the Dagster UI."""
    head = df.head(rows).select(df.columns[:max_cols])
    if head.width == 0:
        return "_(no columns)_"

    def cell(value: Any) -> str:
        text = "" if value is None else str(value)
        return (text[:37] + "...") if len(text) > 40 else text.replace("|", "\\|")

    lines = [
        "| " + " | ".join(head.columns) + " |",
        "|" + "---|" * head.width,
    ]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in head.iter_rows()]
    return "\n".join(lines)


class RowGroupBuffer:
    """Collects decoded pages into row groups of about `rows` rows before writing.

    Pages hold at most 1000 records; one row group per page would make Parquet files of many
    tiny groups. The buffer bounds memory to one row group, whatever the size of the day.
    """

    def __init__(self, write: Any, rows: int = RAW_ROW_GROUP_ROWS) -> None:
        self._write = write
        self._rows = rows
        self._frames: list[pl.DataFrame] = []
        self._held = 0

    def add(self, frame: pl.DataFrame) -> None:
        self._frames.append(frame)
        self._held += frame.height
        if self._held >= self._rows:
            self.flush()

    def flush(self) -> None:
        if self._frames:
            self._write(pl.concat(self._frames, how="vertical_relaxed"))
        self._frames, self._held = [], 0


@dataclass
class PullStats:
    """What one partition's fetch did, for the asset's metadata."""

    rows: int = 0
    pages: int = 0
    bytes: int = 0
    api_total: int = 0
    windows: set[tuple[str, str]] = field(default_factory=set)
    preview: pl.DataFrame | None = None


async def _pull_day(
    contact_center: ContactCenterResource,
    log: logging.Logger | dg.DagsterLogManager,
    partition: str,
    write: Any,
) -> PullStats:
    """Fetch one day, decode every page and hand it to `write`, in page order.

    `write` runs in one worker thread, overlapped with the fetch and decode: Parquet encoding
    and compression release the GIL, so the second core works while the event loop receives.
    (Decoding stays here: in the thread its many short GIL hand-offs made it slower.)
    """
    start, end = partition_window(partition)
    stats = PullStats()
    loop = asyncio.get_running_loop()
    landing: deque[asyncio.Future[None]] = deque()

    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="raw-cdrs") as pool:
        try:
            async with contact_center.client(log) as client:
                async for page in client.fetch_cdr_pages(start, end):
                    frame = decode_page(page.body)
                    if frame.height:
                        landing.append(loop.run_in_executor(pool, write, frame))
                    stats.rows += frame.height
                    if stats.preview is None and frame.height:
                        stats.preview = frame.head(PREVIEW_ROWS)
                    stats.pages += 1
                    stats.bytes += len(page.body)
                    window = (page.window_start.isoformat(), page.window_end.isoformat())
                    # metadata.total is per sub-window: count it once per window, not per page.
                    if window not in stats.windows:
                        stats.windows.add(window)
                        stats.api_total += page.total
                    if len(landing) >= WRITE_AHEAD_PAGES:
                        await landing.popleft()
            while landing:
                await landing.popleft()
        finally:
            # On failure: queued writes are dropped and the pool's shutdown waits for the
            # running one, so `write` is never called after we return.
            for fut in landing:
                if not fut.cancel() and not fut.cancelled():
                    fut.exception()  # retrieved; the first error is already propagating
    return stats


def land_raw_day(
    contact_center: ContactCenterResource,
    warehouse: WarehouseResource,
    log: logging.Logger | dg.DagsterLogManager,
    partition: str,
) -> PullStats:
    """Pull one UTC day and replace its `raw_cdrs` partition atomically; returns the pull stats.

    The one code path for the asset and `bench.ingest`, so the bench measures what users run.
    A lake holding another source's data refuses the write before the API is called."""
    source = contact_center.source_id
    with warehouse.lake().writer(RAW_CDRS, f"date={partition}", source=source) as writer:
        buffer = RowGroupBuffer(writer.write)
        stats = asyncio.run(_pull_day(contact_center, log, partition, buffer.add))
        buffer.flush()
    return stats


def _timing(rows: int, seconds: float) -> dict[str, Any]:
    return {
        "seconds": round(seconds, 3),
        "rows_per_s": round(rows / seconds, 1) if seconds > 0 else 0.0,
    }


def build_cdr_assets(
    partitions_def: dg.PartitionsDefinition[str],
    retry_policy: dg.RetryPolicy,
) -> list[dg.AssetsDefinition]:
    """`raw_cdrs` and the normalization multi-asset, on the given daily partitions."""
    backfill = dg.BackfillPolicy.multi_run(max_partitions_per_run=1)

    @dg.asset(
        name=RAW_CDRS,
        group_name=CDR_GROUP,
        partitions_def=partitions_def,
        backfill_policy=backfill,
        pool=API_POOL,
        retry_policy=retry_policy,
        freshness_policy=nightly_freshness(),
        kinds={"parquet", "api"},
        check_specs=[
            dg.AssetCheckSpec(
                ROW_COUNT_CHECK,
                asset=RAW_CDRS,
                blocking=True,
                description="Rows written equal the API's metadata.total for the window.",
            )
        ],
    )
    def raw_cdrs(
        context: dg.AssetExecutionContext,
        contact_center: ContactCenterResource,
        warehouse: WarehouseResource,
    ) -> Iterator[dg.MaterializeResult[Any] | dg.AssetCheckResult]:
        """Raw CDRs of one UTC day (`started_at` in [day, day+1)), exactly as the API sent them.

        Pages are streamed into one temporary Parquet file that replaces the partition only
        when the whole day has arrived, so a failed run leaves the previous day whole.
        """
        partition = context.partition_key
        begun = time.perf_counter()
        try:
            stats = land_raw_day(contact_center, warehouse, context.log, partition)
        except ContactCenterError as exc:
            raise api_failure(exc, partition=partition) from exc
        except LakeSourceConflict as exc:
            raise config_failure(str(exc), "LakeSourceConflict") from None
        seconds = time.perf_counter() - begun
        warehouse.refresh_warehouse()
        preview = markdown_preview(stats.preview) if stats.preview is not None else "_(empty)_"
        yield dg.MaterializeResult(
            metadata={
                "dagster/row_count": stats.rows,
                "api_total": stats.api_total,
                "pages": stats.pages,
                "sub_windows": len(stats.windows),
                "bytes": stats.bytes,
                **_timing(stats.rows, seconds),
                "preview": dg.MetadataValue.md(preview),
            }
        )
        yield dg.AssetCheckResult(
            check_name=ROW_COUNT_CHECK,
            passed=stats.rows == stats.api_total,
            metadata={
                "rows": stats.rows,
                "api_total": stats.api_total,
                "difference": stats.rows - stats.api_total,
            },
        )

    @dg.multi_asset(
        name="normalize_cdrs",
        group_name=CDR_GROUP,
        partitions_def=partitions_def,
        backfill_policy=backfill,
        retry_policy=retry_policy,
        specs=[
            dg.AssetSpec(
                table,
                deps=[RAW_CDRS],
                kinds={"parquet", "polars"},
                freshness_policy=nightly_freshness(),
                description=_NORMALIZED_DESCRIPTIONS[table],
            )
            for table in NORMALIZED_TABLES
        ],
    )
    def normalize_cdrs(
        context: dg.AssetExecutionContext, warehouse: WarehouseResource
    ) -> Iterator[dg.MaterializeResult[Any]]:
        """Typed tables of one day from its raw partition, batch by batch (bounded memory)."""
        partition = context.partition_key
        begun = time.perf_counter()
        counts = dict.fromkeys(NORMALIZED_TABLES, 0)
        previews: dict[str, pl.DataFrame] = {}
        lake = warehouse.lake()
        key = f"date={partition}"
        # The typed tables come from the raw partition, so they carry its source.
        source = lake.partition_source(RAW_CDRS, key)
        with ExitStack() as stack:
            writers = {
                table: stack.enter_context(lake.writer(table, key, source=source))
                for table in NORMALIZED_TABLES
            }
            for raw in read_partition_batches(warehouse, RAW_CDRS, f"date={partition}"):
                tables = normalize(raw)
                for table, attr in NORMALIZED_TABLES.items():
                    frame: pl.DataFrame = getattr(tables, attr)
                    if frame.height:
                        writers[table].write(frame)
                        counts[table] += frame.height
                        previews.setdefault(table, frame.head(PREVIEW_ROWS))
        seconds = time.perf_counter() - begun
        warehouse.refresh_warehouse(partition)
        for table, rows in counts.items():
            preview = previews.get(table)
            yield dg.MaterializeResult(
                asset_key=table,
                metadata={
                    "dagster/row_count": rows,
                    **_timing(counts["cdrs"], seconds),
                    "preview": dg.MetadataValue.md(
                        markdown_preview(preview) if preview is not None else "_(empty)_"
                    ),
                },
            )

    return [raw_cdrs, normalize_cdrs]


_NORMALIZED_DESCRIPTIONS: Mapping[str, str] = {
    "cdrs": "The CDR fact table: common fields, from/to and user flattened, exact cost.",
    "cdr_calls": "Call CDRs: every field of the spec's call data as a typed column.",
    "cdr_conversations": "Conversation CDRs: channel, flow, durations and SLA values/status.",
    "cdr_sms": "SMS CDRs: sent, segments, message, canned message, related call.",
    "cdr_hlr_lookups": "HLR lookup CDRs: reachable, roaming, related call.",
    "cdr_quarantine": "Raw records that could not be normalized, with the reason; should be empty.",
}


def read_partition_batches(
    warehouse: WarehouseResource,
    table: str,
    partition: str,
    *,
    columns: Sequence[str] | None = None,
    batch_rows: int = NORMALIZE_BATCH_ROWS,
) -> Iterator[pl.DataFrame]:
    """The rows of one lake partition, a bounded batch at a time; nothing if it is absent."""
    parquet = warehouse.lake().open_parquet(table, partition)
    if parquet is None:
        return
    for batch in parquet.iter_batches(batch_size=batch_rows, columns=columns):
        frame = pl.from_arrow(batch)
        assert isinstance(frame, pl.DataFrame)
        yield frame


def read_partition(
    warehouse: WarehouseResource,
    table: str,
    partition: str,
    *,
    columns: Sequence[str] | None = None,
) -> pl.DataFrame:
    """A whole lake partition (checks read only the key columns); empty if it is absent."""
    frames = list(read_partition_batches(warehouse, table, partition, columns=columns))
    if frames:
        return pl.concat(frames, how="vertical_relaxed")
    spec = TABLES[table].file_schema()
    return pl.DataFrame(schema={c: spec[c] for c in (columns or spec.names())})


# --- Snapshot assets -------------------------------------------------------------------------


@dataclass(frozen=True)
class SnapshotSource:
    """One snapshot asset group: the API reads it makes and the tables it writes."""

    name: str
    tables: tuple[str, ...]
    description: str


SNAPSHOT_SOURCES: tuple[SnapshotSource, ...] = (
    SnapshotSource(
        "users",
        (
            "users",
            "user_teams",
            "user_supervised_teams",
            "user_queues",
            "user_supervised_queues",
            "user_skills",
        ),
        "Users, active and deleted together, and the memberships their records carry.",
    ),
    SnapshotSource(
        "queues",
        ("queues", "queue_members", "queue_supervisors"),
        "Routing queues with their members and supervisors.",
    ),
    SnapshotSource("skills", ("skills",), "Routing skills."),
    SnapshotSource(
        "teams", ("teams", "team_members", "team_supervisors"), "Teams, members, supervisors."
    ),
    SnapshotSource("campaigns", ("campaigns",), "Outbound dialer campaigns."),
    SnapshotSource("numbers", ("numbers",), "Purchased phone numbers with exact pricing."),
    SnapshotSource("caller_id_groups", ("caller_id_groups",), "Caller ID groups."),
    SnapshotSource("balance", ("balance_snapshots",), "The account balance, exact decimal."),
)


@dataclass
class Fetched:
    """What a snapshot read returned: records per kind, and how many records/requests."""

    data: dict[str, Any] = field(default_factory=dict)
    records: int = 0
    requests: int = 0

    def put(self, name: str, value: Any, requests: int = 1) -> None:
        self.data[name] = value
        self.records += len(value) if isinstance(value, list) else 1
        self.requests += requests


def _rows(models: Sequence[Any]) -> list[dict[str, Any]]:
    """API models back to records as the API sent them (unknown fields kept)."""
    return [m.model_dump(mode="json", by_alias=True, exclude_unset=True) for m in models]


async def _per_group(
    client: Any, ids: Sequence[Any], method: str, fetched: Fetched, name: str
) -> None:
    """Members (or supervisors) of every queue/team; the client bounds its own concurrency."""
    call = getattr(client, method)
    results = await asyncio.gather(*(call(gid) for gid in ids))
    fetched.data[name] = {gid: _rows(r) for gid, r in zip(ids, results, strict=True)}
    fetched.records += sum(len(r) for r in results)
    fetched.requests += len(ids)


async def fetch_snapshot(
    name: str, contact_center: ContactCenterResource, log: dg.DagsterLogManager
) -> Fetched:
    """Read one resource family from the API, whole."""
    fetched = Fetched()
    async with contact_center.client(log) as client:
        if name == "users":
            fetched.put("active", _rows(await client.list_all_users()))
            fetched.put("deleted", _rows(await client.list_all_deleted_users()))
        elif name in ("queues", "teams"):
            groups = _rows(await getattr(client, f"list_all_{name}")())
            fetched.put(name, groups)
            ids = [g["id"] for g in groups]
            singular = name[:-1]
            await _per_group(client, ids, f"list_all_{singular}_users", fetched, "members")
            await _per_group(
                client, ids, f"list_all_{singular}_supervisors", fetched, "supervisors"
            )
        elif name == "balance":
            balance = await client.get_balance()
            fetched.put("balance", balance.model_dump(mode="json", by_alias=True))
        else:
            fetched.put(name, _rows(await getattr(client, f"list_all_{name}")()))
    return fetched


def build_snapshot_frames(
    name: str, fetched: Fetched, taken_at: datetime
) -> dict[str, pl.DataFrame]:
    """Lake frames of one snapshot family, stamped with `taken_at`."""
    d = fetched.data
    if name == "users":
        return snapshots.users_frames(d["active"], d["deleted"], taken_at)
    if name == "queues":
        return snapshots.queues_frames(d["queues"], d["members"], d["supervisors"], taken_at)
    if name == "teams":
        return snapshots.teams_frames(d["teams"], d["members"], d["supervisors"], taken_at)
    if name == "balance":
        balance = d["balance"]
        amount = balance.get("amount") if isinstance(balance, Mapping) else balance
        return {"balance_snapshots": snapshots.balance_frame(str(amount), taken_at)}
    builders = {
        "skills": snapshots.skills_frame,
        "campaigns": snapshots.campaigns_frame,
        "numbers": snapshots.numbers_frame,
        "caller_id_groups": snapshots.caller_id_groups_frame,
    }
    return {name: builders[name](d[name], taken_at)}


def _snapshot_asset(source: SnapshotSource, retry_policy: dg.RetryPolicy) -> dg.AssetsDefinition:
    @dg.multi_asset(
        name=f"{source.name}_snapshot",
        group_name=SNAPSHOT_GROUP,
        pool=API_POOL,
        retry_policy=retry_policy,
        specs=[
            dg.AssetSpec(
                table,
                kinds={"parquet", "api"},
                freshness_policy=nightly_freshness(),
                description=TABLES[table].description,
            )
            for table in source.tables
        ],
    )
    def snapshot(
        context: dg.AssetExecutionContext,
        contact_center: ContactCenterResource,
        warehouse: WarehouseResource,
    ) -> Iterator[dg.MaterializeResult[Any]]:
        """Read the resource(s) now and replace today's (UTC) snapshot partition."""
        source_id = contact_center.source_id  # fails at once when no source is configured
        lake = warehouse.lake()
        try:
            lake.check_source(source_id)  # before any API call: refuse early
        except LakeSourceConflict as exc:
            raise config_failure(str(exc), "LakeSourceConflict") from None
        taken_at = utc_now()
        begun = time.perf_counter()
        try:
            fetched = asyncio.run(fetch_snapshot(source.name, contact_center, context.log))
        except ContactCenterError as exc:
            raise api_failure(exc, partition=None) from exc
        frames = build_snapshot_frames(source.name, fetched, taken_at)
        seconds = time.perf_counter() - begun
        key = f"snapshot_date={taken_at.date().isoformat()}"
        for table in source.tables:
            lake.write(table, key, frames[table], source=source_id)
        warehouse.refresh_warehouse()
        for table in source.tables:
            frame = frames[table]
            yield dg.MaterializeResult(
                asset_key=table,
                metadata={
                    "dagster/row_count": frame.height,
                    "api_records": fetched.records,
                    "api_requests": fetched.requests,
                    "snapshot_at": taken_at.isoformat(timespec="milliseconds"),
                    "partition": key,
                    **_timing(frame.height, seconds),
                    "preview": dg.MetadataValue.md(markdown_preview(frame)),
                },
            )

    return snapshot


def build_snapshot_assets(retry_policy: dg.RetryPolicy) -> list[dg.AssetsDefinition]:
    """One multi-asset per API resource family; each writes `snapshot_date=<today UTC>`."""
    return [_snapshot_asset(source, retry_policy) for source in SNAPSHOT_SOURCES]
