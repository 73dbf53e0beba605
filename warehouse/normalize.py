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
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation

import orjson
import polars as pl

from models.tables import (
    CDR_CALLS,
    CDR_CONVERSATIONS,
    CDR_HLR_LOOKUPS,
    CDR_QUARANTINE,
    CDR_SMS,
    CDRS,
    TYPE_TABLES,
    TableSpec,
)
from warehouse.decode import (
    DATA_FIELDS,
    RECORD_DTYPE,
    TOP_FIELDS,
    all_key_names,
    parse_ts,
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
_KNOWN_KEY_RE = '"(?:' + "|".join(sorted(all_key_names(RECORD_DTYPE))) + ')":'
_STRING_COST_RE = r'"cost":"'
_COST_KEY = '"cost":'
_COST_TOKEN_RE = r'"cost":(-?[0-9][0-9.eE+-]*)'  # noqa: S105
# The decoded cost went through f64 (shortest repr). It equals the token exactly unless the
# token has more than 6 decimals or an exponent (f64 may have dropped or rounded digits: such a
# token is found in the record's text) or the decoded text has an exponent, 7+ decimals or 10+
# digits: only then is the token read from the text and checked to fit Decimal(18,6) exactly.
_INEXACT_COST_RE = r"[eE]|\.[0-9]{7}|[0-9]{10}"
_LONG_COST_TOKEN_RE = r'"cost":-?[0-9]*(?:\.[0-9]{7}|[.0-9]*[eE])'  # noqa: S105
_SIX = Decimal("0.000001")
_MONEY_LIMIT = Decimal(10) ** 12  # Decimal(18, 6): 12 integer digits
MORE_DECIMALS = "cost has more than 6 decimals (Decimal(18,6) would round it)"
MORE_DIGITS = "cost has more than 12 integer digits (out of Decimal(18,6)'s range)"
# Per-type `data.durations` keys of the spec (seconds; never negative).
DURATIONS: dict[str, tuple[str, ...]] = {
    "call": ("overall", "dialing", "ivr", "queue", "talk", "hold"),
    "conversation": ("overall", "queue", "talk"),
}


class _Num(str):
    """A JSON number token as written (json.loads parse_float/parse_int)."""


def _cost_fit(token: str) -> tuple[str, str | None]:
    """(text to cast, why it cannot be cast exactly) for a cost token as written: a token that
    fits Decimal(18,6) exactly comes back in plain notation (`1.5e0` -> `1.500000`)."""
    try:
        value = Decimal(token)
    except InvalidOperation:
        return token, None  # not a number: the cast fails and says so
    if not value.is_finite():
        return token, None
    if value.is_zero():
        return "0", None  # `0e5`, `-0.0`
    if abs(value) >= _MONEY_LIMIT:
        return token, MORE_DIGITS
    exact = value.quantize(_SIX)
    if exact != value:
        return token, MORE_DECIMALS
    return format(exact, "f"), None


def _exact_costs(records: pl.Series, decoded: pl.Series) -> tuple[pl.Series, pl.Series, pl.Series]:
    """(cost text to cast, top-level cost is a JSON string, why the cost does not fit
    Decimal(18,6) exactly) per record.

    The cost text is the decoded text except where it may not be the token exactly
    (`_INEXACT_COST_RE` on the decoded text, `_LONG_COST_TOKEN_RE` on the record's); there the
    token is taken from the record text (one polars extract when the record has a single
    `"cost":` key, json with exact numbers otherwise) and checked to fit (`_cost_fit`).
    Only rows that contain `"cost":"` are checked for a string cost, the same way."""
    frame = pl.DataFrame({"rec": records, "dec": decoded})
    flags = frame.select(
        inexact=(
            pl.col("dec").str.contains(_INEXACT_COST_RE)
            | pl.col("rec").str.contains(_LONG_COST_TOKEN_RE)
        ).fill_null(False)
        & pl.col("dec").is_not_null(),
        string=pl.col("rec").str.contains(_STRING_COST_RE, literal=True).fill_null(False)
        & pl.col("dec").is_not_null(),
    )
    idx = (flags["inexact"] | flags["string"]).arg_true()
    is_string = pl.Series([False] * len(records), dtype=pl.Boolean())
    misfit = pl.Series([None] * len(records), dtype=S)
    if idx.len() == 0:
        return decoded, is_string, misfit
    sub = frame[idx].with_columns(
        keys=pl.col("rec").str.count_matches(_COST_KEY, literal=True),
        token=pl.col("rec").str.extract(_COST_TOKEN_RE, 1),
    )
    texts = sub["dec"].to_list()
    strings = [False] * sub.height
    misfits: list[str | None] = [None] * sub.height
    for j, (rec, keys, token) in enumerate(sub.select("rec", "keys", "token").iter_rows()):
        if keys == 1:  # the only `"cost":` is the top-level key (the record has a cost)
            strings[j] = token is None
            if token is not None:
                texts[j], misfits[j] = _cost_fit(token)
            continue
        try:
            obj = json.loads(rec, parse_float=_Num, parse_int=_Num)
        except (ValueError, RecursionError):
            continue
        cost = obj.get("cost") if isinstance(obj, dict) else None
        if isinstance(cost, str):
            strings[j] = not isinstance(cost, _Num)
            if isinstance(cost, _Num):
                texts[j], misfits[j] = _cost_fit(cost)
    exact = decoded.scatter(idx, pl.Series(texts, dtype=S))
    return (
        exact,
        is_string.scatter(idx, pl.Series(strings, dtype=pl.Boolean())),
        misfit.scatter(idx, pl.Series(misfits, dtype=S)),
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


def _extras(records: pl.Series, types: pl.Series) -> tuple[pl.Series, pl.Series]:
    """(`extra`, `data_extra`) JSON strings of unknown top-level / data fields."""
    n = len(records)
    r = pl.col("r").str
    unknown = (
        records.to_frame("r")
        .select(
            (
                r.count_matches(_COLON, literal=True)
                - r.count_matches(_ESCAPED_COLON, literal=True)
                != r.count_matches(_KNOWN_KEY_RE)
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
        top = {k: v for k, v in obj.items() if k not in TOP_FIELDS}
        if top:
            extra[i] = orjson.dumps(top).decode()
        data = obj.get("data")
        known = DATA_FIELDS.get(kind or "")
        if isinstance(data, dict) and known is not None:
            more = {k: v for k, v in data.items() if k not in known}
            if more:
                data_extra[i] = orjson.dumps(more).decode()
    return pl.Series(extra, dtype=S), pl.Series(data_extra, dtype=S)


def _endpoint_cols(side: str) -> list[pl.Expr]:
    e = pl.col("r").struct.field(side)
    acct = e.struct.field("channel_account")
    return [
        e.struct.field("type").alias(f"{side}_type"),
        e.struct.field("phone_number").alias(f"{side}_phone_number"),
        acct.struct.field("id").alias(f"{side}_channel_account_id"),
        acct.struct.field("channel").alias(f"{side}_channel"),
        acct.struct.field("identifier").alias(f"{side}_identifier"),
        acct.struct.field("data").struct.field("name").alias(f"{side}_account_name"),
        acct.struct.field("data").struct.field("username").alias(f"{side}_account_username"),
        acct.struct.field("name_snapshot").alias(f"{side}_name_snapshot"),
        _bool(acct.struct.field("deleted")).alias(f"{side}_deleted"),
    ]


def _ref_cols(field: str, prefix: str, *, int_id: bool = True) -> list[pl.Expr]:
    ref = pl.col("r").struct.field("data").struct.field(field)
    rid = ref.struct.field("id")
    return [
        (_int(rid) if int_id else rid).alias(f"{prefix}_id"),
        ref.struct.field("name").alias(f"{prefix}_name"),
        ref.struct.field("name_snapshot").alias(f"{prefix}_name_snapshot"),
        _bool(ref.struct.field("deleted")).alias(f"{prefix}_deleted"),
    ]


def _d(*path: str) -> pl.Expr:
    expr = pl.col("r").struct.field("data")
    for p in path:
        expr = expr.struct.field(p)
    return expr


def _type_frame(ok: pl.DataFrame, kind: str, spec: TableSpec) -> pl.DataFrame:
    common = [pl.col(c) for c in ("id", "subtype", "disposition", "user_id", "user_name_snapshot")]
    common += [pl.col("cost"), pl.col("started_at"), pl.col("ended_at")]
    tail = [pl.col("data_extra").alias("extra"), pl.col("date")]
    specific: list[pl.Expr]
    if kind == "call":
        specific = [
            *_ref_cols("queue", "queue"),
            *_ref_cols("campaign", "campaign"),
            _d("destination_country").alias("destination_country"),
            *[
                _float(_d("durations", k)).alias(f"duration_{k}")
                for k in ("overall", "dialing", "ivr", "queue", "talk", "hold")
            ],
            _d("end_reason").alias("end_reason"),
            _d("wrapup_code", "code_snapshot").alias("wrapup_code_snapshot"),
            _d("summary").alias("summary"),
            _float(_d("conversation_score")).alias("conversation_score"),
            _float(_d("mos")).alias("mos"),
            _float(_d("mos_tc")).alias("mos_tc"),
        ]
    elif kind == "conversation":
        specific = [
            _d("channel").alias("channel"),
            *_ref_cols("flow", "flow", int_id=False),
            *_ref_cols("queue", "queue"),
            _d("wrapup_code", "code_snapshot").alias("wrapup_code_snapshot"),
            *[
                _float(_d("durations", k)).alias(f"duration_{k}")
                for k in ("overall", "queue", "talk")
            ],
        ]
        for name in ("first_response", "resolution", "avg_reply"):
            sla = _d("service_level_agreements", name)
            specific += [
                _float(sla.struct.field("value")).alias(f"sla_{name}_value"),
                sla.struct.field("status").alias(f"sla_{name}_status"),
            ]
    elif kind == "sms":
        specific = [
            _bool(_d("sent")).alias("sent"),
            _int(_d("segments_count")).alias("segments_count"),
            _d("message").alias("message"),
            *_ref_cols("canned_message", "canned_message"),
            _d("related_call", "id").alias("related_call_id"),
        ]
    else:  # hlr_lookup
        specific = [
            _bool(_d("reachable")).alias("reachable"),
            _bool(_d("roaming")).alias("roaming"),
            _d("related_call", "id").alias("related_call_id"),
        ]
    # Project first (struct fields and casts are cheap row-wise), then filter the flat columns:
    # filtering the wide nested `data` struct per type costs more than the whole projection.
    keep = ok.get_column("type") == kind
    return ok.select([*common, *specific, *tail]).filter(keep).cast(spec.polars_schema())


def _negative_durations() -> list[pl.Expr]:
    """A reason per negative `data.durations` value of a call or conversation."""
    kind = pl.col("r").struct.field("type")
    return [
        pl.when((kind == t) & (_float(_d("durations", k)) < 0)).then(
            pl.lit(f"data.durations.{k} is negative")
        )
        for t, keys in DURATIONS.items()
        for k in keys
    ]


def normalize(raw: pl.DataFrame) -> NormalizedTables:
    """`raw_cdrs` rows (any number of pages, e.g. a day read back from the lake) -> typed,
    deduplicated tables."""
    return normalize_decoded(with_decoded(raw))


def normalize_decoded(raw: pl.DataFrame) -> NormalizedTables:
    """Rows of `decode_page_typed` (any number of pages) -> typed, deduplicated tables."""
    # Keep the last copy of each id: later pages/revisions win. Null ids are kept (quarantined).
    with_id = raw.filter(pl.col("id").is_not_null()).unique("id", keep="last", maintain_order=True)
    raw = pl.concat([with_id, raw.filter(pl.col("id").is_null())])
    extra, data_extra = _extras(raw["record"], raw["type"])
    cost_text, cost_is_string, cost_misfit = _exact_costs(
        raw["record"], raw["r"].struct.field("cost")
    )
    df = raw.select(
        "record",
        "started_at_raw",
        "r",
        "struct_reason",
        # As the page's split found them: the quarantine's id and type when `r` is null.
        pl.col("id").alias("head_id"),
        pl.col("type").alias("head_type"),
    ).with_columns(
        extra=extra,
        data_extra=data_extra,
        cost_text=cost_text,
        cost_is_string=cost_is_string,
        cost_misfit=cost_misfit,
    )
    top = pl.col("r").struct
    user = top.field("user").struct
    df = df.with_columns(
        top.field("id").alias("id"),
        top.field("type").alias("type"),
        top.field("subtype").alias("subtype"),
        top.field("disposition").alias("disposition"),
        *_endpoint_cols("from"),
        *_endpoint_cols("to"),
        user.field("id").alias("user_id"),
        user.field("name").alias("user_name"),
        user.field("email").alias("user_email"),
        user.field("name_snapshot").alias("user_name_snapshot"),
        _bool(user.field("deleted")).alias("user_deleted"),
        pl.col("cost_text").cast(CDRS.polars_schema()["cost"], strict=False).alias("cost"),
        top.field("tags").alias("tags"),
    )
    df = with_timestamps(
        df, {"started_at": top.field("started_at"), "ended_at": top.field("ended_at")}
    ).with_columns(pl.col("started_at").dt.date().alias("date"))
    raw_cost = top.field("cost")
    reasons = [
        pl.col("struct_reason"),
        pl.when(pl.col("id").is_null()).then(pl.lit("missing id")),
        pl.when(pl.col("type").is_null()).then(pl.lit("missing type")),
        pl.when(pl.col("cost_is_string")).then(pl.lit("cost is a string")),
        pl.col("cost_misfit"),
        pl.when(
            raw_cost.is_not_null() & pl.col("cost").is_null() & pl.col("cost_misfit").is_null()
        ).then(pl.lit("cost is not a decimal")),
        *_negative_durations(),
        pl.when(pl.col("started_at").is_null()).then(pl.lit("started_at missing or unparseable")),
        pl.when(top.field("ended_at").is_not_null() & pl.col("ended_at").is_null()).then(
            pl.lit("ended_at unparseable")
        ),
    ]
    df = df.with_columns(pl.concat_str(reasons, separator="; ", ignore_nulls=True).alias("reason"))
    bad = df.filter(pl.col("reason") != "")
    ok = df.filter(pl.col("reason") == "")
    known = pl.col("type").is_in(list(DATA_FIELDS))
    # `data` JSON only for rows of an unknown type: the others are null before the JSON path.
    data_json = pl.when(known).then(None).otherwise(pl.col("record")).str.json_path_match("$.data")
    cdrs = ok.with_columns(pl.when(known).then(None).otherwise(data_json).alias("data")).select(
        CDRS.column_names
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
        "type",
        "id",
        "subtype",
        "disposition",
        "user_id",
        "user_name_snapshot",
        "cost",
        "started_at",
        "ended_at",
        "data_extra",
        "date",
        pl.struct(pl.col("r").struct.field("data")).alias("r"),
    )
    per_type = {kind: _type_frame(slim, kind, spec) for kind, spec in TYPE_TABLES.items()}
    return NormalizedTables(
        cdrs=cdrs.cast(CDRS.polars_schema()),
        cdr_calls=per_type["call"],
        cdr_conversations=per_type["conversation"],
        cdr_sms=per_type["sms"],
        cdr_hlr_lookups=per_type["hlr_lookup"],
        quarantine=quarantine.cast(CDR_QUARANTINE.polars_schema()),
    )
