"""Typed CDR tables (`cdrs`, per-type tables, quarantine) projected from decoded records.

`normalize_decoded(rows)` takes rows of `warehouse.decode.decode_page_typed` (the one JSON decode
of each record) and only projects and casts: str -> Decimal(18,6) for cost, timestamps to UTC
milliseconds, per-type `data` fields to typed columns. A value that fails its cast sends its
record to `cdr_quarantine` with a reason. `normalize(raw)` does the same from `raw_cdrs` rows
read back from the lake.

Money is never rounded: a cost that Decimal(18,6) cannot hold exactly (more than 6 decimals
that are not all zeros, or more than 12 integer digits) is quarantined with a reason, like a
negative call or conversation duration. Every cost in `cdrs` equals the API's text as a Decimal.

Fields the spec does not know are found cheaply (literal key counts against one regex of the
known names; only rows with an unknown key take a slower orjson path) and kept in the `extra`
JSON columns. A CDR of an unknown type stays in `cdrs` with its raw `data`. Nothing is dropped:
every input row ends up in `cdrs` or in `cdr_quarantine`, and `raw_cdrs` keeps every record's
exact bytes.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from functools import cache

import orjson
import polars as pl

from models.cdr_fields import CDR_FIELDS, CdrField, CdrFieldTable
from models.tables import (
    CDR_CALLS,
    CDR_CONVERSATIONS,
    CDR_HLR_LOOKUPS,
    CDR_QUARANTINE,
    CDR_SMS,
    CDRS,
    TableSpec,
    cdr_table_specs,
)
from warehouse.decode import (
    all_key_names,
    data_fields,
    parse_ts,
    record_dtype,
    with_decoded,
    with_timestamps,
)

S = pl.String()

# Every key of a minified record ends in an unescaped `":`; inside a string a quote is escaped,
# so `":` there is preceded by a backslash. Keys = count(`":`) - count(`\":`) (two literal
# scans, several times faster than a regex), except for a key ending in an escaped backslash,
# which a record containing `\\":` is sent to the slow path for. Known keys are counted by one
# regex of every name the spec knows; a record has an unknown key when the counts differ.
_COLON = '":'
_ESCAPED_COLON = '\\":'
_DOUBLE_BACKSLASH_COLON = '\\\\":'
# f64 (what the decoded text went through) keeps 15-16 significant digits.
_F64_DIGITS = 16


@dataclass(frozen=True)
class _Money:
    """A top-level decimal field and how its exact value is checked (never rounded).

    The decoded value went through f64 (shortest repr). It equals the token exactly unless the
    token has more decimals than the scale or an exponent (f64 may have dropped or rounded
    digits: such a token is found in the record's text) or the decoded text has an exponent,
    more decimals than the scale or too many digits for f64: only then is the token read from
    the text and checked to fit Decimal(precision, scale) exactly."""

    field: CdrField
    key: str  # `"cost":`
    token_re: str
    inexact_re: str
    long_token_re: str
    quantum: Decimal
    limit: Decimal
    more_decimals: str
    more_digits: str

    @staticmethod
    def of(f: CdrField) -> _Money:
        if len(f.keys) != 1 or f.precision is None or f.scale is None:
            raise ValueError(
                f"{f.path}: a decimal field is checked exact on the record's text, "
                "so it must be a top-level field"
            )
        p, s = f.precision, f.scale
        key = f'"{f.path}":'
        k = re.escape(key)
        return _Money(
            field=f,
            key=key,
            token_re=k + r"(-?[0-9][0-9.eE+-]*)",
            inexact_re=rf"[eE]|\.[0-9]{{{s + 1}}}|[0-9]{{{_F64_DIGITS - s}}}",
            long_token_re=k + rf"-?[0-9]*(?:\.[0-9]{{{s + 1}}}|[.0-9]*[eE])",
            quantum=Decimal(1).scaleb(-s),
            limit=Decimal(10) ** (p - s),
            more_decimals=f"{f.path} has more than {s} decimals (Decimal({p},{s}) would round it)",
            more_digits=f"{f.path} has more than {p - s} integer digits "
            f"(out of Decimal({p},{s})'s range)",
        )


class _Num(str):
    """A JSON number token as written (json.loads parse_float/parse_int)."""


def _cost_fit(token: str, money: _Money) -> tuple[str, str | None]:
    """(text to cast, why it cannot be cast exactly) for a money token as written: a token that
    fits Decimal(precision, scale) exactly comes back in plain notation (`1.5e0` -> `1.500000`)."""
    try:
        value = Decimal(token)
    except InvalidOperation:
        return token, None  # not a number: the cast fails and says so
    if not value.is_finite():
        return token, None
    if value.is_zero():
        return "0", None  # `0e5`, `-0.0`
    if abs(value) >= money.limit:
        return token, money.more_digits
    exact = value.quantize(money.quantum)
    if exact != value:
        return token, money.more_decimals
    return format(exact, "f"), None


def _exact_costs(
    records: pl.Series, decoded: pl.Series, money: _Money
) -> tuple[pl.Series, pl.Series, pl.Series]:
    """(money text to cast, the top-level value is a JSON string, why it does not fit
    Decimal(precision, scale) exactly) per record, for one top-level decimal field (`cost`).

    The text is the decoded text except where it may not be the token exactly (`inexact_re` on
    the decoded text, `long_token_re` on the record's); there the token is taken from the record
    text (one polars extract when the record has a single `"cost":` key, json with exact numbers
    otherwise) and checked to fit (`_cost_fit`). Only rows that contain `"cost":"` are checked
    for a string value, the same way."""
    frame = pl.DataFrame({"rec": records, "dec": decoded})
    flags = frame.select(
        inexact=(
            pl.col("dec").str.contains(money.inexact_re)
            | pl.col("rec").str.contains(money.long_token_re)
        ).fill_null(False)
        & pl.col("dec").is_not_null(),
        string=pl.col("rec").str.contains(money.key + '"', literal=True).fill_null(False)
        & pl.col("dec").is_not_null(),
    )
    idx = (flags["inexact"] | flags["string"]).arg_true()
    is_string = pl.Series([False] * len(records), dtype=pl.Boolean())
    misfit = pl.Series([None] * len(records), dtype=S)
    if idx.len() == 0:
        return decoded, is_string, misfit
    sub = frame[idx].with_columns(
        keys=pl.col("rec").str.count_matches(money.key, literal=True),
        token=pl.col("rec").str.extract(money.token_re, 1),
    )
    texts = sub["dec"].to_list()
    strings = [False] * sub.height
    misfits: list[str | None] = [None] * sub.height
    for j, (rec, keys, token) in enumerate(sub.select("rec", "keys", "token").iter_rows()):
        if keys == 1:  # the only `"cost":` is the top-level key (the record has a cost)
            strings[j] = token is None
            if token is not None:
                texts[j], misfits[j] = _cost_fit(token, money)
            continue
        try:
            obj = json.loads(rec, parse_float=_Num, parse_int=_Num)
        except (ValueError, RecursionError):
            continue
        value = obj.get(money.field.path) if isinstance(obj, dict) else None
        if isinstance(value, str):
            strings[j] = not isinstance(value, _Num)
            if isinstance(value, _Num):
                texts[j], misfits[j] = _cost_fit(value, money)
    exact = decoded.scatter(idx, pl.Series(texts, dtype=S))
    return (
        exact,
        is_string.scatter(idx, pl.Series(strings, dtype=pl.Boolean())),
        misfit.scatter(idx, pl.Series(misfits, dtype=S)),
    )


@dataclass(frozen=True)
class _Plan:
    """What normalization needs of a field table, built once per table."""

    fields: CdrFieldTable
    specs: dict[str, TableSpec]  # `cdrs` and the per-type tables, by name
    known_key_re: str  # a key of any field's path, as a minified record writes it
    top_keys: frozenset[str]
    data_keys: dict[str, frozenset[str]]  # per known type
    money: tuple[_Money, ...]


@cache
def _plan(fields: CdrFieldTable) -> _Plan:
    for f in fields.fields:
        if (f.required or f.kind == "timestamp") and f.cdr_type is not None:
            raise ValueError(f"{f.path}: required and timestamp fields are top-level")
    dtype = record_dtype(fields)
    return _Plan(
        fields=fields,
        specs=cdr_table_specs(fields),
        known_key_re='"(?:' + "|".join(sorted(all_key_names(dtype))) + ')":',
        top_keys=frozenset(f.name for f in dtype.fields),
        data_keys=data_fields(fields),
        money=tuple(_Money.of(f) for f in fields.fields if f.kind == "decimal"),
    )


@dataclass(frozen=True)
class NormalizedTables:
    cdrs: pl.DataFrame
    cdr_calls: pl.DataFrame
    cdr_conversations: pl.DataFrame
    cdr_sms: pl.DataFrame
    cdr_hlr_lookups: pl.DataFrame
    quarantine: pl.DataFrame

    def tables(self) -> dict[str, pl.DataFrame]:
        """Frames keyed by lake table name."""
        return {
            CDRS.name: self.cdrs,
            CDR_CALLS.name: self.cdr_calls,
            CDR_CONVERSATIONS.name: self.cdr_conversations,
            CDR_SMS.name: self.cdr_sms,
            CDR_HLR_LOOKUPS.name: self.cdr_hlr_lookups,
            CDR_QUARANTINE.name: self.quarantine,
        }


def _bool(expr: pl.Expr) -> pl.Expr:
    return expr.replace_strict(
        {"true": True, "false": False}, default=None, return_dtype=pl.Boolean()
    )


def _float(expr: pl.Expr) -> pl.Expr:
    return expr.cast(pl.Float64(), strict=False)


def _int(expr: pl.Expr) -> pl.Expr:
    return expr.cast(pl.Float64(), strict=False).cast(pl.Int64(), strict=False)


def _extras(records: pl.Series, types: pl.Series, plan: _Plan) -> tuple[pl.Series, pl.Series]:
    """(`extra`, `data_extra`) JSON strings of unknown top-level / data fields."""
    n = len(records)
    r = pl.col("r").str
    unknown = (
        records.to_frame("r")
        .select(
            (
                r.count_matches(_COLON, literal=True)
                - r.count_matches(_ESCAPED_COLON, literal=True)
                != r.count_matches(plan.known_key_re)
            )
            | r.contains(_DOUBLE_BACKSLASH_COLON, literal=True)
        )
        .to_series()
    )
    extra: list[str | None] = [None] * n
    data_extra: list[str | None] = [None] * n
    idx = unknown.arg_true().to_list()
    if not idx:
        return pl.Series(extra, dtype=S), pl.Series(data_extra, dtype=S)
    texts = records.gather(idx).to_list()
    kinds = types.gather(idx).to_list()
    for i, text, kind in zip(idx, texts, kinds, strict=True):
        try:
            obj = orjson.loads(text)
        except orjson.JSONDecodeError:
            continue
        if not isinstance(obj, dict):
            continue
        top = {k: v for k, v in obj.items() if k not in plan.top_keys}
        if top:
            extra[i] = orjson.dumps(top).decode()
        data = obj.get("data")
        known = plan.data_keys.get(kind or "")
        if isinstance(data, dict) and known is not None:
            more = {k: v for k, v in data.items() if k not in known}
            if more:
                data_extra[i] = orjson.dumps(more).decode()
    return pl.Series(extra, dtype=S), pl.Series(data_extra, dtype=S)


def _at(keys: tuple[str, ...]) -> pl.Expr:
    """The decoded text at a path of the record (`r`)."""
    expr = pl.col("r")
    for key in keys:
        expr = expr.struct.field(key)
    return expr


def _typed(f: CdrField) -> pl.Expr:
    """A field's decoded text cast to its column's type (null when it does not cast)."""
    text = _at(f.keys)
    if f.kind == "bool":
        return _bool(text)
    if f.kind == "float":
        return _float(text)
    if f.kind == "int":
        return _int(text)
    if f.kind in ("text", "text_list"):
        return text
    raise ValueError(f"{f.path}: a {f.kind} field is cast with its own checks")


def _type_frame(
    ok: pl.DataFrame, kind: str, spec: TableSpec, fields: CdrFieldTable
) -> pl.DataFrame:
    common = [pl.col(f.column) for f in fields.common]
    specific = [_typed(f).alias(f.column) for f in fields.of_type(kind)]
    tail = [pl.col("data_extra").alias("extra"), pl.col("date")]
    # Project first (struct fields and casts are cheap row-wise), then filter the flat columns:
    # filtering the wide nested `data` struct per type costs more than the whole projection.
    keep = ok.get_column("type") == kind
    return ok.select([*common, *specific, *tail]).filter(keep).cast(spec.polars_schema())


def _reasons(plan: _Plan) -> list[pl.Expr]:
    """Why a record is quarantined, one expression per rule of the field table, in the order
    the reason text lists them: decoding, required fields, money, negative values, times."""
    fields = plan.fields
    kind = pl.col("r").struct.field("type")
    reasons = [pl.col("struct_reason")]
    reasons += [
        pl.when(pl.col(f.column).is_null()).then(pl.lit(f"missing {f.path}"))
        for f in fields.top
        if f.required and f.kind != "timestamp"
    ]
    for m in plan.money:
        c = m.field.column
        reasons += [
            pl.when(pl.col(f"{c}_is_string")).then(pl.lit(f"{m.field.path} is a string")),
            pl.col(f"{c}_misfit"),
            pl.when(
                _at(m.field.keys).is_not_null()
                & pl.col(c).is_null()
                & pl.col(f"{c}_misfit").is_null()
            ).then(pl.lit(f"{m.field.path} is not a decimal")),
        ]
    for f in fields.fields:
        if f.non_negative:
            value = pl.col(f.column) if f.cdr_type is None else _typed(f)
            negative = value < 0 if f.cdr_type is None else (kind == f.cdr_type) & (value < 0)
            reasons.append(pl.when(negative).then(pl.lit(f"{f.path} is negative")))
    for f in fields.top:
        if f.kind != "timestamp":
            continue
        if f.required:
            bad = pl.col(f.column).is_null()
            reasons.append(pl.when(bad).then(pl.lit(f"{f.path} missing or unparseable")))
        else:
            bad = _at(f.keys).is_not_null() & pl.col(f.column).is_null()
            reasons.append(pl.when(bad).then(pl.lit(f"{f.path} unparseable")))
    return reasons


def normalize(raw: pl.DataFrame, fields: CdrFieldTable = CDR_FIELDS) -> NormalizedTables:
    """`raw_cdrs` rows (any number of pages, e.g. a day read back from the lake) -> typed,
    deduplicated tables."""
    return normalize_decoded(with_decoded(raw, fields), fields)


def normalize_decoded(raw: pl.DataFrame, fields: CdrFieldTable = CDR_FIELDS) -> NormalizedTables:
    """Rows of `decode_page_typed` (any number of pages, decoded with the same `fields`) ->
    typed, deduplicated tables: one column per field of the field table."""
    plan = _plan(fields)
    cdrs_spec = plan.specs[CDRS.name]
    # Keep the last copy of each id: later pages/revisions win. Null ids are kept (quarantined).
    with_id = raw.filter(pl.col("id").is_not_null()).unique("id", keep="last", maintain_order=True)
    raw = pl.concat([with_id, raw.filter(pl.col("id").is_null())])
    extra, data_extra = _extras(raw["record"], raw["type"], plan)
    money: dict[str, pl.Series] = {}
    for m in plan.money:
        c = m.field.column
        decoded = raw["r"].struct.field(m.field.path)
        text, is_string, misfit = _exact_costs(raw["record"], decoded, m)
        money |= {f"{c}_text": text, f"{c}_is_string": is_string, f"{c}_misfit": misfit}
    df = raw.select(
        "record",
        "started_at_raw",
        "r",
        "struct_reason",
        # As the page's split found them: the quarantine's id and type when `r` is null.
        pl.col("id").alias("head_id"),
        pl.col("type").alias("head_type"),
    ).with_columns(extra=extra, data_extra=data_extra, **money)
    df = df.with_columns(
        (
            pl.col(f"{f.column}_text").cast(f.dtype, strict=False)
            if f.kind == "decimal"
            else _typed(f)
        ).alias(f.column)
        for f in fields.top
        if f.kind != "timestamp"
    )
    df = with_timestamps(
        df, {f.column: _at(f.keys) for f in fields.top if f.kind == "timestamp"}
    ).with_columns(pl.col("started_at").dt.date().alias("date"))
    df = df.with_columns(
        pl.concat_str(_reasons(plan), separator="; ", ignore_nulls=True).alias("reason")
    )
    bad = df.filter(pl.col("reason") != "")
    ok = df.filter(pl.col("reason") == "")
    known = pl.col("type").is_in(list(plan.data_keys))
    # `data` JSON only for rows of an unknown type: the others are null before the JSON path.
    data_json = pl.when(known).then(None).otherwise(pl.col("record")).str.json_path_match("$.data")
    cdrs = ok.with_columns(pl.when(known).then(None).otherwise(data_json).alias("data")).select(
        cdrs_spec.column_names
    )
    quarantine = bad.select(
        pl.coalesce(
            pl.col("id"), pl.col("record").str.json_path_match("$.id"), pl.col("head_id")
        ).alias("id"),
        pl.coalesce(
            pl.col("type"), pl.col("record").str.json_path_match("$.type"), pl.col("head_type")
        ).alias("type"),
        "started_at_raw",
        "reason",
        "record",
        parse_ts(pl.col("started_at_raw").str.slice(0, 10) + "T00:00:00Z").dt.date().alias("date"),
    )
    # Only what the per-type tables read, so each per-type filter copies a slim frame.
    slim = ok.select(
        *dict.fromkeys(["type", *(f.column for f in fields.common)]),
        "data_extra",
        "date",
        pl.struct(pl.col("r").struct.field("data")).alias("r"),
    )
    per_type = {
        t.table: _type_frame(slim, t.name, plan.specs[t.table], fields) for t in fields.types
    }
    # A new CDR type also needs its attribute here (and its table in `pipelines.cdr_day`).
    return NormalizedTables(
        cdrs=cdrs.cast(cdrs_spec.polars_schema()),
        quarantine=quarantine.cast(CDR_QUARANTINE.polars_schema()),
        **per_type,
    )
