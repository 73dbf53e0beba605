"""API CDR pages -> `raw_cdrs` rows, each record decoded once into typed columns.

* `decode_page(body)` splits one page into records (one minified JSON string per record,
  unknown fields included) with msgspec, odd pages included (minified by msgspec, each token as
  written); it never builds a dict per record.
* `decode_page_typed(body)` (and `decode_page_counted`, which also says which path it took)
  adds `r`: each record decoded once into a struct of the field table's paths
  (`models.cdr_fields`), each leaf typed as its column (`warehouse.native.typed_dtype`).
  A page is decoded in one native pass (`warehouse.native`: pyarrow under the field table's
  Arrow schema); a page that pass refuses goes whole to the tolerant path: every leaf decoded
  as *text* (`str.json_decode` into `record_dtype`), so a scalar of the wrong type never fails
  the whole page, then cast (`to_typed`: a value that does not cast is null, money checked
  exact against the record's text). `struct_reason` says why a record could not be decoded
  (its structure, or a value no decoder reads), `money_reason` why its money is not exact.
* `with_decoded(raw)` does the same, by the tolerant path, for `raw_cdrs` rows read back from
  the lake.

One odd record never stops a page: a page msgspec cannot split (a 3,000-deep array, `NaN`) is
split by `models.jsonpage`, byte for byte; a record that is not UTF-8 is kept as `base64:` and
its exact bytes (`record_text`); a record polars cannot decode gets a reason naming why (not
UTF-8, nested too deep, a number out of range or not a JSON number, at its path), and goes to
quarantine with its bytes while the rest of its page lands.

`warehouse.normalize` projects the typed tables from these columns.
"""

from __future__ import annotations

import base64
import math
from collections.abc import Iterable, Mapping
from functools import cache
from typing import Any, NamedTuple

import msgspec
import polars as pl
import pyarrow as pa
import simdjson

from models.cdr_fields import CDR_FIELDS, CdrFieldTable
from models.jsonpage import (
    PageSyntaxError,
    depth,
    is_json_scalar,
    record_members,
    scalars,
    split_page,
    tokens,
)
from models.tables import RAW_CDRS
from warehouse.money import Money, exact_costs
from warehouse.native import NativePage, decode_native, typed_dtype

S = pl.String()
RAW_RECORD_COLUMNS = RAW_CDRS.column_names


@cache
def record_dtype(fields: CdrFieldTable = CDR_FIELDS) -> pl.Struct:
    """The struct a record is decoded into: every path of the field table (`models.cdr_fields`),
    nested as in the record, each leaf read as text (a list of text for a list field), so a
    value of the wrong type fails only its own cast. The `data` fields of every type share one
    `data` struct."""
    tree: dict[str, Any] = {}
    for f in fields.fields:
        node = tree
        for key in f.keys[:-1]:  # no path is a leaf and an object (`CdrFieldTable` checks)
            node = node.setdefault(key, {})
        node[f.keys[-1]] = pl.List(S) if f.kind == "text_list" else S

    def struct(node: dict[str, Any]) -> pl.Struct:
        return pl.Struct({k: struct(v) if isinstance(v, dict) else v for k, v in node.items()})

    return struct(tree)


@cache
def data_fields(fields: CdrFieldTable = CDR_FIELDS) -> dict[str, frozenset[str]]:
    """The `data` keys each known CDR type has (the others are its `extra`)."""
    return {t.name: frozenset(f.keys[1] for f in fields.of_type(t.name)) for t in fields.types}


RECORD_DTYPE = record_dtype()
# The record's top-level keys and, per known CDR type, its `data` keys.
TOP_FIELDS: dict[str, Any] = {f.name: f.dtype for f in RECORD_DTYPE.fields}
DATA_FIELDS: dict[str, frozenset[str]] = data_fields()


def all_key_names(dtype: Any) -> set[str]:
    names: set[str] = set()
    if isinstance(dtype, pl.Struct):
        for f in dtype.fields:
            names.add(f.name)
            names |= all_key_names(f.dtype)
    elif isinstance(dtype, pl.List):
        names |= all_key_names(dtype.inner)
    return names


