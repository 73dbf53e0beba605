"""`cdrhouse sql`'s file formats (csv, json, parquet), written a batch of rows at a time: the
command holds one batch, whatever the size of the result (`SELECT * FROM cdrs` held the whole
lake as a polars frame, and its CSV as one more string).

CSV and JSON are formatted by polars, batch by batch, to the same text a whole frame gives.
What polars cannot take or write is handed over by DuckDB as text first: a nested value in CSV
(`cdrs.tags`, `users.channels`) as its JSON, BLOB, BIT, INTERVAL and UNION values as DuckDB
prints them. Parquet is DuckDB's Arrow batches as they come, zstd-compressed."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import duckdb
    import pyarrow as pa
    from duckdb.sqltypes import DuckDBPyType

BATCH_ROWS = 50_000
ROW_GROUP_ROWS = 122_880  # 60 of DuckDB's 2,048-row vectors
# Nested types: CSV has no place for them.
_NESTED = frozenset({"list", "array", "struct", "map", "union"})
# Types polars cannot read from Arrow or write as text or JSON (a traceback before).
_AS_TEXT = frozenset({"blob", "bit", "interval", "union"})


class ExportError(ValueError):
    """The rows cannot be written in the format asked for."""


def _holds(t: DuckDBPyType, ids: frozenset[str]) -> bool:
    if t.id in ids:
        return True
    if t.id not in _NESTED:
        return False
    from duckdb.sqltypes import DuckDBPyType

    # A child is a type, or a size (ARRAY), a precision or an ENUM's values.
    return any(isinstance(c, DuckDBPyType) and _holds(c, ids) for _, c in t.children)


def prepared(rel: duckdb.DuckDBPyRelation, fmt: str) -> duckdb.DuckDBPyRelation:
    """`rel` with the columns CSV or JSON (`fmt`) cannot hold as they are turned into text by
    DuckDB; columns go by position (`SELECT a.id, b.id` has two named `id`)."""
    from warehouse.viewsql import q

    values = [
        f"to_json(#{n})::VARCHAR"
        if fmt == "csv" and t.id in _NESTED
        else f"#{n}::VARCHAR"
        if _holds(t, _AS_TEXT)
        else None
        for n, t in enumerate(rel.types, 1)
    ]
    if not any(values):
        return rel
    return rel.project(
        ", ".join(
            f"{v or f'#{n}'} AS {q(name)}"
            for n, (v, name) in enumerate(zip(values, rel.columns, strict=True), 1)
        )
    )


def text_chunks(
    rel: duckdb.DuckDBPyRelation, fmt: str, batch_rows: int = BATCH_ROWS
) -> Iterator[str]:
    """The rows of `rel` as CSV (a header line, then a line per row) or JSON (an array of
    objects, and a newline), a batch at a time: together, the text polars writes for the
    whole result at once."""
    import polars as pl
    from polars.exceptions import PanicException, PolarsError

    reader = prepared(rel, fmt).to_arrow_reader(batch_rows)
    try:
        if fmt == "json":
            # "[" goes out with the first rows: a result polars refuses prints nothing.
            opening = "["
            for batch in reader:
                body = _frame(pl, batch).write_json()[1:-1]
                if body:
                    yield opening + body
                    opening = ","
            yield "[]\n" if opening == "[" else "]\n"
            return
        header = True
        for batch in reader:
            if batch.num_rows or header:
                yield _frame(pl, batch).write_csv(include_header=header)
                header = False
        if header:  # no batch at all: the header alone
            yield _frame(pl, reader.schema.empty_table()).write_csv()
    except (PolarsError, PanicException) as exc:  # a panic: a timestamp out of polars' range
        raise ExportError(f"cannot write the rows as {fmt}: {exc}") from None


def _frame(pl: Any, batch: pa.RecordBatch | pa.Table) -> Any:
    """The batch as polars takes it: a name met again gets `_1`, `_2`, ... (polars holds
    each name once; `SELECT a.id, b.id` was refused)."""
    seen: dict[str, int] = {}
    names = []
    for name in batch.schema.names:
        count = seen.get(name, 0)
        seen[name] = count + 1
        names.append(name if not count else f"{name}_{count}")
    if names != batch.schema.names:
        batch = batch.rename_columns(names)
    return pl.DataFrame(pl.from_arrow(batch))


def write_parquet(rel: duckdb.DuckDBPyRelation, path: Path) -> None:
    """The rows of `rel` into a zstd Parquet file at `path`, in row groups of `ROW_GROUP_ROWS`
    (DuckDB hands over a batch per file it read: a row group each made a file 27x larger)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    reader = rel.to_arrow_reader(BATCH_ROWS)
    try:
        # Through a Python file: pyarrow's own opening seeks, which a FIFO cannot ("lseek
        # failed" for `--output` a named pipe).
        with (
            path.open("wb") as fh,
            pq.ParquetWriter(fh, reader.schema, compression="zstd") as writer,
        ):
            held = reader.schema.empty_table()
            for batch in reader:
                held = pa.concat_tables([held, pa.Table.from_batches([batch])])
                if held.num_rows >= ROW_GROUP_ROWS:
                    writer.write_table(held.slice(0, ROW_GROUP_ROWS))
                    held = held.slice(ROW_GROUP_ROWS)
            if held.num_rows:
                writer.write_table(held)
    except (pa.ArrowNotImplementedError, pa.ArrowInvalid) as exc:  # INTERVAL has no Parquet type
        raise ExportError(f"cannot write the rows as parquet: {exc}") from None


def write_text_file(rel: duckdb.DuckDBPyRelation, fmt: str, path: Path) -> None:
    with path.open("w", encoding="utf-8", newline="") as fh:
        for chunk in text_chunks(rel, fmt):
            fh.write(chunk)
