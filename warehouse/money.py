"""Money read exactly from a record's text: the tolerant path's check that a decoded cost is the
JSON token as written and fits Decimal(precision, scale), never rounded.

The tolerant decode (`warehouse.decode`) reads every leaf as text, and a number's text went
through f64 (shortest repr). `exact_costs` finds the rows where that text may not be the token
exactly and reads the token from the record's text instead; a token that does not fit is given a
reason (the record is quarantined). The native decode (`warehouse.native`) needs none of this:
it parses the token straight into `decimal128` and refuses a page that does not fit.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation

import polars as pl

from models.cdr_fields import CdrField

S = pl.String()

# f64 (what the decoded text went through) keeps 15-16 significant digits.
_F64_DIGITS = 16


@dataclass(frozen=True)
class Money:
    """A top-level decimal field and how its exact value is checked (never rounded).

    The decoded value went through f64 (shortest repr). It equals the token exactly unless the
    token has more decimals than the scale or an exponent (f64 may have dropped or rounded
    digits: such a token is found in the record's text) or the decoded text has an exponent,
    more decimals than the scale or too many digits for f64: only then is the token read from
    the text and checked to fit Decimal(precision, scale) exactly."""

    field: CdrField
    key: str  # `"cost":` as a regex (whitespace allowed)
    token_re: str
    inexact_re: str
    long_token_re: str
    quantum: Decimal
    limit: Decimal
    more_decimals: str
    more_digits: str

    @staticmethod
    def of(f: CdrField) -> Money:
        if len(f.keys) != 1 or f.precision is None or f.scale is None:
            raise ValueError(
                f"{f.path}: a decimal field is checked exact on the record's text, "
                "so it must be a top-level field"
            )
        p, s = f.precision, f.scale
        # The key as JSON allows it written: whitespace around the colon (a pretty-printed
        # record); a key spelled with escapes goes to the JSON reading (`exact_costs`).
        k = re.escape(f'"{f.path}"') + r"\s*:\s*"
        return Money(
            field=f,
            key=k,
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


def _cost_fit(token: str, money: Money) -> tuple[str, str | None]:
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


def exact_text(value: object, dtype: pl.DataType) -> str | None:
    """A decimal's text (a snapshot's price or balance) in plain notation, or None when it is
    not a finite number or does not fit `dtype` exactly: a cast would round `1.23456789` to
    `1.234568`, and turn `-0.0000005` into 0, without a word."""
    if not isinstance(dtype, pl.Decimal):
        raise TypeError(f"not a decimal column: {dtype}")
    if value is None:
        return None
    try:
        number = Decimal(str(value))
    except InvalidOperation:
        return None
    scale = dtype.scale
    precision = dtype.precision if dtype.precision is not None else 38
    if not number.is_finite() or abs(number) >= Decimal(10) ** (precision - scale):
        return None
    exact = number.quantize(Decimal(1).scaleb(-scale))
    return format(exact, "f") if exact == number else None


def exact_costs(
    records: pl.Series, decoded: pl.Series, money: Money
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
        string=pl.col("rec").str.contains(money.key + '"').fill_null(False)
        & pl.col("dec").is_not_null(),
        # A key written with an escape (`"c\u006fst"`) is not seen by the patterns.
        escaped=pl.col("rec").str.contains("\\u", literal=True).fill_null(False)
        & pl.col("dec").is_not_null(),
    )
    idx = (flags["inexact"] | flags["string"] | flags["escaped"]).arg_true()
    is_string = pl.Series([False] * len(records), dtype=pl.Boolean())
    misfit = pl.Series([None] * len(records), dtype=S)
    if idx.len() == 0:
        return decoded, is_string, misfit
    sub = frame[idx].with_columns(
        keys=pl.col("rec").str.count_matches(money.key),
        token=pl.col("rec").str.extract(money.token_re, 1),
    )
    texts = sub["dec"].to_list()
    strings = [False] * sub.height
    misfits: list[str | None] = [None] * sub.height
    for j, (rec, keys, token) in enumerate(sub.select("rec", "keys", "token").iter_rows()):
        if keys == 1 and "\\u" not in rec:  # the only `"cost":`: the top-level key
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
