"""The snapshot checks: each reads the latest snapshot of its table."""

from collections.abc import Sequence
from decimal import Decimal, InvalidOperation

import dagster as dg
import polars as pl

from models.tables import TABLES
from pipelines.checks import id_sample
from pipelines.resources import WarehouseResource
from pipelines.scope import DEFAULT_SCOPE, AccountScope
from warehouse.lake import DEFAULT_ACCOUNT

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


def latest_snapshot(
    warehouse: WarehouseResource,
    table: str,
    columns: Sequence[str],
    account_id: str = DEFAULT_ACCOUNT,
) -> pl.DataFrame:
    """The newest snapshot of an account's table (empty frame when none was taken yet)."""
    lake = warehouse.lake(account_id)
    keys = lake.partitions(table)
    frames = list(lake.iter_batches(table, keys[-1], columns=columns)) if keys else []
    if frames:
        return pl.concat(frames)
    spec = TABLES[table].file_schema()
    return pl.DataFrame(schema={c: spec[c] for c in columns})


def _ids_check(table: str, scope: AccountScope) -> dg.AssetChecksDefinition:
    @dg.asset_check(
        asset=scope.key(table),
        name=f"{table}_snapshot_valid",
        description=f"The latest {table} snapshot is non-empty and its ids are unique.",
    )
    def check(warehouse: WarehouseResource) -> dg.AssetCheckResult:
        ids = latest_snapshot(warehouse, table, ["id"], scope.account_id)["id"]
        dupes = ids.filter(ids.is_duplicated()).unique()
        return dg.AssetCheckResult(
            passed=ids.len() > 0 and dupes.len() == 0,
            metadata={"rows": ids.len(), "duplicate_ids": dupes.len(), "sample": id_sample(dupes)},
        )

    return check


def _balance_check(scope: AccountScope) -> dg.AssetChecksDefinition:
    @dg.asset_check(
        asset=scope.key("balance_snapshots"),
        description="The latest balance snapshot has one row whose amount is a valid decimal.",
    )
    def balance_is_decimal(warehouse: WarehouseResource) -> dg.AssetCheckResult:
        df = latest_snapshot(
            warehouse, "balance_snapshots", ["amount", "amount_raw"], scope.account_id
        )
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

    return balance_is_decimal


def build_snapshot_checks(
    scope: AccountScope = DEFAULT_SCOPE,
) -> list[dg.AssetChecksDefinition]:
    """Non-empty + unique ids for every dimension snapshot of the account, and a valid decimal
    balance."""
    return [*(_ids_check(table, scope) for table in SNAPSHOT_ID_TABLES), _balance_check(scope)]
