"""Which SQL `cdrhouse sql` runs: statements that only read, checked on DuckDB's own parse.

This is one of two layers (the other is the connection, `warehouse.duck.connect_analyst`, on
which DuckDB itself refuses files outside the lake, extensions and settings). Each statement
DuckDB's parser finds in the text must be one of:

* a query (SELECT, WITH, FROM-first, VALUES, TABLE, DESCRIBE, SHOW, SUMMARIZE): its syntax tree
  (`json_serialize_sql`) may hold only query nodes, so a data-modifying or COPY body inside a
  WITH is refused, and only table functions that read (`read_*`, `glob`, `range`, ...);
* `EXPLAIN [ANALYZE]` of such a query (EXPLAIN ANALYZE runs what it explains);
* a `PIVOT` without an IN list (DuckDB parses it into several statements it does not show):
  it must start as a query does, and no token of it may be a writing keyword or the name of a
  table function a query may not call;
* `PRAGMA` of a pragma that only describes (`table_info`, `show_tables`, ...), and `CALL` of
  a table function a query may call.

Everything else (COPY, EXPORT, ATTACH, INSTALL/LOAD, SET/RESET/USE, CREATE, INSERT, ...) is
refused, and so is a text whose second statement would be: nothing runs unless all pass.
Paths are not judged here: which files a query may read is the connection's business.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from typing import Any

import duckdb

REFUSAL = (
    "`cdrhouse sql` is read-only and only reads the lake (SELECT, WITH, FROM, DESCRIBE, SHOW, "
    "SUMMARIZE, PIVOT, EXPLAIN); save a result with --format and --output FILE"
)

# Query nodes of the syntax tree that read; INSERT/UPDATE/DELETE/COPY_QUERY_NODE do not.
READ_NODES = frozenset({"SELECT_NODE", "SET_OPERATION_NODE", "RECURSIVE_CTE_NODE", "CTE_NODE"})
# Table functions a query may call. Not `query` (it runs SQL text this check cannot see),
# `checkpoint`, the logging and profiling switches, or scans of Python memory.
READ_TABLE_FUNCTIONS = frozenset(
    {
        "read_parquet", "parquet_scan", "read_csv", "read_csv_auto", "read_json",
        "read_json_auto", "read_ndjson", "read_ndjson_auto", "read_json_objects",
        "read_json_objects_auto", "read_ndjson_objects", "read_text", "read_blob",
        "read_duckdb", "parquet_metadata", "parquet_schema", "parquet_file_metadata",
        "parquet_kv_metadata", "parquet_full_metadata", "parquet_bloom_probe", "glob",
        "sniff_csv", "range", "generate_series", "unnest", "repeat", "repeat_row", "json_each",
        "json_tree", "summary", "query_table", "icu_calendar_names", "pg_timezone_names",
        "histogram", "histogram_values",
    }
)  # fmt: skip
READ_FUNCTION_PREFIXES = ("duckdb_", "pragma_")
# PRAGMAs that describe the catalog or the engine and change nothing.
READ_PRAGMAS = frozenset(
    {
        "table_info", "show", "show_tables", "show_tables_expanded", "show_databases",
        "database_list", "database_size", "storage_info", "metadata_info", "version",
        "platform", "user_agent", "functions", "collations",
    }
)  # fmt: skip
# How a statement that reads may begin (the first keyword of a PIVOT's text).
QUERY_HEADS = frozenset(
    {"SELECT", "FROM", "VALUES", "TABLE", "WITH", "PIVOT", "PIVOT_WIDER", "UNPIVOT",
     "PIVOT_LONGER", "DESCRIBE", "SHOW", "SUMMARIZE", "("}
)  # fmt: skip
# Keywords that only a writing or configuring statement holds.
WRITE_KEYWORDS = frozenset(
    {"INSERT", "UPDATE", "DELETE", "MERGE", "COPY", "CREATE", "DROP", "ALTER", "ATTACH",
     "DETACH", "INSTALL", "LOAD", "EXPORT", "IMPORT", "SET", "RESET", "PRAGMA", "CALL",
     "CHECKPOINT", "VACUUM", "TRUNCATE", "USE"}
)  # fmt: skip


# Enough for the JSON tree of any query DuckDB parses (its max_expression_depth is 1000).
JSON_DEPTH = 20_000


class RefusedQuery(ValueError):
    """The text holds a statement `cdrhouse sql` does not run; the message (one line) says
    which."""

    def __init__(self, message: str) -> None:
        super().__init__(" ".join(message.split()))


def read_statements(con: duckdb.DuckDBPyConnection, text: str) -> list[duckdb.Statement]:
    """The statements of `text`, parsed by `con`, once each is shown to only read.

    Raises `RefusedQuery` for the first one that does not, and lets DuckDB's own
    `ParserException` through for text that does not parse."""
    statements = con.extract_statements(text)
    if not statements:
        raise RefusedQuery("the query holds no statement")
    for statement in statements:
        _check(con, statement)
    return statements


def _check(con: duckdb.DuckDBPyConnection, statement: duckdb.Statement) -> None:
    text = statement.query
    try:
        kind = statement.type
    except ValueError:  # a statement type the Python enum does not know (UPDATE EXTENSIONS)
        raise RefusedQuery(f"{_head(text)} is refused: {REFUSAL}") from None
    if kind == duckdb.StatementType.SELECT:
        _check_tree(con, text)
    elif kind == duckdb.StatementType.EXPLAIN:
        _check_explained(con, text)
    elif kind == duckdb.StatementType.MULTI:
        _check_multi(con, text)
    elif kind == duckdb.StatementType.PRAGMA:
        _check_pragma(text)
    elif kind == duckdb.StatementType.CALL:
        _check_call(con, text)
    else:
        raise RefusedQuery(f"{_head(text)} is refused: {REFUSAL}")


def _check_tree(con: duckdb.DuckDBPyConnection, text: str) -> None:
    # fetchall, not fetchone: a result left unfinished blocks the connection's next statement
    rows = con.execute("SELECT json_serialize_sql(?)", [text]).fetchall()
    tree = _loads(rows[0][0]) if rows else {"error": True, "error_message": "no tree"}
    if tree.get("error"):
        # Fail closed: a query whose tree DuckDB cannot show is not run.
        why = str(tree.get("error_message")).splitlines()[0]
        raise RefusedQuery(f"cannot check this query ({why}); {REFUSAL}")
    for node in _dicts(tree):
        node_type = node.get("type")
        if (
            isinstance(node_type, str)
            and node_type.endswith("_NODE")
            and node_type not in READ_NODES
        ):
            what = node_type.removesuffix("_NODE").removesuffix("_QUERY")
            raise RefusedQuery(f"{what} inside a query is refused: {REFUSAL}")
        if node_type == "TABLE_FUNCTION":
            name = str(node.get("function", {}).get("function_name", "")).lower()
            if not _reads(name):
                raise RefusedQuery(f"table function {name}() is refused: {REFUSAL}")


def _reads(table_function: str) -> bool:
    name = table_function.lower()
    return name in READ_TABLE_FUNCTIONS or name.startswith(READ_FUNCTION_PREFIXES)


def _loads(text: str) -> Any:
    """The tree of a long expression (`1+1+…`, up to DuckDB's depth limit of 1000) nests a few
    thousand levels deep, beyond Python's default recursion limit for decoding JSON."""
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, JSON_DEPTH))
    try:
        return json.loads(text)
    except RecursionError:
        raise RefusedQuery("the query nests too deeply to be checked") from None
    finally:
        sys.setrecursionlimit(limit)


