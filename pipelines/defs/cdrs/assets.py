"""The CDR assets (daily partitions): one step per day, `raw_cdrs`.

It pulls the day through the connector's parallel sub-window fetch, decodes each record once, and
writes `raw_cdrs` and every typed CDR table as atomic lake partitions, computing the CDR checks as
it writes (`pipelines.cdr_day`); memory stays flat in the size of the day. Callers' numbers land
as the account's `ContactCenterResource.privacy()` says (README "Callers' privacy").
"""

import time
from collections.abc import Iterator, Mapping
from typing import Any

import dagster as dg
import polars as pl

from connectors.contact_center.errors import ContactCenterError
from pipelines.cdr_day import NORMALIZED_TABLES, NoRawPartition, land_day, renormalize_day
from pipelines.checks import (
    CDR_CHECK_SPECS,
    RAW_CDRS,
    blocking_problems,
    known_user_ids,
    row_count_result,
)
from pipelines.checks import selected as selected_checks
from pipelines.names import CDR_GROUP
from pipelines.preflight import fatal_setup_errors
from pipelines.resources import ContactCenterResource, WarehouseResource, config_failure
from pipelines.scope import DEFAULT_SCOPE, AccountScope
from pipelines.steps import api_failure, landed, nightly_freshness, run_max_shrink
from warehouse.lake import Lake

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


def build_cdr_assets(
    partitions_def: dg.PartitionsDefinition[str],
    retry_policy: dg.RetryPolicy,
    scope: AccountScope = DEFAULT_SCOPE,
) -> list[dg.AssetsDefinition]:
    """`raw_cdrs` and the typed CDR tables of one day of one account (`scope`): one step that
    fetches, decodes once, writes every table and computes every CDR check
    (`pipelines.cdr_day`), in the account's pool, with the account's API resource."""
    backfill = dg.BackfillPolicy.multi_run(max_partitions_per_run=1)
    specs = [
        dg.AssetSpec(
            scope.key(RAW_CDRS),
            kinds={"parquet", "api"},
            freshness_policy=nightly_freshness(),
            description=RAW_DESCRIPTION,
            skippable=True,
        ),
        *(
            dg.AssetSpec(
                scope.key(table),
                deps=[scope.key(RAW_CDRS)],
                kinds={"parquet", "polars"},
                freshness_policy=nightly_freshness(),
                description=_NORMALIZED_DESCRIPTIONS[table],
                skippable=True,
            )
            for table in NORMALIZED_TABLES
        ),
    ]

    @dg.multi_asset(
        name=scope.op(RAW_CDRS),
        group_name=scope.named(CDR_GROUP),
        partitions_def=partitions_def,
        backfill_policy=backfill,
        pool=scope.pool,
        retry_policy=retry_policy,
        specs=specs,
        check_specs=[s._replace(asset_key=scope.key(s.asset_key)) for s in CDR_CHECK_SPECS],
        can_subset=True,
        required_resource_keys={scope.resource_key, "warehouse"},
    )
    @fatal_setup_errors
    def raw_cdrs(
        context: dg.AssetExecutionContext,
    ) -> Iterator[dg.MaterializeResult[Any] | dg.AssetCheckResult]:
        """One UTC day (`started_at` in [day, day+1)): the records exactly as the API sent them,
        and the typed tables projected from them, each replaced atomically, and only when every
        blocking check passes; otherwise nothing of the day is published and the step fails
        naming what was wrong, so the aggregates and the views are not refreshed either.

        Selected without `raw_cdrs`, the typed tables are normalized again from the lake's
        `raw_cdrs` partition, without calling the API, by the same rule."""
        contact_center: ContactCenterResource = getattr(context.resources, scope.resource_key)
        warehouse: WarehouseResource = context.resources.warehouse
        partition = context.partition_key
        key = f"date={partition}"
        selected = {k.path[-1] for k in context.selected_asset_keys}
        tables = [t for t in NORMALIZED_TABLES if t in selected]
        lake = warehouse.lake(scope.account_id)
        begun = time.perf_counter()
        fetched = RAW_CDRS in selected
        max_shrink = run_max_shrink(context, warehouse)
        if fetched:
            contact_center.settings()  # no source: fail now, naming it first
            try:
                stats, checks = land_day(
                    contact_center,
                    lake,
                    context.log,
                    partition,
                    tables,
                    privacy=contact_center.privacy(),
                    max_shrink=max_shrink,
                )
            except ContactCenterError as exc:
                raise api_failure(exc, partition=partition, api=contact_center) from exc
            api_total: int | None = stats.api_total
        else:
            # No API call, but the typed tables land: the same rule for callers' numbers.
            privacy = contact_center.privacy()
            try:
                stats, checks = renormalize_day(
                    lake, partition, tables, privacy=privacy, max_shrink=max_shrink, log=context.log
                )
            except NoRawPartition as exc:
                raise config_failure(str(exc), "NoRawPartition") from None
            api_total = None
        seconds = time.perf_counter() - begun
        whole = checks.whole(stats.rows, api_total)
        if whole:
            warehouse.record_zone(lake, scope.account_id)
        results: list[dg.AssetCheckResult] = []
        if fetched:
            results.append(row_count_result(stats.rows, stats.api_total))
        results.append(checks.shrink_result(stats.rows))
        smaller = checks.smaller(stats.rows)
        if whole and smaller is not None:
            context.log.warning(smaller)  # replaced by a smaller day: said, not only allowed
        if tables or not whole:
            # The received ids: in the raw records, rejected when the day was not whole.
            def received_ids() -> Iterator[pl.Series]:
                rejected = fetched and not whole
                for batch in lake.iter_batches(RAW_CDRS, key, columns=["id"], rejected=rejected):
                    yield batch["id"]

            results += checks.results(known_user_ids(lake, checks.user_ids), received_ids)
        if whole:
            if fetched:
                yield landed(
                    scope.key(RAW_CDRS),
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
                yield landed(
                    scope.key(table),
                    stats.counts.get(table, 0),
                    stats.previews.get(table),
                    (stats.rows, seconds),
                )
        results = [scope.rekeyed(r) for r in results]
        yield from selected_checks(results, context.selected_asset_check_keys)
        if not whole:
            raise day_not_whole(partition, blocking_problems(results), lake, fetched)

    return [raw_cdrs]


RAW_DESCRIPTION = (
    "Raw CDRs of one UTC day (`started_at` in [day, day+1)), exactly as the API sent them, "
    "except under CDRHOUSE_PHONE_NUMBERS=token: there every from/to number and any other "
    "number in the record, and a customer's channel identifier, username and display name, "
    "are keyed tokens, and the SMS message is null (unless CDRHOUSE_SMS_BODIES=keep)."
)
_NORMALIZED_DESCRIPTIONS: Mapping[str, str] = {
    "cdrs": "The CDR fact table: common fields, from/to and user flattened, exact cost.",
    "cdr_calls": "Call CDRs: every field of the spec's call data as a typed column.",
    "cdr_conversations": "Conversation CDRs: channel, flow, durations and SLA values/status.",
    "cdr_sms": "SMS CDRs: sent, segments, message, canned message, related call.",
    "cdr_hlr_lookups": "HLR lookup CDRs: reachable, roaming, related call.",
    "cdr_quarantine": "Raw records that could not be normalized, with the reason; should be empty.",
}
