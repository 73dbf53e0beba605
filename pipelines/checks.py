"""Asset checks: every reconciliation of the pipeline, visible per partition in the Dagster UI.

CDR checks run per daily partition on what the lake holds for that day. The row-count check
against the API's `metadata.total` lives inside `raw_cdrs` itself (it needs the totals seen
during the fetch) and is blocking; these run after normalization. Snapshot checks read the
latest snapshot of each table.
"""

from collections.abc import Sequence
from decimal import Decimal, InvalidOperation
from typing import Any

import dagster as dg
import polars as pl

from models.tables import TYPE_TABLES
from pipelines.assets import RAW_CDRS, read_partition
from pipelines.partitions import partition_window
from pipelines.resources import WarehouseResource

# Per-type table name -> the CDR `type` value whose rows it holds.
TABLE_TYPES: dict[str, str] = {spec.name: kind for kind, spec in TYPE_TABLES.items()}
# Snapshot tables checked for unique ids (their `id` is the natural key), and the asset each
# table belongs to is simply the table name.
SNAPSHOT_ID_TABLES: tuple[str, ...] = (
    "users",
    "queues",
    "skills",
    "teams",
    "campaigns",
    "numbers",
    "caller_id_groups",
)
SAMPLE = 5


def _sample(values: pl.Series) -> list[str]:
    return [str(v) for v in values.head(SAMPLE).to_list()]


def _day(context: dg.AssetCheckExecutionContext) -> str:
    return f"date={context.partition_key}"


def build_cdr_checks(
    partitions_def: dg.PartitionsDefinition[str],
) -> list[dg.AssetChecksDefinition]:
    """Per-partition checks on the normalized CDR tables."""

    @dg.asset_check(
        asset="cdrs",
        partitions_def=partitions_def,
        description="CDR ids are unique within the day (re-runs must not duplicate).",
    )
    def cdrs_ids_unique(
        context: dg.AssetCheckExecutionContext, warehouse: WarehouseResource
    ) -> dg.AssetCheckResult:
        ids = read_partition(warehouse, "cdrs", _day(context), columns=["id"])["id"]
        dupes = ids.filter(ids.is_duplicated()).unique()
        return dg.AssetCheckResult(
            passed=dupes.len() == 0,
            metadata={"rows": ids.len(), "duplicate_ids": dupes.len(), "sample": _sample(dupes)},
        )

    @dg.asset_check(
        asset="cdrs",
        partitions_def=partitions_def,
        description="Every started_at lies inside the partition's [day, day+1) UTC window.",
    )
    def cdrs_started_at_in_window(
        context: dg.AssetCheckExecutionContext, warehouse: WarehouseResource
    ) -> dg.AssetCheckResult:
        start, end = partition_window(context.partition_key)
        df = read_partition(warehouse, "cdrs", _day(context), columns=["id", "started_at"])
        outside = df.filter(
            pl.col("started_at").is_null()
            | (pl.col("started_at") < start)
            | (pl.col("started_at") >= end)
        )
        return dg.AssetCheckResult(
            passed=outside.height == 0,
            metadata={
                "window_start": start.isoformat(),
                "window_end": end.isoformat(),
                "outside": outside.height,
                "sample": _sample(outside["id"]),
            },
        )

    @dg.asset_check(
        asset="cdrs",
        partitions_def=partitions_def,
        description="No nulls in the keys (id, type, started_at) of cdrs and the type tables.",
    )
    def cdrs_keys_not_null(
        context: dg.AssetCheckExecutionContext, warehouse: WarehouseResource
    ) -> dg.AssetCheckResult:
        nulls: dict[str, int] = {}
        cdrs = read_partition(
            warehouse, "cdrs", _day(context), columns=["id", "type", "started_at"]
        )
        for column in cdrs.columns:
            nulls[f"cdrs.{column}"] = cdrs[column].null_count()
        for table in TABLE_TYPES:
            ids = read_partition(warehouse, table, _day(context), columns=["id"])
            nulls[f"{table}.id"] = ids["id"].null_count()
        return dg.AssetCheckResult(
            passed=not any(nulls.values()),
            metadata={"null_counts": nulls},
        )

    @dg.asset_check(
        asset="cdrs",
        partitions_def=partitions_def,
        additional_deps=list(TABLE_TYPES),
        description="Each per-type table holds exactly the cdrs rows of its type.",
    )
    def cdrs_type_tables_add_up(
        context: dg.AssetCheckExecutionContext, warehouse: WarehouseResource
    ) -> dg.AssetCheckResult:
        cdrs = read_partition(warehouse, "cdrs", _day(context), columns=["id", "type"])
        by_type = dict(cdrs.group_by("type").len().iter_rows())
        compare: dict[str, dict[str, Any]] = {}
        for table, kind in TABLE_TYPES.items():
            rows = read_partition(warehouse, table, _day(context), columns=["id"]).height
            compare[table] = {"rows": rows, "cdrs_of_type": int(by_type.get(kind, 0))}
        unknown = cdrs.filter(
            ~pl.col("type").is_in(pl.Series(list(TABLE_TYPES.values())).implode())
        ).height
        typed = sum(v["rows"] for v in compare.values())
        return dg.AssetCheckResult(
            passed=all(v["rows"] == v["cdrs_of_type"] for v in compare.values())
            and typed + unknown == cdrs.height,
            metadata={
                "cdrs": cdrs.height,
                "typed_rows": typed,
                "unknown_type_rows": unknown,
                "by_table": compare,
            },
        )

    @dg.asset_check(
        asset="cdrs",
        partitions_def=partitions_def,
        additional_deps=["users"],
        description="Every CDR user id is in the users dimension (active or deleted).",
    )
    def cdrs_users_known(
        context: dg.AssetCheckExecutionContext, warehouse: WarehouseResource
    ) -> dg.AssetCheckResult:
        users = known_user_ids(warehouse)
        cdr_users = (
            read_partition(warehouse, "cdrs", _day(context), columns=["user_id"])["user_id"]
            .drop_nulls()
            .unique()
        )
        missing = cdr_users.filter(~cdr_users.is_in(users.implode()))
        return dg.AssetCheckResult(
            passed=missing.len() == 0,
            # A warning: the users snapshot may simply be older than the newest agents.
            severity=dg.AssetCheckSeverity.WARN,
            metadata={
                "cdr_users": cdr_users.len(),
                "known_users": users.len(),
                "unknown_users": missing.len(),
                "sample": _sample(missing),
            },
        )

    @dg.asset_check(
        asset="cdr_quarantine",
        partitions_def=partitions_def,
        additional_deps=[RAW_CDRS, "cdrs"],
        description="No record was quarantined, and raw = cdrs + quarantine rows (none dropped).",
    )
    def cdr_quarantine_empty(
        context: dg.AssetCheckExecutionContext, warehouse: WarehouseResource
    ) -> dg.AssetCheckResult:
        quarantined = read_partition(
            warehouse, "cdr_quarantine", _day(context), columns=["id", "reason"]
        )
        raw = read_partition(warehouse, RAW_CDRS, _day(context), columns=["id"]).height
        cdrs = read_partition(warehouse, "cdrs", _day(context), columns=["id"]).height
        reasons = dict(quarantined.group_by("reason").len().head(SAMPLE).iter_rows())
        return dg.AssetCheckResult(
            passed=quarantined.height == 0 and raw == cdrs + quarantined.height,
            metadata={
                "raw_rows": raw,
                "cdrs_rows": cdrs,
                "quarantined": quarantined.height,
                "reasons": {str(k): int(v) for k, v in reasons.items()},
                "sample": _sample(quarantined["id"]),
            },
        )

    return [
        cdrs_ids_unique,
        cdrs_started_at_in_window,
        cdrs_keys_not_null,
        cdrs_type_tables_add_up,
        cdrs_users_known,
        cdr_quarantine_empty,
    ]


