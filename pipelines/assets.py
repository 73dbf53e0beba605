"""The CDR assets (daily partitions) and the snapshot assets.

One step per day, `raw_cdrs`, pulls the day through the connector's parallel sub-window fetch,
decodes each record once, and writes `raw_cdrs` and every typed CDR table as atomic lake
partitions, computing the CDR checks as it writes (`pipelines.cdr_day`); memory stays flat in the
size of the day. Every API-calling asset is in the `contact_center_api` pool (limit in
dagster.yaml).
"""

import asyncio
import functools
import time
from collections.abc import Iterator, Mapping
from datetime import timedelta
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
from models.timestamps import iso_ms
from pipelines.cdr_day import (
    NORMALIZED_TABLES,
    PREVIEW_ROWS,
    NoRawPartition,
    land_day,
    renormalize_day,
)
from pipelines.checks import (
    CDR_CHECK_SPECS,
    RAW_CDRS,
    blocking_problems,
    known_user_ids,
    row_count_result,
)
from pipelines.checks import selected as selected_checks
from pipelines.preflight import fatal_setup_errors
from pipelines.resources import (
    ContactCenterResource,
    WarehouseResource,
    config_failure,
    utc_now,
)
from pipelines.snapshot_sources import (
    SNAPSHOT_SOURCES,
    SnapshotSource,
    build_snapshot_frames,
    fetch_snapshot,
)
from warehouse.lake import Lake, LakeSourceConflict

API_POOL = "contact_center_api"
CDR_GROUP = "cdrs"
SNAPSHOT_GROUP = "snapshots"
CDRS_ENDPOINT = "/api/v4/reporting/cdrs"


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


@functools.cache
def nightly_freshness() -> dg.FreshnessPolicy:
    """Fresh if materialized between the 01:00 UTC schedule and 03:00 UTC each day.

    One shared (immutable) policy: building a cron policy validates its schedule, about 40 ms
    each, which summed to a second of every code-location load and `cdrhouse` command."""
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


BLOCKING_CHECK_FAILED = "BlockingCheckFailed"


