"""docs/warehouse.md is generated and up to date."""

from __future__ import annotations

from models.tables import ALL_TABLES
from warehouse.dictionary import DOC_PATH, render
from warehouse.viewsql import reporting_sql_files


def test_checked_in_dictionary_is_not_stale() -> None:
    assert DOC_PATH.read_text() == render(), "run: python -m warehouse.dictionary"


def test_dictionary_covers_every_table_view_and_column() -> None:
    text = render()
    for spec in ALL_TABLES:
        assert f"### `{spec.name}`" in text
        for col in spec.columns:
            assert f"| `{col.name}` |" in text
    for path in reporting_sql_files():
        view = path.stem.split("_", 1)[1]
        assert f"### `{view}`" in text
    assert "| `cost` | DECIMAL(38,6) |" in text
    assert "|  |" not in text  # every column has a meaning
