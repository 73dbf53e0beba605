"""What the Dagster catalog shows of each table asset: columns, lineage, name, location, owners.

Every table asset gets, as definition metadata:

* `dagster/column_schema`: every column with its DuckDB type and its meaning from the data
  dictionary (`models/tables.py` for the lake tables; the reporting views' `-- @col` lines and
  DuckDB's own types for the `agg_*` pre-aggregates), the same text as `docs/warehouse.md`;
* `dagster/table_name`: the DuckDB view that reads it, `warehouse.main.<view>`;
* `dagster/uri`: where its partitions live, `<lake uri>/<table>`;
* `dagster/column_lineage` (the typed CDR tables): the `raw_cdrs` field each column is decoded
  from, as a path into the raw `record` JSON (`record.data.durations.talk`) or a raw column,
  as the CDR field table (`models.cdr_fields`) declares it;
* owners, from `CDRHOUSE_OWNERS` (read in `definitions.py`; default `team:cdrhouse`).

The metadata is attached in `definitions.py` with `dg.map_asset_specs`, so the asset code keeps
only what it computes.
"""

from __future__ import annotations

import json
import re
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from functools import cache
from pathlib import Path

import dagster as dg

from models.cdr_fields import CDR_FIELDS, CdrFieldTable
from models.tables import CDR_QUARANTINE, RAW_CDRS, TABLES, TableSpec, cdr_table_specs
from warehouse.lake import ACCOUNT_COLUMN, LAKE_TABLE_ACCOUNT_MEANING
from warehouse.viewsql import aggregate_names, duck_type, reporting_sql_files, view_name

DEFAULT_OWNERS = ("team:cdrhouse",)
WAREHOUSE_CATALOG = "warehouse.main"  # `warehouse.duckdb` opened by path: catalog `warehouse`
_COL_RE = re.compile(r"^-- @col (\w+):\s*(.*)$", re.MULTILINE)
_OWNER_RE = re.compile(r"^(team:[\w.-]+|[^@\s,]+@[^@\s,]+\.[^@\s,]+)$")


class OwnersError(ValueError):
    """`CDRHOUSE_OWNERS` holds something Dagster would not take as an owner."""


def parse_owners(text: str | None) -> tuple[str, ...]:
    """`team:name` or email entries, comma separated; empty or unset gives the default."""
    owners = tuple(o.strip() for o in (text or "").split(",") if o.strip())
    bad = [o for o in owners if not _OWNER_RE.match(o)]
    if bad:
        raise OwnersError(
            f"CDRHOUSE_OWNERS: {', '.join(bad)} is not an owner; use team:<name> or an email, "
            "comma separated, e.g. 'team:contact-center-data,lead@example.com'"
        )
    return owners or DEFAULT_OWNERS


# --- column schemas -------------------------------------------------------------------------


def _spec_columns(spec: TableSpec) -> list[dg.TableColumn]:
    """The view's columns: `account_id` first (from the lake path), then the spec's."""
    account = dg.TableColumn(
        name=ACCOUNT_COLUMN, type="VARCHAR", description=LAKE_TABLE_ACCOUNT_MEANING
    )
    return [account] + [
        dg.TableColumn(name=c.name, type=duck_type(c.dtype), description=c.description)
        for c in spec.columns
    ]


# The `agg_*` views' DuckDB types, as `describe_aggregates()` gives them, checked in: asking
# DuckDB at import cost every process that loads the definitions ~0.25 s and ~28 MB of RSS.
# `python -m pipelines.catalog` rewrites the file; a test fails when it drifts from the SQL.
AGGREGATE_TYPES_FILE = Path(__file__).with_name("aggregate_columns.json")


def describe_aggregates() -> dict[str, list[tuple[str, str]]]:
    """Name and DuckDB type of every `agg_*` view's columns, over an empty lake."""
    import duckdb

    from warehouse.duck import create_views
    from warehouse.lake import Lake

    with tempfile.TemporaryDirectory() as tmp:
        con = duckdb.connect()
        try:
            create_views(con, Lake(str(Path(tmp) / "lake")))
            return {
                agg: [
                    (name, ctype) for name, ctype, *_ in con.execute(f"DESCRIBE {agg}").fetchall()
                ]
                for agg in aggregate_names()
            }
        finally:
            con.close()


