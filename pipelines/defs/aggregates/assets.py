"""The per-day reporting aggregates (`agg_*`) as assets, partitioned like the CDR days.

Each `agg_*` view of `warehouse/sql` groups by date, so one day of the CDR tables gives exactly
that day's rows: the step computes them from that day's partitions alone and replaces the day's
aggregate partitions, so its cost does not grow with the days the lake holds. It is the last
step of a CDR run, and it refreshes the DuckDB views for the whole run (only when they would
change: new partitions of a known table need none).
"""

from collections.abc import Iterator, Sequence
from typing import Any

import dagster as dg
import pyarrow as pa

from pipelines.mapping_check import CALL_AGG, mapping_check_result, mapping_check_spec
from pipelines.names import CDR_GROUP
from pipelines.preflight import fatal_setup_errors
from pipelines.resources import WarehouseResource
from pipelines.scope import DEFAULT_SCOPE, AccountScope
from warehouse.viewsql import AGG_SOURCES, aggregate_names

VOLUME_AGG = "agg_daily_volume"
VOLUME_CHECK = "agg_daily_volume_matches_cdrs"


def build_aggregate_assets(
    partitions_def: dg.PartitionsDefinition[str],
    retry_policy: dg.RetryPolicy,
    scope: AccountScope = DEFAULT_SCOPE,
) -> list[dg.AssetsDefinition]:
    """One multi-asset per account (`scope`): every `agg_*` of one day, downstream of the
    account's typed CDR tables, written to the account's lake, in the account's `cdrs` group."""
    names: Sequence[str] = aggregate_names()

    @dg.multi_asset(
        name=scope.op("reporting_aggregates"),
        group_name=scope.named(CDR_GROUP),
        partitions_def=partitions_def,
        backfill_policy=dg.BackfillPolicy.multi_run(max_partitions_per_run=1),
        retry_policy=retry_policy,
        specs=[
            dg.AssetSpec(
                scope.key(name),
                deps=[scope.key(source) for source in AGG_SOURCES],
                kinds={"parquet", "duckdb"},
                description=f"Per-day pre-aggregate behind the reporting view of `{name}`.",
            )
            for name in names
        ],
        check_specs=[
            dg.AssetCheckSpec(
                VOLUME_CHECK,
                asset=scope.key(VOLUME_AGG),
                description="The day's CDR count in agg_daily_volume equals the cdrs rows.",
            ),
            mapping_check_spec()._replace(asset_key=scope.key(CALL_AGG)),
        ],
        can_subset=True,
        required_resource_keys={"warehouse"},
    )
    @fatal_setup_errors
    def reporting_aggregates(
        context: dg.AssetExecutionContext,
    ) -> Iterator[dg.MaterializeResult[Any] | dg.AssetCheckResult]:
        """Replace the day's `agg_*` partitions, then refresh the views once for the run (unless
        its caller does after its runs: `views_in_runs`)."""
        # DuckDB only from here: loaded, it keeps ~35 MB resident, which the CDR day's step
        # (the peak of a run) does not carry: every run executes its steps in one process.
        from warehouse.duck import write_aggregates

        warehouse: WarehouseResource = context.resources.warehouse
        selected = {k.path[-1] for k in context.selected_asset_keys}
        lake = warehouse.lake(scope.account_id)
        written = write_aggregates(lake, f"date={context.partition_key}", selected)
        tables = written.tables
        warehouse.views_after_landing(context.log)
        for name, table in tables.items():
            yield dg.MaterializeResult(
                asset_key=scope.key(name), metadata={"dagster/row_count": table.num_rows}
            )
        if VOLUME_AGG in tables:
            yield scope.rekeyed(_volume_check(tables[VOLUME_AGG], written.cdrs_rows))
        if CALL_AGG in tables:
            yield scope.rekeyed(mapping_check_result(tables[CALL_AGG], warehouse.kpi()))

    return [reporting_aggregates]


def _volume_check(table: pa.Table, cdrs_rows: int) -> dg.AssetCheckResult:
    counted = int(pa.compute.sum(table["cdrs"]).as_py() or 0) if table.num_rows else 0
    return dg.AssetCheckResult(
        asset_key=VOLUME_AGG,
        check_name=VOLUME_CHECK,
        passed=counted == cdrs_rows,
        metadata={"agg_cdrs": counted, "cdrs_rows": cdrs_rows},
    )