def known_user_ids(warehouse: WarehouseResource) -> pl.Series:
    """Every user id seen in any users snapshot (active or deleted)."""
    lake = warehouse.lake()
    ids = [
        read_partition(warehouse, "users", key, columns=["id"])["id"]
        for key in lake.partitions("users")
    ]
    return pl.concat(ids).unique() if ids else pl.Series("id", [], dtype=pl.String)


def latest_snapshot(
    warehouse: WarehouseResource, table: str, columns: Sequence[str]
) -> pl.DataFrame:
    """The newest snapshot of a table (empty frame when none was taken yet)."""
    keys = warehouse.lake().partitions(table)
    return read_partition(
        warehouse, table, keys[-1] if keys else "snapshot_date=none", columns=columns
    )


def _ids_check(table: str) -> dg.AssetChecksDefinition:
    @dg.asset_check(
        asset=table,
        name=f"{table}_snapshot_valid",
        description=f"The latest {table} snapshot is non-empty and its ids are unique.",
    )
    def check(warehouse: WarehouseResource) -> dg.AssetCheckResult:
        ids = latest_snapshot(warehouse, table, ["id"])["id"]
        dupes = ids.filter(ids.is_duplicated()).unique()
        return dg.AssetCheckResult(
            passed=ids.len() > 0 and dupes.len() == 0,
            metadata={"rows": ids.len(), "duplicate_ids": dupes.len(), "sample": _sample(dupes)},
        )

    return check


@dg.asset_check(
    asset="balance_snapshots",
    description="The latest balance snapshot has one row whose amount is a valid decimal.",
)
def balance_is_decimal(warehouse: WarehouseResource) -> dg.AssetCheckResult:
    df = latest_snapshot(warehouse, "balance_snapshots", ["amount", "amount_raw"])
    raw = df["amount_raw"].to_list()
    valid = True
    for value in raw:
        try:
            valid = valid and value is not None and Decimal(value).is_finite()
        except InvalidOperation:
            valid = False
    return dg.AssetCheckResult(
        passed=df.height == 1 and valid and df["amount"].null_count() == 0,
        metadata={"rows": df.height, "amount_raw": [str(v) for v in raw]},
    )


def build_snapshot_checks() -> list[dg.AssetChecksDefinition]:
    """Non-empty + unique ids for every dimension snapshot, and a valid decimal balance."""
    return [*(_ids_check(table) for table in SNAPSHOT_ID_TABLES), balance_is_decimal]