TS_FORMATS = ("%Y-%m-%dT%H:%M:%S%.fZ", "%Y-%m-%dT%H:%M:%S%.f%:z", "%Y-%m-%dT%H:%M:%SZ")


class PageDecodeError(ValueError):
    """The page is not a JSON object with a `cdrs` array."""


# A `record` that is not UTF-8 (no JSON text can hold it) is kept as this prefix and the base64
# of its exact bytes; no JSON text starts with `b`, so the two never mix.
BASE64_PREFIX = "base64:"
NOT_UTF8 = "record is not valid UTF-8 (record holds base64: and its exact bytes)"
STRUCTURE = "structure does not match the spec"
# Past this depth a record that fails to decode is said to be too deep (the spec's CDR nests 4
# levels; the decoders stop near 1,000).
MAX_DEPTH = 64
_MALFORMED = (msgspec.MsgspecError, ValueError, RecursionError)


def record_text(raw: bytes) -> str:
    """A record's bytes as the `record` column keeps them: the text, or `base64:` + the exact
    bytes base64-encoded when they are not UTF-8."""
    try:
        return raw.decode()
    except UnicodeDecodeError:
        return BASE64_PREFIX + base64.b64encode(raw).decode()


def record_bytes(text: str) -> bytes:
    """The exact bytes of a `record` value (the inverse of `record_text`)."""
    if text.startswith(BASE64_PREFIX):
        return base64.b64decode(text[len(BASE64_PREFIX) :])
    return text.encode()


# ---------------------------------------------------------------------------------------------
# decode_page


class _Head(msgspec.Struct):
    id: str | None = None
    type: str | None = None
    started_at: str | None = None


# `null` for the list (as a Go server writes a nil slice) is read as `[]`: the connector
# refuses it unless `metadata.total` says no record is left, and the day step compares each
# page's count with the rows decoded here.
class _HeadPage(msgspec.Struct):
    cdrs: list[_Head] | None


class _RawPage(msgspec.Struct):
    cdrs: list[msgspec.Raw] | None


_EMPTY_PAGE = b'{"cdrs":[]}'
_HEADS = msgspec.json.Decoder(_HeadPage)
_RAWS = msgspec.json.Decoder(_RawPage)


def _minified(raw: bytes) -> bool:
    return len(msgspec.json.format(raw, indent=-1)) == len(raw)


def decode_page(body: bytes) -> pl.DataFrame:
    """One raw CDR list page -> rows of the `raw_cdrs` schema (every record kept).

    Fast path (msgspec, C): every record's exact bytes (`Raw`, no re-serialization) plus its
    id/type/started_at. Any page it does not fit (a record that is not an object, a non-string
    id/type/started_at, no `cdrs` array, invalid JSON, records with whitespace, judged on the
    first and last record) takes the general path (`_decode_page_general`).
    """
    try:
        heads = _HEADS.decode(body).cdrs
        raws = _RAWS.decode(body).cdrs
    except _MALFORMED:
        return _decode_page_general(body)
    if raws is None or heads is None:
        body, raws, heads = _EMPTY_PAGE, [], []
    if raws and not (_minified(raws[0]) and _minified(raws[-1])):
        return _decode_page_general(body)
    try:
        record = pl.Series([bytes(r) for r in raws], dtype=pl.Binary()).cast(S)
    except pl.exceptions.ComputeError:  # a record that is not UTF-8
        return _decode_page_general(body)
    return _raw_frame(heads, record)


def _raw_frame(heads: list[_Head], record: pl.Series) -> pl.DataFrame:
    """`decode_page`'s fast path, from the page's heads and its records."""
    df = pl.DataFrame(
        {
            "id": pl.Series([h.id for h in heads], dtype=S),
            "type": pl.Series([h.type for h in heads], dtype=S),
            "started_at_raw": pl.Series([h.started_at for h in heads], dtype=S),
            "record": record.alias("record"),
        }
    )
    return _with_date(df)


