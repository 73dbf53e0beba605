"""The table specs are consistent: unique names, keys exist, schemas convert."""

from __future__ import annotations

import polars as pl
import pytest

from models.tables import ALL_TABLES, CDR_TABLES, SNAPSHOT_TABLES, TABLES, TYPE_TABLES
from tests.support.keys import CDR_ASSETS, SNAPSHOT_ASSETS

# Every asset of the CDR and snapshot groups is a lake table.
REQUIRED = CDR_ASSETS | SNAPSHOT_ASSETS


def test_every_lake_table_has_a_spec() -> None:
    assert set(TABLES) == REQUIRED
    assert len(TABLES) == len(ALL_TABLES)


@pytest.mark.parametrize("spec", ALL_TABLES, ids=lambda s: s.name)
def test_spec_is_consistent(spec) -> None:
    names = spec.column_names
    assert len(names) == len(set(names)), "duplicate column"
    assert set(spec.primary_key) <= set(names)
    assert spec.partition_key in names
    assert all(c.description for c in spec.columns)
    # Files never store the partition column (it lives in the hive path).
    arrow = spec.arrow_schema()
    assert spec.partition_key not in arrow.names
    assert arrow.names == [n for n in names if n != spec.partition_key]
    assert spec.empty().schema == spec.polars_schema()


def test_partition_keys_and_snapshot_columns() -> None:
    assert all(s.partition_key == "date" for s in CDR_TABLES)
    for spec in SNAPSHOT_TABLES:
        assert spec.partition_key == "snapshot_date"
        assert {"snapshot_date", "snapshot_at"} <= set(spec.column_names)


def test_money_is_decimal_and_timestamps_are_utc_ms() -> None:
    assert isinstance(TABLES["cdrs"].polars_schema()["cost"], pl.Decimal)
    for spec in TYPE_TABLES.values():
        assert isinstance(spec.polars_schema()["cost"], pl.Decimal)
    for p in ("activation_fee", "monthly_fee", "partial_month_fee", "price_per_min"):
        assert isinstance(TABLES["numbers"].polars_schema()[p], pl.Decimal)
    assert TABLES["cdrs"].polars_schema()["started_at"] == pl.Datetime("ms", "UTC")
    assert TABLES["users"].polars_schema()["deleted_at"] == pl.Datetime("ms", "UTC")