def day_not_whole(partition: str, problems: list[str], lake: Lake, fetched: bool) -> dg.Failure:
    """The step's failure when a blocking check failed: what was wrong, and that nothing of the
    day was published. Not retried: the API would send the same records (the nightly lookback
    fetches the day again)."""
    kept = "every published partition of the day is kept as it was"
    if fetched:
        where = lake.partition_url(RAW_CDRS, f"date={partition}", rejected=True)
        kept += f"; the records received are in {where}"
    return dg.Failure(
        description=f"day {partition} not published: {'; '.join(problems)} ({kept})",
        metadata={
            "error_class": BLOCKING_CHECK_FAILED,
            "partition": partition,
            "fatal": True,
        },
        allow_retries=False,
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


def _landed(
    table: str,
    rows: int,
    preview: pl.DataFrame | None,
    timed: tuple[int, float],
    **extra: Any,
) -> dg.MaterializeResult[Any]:
    """A table's materialization: its rows, what else the step knows, the step's throughput
    (`timed`: rows the step handled, seconds) and a preview."""
    handled, seconds = timed
    return dg.MaterializeResult(
        asset_key=table,
        metadata={
            "dagster/row_count": rows,
            **extra,
            "seconds": round(seconds, 3),
            "rows_per_s": round(handled / seconds, 1) if seconds > 0 else 0.0,
            "preview": dg.MetadataValue.md(
                markdown_preview(preview) if preview is not None else "_(empty)_"
            ),
        },
    )


def build_cdr_assets(
    partitions_def: dg.PartitionsDefinition[str],
    retry_policy: dg.RetryPolicy,
) -> list[dg.AssetsDefinition]:
    """`raw_cdrs` and the typed CDR tables of one day: one step that fetches, decodes once,
    writes every table and computes every CDR check (`pipelines.cdr_day`)."""
    backfill = dg.BackfillPolicy.multi_run(max_partitions_per_run=1)
    specs = [
        dg.AssetSpec(
            RAW_CDRS,
            kinds={"parquet", "api"},
            freshness_policy=nightly_freshness(),
            description=RAW_DESCRIPTION,
            skippable=True,
        ),
        *(
            dg.AssetSpec(
                table,
                deps=[RAW_CDRS],
                kinds={"parquet", "polars"},
                freshness_policy=nightly_freshness(),
                description=_NORMALIZED_DESCRIPTIONS[table],
                skippable=True,
            )
            for table in NORMALIZED_TABLES
        ),
    ]

    @dg.multi_asset(
        name=RAW_CDRS,
        group_name=CDR_GROUP,
        partitions_def=partitions_def,
        backfill_policy=backfill,
        pool=API_POOL,
        retry_policy=retry_policy,
        specs=specs,
        check_specs=list(CDR_CHECK_SPECS),
        can_subset=True,
    )
    @fatal_setup_errors
    def raw_cdrs(
        context: dg.AssetExecutionContext,
        contact_center: ContactCenterResource,
        warehouse: WarehouseResource,
    ) -> Iterator[dg.MaterializeResult[Any] | dg.AssetCheckResult]:
        """One UTC day (`started_at` in [day, day+1)): the records exactly as the API sent them,
        and the typed tables projected from them, each replaced atomically, and only when every
        blocking check passes; otherwise nothing of the day is published and the step fails
        naming what was wrong, so the aggregates and the views are not refreshed either.

        Selected without `raw_cdrs`, the typed tables are normalized again from the lake's
        `raw_cdrs` partition, without calling the API, by the same rule."""
        partition = context.partition_key
        key = f"date={partition}"
        selected = {k.to_user_string() for k in context.selected_asset_keys}
        tables = [t for t in NORMALIZED_TABLES if t in selected]
        lake = warehouse.lake()
        begun = time.perf_counter()
        fetched = RAW_CDRS in selected
        if fetched:
            try:
                stats, checks = land_day(contact_center, lake, context.log, partition, tables)
            except ContactCenterError as exc:
                raise api_failure(exc, partition=partition) from exc
            except LakeSourceConflict as exc:
                raise config_failure(str(exc), "LakeSourceConflict") from None
            api_total: int | None = stats.api_total
        else:
            try:
                stats, checks = renormalize_day(lake, partition, tables)
            except NoRawPartition as exc:
                raise config_failure(str(exc), "NoRawPartition") from None
            api_total = None
        seconds = time.perf_counter() - begun
        whole = checks.whole(stats.rows, api_total)
        results: list[dg.AssetCheckResult] = []
        if fetched:
            results.append(row_count_result(stats.rows, stats.api_total))
        if tables or not whole:
            # The received ids: in the raw records, rejected when the day was not whole.
            def received_ids() -> Iterator[pl.Series]:
                rejected = fetched and not whole
                for batch in lake.iter_batches(RAW_CDRS, key, columns=["id"], rejected=rejected):
                    yield batch["id"]

            results += checks.results(known_user_ids(lake, checks.user_ids), received_ids)
        if whole:
            if fetched:
                yield _landed(
                    RAW_CDRS,
                    stats.rows,
                    stats.previews.get(RAW_CDRS),
                    (stats.rows, seconds),
                    api_total=stats.api_total,
                    pages=stats.pages,
                    native_pages=stats.native_pages,
                    sub_windows=len(stats.windows),
                    bytes=stats.bytes,
                )
            for table in tables:
                yield _landed(
                    table,
                    stats.counts.get(table, 0),
                    stats.previews.get(table),
                    (stats.rows, seconds),
                )
        yield from selected_checks(results, context.selected_asset_check_keys)
        if not whole:
            raise day_not_whole(partition, blocking_problems(results), lake, fetched)

    return [raw_cdrs]


RAW_DESCRIPTION = (
    "Raw CDRs of one UTC day (`started_at` in [day, day+1)), exactly as the API sent them."
)
_NORMALIZED_DESCRIPTIONS: Mapping[str, str] = {
    "cdrs": "The CDR fact table: common fields, from/to and user flattened, exact cost.",
    "cdr_calls": "Call CDRs: every field of the spec's call data as a typed column.",
    "cdr_conversations": "Conversation CDRs: channel, flow, durations and SLA values/status.",
    "cdr_sms": "SMS CDRs: sent, segments, message, canned message, related call.",
    "cdr_hlr_lookups": "HLR lookup CDRs: reachable, roaming, related call.",
    "cdr_quarantine": "Raw records that could not be normalized, with the reason; should be empty.",
}


# --- Snapshot assets -------------------------------------------------------------------------


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
    @fatal_setup_errors
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
            fetched = asyncio.run(fetch_snapshot(source, contact_center, context.log))
        except ContactCenterError as exc:
            raise api_failure(exc, partition=None) from exc
        frames = build_snapshot_frames(source.name, fetched, taken_at)
        seconds = time.perf_counter() - begun
        key = f"snapshot_date={taken_at.date().isoformat()}"
        for table in source.tables:
            lake.write(table, key, frames[table], source=source_id)
        warehouse.refresh_views()
        for table in source.tables:
            frame = frames[table]
            yield _landed(
                table,
                frame.height,
                frame,
                (frame.height, seconds),
                api_records=fetched.records,
                api_requests=fetched.requests,
                snapshot_at=iso_ms(taken_at),
                partition=key,
            )

    return snapshot


def build_snapshot_assets(retry_policy: dg.RetryPolicy) -> list[dg.AssetsDefinition]:
    """One multi-asset per API resource family; each writes `snapshot_date=<today UTC>`."""
    return [_snapshot_asset(source, retry_policy) for source in SNAPSHOT_SOURCES]