def parse_ts(expr: pl.Expr) -> pl.Expr:
    """Parse every timestamp form the spec shows, to UTC milliseconds (null if none fits)."""
    parsed = [
        expr.str.to_datetime(fmt, time_unit="ms", time_zone="UTC", strict=False)
        for fmt in TS_FORMATS
    ]
    return pl.coalesce(parsed)


def _parse_common_ts(expr: pl.Expr) -> pl.Expr:
    """`parse_ts` for the form nearly every value has (`TS_FORMATS[0]`): a third of the work."""
    return expr.str.to_datetime(TS_FORMATS[0], time_unit="ms", time_zone="UTC", strict=False)


def with_timestamps(df: pl.DataFrame, texts: Mapping[str, pl.Expr]) -> pl.DataFrame:
    """`df` plus one column per `name: text`, parsed as `parse_ts` does: the common form
    first, and every form only for a column where some value needs it (same result). A name
    may be the column its text reads: the texts are all read before any is replaced."""
    tmp = {name: f"__ts_{name}" for name in texts}
    out = df.with_columns(_parse_common_ts(text).alias(tmp[n]) for n, text in texts.items())
    missed = out.select(
        (text.is_not_null() & pl.col(tmp[name]).is_null()).any().alias(name)
        for name, text in texts.items()
    ).row(0, named=True)
    parsed = [
        (parse_ts(texts[name]) if missed[name] else pl.col(tmp[name])).alias(name) for name in texts
    ]
    return out.with_columns(parsed).drop(tmp.values())


def _with_date(df: pl.DataFrame) -> pl.DataFrame:
    """Add the UTC `date` of `started_at_raw` (and `record` as text) in one polars pass: the
    common format first, all formats only when some value needs them (same result as
    `parse_ts`, a third of the work)."""
    out = with_timestamps(df, {"date": pl.col("started_at_raw")})
    return out.with_columns(pl.col("record").cast(S), pl.col("date").dt.date()).select(
        RAW_RECORD_COLUMNS
    )


class _RawHead(msgspec.Struct):
    id: msgspec.Raw = msgspec.Raw(b"null")
    type: msgspec.Raw = msgspec.Raw(b"null")
    started_at: msgspec.Raw = msgspec.Raw(b"null")


_RAW_HEAD = msgspec.json.Decoder(_RawHead)


def _raw_text(raw: msgspec.Raw) -> str | None:
    """A head field as text: a string decoded, any other value as its JSON text as written
    (bytes that are not UTF-8 shown as U+FFFD: the record keeps them exactly)."""
    text = bytes(raw)
    if text == b"null":
        return None
    if text.startswith(b'"'):
        try:
            return str(msgspec.json.decode(text))
        except _MALFORMED:
            return text[1:-1].decode("utf-8", "replace")
    return text.decode("utf-8", "replace")


def _head(raw: bytes) -> _RawHead:
    """id, type and started_at of one record, as written."""
    try:
        return _RAW_HEAD.decode(raw)
    except _MALFORMED:
        # Not an object (kept whole; normalize quarantines it), or an object msgspec cannot
        # read (too deep, not UTF-8): its members are found without reading their values.
        found = record_members(raw)
    return _RawHead(
        **{k: msgspec.Raw(found[k]) for k in ("id", "type", "started_at") if k in found}
    )


def _split(body: bytes) -> list[bytes]:
    """A page's records, minified, their tokens as written: msgspec, or when it refuses the
    page (a record too deep, `NaN`), `models.jsonpage`; PageDecodeError if it is no page."""
    try:
        return [bytes(r) for r in _RAWS.decode(msgspec.json.format(body, indent=-1)).cdrs or ()]
    except _MALFORMED:
        pass
    try:
        return split_page(body, "cdrs").records
    except PageSyntaxError:
        _page_error(body)
        raise PageDecodeError("page has no `cdrs` array") from None


