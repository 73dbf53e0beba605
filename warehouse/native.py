"""One native pass per page: a whole CDR page -> typed columns with `pyarrow.json`.

The page is read under an explicit Arrow schema built from the field table
(`models.cdr_fields`): every leaf of every CDR type typed as its column is (money as
`decimal128(precision, scale)`, parsed from the JSON number's text with no float in between),
the `data` fields of every type in one struct, timestamps as text (parsed later, like the
tolerant path's). Fields the schema does not name are inferred by the reader and dropped, but
the page says whether it had any: a page without one has no `extra` to find (see
`warehouse.normalize._extras`), the others have their `extra` found on the records' text, the
same way as on the tolerant path.

`decode_native` returns None for any page it cannot decode *exactly as the tolerant path
would* (`warehouse.decode`), and the caller then decodes the whole page that way: a reader
error (a value of the wrong type, a key twice, a number no type holds, a bad escape, unknown
fields whose type differs between records), a money value written as a JSON string or a key
spelled with a `\\u` escape of an ASCII character (the reader would take the string as a
number; the tolerant path quarantines it), a cost the decimal type cannot hold exactly (more
integer digits than the precision allows: the reader only checks the decimals), an integer
past 2**53 or a float that is negative zero or not finite (the tolerant path reads numbers
through f64 text), a record that is not an object, or a record count that differs from the
page's split. The page's records themselves (the
`raw_cdrs` bytes) come from its msgspec split, as on the tolerant path.
"""

from __future__ import annotations

import io
import re
from decimal import Decimal
from functools import cache
from typing import Any, NamedTuple

import polars as pl
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pj

from models.cdr_fields import CDR_FIELDS, CdrField, CdrFieldTable

# A tolerant-path integer goes through f64: past this it may not be the token's value.
_EXACT_INT = 2**53
# -0.0 as int64 bits (the sign bit alone).
_NEGATIVE_ZERO_BITS = -(2**63)
# Text as `string_view`: polars' own layout, so the typed columns reach it without a copy.
_TEXT = pa.string_view()
_PA_TYPES: dict[str, pa.DataType] = {
    "text": _TEXT,
    "timestamp": _TEXT,  # parsed with the tolerant path's formats, from the text
    "bool": pa.bool_(),
    "int": pa.int64(),
    "float": pa.float64(),
    "text_list": pa.list_(_TEXT),
}


def _leaf_type(fields: list[CdrField]) -> pa.DataType:
    """The Arrow type of one path: its field's type, or text when two CDR types disagree on
    it (cast per type later, as a text leaf is)."""
    kinds = {(f.kind, f.precision, f.scale) for f in fields}
    if len(kinds) > 1:
        return _TEXT
    f = fields[0]
    if f.kind == "decimal":
        return pa.decimal128(f.precision or 0, f.scale or 0)  # both set: CdrField checks
    return _PA_TYPES[f.kind]


@cache
def record_type(fields: CdrFieldTable = CDR_FIELDS) -> pa.StructType:
    """The Arrow struct of one record: every path of the field table, nested as in the record,
    each leaf typed (see `_leaf_type`); the same tree as `warehouse.decode.record_dtype`."""
    tree: dict[str, Any] = {}
    for f in fields.fields:
        node = tree
        for key in f.keys[:-1]:
            node = node.setdefault(key, {})
        node.setdefault(f.keys[-1], []).append(f)

    def struct(node: dict[str, Any]) -> pa.StructType:
        return pa.struct(
            [
                pa.field(k, struct(v) if isinstance(v, dict) else _leaf_type(v))
                for k, v in node.items()
            ]
        )

    return struct(tree)


@cache
def typed_dtype(fields: CdrFieldTable = CDR_FIELDS) -> pl.Struct:
    """`record_type` as polars sees it: the dtype of the typed `r` column of every decoded
    page, native or tolerant."""
    dtype = pl.Series("r", pa.array([], record_type(fields))).dtype
    assert isinstance(dtype, pl.Struct)
    return dtype


@cache
def _options(fields: CdrFieldTable) -> pj.ParseOptions:
    schema = pa.schema([pa.field("cdrs", pa.list_(record_type(fields)))])
    return pj.ParseOptions(
        explicit_schema=schema, unexpected_field_behavior="infer", newlines_in_values=True
    )