@cache
def aggregate_columns() -> Mapping[str, tuple[dg.TableColumn, ...]]:
    """Columns of every `agg_*` view: the checked-in DuckDB types, the meanings from the
    `-- @col` lines of the reporting SQL file that defines it."""
    meanings: dict[str, dict[str, str]] = {}
    for path in reporting_sql_files():
        sql = path.read_text()
        cols = dict(_COL_RE.findall(sql))
        for agg in aggregate_names():
            if f"VIEW {agg} AS" in sql:
                meanings[agg] = cols
    types: dict[str, list[list[str]]] = json.loads(AGGREGATE_TYPES_FILE.read_text())
    return {
        agg: tuple(
            dg.TableColumn(name=name, type=ctype, description=meanings[agg].get(name))
            for name, ctype in types[agg]
        )
        for agg in aggregate_names()
    }


def column_schema(table: str, fields: CdrFieldTable = CDR_FIELDS) -> dg.TableSchema:
    """The table's columns, DuckDB types and dictionary descriptions (the CDR tables' from the
    field table `fields`)."""
    specs = {**TABLES, **_cdr_specs(fields)}
    if table in specs:
        return dg.TableSchema(columns=_spec_columns(specs[table]))
    return dg.TableSchema(columns=list(aggregate_columns()[table]))


def table_view(table: str) -> str:
    """The DuckDB view over every partition of the table."""
    return view_name(TABLES[table]) if table in TABLES else table


# --- column lineage of the typed CDR tables ---------------------------------------------------


def _cdr_specs(fields: CdrFieldTable) -> dict[str, TableSpec]:
    """The CDR tables whose columns the field table gives, and the quarantine."""
    return {**cdr_table_specs(fields), CDR_QUARANTINE.name: CDR_QUARANTINE}


def raw_field(table: str, column: str, fields: CdrFieldTable = CDR_FIELDS) -> str:
    """Where in `raw_cdrs` a typed column comes from: a raw column or a path in `record`."""
    for c in _cdr_specs(fields)[table].columns:
        if c.name == column and c.lineage is not None:
            return c.lineage
    raise KeyError(f"{table}.{column} has no lineage")


def column_lineage(
    table: str, fields: CdrFieldTable = CDR_FIELDS, prefix: Sequence[str] = ()
) -> dg.TableColumnLineage:
    raw = dg.AssetKey([*prefix, RAW_CDRS.name])
    return dg.TableColumnLineage(
        deps_by_column={
            c.name: [dg.TableColumnDep(asset_key=raw, column_name=raw_field(table, c.name, fields))]
            for c in _cdr_specs(fields)[table].columns
        }
    )


LINEAGE_TABLES = frozenset(_cdr_specs(CDR_FIELDS))


# --- attaching it ------------------------------------------------------------------------------


def catalog_metadata(
    table: str, lake_uri: str, fields: CdrFieldTable = CDR_FIELDS, prefix: Sequence[str] = ()
) -> dict[str, object]:
    """`prefix`: the account's key prefix (`pipelines.scope`): () for `default`, whose tables
    are at the lake root, `(id,)` for an account whose sub-lake is `<root>/account_id=<id>`."""
    where = lake_uri.rstrip("/") + "".join(f"/account_id={p}" for p in prefix)
    metadata: dict[str, object] = {
        "dagster/column_schema": column_schema(table, fields),
        "dagster/table_name": f"{WAREHOUSE_CATALOG}.{table_view(table)}",
        "dagster/uri": f"{where}/{table}",
    }
    if table in LINEAGE_TABLES:
        metadata["dagster/column_lineage"] = column_lineage(table, fields, prefix)
    return metadata


def is_table(name: str) -> bool:
    return name in TABLES or name in aggregate_names()


def with_catalog(
    assets: Sequence[dg.AssetsDefinition],
    lake_uri: str,
    owners: Iterable[str],
    prefix: Sequence[str] = (),
) -> list[dg.AssetsDefinition]:
    """The same assets, each table asset carrying its catalog metadata, all with `owners`;
    `prefix` is the account's key prefix (its tables are named by the key's last part)."""
    team = list(owners)

    def add(spec: dg.AssetSpec) -> dg.AssetSpec:
        name = spec.key.path[-1] if list(spec.key.path[:-1]) == list(prefix) else ""
        extra = catalog_metadata(name, lake_uri, prefix=prefix) if is_table(name) else {}
        return spec.replace_attributes(metadata={**spec.metadata, **extra}, owners=team)

    return list(dg.map_asset_specs(add, assets))


if __name__ == "__main__":
    # One line per view, so a change of the SQL shows as a one-line diff.
    rows = [f"  {json.dumps(a)}: {json.dumps(cols)}" for a, cols in describe_aggregates().items()]
    AGGREGATE_TYPES_FILE.write_text("{\n" + ",\n".join(rows) + "\n}\n")
    print(f"wrote {AGGREGATE_TYPES_FILE}")