def _decode_page_general(body: bytes) -> pl.DataFrame:
    """decode_page for any page shape: minified records, their tokens as written (msgspec only
    strips whitespace), odd scalars as text; simdjson only to say why a page is not one."""
    records: list[str] = []
    cols: dict[str, list[str | None]] = {"id": [], "type": [], "started_at_raw": []}
    for raw in _split(body):
        records.append(record_text(raw))
        head = _head(raw)
        cols["id"].append(_raw_text(head.id))
        cols["type"].append(_raw_text(head.type))
        cols["started_at_raw"].append(_raw_text(head.started_at))
    record = pl.Series("record", records, dtype=S)
    df = pl.DataFrame(
        {
            "id": pl.Series(cols["id"], dtype=S),
            "type": pl.Series(cols["type"], dtype=S),
            "started_at_raw": pl.Series(cols["started_at_raw"], dtype=S),
            "record": record,
        }
    )
    return _with_date(df)


def _page_error(body: bytes) -> None:
    """Raise PageDecodeError saying why `body` is not a page (invalid JSON, no `cdrs`)."""
    parser = simdjson.Parser()
    try:
        doc = parser.parse(body)
    except (ValueError, RuntimeError) as e:
        raise PageDecodeError(f"page is not valid JSON: {e}") from None
    del doc


# The columns of a decoded page: `raw_cdrs`'s, then what `warehouse.normalize` projects from.
DECODED_COLUMNS = (*RAW_RECORD_COLUMNS, "r", "struct_reason", "money_reason", "known_keys")


def narrow(frame: pl.DataFrame, names: Iterable[str]) -> pl.DataFrame:
    """`frame.select(names)` (those it has) without a query plan: a decoded frame holds `r`,
    whose schema (every field of every CDR type) each frame operation is planned against,
    ~1 ms per row group or page whatever it reads (bench/RESULTS.md)."""
    return pl.DataFrame([frame.get_column(n) for n in names if n in frame.columns])


_DECODE_CHUNK = 8192
# A page past this is dropped by `decode_page_typed` before its records are decoded.
BIG_PAGE_BYTES = 8 * 2**20


