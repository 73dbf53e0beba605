"""Typed CDR tables (`cdrs`, per-type tables, quarantine) projected from decoded records.

`normalize_decoded(rows)` takes rows of `warehouse.decode.decode_page_typed` (the one JSON decode
of each record, its leaves already typed: natively, or cast by the tolerant path) and only
projects: timestamps to UTC milliseconds, per-type `data` fields to their columns. A record
that breaks a rule of the field table goes to `cdr_quarantine` with a reason.
`normalize(raw)` does the same from `raw_cdrs` rows read back from the lake.

Money is never rounded: a cost that Decimal(18,6) cannot hold exactly (more than 6 decimals
that are not all zeros, or more than 12 integer digits) is quarantined with a reason (the
decode's `money_reason`), like a negative call or conversation duration. Every cost in `cdrs`
equals the API's text as a Decimal.

Fields the spec does not know are found cheaply (literal key counts against one regex of the
known names; only rows with an unknown key take a slower orjson path) and kept in the `extra`
JSON columns. A CDR of an unknown type stays in `cdrs` with its raw `data`. Nothing is dropped:
every input row ends up in `cdrs` or in `cdr_quarantine`, and `raw_cdrs` keeps every record's
exact bytes.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import Any

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
    PARTY_COLUMNS,
    TableSpec,
    cdr_table_specs,
)
from warehouse.decode import (
    all_key_names,
    cast_text,
    data_fields,
    parse_ts,
    record_dtype,
    with_decoded,
    with_timestamps,
)
from warehouse.native import typed_dtype

S = pl.String()

# Every key of a minified record ends in an unescaped `":`; inside a string a quote is escaped,
# so `":` there is preceded by a backslash. Keys = count(`":`) - count(`\":`) (two literal
# scans, several times faster than a regex), except for a key ending in an escaped backslash,
# which a record containing `\\":` is sent to the slow path for. Known keys are counted by one
# regex of every name the spec knows; a record has an unknown key when the counts differ.
_COLON = '":'
_ESCAPED_COLON = '\\":'
_DOUBLE_BACKSLASH_COLON = '\\\\":'
# What can make a record without unknown keys count one (see `_extras`): a string value
# starting with `:` (its opening quote after `:`, `,`, `[` or whitespace), or `\\":`. A
# superset (any backslash before `":`, any whitespace) only counts a few more records.
_FOOLING = r'[:,\[\s\\]":'


@dataclass(frozen=True)
class _Plan:
    """What normalization needs of a field table, built once per table."""

    fields: CdrFieldTable
    specs: dict[str, TableSpec]  # `cdrs` and the per-type tables, by name
    known_key_re: str  # a key of any field's path, as a minified record writes it
    top_keys: frozenset[str]
    data_keys: dict[str, frozenset[str]]  # per known type
    leaves: dict[tuple[str, ...], Any]  # the typed `r`'s leaf types (polars dtypes), by path


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
        leaves=dict(_leaf_types(typed_dtype(fields))),
    )


def _leaf_types(dtype: pl.Struct, path: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], Any]]:
    out: list[tuple[tuple[str, ...], Any]] = []
    for f in dtype.fields:
        if isinstance(f.dtype, pl.Struct):
            out += _leaf_types(f.dtype, (*path, f.name))
        else:
            out.append(((*path, f.name), f.dtype))
    return out


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


def _extras(
    records: pl.Series, types: pl.Series, known_keys: pl.Series, plan: _Plan
) -> tuple[pl.Series, pl.Series]:
    """(`extra`, `data_extra`) JSON strings of unknown top-level / data fields.

    A record of a page the native pass found no unknown key in (`known_keys`) is counted only
    when its text can fool the count: then each `":` not escaped is a known key's end (the
    regex's match), but for a string starting with `:` (its opening quote follows `:`, `,`,
    `[` or whitespace) and a key ending in an escaped backslash. Such a record is counted as
    any other, so every record gets what the count gives it."""
    n = len(records)
    r = pl.col("r").str
    frame = pl.DataFrame({"r": records, "known": known_keys})
    counted = frame.select((~pl.col("known")) | r.contains(_FOOLING)).to_series().arg_true()
    unknown = (
        frame[counted]
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
    idx = counted.gather(unknown.arg_true()).to_list()
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
            extra[i] = _json_text(top)
        data = obj.get("data")
        known = plan.data_keys.get(kind or "")
        if isinstance(data, dict) and known is not None:
            more = {k: v for k, v in data.items() if k not in known}
            if more:
                data_extra[i] = _json_text(more)
    return pl.Series(extra, dtype=S), pl.Series(data_extra, dtype=S)


def _json_text(fields: dict[str, Any]) -> str | None:
    """Unknown fields as JSON text; None for fields nested deeper than orjson writes (255
    levels; the decoders take ~1,000): that record's `extra` is left empty rather than the
    day failing, and `raw_cdrs` holds its exact text."""
    try:
        return orjson.dumps(fields).decode()
    except TypeError:  # orjson: "Recursion limit reached"
        return None


def _leaf(keys: tuple[str, ...]) -> str:
    """The flat column of a leaf of `r` (`_leaves`): `r.` and its dotted path (no key holds a
    dot: a field's keys are its path split on dots), which no other column's name starts with."""
    return "r." + ".".join(keys)


def _at(keys: tuple[str, ...]) -> pl.Expr:
    """The decoded value at a path of the record (its leaf's flat column, see `_leaves`)."""
    return pl.col(_leaf(keys))


def _leaves(r: pl.Series) -> list[pl.Series]:
    """Every leaf of the struct `r`, one Series each, named by `_leaf` (a leaf is null
    where any struct above it is). Unnested on the Series because a frame operation is planned
    against the frame's whole schema: with `r` in it (every field of every CDR type), each
    one cost ~1 ms per row group, whatever it read (bench/RESULTS.md)."""
    out: list[pl.Series] = []

    def walk(struct: pl.Series, path: tuple[str, ...]) -> None:
        for child in struct.struct.unnest().get_columns():
            if isinstance(child.dtype, pl.Struct):
                walk(child, (*path, child.name))
            else:
                out.append(child.alias(_leaf((*path, child.name))))

    walk(r, ())
    return out


def _typed(f: CdrField, plan: _Plan) -> pl.Expr:
    """A field's decoded value as its column's type: the typed leaf itself, or, where two CDR
    types share a path with different types (a text leaf), its text cast."""
    value = _at(f.keys)
    leaf = plan.leaves[f.keys]
    if leaf == f.dtype or f.kind == "timestamp":
        return value
    return cast_text(value, f.dtype)


def _type_frame(ok: pl.DataFrame, kind: str, spec: TableSpec, plan: _Plan) -> pl.DataFrame:
    fields = plan.fields
    common = [pl.col(f.column) for f in fields.common]
    specific = [_typed(f, plan).alias(f.column) for f in fields.of_type(kind)]
    tail = [pl.col("data_extra").alias("extra"), pl.col("date")]
    # Project first (struct fields and casts are cheap row-wise), then filter the flat columns:
    # filtering the wide nested `data` struct per type costs more than the whole projection.
    keep = ok.get_column("type") == kind
    return ok.select([*common, *specific, *tail]).filter(keep).cast(spec.polars_schema())


def _reasons(plan: _Plan) -> list[pl.Expr]:
    """Why a record is quarantined, one expression per rule of the field table, in the order
    the reason text lists them: decoding, required fields, money, negative values, times."""
    fields = plan.fields
    kind = _at(("type",))
    reasons = [pl.col("struct_reason")]
    reasons += [
        pl.when(pl.col(f.column).is_null()).then(pl.lit(f"missing {f.path}"))
        for f in fields.top
        if f.required and f.kind != "timestamp"
    ]
    reasons.append(pl.col("money_reason"))  # the decode's (a JSON string, too many digits)
    for f in fields.fields:
        if f.non_negative:
            value = pl.col(f.column) if f.cdr_type is None else _typed(f, plan)
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
    # Keep the last copy of each id: later pages/revisions win. Null ids are kept (quarantined),
    # after the others. A group with neither (the usual one) stays as it is, uncopied.
    ids = raw.get_column("id")
    if ids.null_count() or ids.n_unique() != raw.height:
        with_id = raw.filter(pl.col("id").is_not_null()).unique(
            "id", keep="last", maintain_order=True
        )
        raw = pl.concat([with_id, raw.filter(pl.col("id").is_null())])
    extra, data_extra = _extras(raw["record"], raw["type"], raw["known_keys"], plan)
    # The numbers' countries, when the privacy stage put them beside the record (its
    # `Pseudonymizer.page`, before the numbers became tokens): on to `cdrs`.
    beside = [c.name for c in PARTY_COLUMNS if c.name in raw.columns]
    column = raw.get_column
    df = pl.DataFrame(
        [
            *(column(name) for name in beside),
            column("record"),
            column("started_at_raw"),
            column("struct_reason"),
            column("money_reason"),
            # As the page's split found them: the quarantine's id and type when `r` is null.
            column("id").alias("head_id"),
            column("type").alias("head_type"),
            extra.alias("extra"),
            data_extra.alias("data_extra"),
            *_leaves(column("r")),
        ]
    )
    df = df.with_columns(
        _typed(f, plan).alias(f.column) for f in fields.top if f.kind != "timestamp"
    )
    df = with_timestamps(
        df, {f.column: _at(f.keys) for f in fields.top if f.kind == "timestamp"}
    ).with_columns(pl.col("started_at").dt.date().alias("date"))
    df = df.with_columns(
        pl.concat_str(_reasons(plan), separator="; ", ignore_nulls=True).alias("reason")
    )
    quarantined = df.get_column("reason") != ""
    if quarantined.any():
        bad, ok = df.filter(quarantined), df.filter(~quarantined)
    else:  # the usual group: nothing quarantined, and no copy of every column to make
        bad, ok = df.clear(), df
    known = pl.col("type").is_in(list(plan.data_keys))
    # `data` JSON only for rows of an unknown type: the others are null before the JSON path.
    data_json = pl.when(known).then(None).otherwise(pl.col("record")).str.json_path_match("$.data")
    cdrs = ok.with_columns(pl.when(known).then(None).otherwise(data_json).alias("data")).select(
        *cdrs_spec.column_names, *beside
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
        *dict.fromkeys(_leaf(f.keys) for f in fields.fields if f.cdr_type is not None),
    )
    per_type = {t.table: _type_frame(slim, t.name, plan.specs[t.table], plan) for t in fields.types}
    # A new CDR type also needs its attribute here (and its table in `pipelines.cdr_day`).
    return NormalizedTables(
        cdrs=cdrs.cast(cdrs_spec.polars_schema()),
        quarantine=quarantine.cast(CDR_QUARANTINE.polars_schema()),
        **per_type,
    )
