"""The catalog metadata of the table assets: columns, lineage, table name, location, owners."""

from __future__ import annotations

import re
from pathlib import Path

import dagster as dg
import duckdb
import pytest

from models.tables import TABLES
from pipelines.catalog import LINEAGE_TABLES, OwnersError, parse_owners
from pipelines.definitions import defs_from_env
from tests.support.clock import SessionClock
from tests.support.served import sandbox_defs
from warehouse.dictionary import DOC_PATH
from warehouse.lake import ACCOUNT_COLUMN

LAKE = "s3://acme-data/cdrhouse/lake"


# Days of sandbox data before the session's today (the lineage test lands yesterday).
HISTORY_DAYS = 6


def _defs(clock: SessionClock, data_dir: Path, lake_uri: str | None = None) -> dg.Definitions:
    return sandbox_defs(data_dir, clock.days_ago(HISTORY_DAYS), 400, lake_uri=lake_uri)


def _dictionary_rows() -> dict[str, dict[str, tuple[str, str]]]:
    """Column -> (type, meaning) per section of docs/warehouse.md, the checked-in dictionary."""
    sections: dict[str, dict[str, tuple[str, str]]] = {}
    current: dict[str, tuple[str, str]] = {}
    for line in DOC_PATH.read_text().splitlines():
        if heading := re.match(r"^### `(\w+)`", line):
            current = sections.setdefault(heading.group(1), {})
        elif row := re.match(r"^\| `(\w+)` \| ([^|]+) \| (.*) \|$", line):
            current[row.group(1)] = (row.group(2).strip(), row.group(3).strip())
    return sections


def test_every_table_asset_carries_its_described_columns_name_and_location(
    tmp_path: Path, clock: SessionClock
) -> None:
    graph = _defs(clock, tmp_path, LAKE).resolve_asset_graph()
    dictionary = _dictionary_rows()
    tables = [
        key for key in graph.get_all_asset_keys() if key.to_user_string() != "contact_center_report"
    ]
    assert len(tables) == 33  # + the three 15-minute KPI aggregates
    for key in tables:
        name = key.to_user_string()
        metadata = graph.get(key).metadata
        schema = metadata["dagster/column_schema"]
        assert isinstance(schema, dg.TableSchema), name
        columns = {c.name: (c.type, c.description) for c in schema.columns}
        if name in TABLES:
            # account_id (the view's, from the lake path), then every column of the spec, in
            # order, with the dictionary's type and meaning.
            expected = [ACCOUNT_COLUMN, *TABLES[name].column_names]
            assert [c.name for c in schema.columns] == expected, name
            assert columns == dictionary[name], name
        else:  # agg_X: its own section (the KPI intervals), else rpt_X minus its current name
            view = dictionary.get(name) or dictionary[name.replace("agg_", "rpt_")]
            assert set(columns) == set(view) - {"current_name"}, name
            for column, (ctype, meaning) in columns.items():
                assert (ctype.replace(" ", ""), meaning) == (
                    view[column][0].replace(" ", ""),
                    view[column][1],
                ), (name, column)
        assert all(description for _, description in columns.values()), name
        snapshot = name in TABLES and TABLES[name].kind == "snapshot"
        view_name = f"{name}_snapshots" if snapshot and name != "balance_snapshots" else name
        assert metadata["dagster/table_name"] == f"warehouse.main.{view_name}", name
        assert metadata["dagster/uri"] == f"{LAKE}/{name}", name
        assert graph.get(key).owners == ["team:cdrhouse"], name


def test_typed_tables_have_column_lineage_to_fields_of_real_raw_records(
    tmp_path: Path, clock: SessionClock
) -> None:
    defs = _defs(clock, tmp_path)
    graph = defs.resolve_asset_graph()
    lineage_paths: dict[str, set[str]] = {}
    for name in LINEAGE_TABLES:
        lineage = graph.get(dg.AssetKey(name)).metadata["dagster/column_lineage"]
        assert isinstance(lineage, dg.TableColumnLineage)
        assert set(lineage.deps_by_column) == set(TABLES[name].column_names), name
        for column, deps in lineage.deps_by_column.items():
            (dep,) = deps
            assert dep.asset_key == dg.AssetKey("raw_cdrs"), (name, column)
            lineage_paths.setdefault(dep.column_name, set()).add(f"{name}.{column}")
    raw_columns = set(TABLES["raw_cdrs"].column_names)
    paths = {p for p in lineage_paths if p not in raw_columns}
    assert all(p.startswith("record.") for p in paths), paths

    # Land one real sandbox day; each path must be a field of some raw record.
    with dg.DagsterInstance.ephemeral() as instance:
        result = defs.resolve_job_def("cdr_daily").execute_in_process(
            partition_key=clock.days_ago(1).isoformat(), instance=instance
        )
    assert result.success
    glob = str(tmp_path / "lake" / "raw_cdrs" / "*" / "*.parquet")
    found: dict[str, int] = {}
    for path in sorted(paths):
        relation = duckdb.sql(
            f"SELECT count(*) FROM read_parquet('{glob}') "
            f"WHERE json_exists(record, '$.{path.removeprefix('record.')}')"
        )
        assert relation is not None, path
        for (count,) in relation.fetchall():
            found[path] = count
    missing = sorted(p for p, n in found.items() if n == 0)
    assert not missing, f"lineage names fields no raw record has: {missing}"


def test_owners_come_from_cdrhouse_owners(tmp_path: Path) -> None:
    env = {
        "CDRHOUSE_DATA_DIR": str(tmp_path),
        "CDRHOUSE_OWNERS": "team:contact-center-data, lead@example.com",
    }
    graph = defs_from_env(env).resolve_asset_graph()
    for key in graph.get_all_asset_keys():
        assert graph.get(key).owners == ["team:contact-center-data", "lead@example.com"]
    assert parse_owners(" ") == ("team:cdrhouse",)
    with pytest.raises(OwnersError, match="CDRHOUSE_OWNERS: data team is not an owner"):
        parse_owners("data team")
