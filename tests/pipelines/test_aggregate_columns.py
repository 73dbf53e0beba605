"""The checked-in DuckDB types of the `agg_*` views match what DuckDB says of the SQL today."""

from __future__ import annotations

import json

from pipelines.catalog import AGGREGATE_TYPES_FILE, column_schema, describe_aggregates
from warehouse.viewsql import aggregate_names


def test_checked_in_aggregate_types_equal_duckdbs_description_of_the_views() -> None:
    # On failure: `python -m pipelines.catalog` rewrites the file from the SQL.
    checked_in = json.loads(AGGREGATE_TYPES_FILE.read_text())
    described = {agg: [list(col) for col in cols] for agg, cols in describe_aggregates().items()}
    assert checked_in == described
    assert sorted(checked_in) == sorted(aggregate_names())


def test_aggregate_column_schema_carries_types_and_meanings() -> None:
    columns = column_schema("agg_daily_volume").columns
    by_name = {c.name: c for c in columns}
    assert by_name["date"].type == "DATE"
    assert all(c.description for c in columns), [c.name for c in columns if not c.description]