def _json_decode(records: pl.Series, dtype: pl.Struct) -> pl.Series:
    """`records.str.json_decode(dtype)`, in slices decoded in parallel (one `select`, its
    expressions run on polars' thread pool). Row-wise, so the result is the same, and it raises
    when any slice does."""
    n = len(records)
    parts = max(1, min(pl.thread_pool_size(), n // _DECODE_CHUNK))
    if parts == 1:
        return records.str.json_decode(dtype)
    step = -(-n // parts)
    col = pl.col("r")
    cols = records.to_frame("r").select(
        col.slice(i * step, step).str.json_decode(dtype).implode().alias(str(i))
        for i in range(parts)
    )
    return pl.concat([cols[str(i)].explode() for i in range(parts)]).alias(records.name)


def _decode_text(text: str | None, dtype: pl.Struct) -> Any:
    return pl.Series([text], dtype=S).str.json_decode(dtype)[0]


def _head_struct(raw: bytes, dtype: pl.Struct) -> Any:
    """A struct of only the record's id, type and started_at (for its quarantine row)."""
    found = record_members(raw)
    head = {k: _raw_text(msgspec.Raw(found[k])) for k in ("id", "type", "started_at") if k in found}
    return _decode_text(msgspec.json.encode(head).decode(), dtype) if head else None


def _decode_odd(text: str, dtype: pl.Struct) -> tuple[Any, str]:
    """A record polars refused: why, and what of it can be read, so that its quarantine row
    has its id, type and started_at: every field but the odd scalars (read as null), or only
    the id, type and started_at of a record not UTF-8 or nested too deep."""
    if text.startswith(BASE64_PREFIX):
        return _head_struct(record_bytes(text), dtype), NOT_UTF8
    raw = text.encode()
    try:
        toks = tokens(raw)
    except PageSyntaxError:
        return None, STRUCTURE
    if depth(toks) > MAX_DEPTH:
        return _head_struct(raw, dtype), f"nested deeper than {MAX_DEPTH} levels"
    problems: list[str] = []
    for path, index in scalars(toks):
        tok = toks[index]
        if not is_json_scalar(tok):
            problems.append(f"{path} is not a JSON number")
        elif tok[:1] in b"-0123456789" and math.isinf(float(tok)):
            problems.append(f"{path} is out of range")
        else:
            continue
        toks[index] = b"null"
    if not problems:
        return None, STRUCTURE
    try:
        return _decode_text(b"".join(toks).decode(), dtype), "; ".join(problems)
    except pl.exceptions.PolarsError:
        return None, "; ".join([*problems, STRUCTURE])


def _decode_records(records: pl.Series, dtype: pl.Struct) -> tuple[pl.Series, pl.Series]:
    """Decode record strings; a record that cannot be decoded comes back with a reason (and
    null, unless only some scalars were the trouble: see `_decode_odd`)."""
    try:
        return _json_decode(records, dtype), pl.Series([None] * len(records), dtype=S)
    except pl.exceptions.PolarsError:
        pass
    # Slow path, only when some record nests an object where a scalar belongs (or vice versa),
    # or holds what no decoder reads (see the module's docstring): halves are decoded until the
    # records that fail are alone, a few dozen decodes for a page of 1,000 with one bad record.
    reasons: list[str | None] = []
    decoded = _bisect(records, reasons, dtype)
    return decoded, pl.Series(reasons, dtype=S)


def _bisect(records: pl.Series, reasons: list[str | None], dtype: pl.Struct) -> pl.Series:
    """`records` decoded (row-wise, as one decode would), appending each row's reason."""
    try:
        decoded = records.str.json_decode(dtype)
    except pl.exceptions.PolarsError:
        if len(records) == 1:
            value, reason = _decode_odd(records[0], dtype)
            reasons.append(reason)
            return pl.Series([value], dtype=dtype)
        half = len(records) // 2
        return pl.concat(
            [_bisect(records[:half], reasons, dtype), _bisect(records[half:], reasons, dtype)]
        )
    reasons.extend([None] * len(records))
    return decoded


def decode_page_typed(
    body: bytes, fields: CdrFieldTable = CDR_FIELDS, *, native: bool = True
) -> pl.DataFrame:
    """One page -> its `raw_cdrs` rows plus each record decoded once into typed columns
    (`decode_page_counted` without saying which path it took)."""
    return decode_page_counted(body, fields, native=native).frame


class Decoded(NamedTuple):
    frame: pl.DataFrame
    native: bool  # decoded in the one native pass (else by the tolerant path)


def decode_page_counted(
    body: bytes, fields: CdrFieldTable = CDR_FIELDS, *, native: bool = True
) -> Decoded:
    """One page -> its `raw_cdrs` rows plus each record decoded once into typed columns, and
    whether the native pass decoded it.

    The `raw_cdrs` columns keep every record's exact bytes (so a day can be normalized again
    from the lake, and nothing the spec does not know is lost); `r` is the record as a struct of
    the field table's paths, each leaf typed as its column (`typed_dtype`, timestamps as text),
    `struct_reason` says why a record could not be decoded into it and `money_reason` why its
    money is not exact. This is the one JSON decode of a record on the fetch path:
    `normalize_decoded` only projects.

    msgspec splits the page into records (no values built): their exact bytes. Then the whole
    page is decoded in one native pass (`warehouse.native`, pyarrow under the field table's
    Arrow schema); a page it refuses goes whole to the tolerant path, which decides record by
    record (every leaf read as text, then cast: `to_typed`). Pages msgspec does not fit take
    `decode_page`'s path, tolerant too. `native=False` forces the tolerant path (tests compare
    the two). `fields` is the field table whose paths `r` holds.

    A big page (a record of 40 MB) takes the tolerant path and is let go of as soon as its
    records are copied out, before they are decoded (the decode of a 40 MB string takes ~3x its
    size for a moment): the caller must hold no other reference to `body`. Its heads are read
    first, so that a page whose records do not all decode takes `decode_page`'s path without
    it."""
    try:
        raws = _RAWS.decode(body).cdrs
    except _MALFORMED:
        return Decoded(with_decoded(decode_page(body), fields), False)
    if raws is None:
        body, raws = _EMPTY_PAGE, []
    if raws and not (_minified(raws[0]) and _minified(raws[-1])):
        return Decoded(with_decoded(decode_page(body), fields), False)
    big = len(body) > BIG_PAGE_BYTES
    heads: list[_Head] | None = None
    if big:
        try:
            heads = _HEADS.decode(body).cdrs
        except _MALFORMED:
            heads = None  # decode_page's general path would need the body: keep it
    try:
        record = pl.Series("record", [bytes(r) for r in raws], dtype=pl.Binary()).cast(S)
    except pl.exceptions.PolarsError:
        return Decoded(with_decoded(decode_page(body), fields), False)  # not UTF-8
    del raws
    if native and not big:
        page = decode_native(body, record, fields)
        if page is not None:
            return Decoded(_native_frame(record, page), True)
    if heads is not None:
        del body  # the records are in `record`; what `decode_page` would do is `_raw_frame`
    try:
        decoded = _json_decode(record, record_dtype(fields))
    except pl.exceptions.PolarsError:
        # Some record's structure is off: per record.
        if heads is not None:
            return Decoded(with_decoded(_raw_frame(heads, record), fields), False)
        return Decoded(with_decoded(decode_page(body), fields), False)
    return Decoded(_frame(record, *to_typed(record, decoded, fields)), False)


def _native_frame(record: pl.Series, page: NativePage) -> pl.DataFrame:
    """`_frame` for a natively decoded page: each Arrow column made a Series (no copy), then
    one frame of them. Not `pl.from_arrow` of a table: it reads the frame's dtypes back into
    Python objects, `r`'s whole tree, for each page (half of this function's time)."""
    typed, n = page.records, len(record)
    columns = {
        "id": typed.field("id"),
        "type": typed.field("type"),
        "started_at_raw": typed.field("started_at"),
        "date": pa.nulls(n, pa.date32()),
        "r": typed,
        "struct_reason": pa.nulls(n, pa.string_view()),
        "money_reason": pa.nulls(n, pa.string_view()),
        "known_keys": pa.repeat(page.known_keys, n),
    }
    return pl.DataFrame(
        [record.alias(c) if c == "record" else pl.Series(c, columns[c]) for c in DECODED_COLUMNS]
    )


def _frame(
    record: pl.Series,
    typed: pl.Series,
    money_reason: pl.Series | None,
    *,
    known_keys: bool = False,
) -> pl.DataFrame:
    """A page's decoded rows from its records and their typed struct: id, type and
    started_at come from the struct (the page split read no values). `known_keys`: the native
    pass found no key the field table does not name."""
    n = len(record)
    top = typed.struct
    columns = {
        "id": top.field("id"),
        "type": top.field("type"),
        "started_at_raw": top.field("started_at"),
        "record": record,
        # The partition column: written by the path, not into the file.
        "date": pl.repeat(None, n, dtype=pl.Date(), eager=True),
        "r": typed,
        "struct_reason": pl.repeat(None, n, dtype=S, eager=True),
        "money_reason": (
            pl.repeat(None, n, dtype=S, eager=True) if money_reason is None else money_reason
        ),
        "known_keys": pl.repeat(known_keys, n, dtype=pl.Boolean(), eager=True),
    }
    return pl.DataFrame({name: columns[name].alias(name) for name in DECODED_COLUMNS})


def with_decoded(raw: pl.DataFrame, fields: CdrFieldTable = CDR_FIELDS) -> pl.DataFrame:
    """`raw_cdrs` rows plus `r`, `struct_reason` and `money_reason` (see
    `decode_page_typed`), by the tolerant path."""
    decoded, struct_reason = _decode_records(raw["record"], record_dtype(fields))
    typed, money_reason = to_typed(raw["record"], decoded, fields)
    return raw.with_columns(
        r=typed, struct_reason=struct_reason, money_reason=money_reason, known_keys=pl.lit(False)
    )


# ---------------------------------------------------------------------------------------------
# the tolerant path's casts: text leaves -> the typed struct the native path reads directly


def _bool(expr: pl.Expr) -> pl.Expr:
    return expr.replace_strict(
        {"true": True, "false": False}, default=None, return_dtype=pl.Boolean()
    )


def cast_text(text: pl.Expr, dtype: Any) -> pl.Expr:
    """A decoded text leaf cast to a column type, null when it does not cast exactly."""
    if dtype == pl.Boolean():
        return _bool(text)
    if dtype == pl.Float64():
        return text.cast(pl.Float64(), strict=False)
    if dtype == pl.Int64():
        # The integer as written when it is one (past 2**53, f64 rounded it); else through
        # f64 only when that is a whole number (`1e2`): `1.7` is not 1, it is unreadable.
        number = text.cast(pl.Float64(), strict=False)
        whole = (number == number.floor()) & (number.abs() < 2.0**53)
        return pl.coalesce(
            text.cast(pl.Int64(), strict=False),
            pl.when(whole).then(number.cast(pl.Int64(), strict=False)),
        )
    if dtype in (S, pl.List(S)):
        return text
    raise ValueError(f"no text cast to {dtype}")


@cache
def _moneys(fields: CdrFieldTable) -> tuple[Money, ...]:
    return tuple(Money.of(f) for f in fields.fields if f.kind == "decimal")


def _typed_struct(
    text: pl.Expr, dtype: pl.Struct, path: tuple[str, ...], money: Mapping[tuple[str, ...], str]
) -> pl.Expr:
    parts = []
    for field in dtype.fields:
        at = (*path, field.name)
        child = text.struct.field(field.name)
        if isinstance(field.dtype, pl.Struct):
            expr = _typed_struct(child, field.dtype, at, money)
        elif at in money:
            expr = pl.col(money[at])
        else:
            expr = cast_text(child, field.dtype)
        parts.append(expr.alias(field.name))
    return pl.struct(parts)


def to_typed(
    records: pl.Series, decoded: pl.Series, fields: CdrFieldTable = CDR_FIELDS
) -> tuple[pl.Series, pl.Series]:
    """(`r` typed as the native path reads it, `money_reason`) from the tolerant decode's
    text leaves: each leaf cast to its column's type (null when it does not cast), money
    checked exact against the record's text (`warehouse.money`); `money_reason` says why a
    record's money is not exact (a JSON string, more decimals or digits than the type holds,
    not a number), null when it is."""
    frame = pl.DataFrame({"record": records, "r": decoded})
    money: dict[tuple[str, ...], str] = {}
    reasons: list[pl.Expr] = []
    for i, m in enumerate(_moneys(fields)):
        text_leaf = frame["r"].struct.field(m.field.path)
        text, is_string, misfit = exact_costs(records, text_leaf, m)
        value = text.cast(m.field.dtype, strict=False)
        money[m.field.keys] = name = f"__money_{i}"
        frame = frame.with_columns(
            **{name: value, f"{name}_text": text_leaf, f"{name}_string": is_string},
            **{f"{name}_misfit": misfit},
        )
        reasons += [
            pl.when(pl.col(f"{name}_string")).then(pl.lit(f"{m.field.path} is a string")),
            pl.col(f"{name}_misfit"),
            pl.when(
                pl.col(f"{name}_text").is_not_null()
                & pl.col(name).is_null()
                & pl.col(f"{name}_misfit").is_null()
            ).then(pl.lit(f"{m.field.path} is not a decimal")),
        ]
    reason = pl.concat_str(reasons, separator="; ", ignore_nulls=True) if reasons else pl.lit("")
    out = frame.select(
        _typed_struct(pl.col("r"), typed_dtype(fields), (), money).alias("r"),
        pl.when(reason != "").then(reason).otherwise(None).alias("money_reason"),
    )
    return out["r"], out["money_reason"]