@cache
def _refused_text(fields: CdrFieldTable) -> str:
    """A regex of what in a record's text the native pass must not read: a money key followed
    by a JSON string (the reader would take `"0.50"` as a number; the tolerant path
    quarantines it), and a JSON escape of a printable ASCII character (`\\u0063`), which may
    spell such a key. Conservative: a nested unknown object's `cost` string refuses the page
    too."""
    keys = sorted({re.escape(f.keys[-1]) for f in fields.fields if f.kind == "decimal"})
    money = [rf'"(?:{"|".join(keys)})"\s*:\s*"'] if keys else []
    return "|".join([*money, r"\\u00[2-7][0-9A-Fa-f]"])


def _leaves(array: pa.StructArray, into: dict[pa.DataType, list[pa.Array]]) -> None:
    """Every leaf array under `array`, by type (children as the reader built them: a null
    struct's children are null there)."""
    for i, field in enumerate(array.type):
        child = array.field(i)
        if pa.types.is_struct(field.type):
            _leaves(child, into)
        else:
            into.setdefault(field.type, []).append(child)


def _exact(records: pa.StructArray) -> bool:
    """Whether every number is what the tolerant path reads from the same text: money within
    its precision (the reader checks only the decimals); integers and floats as f64 text reads
    them (an integer within 2**53, a float finite and not negative zero: an integer token `-0`
    reads 0.0 there)."""
    leaves: dict[pa.DataType, list[pa.Array]] = {}
    _leaves(records, leaves)
    for kind, arrays in leaves.items():
        if pa.types.is_decimal(kind):
            wide = pa.decimal128(38, kind.scale)
            limit = pa.scalar(Decimal(10) ** (kind.precision - kind.scale), wide)
            for leaf in arrays:
                if pc.any(pc.greater_equal(pc.abs(leaf.cast(wide)), limit)).as_py():
                    return False
        elif pa.types.is_int64(kind):
            bounds = pc.min_max(pa.concat_arrays(arrays)).as_py()
            if bounds["min"] is not None and max(-bounds["min"], bounds["max"]) > _EXACT_INT:
                return False
        elif pa.types.is_float64(kind):
            values = pa.concat_arrays(arrays)
            # min_count=0: no value (an empty page, a leaf null everywhere) is no inexact one.
            if not pc.all(pc.is_finite(values), min_count=0).as_py():
                return False
            if pc.any(pc.equal(values.view(pa.int64()), _NEGATIVE_ZERO_BITS)).as_py():
                return False
    return True


class NativePage(NamedTuple):
    records: pa.StructArray  # every record, typed (`record_type`; `typed_dtype` in polars)
    # No record holds a key the field table does not name at its place: none has an `extra`
    # unless its text fools the key count (see `warehouse.normalize._extras`).
    known_keys: bool


def _project(array: pa.StructArray, kind: pa.StructType) -> pa.StructArray:
    """`array` with only the fields of `kind` (the reader's inferred extra fields dropped, at
    every level); no value copied."""
    children = []
    for field in kind:
        child = array.field(field.name)
        if pa.types.is_struct(field.type):
            child = _project(child, field.type)
        children.append(child)
    mask = array.is_null() if array.null_count else None
    return pa.StructArray.from_arrays(children, fields=list(kind), mask=mask)


def decode_native(
    body: bytes, records: pl.Series, fields: CdrFieldTable = CDR_FIELDS
) -> NativePage | None:
    """The page's records (`records`: their texts, as the page's split found them) as one typed
    struct Series (`typed_dtype`), or None when the page must take the tolerant path (see the
    module's docstring)."""
    if records.str.contains(_refused_text(fields)).any():
        return None
    try:
        table = pj.read_json(
            io.BytesIO(body),
            read_options=pj.ReadOptions(use_threads=False, block_size=len(body) + 64),
            parse_options=_options(fields),
        )
    except (pa.ArrowException, ValueError):
        return None
    pages = table.column("cdrs")
    if table.num_rows != 1 or pages.null_count or not pa.types.is_list(pages.type):
        return None
    typed = pages.chunk(0).flatten() if pages.num_chunks == 1 else None
    if typed is None or not pa.types.is_struct(typed.type):
        return None
    if len(typed) != len(records) or typed.null_count:
        return None
    kind = record_type(fields)
    known = typed.type.equals(kind)
    if not known:
        try:
            typed = _project(typed, kind)
        except (pa.ArrowException, KeyError):
            return None
        if not typed.type.equals(kind):
            return None
    try:
        if not _exact(typed):
            return None
    except pa.ArrowException:
        return None
    return NativePage(typed, known)