def _dicts(value: Any) -> Iterator[dict[str, Any]]:
    """Every dict in a JSON value, without recursion (the tree may be thousands deep)."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            yield item
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)


def _tokens(text: str) -> list[tuple[int, str]]:
    """(offset, text) of each token DuckDB's tokenizer finds, comments left out."""
    found = duckdb.tokenize(text)
    out = []
    for i, (start, kind) in enumerate(found):
        end = found[i + 1][0] if i + 1 < len(found) else len(text)
        if kind != duckdb.token_type.comment:
            out.append((start, text[start:end].strip()))
    return out


def _head(text: str) -> str:
    tokens = _tokens(text)
    return tokens[0][1].upper() if tokens else "an empty statement"


def _check_explained(con: duckdb.DuckDBPyConnection, text: str) -> None:
    """EXPLAIN [ANALYZE] [(options)] <statement>: the statement must pass on its own."""
    tokens = _tokens(text)
    i = 1  # past EXPLAIN
    if i < len(tokens) and tokens[i][1].upper() in ("ANALYZE", "ANALYSE"):
        i += 1
    if i < len(tokens) and tokens[i][1] == "(":
        # (options), or a parenthesized query when nothing follows it: EXPLAIN (SELECT 1)
        depth, group = 0, i
        for j in range(i, len(tokens)):
            depth += tokens[j][1].count("(") - tokens[j][1].count(")")
            if depth <= 0:
                i = j + 1 if j + 1 < len(tokens) else group
                break
    inner = con.extract_statements(text[tokens[i][0] :]) if i < len(tokens) else []
    if len(inner) != 1:
        raise RefusedQuery(f"EXPLAIN of this statement is refused: {REFUSAL}")
    _check(con, inner[0])


def _check_multi(con: duckdb.DuckDBPyConnection, text: str) -> None:
    """A statement DuckDB splits into several it does not expose (a PIVOT without IN)."""
    tokens = _tokens(text)
    words = {t.upper() for _, t in tokens}
    head = tokens[0][1].upper() if tokens else ""
    if head == "EXPLAIN":
        _check_explained(con, text)
        return
    writes = sorted(words & WRITE_KEYWORDS)
    if head not in QUERY_HEADS or writes:
        what = writes[0] if writes else head
        raise RefusedQuery(f"{what} is refused: {REFUSAL}")
    # No syntax tree here: refuse any word that names a table function a query may not call
    # (a column of that name too; rare, and refusing is the safe side).
    rows = con.execute(
        "SELECT DISTINCT lower(function_name) FROM duckdb_functions() "
        "WHERE function_type IN ('table', 'table_macro')"
    ).fetchall()
    names = {t.strip('"').lower() for _, t in tokens}
    refused = sorted(name for (name,) in rows if name in names and not _reads(name))
    if refused:
        raise RefusedQuery(f"table function {refused[0]}() is refused: {REFUSAL}")


def _check_pragma(text: str) -> None:
    """`PRAGMA name` or `PRAGMA name(args)` of a pragma that only describes."""
    tokens = [t for _, t in _tokens(text)]
    name = tokens[1].strip('"').lower() if len(tokens) > 1 else ""
    if name not in READ_PRAGMAS or (len(tokens) > 2 and tokens[2] != "("):
        raise RefusedQuery(f"PRAGMA {name} is refused: {REFUSAL}")


def _check_call(con: duckdb.DuckDBPyConnection, text: str) -> None:
    """`CALL f(args)` is `SELECT * FROM f(args)`: the same table functions are allowed."""
    tokens = _tokens(text)
    if not tokens or tokens[0][1].upper() != "CALL" or len(tokens) < 2:
        raise RefusedQuery(f"{_head(text)} is refused: {REFUSAL}")
    as_query = "SELECT * FROM " + text[tokens[1][0] :]
    parsed = con.extract_statements(as_query)
    if len(parsed) != 1 or parsed[0].type != duckdb.StatementType.SELECT:
        raise RefusedQuery(f"this CALL is refused: {REFUSAL}")
    _check_tree(con, as_query)
