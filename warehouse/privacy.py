"""Callers' numbers and identities as keyed tokens, applied when a day lands (issue 26).

Under `CDRHOUSE_PHONE_NUMBERS=token`, a number's token is the lowercase hex HMAC-SHA256, under
the key (`CDRHOUSE_PII_KEY`), of its E.164 digits without `+` (`phone_token`): the same number
in any written form (`+49…`, `0049…`, `49…`) gives the same token, so analysts still count
repeat callers and join tables, and nobody without the key can test a guess (a plain hash of a
number is reversed by hashing the small number space). A customer's channel identity (WhatsApp
identifier, username, display name) gets a text token (`text_token`: HMAC of `text:` + value),
unless the identifier is a number, which gets the number's token.

`Pseudonymizer.page` rewrites a row group's decoded rows before anything of it is written (on
a thread of its own, while the previous group is written; the group's distinct numbers are
made at once by `_made_all`: vectorized lookups of their countries, one HMAC each):

* `record` (hence `raw_cdrs`, `cdr_quarantine`, `extra` and `data`) keeps the record's exact
  bytes with the values replaced: each `from`/`to` number by its token, with `phone_country`
  and `phone_calling_code` written beside it; each channel identity (identifier, name,
  username, name snapshot) by its token; the SMS `message` by null (unless
  `CDRHOUSE_SMS_BODIES=keep`); and, in a field the spec does not name, any string that is a
  number (`"+4915…"`, 7 to 15 digits, or written for people: `"+49 151 …"`, `"tel:+49…"`,
  valid by phonenumbers), such a number as a key, and any integer that is a valid phone
  number by that number's token (the fields the spec names keep their values: a tag, a queue's or a
  campaign's name, free text; unless a value is, whole, the record's own customer's number,
  which gets its token there too). Each distinct
  value is tokenized once in Python; each record is rewritten by vectorized replacement of
  the value's exact JSON text under its key (a row's own numbers spliced out at their byte
  offsets; the names, identifiers and bodies of the group's conversations and SMS in one
  `replace_many` pass over their records, since the same text gets the same replacement in
  any record).
  A record with a backslash (an escape could spell a value differently), one that still
  holds a value after that, one whose customer is named like an agent or a queue of the
  group, or one of a page with fields the spec may not name that holds a number outside its
  own (`from`/`to`) ones, or one with a second `message` key, is decoded, replaced by path
  and encoded again instead (a value no JSON reader takes, `NaN`, held aside; a text that is
  not JSON has every string value and digit run replaced). A number a decode reason quotes
  (a key) becomes its token there too.
* `r` (the typed decode) gets the tokens too, so the typed tables normalized from it hold
  them, and the numbers' countries are set beside it (`normalize_decoded` passes them to
  `cdrs`).
* a token on the forget-list (`cdrhouse privacy forget`) becomes null instead, and the row's
  `pii_forgotten` is true: a re-pull of an erased day does not bring the person back.

Free text is not searched for numbers: a call `summary` that quotes a number keeps it (under
`token` the SMS body, the one free text a customer writes, is dropped).

`Pseudonymizer.tables` then gives the typed tables the columns the lake holds beyond
normalization (`models.tables.landed`): each number's country and calling code on `cdrs`, and
`pii_forgotten` everywhere (for rows read back from the lake, it also replaces their values,
as `page` does). Under `raw`, records and tables are untouched: a partition keeps the schema it
had before this stage existed (readers show its columns as null).

Agents' names and emails are employee data and stay as they are.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import unicodedata
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from functools import lru_cache
from typing import Any, Literal

import msgspec
import phonenumbers
import polars as pl
from phonenumbers import COUNTRY_CODE_TO_REGION_CODE, NumberParseException, PhoneNumberFormat

from models.jsonpage import PageSyntaxError, is_json_scalar, scalars, tokens
from models.tables import PARTY_COLUMNS, PII_FORGOTTEN, TABLES, landed
from warehouse.decode import BASE64_PREFIX, record_dtype, with_decoded
from warehouse.lake import Lake

PhoneNumbers = Literal["token", "raw"]
SmsBodies = Literal["drop", "keep"]
PHONE_NUMBERS_VAR = "CDRHOUSE_PHONE_NUMBERS"
PII_KEY_VAR = "CDRHOUSE_PII_KEY"
SMS_BODIES_VAR = "CDRHOUSE_SMS_BODIES"

FORGOTTEN = PII_FORGOTTEN.name
SIDES = ("from", "to")
# cdrs columns holding a customer's number or identity, and how each is tokenized.
PHONE_COLUMNS = tuple(f"{side}_phone_number" for side in SIDES)
IDENTIFIER_COLUMNS = tuple(f"{side}_identifier" for side in SIDES)
NAME_COLUMNS = tuple(
    f"{side}_{name}" for side in SIDES for name in ("account_name", "account_username")
) + tuple(f"{side}_name_snapshot" for side in SIDES)
TOKEN_COLUMNS = PHONE_COLUMNS + IDENTIFIER_COLUMNS + NAME_COLUMNS
# The keys a customer's name sits under in a channel account (`data.name`, `data.username`,
# `name_snapshot`), and the other objects' keys of the same names (agent, queue, flow...).
NAME_KEYS = ("name", "username", "name_snapshot")
_TOKEN = re.compile(r"[0-9a-f]{64}")
# A JSON string that is a number: the whole literal, quotes included (polars regex).
NUMBER_LITERAL = r'"(?:\+?[0-9]{7,15}|(?i:tel:)?(?:\+|00)[0-9][0-9 ().\x{A0}/-]{5,24}[0-9])"'
# A JSON integer of 7 to 15 digits in value position (polars regex); may match inside a string
# too, which only sends the record by path, where the JSON is read.
INTEGER_LITERAL = r"[:\[,]\s*-?[0-9]{7,15}\s*[,\]}]"
_NUMBER_TEXT = re.compile(r"\+?[0-9]{7,15}")
_SEPARATORS = str.maketrans("", "", " -().\u00a0/\t\u2010\u2011\u2012\u2013\u2014\u2212")
# A number written for people, in international form (`+49 151 …`, `0049 151-…`, `tel:+49…`):
# in a field the spec does not name it is a number when phonenumbers finds it valid.
_WRITTEN_NUMBER = re.compile(r"(?i:tel:)?(?:\+|00)[0-9][0-9 ().\u00a0/-]{5,24}[0-9]")
_DECODE = msgspec.json.Decoder(float_hook=Decimal)  # money stays exactly as written
_ENCODE = msgspec.json.Encoder(decimal_format="number")


@dataclass(frozen=True)
class PrivacyPolicy:
    """What lands of a person: `raw` (as the API sent it) or `token` (keyed tokens)."""

    phone_numbers: PhoneNumbers
    key: bytes = field(default=b"", repr=False)
    sms_bodies: SmsBodies = "drop"

    def __post_init__(self) -> None:
        if self.phone_numbers == "token" and not self.key:
            raise ValueError(f"{PHONE_NUMBERS_VAR}=token needs a key ({PII_KEY_VAR})")

    def __repr__(self) -> str:
        return f"PrivacyPolicy({self.phone_numbers}, sms_bodies={self.sms_bodies})"

    @property
    def tokens(self) -> bool:
        return self.phone_numbers == "token"

    @property
    def key_check(self) -> str | None:
        """Which key makes the tokens, for the partitions' footers (`META_KEY_CHECK`): the
        HMAC of a constant under it, which tells keys apart and gives none of them away; None
        under `raw`."""
        return _keyed(self.key).hex(_KEY_CHECK_TEXT) if self.tokens else None


RAW = PrivacyPolicy("raw")


def e164_digits(text: str) -> str:
    """A number's E.164 digits without `+`, however it is written (`+49 151 …`, `0049151…`,
    `49151…`, `tel:+49…`, full-width digits, other Unicode spaces, an extension, letters):
    separators and an international prefix (`+`, `00`) are dropped, then phonenumbers reads
    it; a number it cannot read keeps its digits, so it still gets a stable token."""
    if not text.isascii():
        text = unicodedata.normalize("NFKC", text)  # full-width digits, U+202F...
    text = text.strip()
    if text[:4].lower() == "tel:":
        text = text[4:]
    digits = text.translate(_SEPARATORS)
    if digits.startswith("+"):
        digits = digits[1:]
    elif digits.startswith("00"):
        digits = digits[2:]
    if digits.isascii() and digits.isdigit():
        return _canonical(digits)
    return _read_odd(digits)


@lru_cache(maxsize=1 << 12)
def _read_odd(digits: str) -> str:
    """A number written with more than digits (`… ext. 12`, `+1 800 FLOWERS`): phonenumbers
    reads it as international, as `_canonical` does (the extension is not part of E.164)."""
    try:
        number = phonenumbers.parse("+" + digits, None)
    except NumberParseException:
        return digits
    if not phonenumbers.is_possible_number(number):
        return digits
    return phonenumbers.format_number(number, PhoneNumberFormat.E164)[1:]


@lru_cache(maxsize=1 << 16)
def _canonical(digits: str) -> str:
    if not digits.isdigit():
        return digits
    code = _calling_code(digits)
    if code is not None and 8 <= len(digits) <= 15 and digits[len(str(code))] != "0":
        # Already E.164 (the API's own form): phonenumbers would return it as it is, at
        # ~20 us a number; a trunk 0 after the code, or a short or long one, goes to it.
        return digits
    try:
        number = phonenumbers.parse("+" + digits, None)
    except NumberParseException:
        return digits
    return phonenumbers.format_number(number, PhoneNumberFormat.E164)[1:]


def _calling_code(digits: str) -> int | None:
    if digits[:1] == "0":  # a national number (trunk 0): no calling code to read
        return None
    for size in (1, 2, 3):
        if digits[:size].isdigit() and int(digits[:size]) in COUNTRY_CODE_TO_REGION_CODE:
            return int(digits[:size])
    return None


_REGIONS: dict[str, str] = {}


def _region(digits: str, code: int) -> str:
    """The country of a number whose calling code several countries share (+1, +44, +7...):
    phonenumbers' answer for the first number seen with the same calling code and next three
    digits (a NANP area code), its main country when it cannot tell."""
    prefix = digits[: len(str(code)) + 3]
    region = _REGIONS.get(prefix)
    if region is None:
        try:
            region = phonenumbers.region_code_for_number(phonenumbers.parse("+" + digits, None))
        except NumberParseException:
            region = None
        region = region or COUNTRY_CODE_TO_REGION_CODE[code][0]
        if len(_REGIONS) < 1 << 16:
            _REGIONS[prefix] = region
    return region


def country(digits: str) -> tuple[str | None, int | None]:
    """(ISO country code, calling code) of E.164 digits; (None, None) if unknown."""
    code = _calling_code(digits)
    if code is None:
        return None, None
    regions = COUNTRY_CODE_TO_REGION_CODE[code]
    region = regions[0] if len(regions) == 1 else _region(digits, code)
    if region in (None, "001", "ZZ"):  # non-geographic (+800...) or unknown
        return None, code
    return region, code


class _Keyed:
    """HMAC-SHA256 under one key, from the key's pads hashed once: ~1.2 us a value, where
    `hmac.digest` sets the key up again for each (~2.6 us here). Same bytes as `hmac`."""

    def __init__(self, key: bytes) -> None:
        if len(key) > _BLOCK:
            key = hashlib.sha256(key).digest()
        key = key.ljust(_BLOCK, b"\0")
        self._inner = hashlib.sha256(bytes(b ^ 0x36 for b in key))
        self._outer = hashlib.sha256(bytes(b ^ 0x5C for b in key))

    def __repr__(self) -> str:
        return "_Keyed(<key>)"

    def hex(self, text: str) -> str:
        inner = self._inner.copy()
        inner.update(text.encode())
        outer = self._outer.copy()
        outer.update(inner.digest())
        return outer.hexdigest()


_BLOCK = 64  # SHA-256's block size
# Keyed for `PrivacyPolicy.key_check`: not digits, so no number's token is ever this one's.
_KEY_CHECK_TEXT = "cdrhouse: which key made these tokens"


@lru_cache(maxsize=8)
def _keyed(key: bytes) -> _Keyed:
    return _Keyed(key)


def _hmac(key: bytes, text: str) -> str:
    return _keyed(key).hex(text)


def phone_token(key: bytes, number: str) -> str:
    """The number's token: hex HMAC-SHA256 of its E.164 digits without `+`."""
    return _hmac(key, e164_digits(number))


def text_token(key: bytes, text: str) -> str:
    """A customer's name or username as a token (never equal to a number's)."""
    return _hmac(key, "text:" + text)


def is_token(value: str) -> bool:
    return _TOKEN.fullmatch(value) is not None


def looks_like_number(text: str) -> bool:
    """A customer's number as a value: 7 to 15 digits (`+` allowed), or an international
    number written with separators that phonenumbers finds valid (not a date or a time)."""
    if _NUMBER_TEXT.fullmatch(text) is not None:
        return True
    return _WRITTEN_NUMBER.fullmatch(text) is not None and _valid_number(e164_digits(text))


# A number's token, country, calling code, and JSON text under `phone_number`.
_Number = tuple[str, str | None, int | None, str]
_NUMBERS_HELD = 30_000  # numbers (names) a landing keeps made, twice (~25 MB); older: made again


@dataclass
class Pseudonymizer:
    """One landing's tokenizer (a day, or a run of `cdrhouse privacy forget`): the policy, the
    forget-list's tokens, and the tokens made so far (each value is hashed once)."""

    policy: PrivacyPolicy
    forgotten: frozenset[str] = frozenset()
    _phones: dict[str, str] = field(default_factory=dict, repr=False)
    _texts: dict[str, str] = field(default_factory=dict, repr=False)
    _countries: dict[str, tuple[str | None, int | None]] = field(default_factory=dict, repr=False)
    # Read back from the lake: an erased number's country and calling code, by (side, CDR id)
    # (its token is null, the country stays beside it).
    _erased_countries: dict[tuple[str, str], tuple[str | None, int | None]] = field(
        default_factory=dict, repr=False
    )
    _numbers: dict[str, _Number] = field(default_factory=dict, repr=False)
    _numbers_before: dict[str, _Number] = field(default_factory=dict, repr=False)
    _tokens: dict[str, str] = field(default_factory=dict, repr=False)  # E.164 digits -> token
    # The records are read back from `raw_cdrs`: their values are tokens already. Only then is
    # a 64-hex value taken as a token (from the API, a name could be one, and would stay).
    landed: bool = False

    @classmethod
    def for_lake(cls, policy: PrivacyPolicy, lake: Lake, *, landed: bool = False) -> Pseudonymizer:
        """The tokenizer of a landing into `lake`: its forget-list is read now, before the
        day is pulled, so an erasure never lands again."""
        return cls(policy, lake.forgotten() if policy.tokens else frozenset(), landed=landed)

    # -- values -----------------------------------------------------------------------------

    def phone(self, value: str) -> str:
        if self.landed and is_token(value):
            return value
        token = self._phones.get(value)
        if token is None:
            digits = e164_digits(value)
            token = _hmac(self.policy.key, digits)
            self._phones[value] = token
            self._countries[token] = country(digits)
        return token

    def text(self, value: str) -> str:
        if self.landed and is_token(value):
            return value
        token = self._texts.get(value)
        if token is None:
            if len(self._texts) >= _NUMBERS_HELD:
                self._texts.clear()
            token = self._texts[value] = text_token(self.policy.key, value)
        return token

    def identifier(self, value: str) -> str:
        """A channel identifier's token: a number's (it joins the customer's calls), else a
        name's."""
        return self._made(value)[0] if looks_like_number(value) else self.text(value)

    def country_of(self, value: str) -> tuple[str | None, int | None]:
        """Country and calling code of a number, or of a token this landing made."""
        if is_token(value):
            return self._countries.get(value, (None, None))
        made = self._made(value)
        return made[1], made[2]

    def _out(self, token: str) -> str | None:
        return None if token in self.forgotten else token

    # -- records ----------------------------------------------------------------------------

    def page(self, frame: pl.DataFrame) -> pl.DataFrame:
        """Decoded rows (`warehouse.decode`: a row group of them) as they land; unchanged under
        `raw`. Under `token`:

        * `record` is rewritten (see the module's text), and `r`'s values are replaced by
          their tokens, so the typed tables normalized from it hold tokens;
        * each side's number's country and calling code are added (`PARTY_COLUMNS`, which
          `normalize_decoded` passes on to `cdrs`), and `pii_forgotten`.

        Python sees each distinct value once (its token, and its exact JSON text under its
        key with what replaces it); the records are rewritten in one vectorized pass over
        them all (`str.replace_many`: the same text gets the same replacement in any
        record)."""
        if not self.policy.tokens:
            return frame
        values = frame.select(
            **{name: _at(path) for name, path in _VALUE_PATHS.items()},
            _message=_at(("data", "message")),
        )
        present = [n for n in _VALUE_PATHS if values.get_column(n).null_count() < frame.height]
        r = frame.get_column("r").struct
        names = [n for n in present if n in _NAME_VALUES]
        # A name an agent or a queue of the group also has is not replaced (they would be
        # renamed too): its records go by path.
        others = set(_other_names(r).to_list()) if names else set()
        pairs: dict[str, str] = {}  # a name's JSON text under its key -> its replacement's
        outs: dict[str, pl.Series] = {}  # each row's token (null when forgotten), per value
        # Per value (a number, a name: one text can be both, with two tokens), the texts whose
        # token is forgotten.
        gone: dict[str, set[str]] = {}
        forgotten = self.forgotten
        records = frame.get_column("record")
        # A copy: `scatter` changes a Series in place, and the path below reads `records` as
        # the API sent them.
        text = records.clone()
        countries: list[pl.Series] = []
        numbers: dict[str, pl.Series] = {}  # each row's replacement of its number, per side
        made_all: pl.DataFrame | None = None
        for name in present:
            key = _VALUE_PATHS[name][-1]
            column = values.get_column(name)
            if name in _NUMBER_VALUES:
                # In (nearly) every record: each row's own number, spliced out for its
                # replacement; the group's distinct numbers are made at once (`_made_all`).
                if made_all is None:
                    made_all = self._made_all(
                        pl.concat([values.get_column(n) for n in _NUMBER_VALUES if n in present])
                    )
                side = _VALUE_PATHS[name][0]
                made = column.to_frame("value").join(
                    made_all, on="value", how="left", maintain_order="left"
                )
                if forgotten:
                    made = made.with_columns(
                        erased=pl.col("token").is_in(list(forgotten)).fill_null(False)
                    )
                    if made.get_column("erased").any():
                        gone[name] = set(made.filter("erased").get_column("value").to_list())
                        # The token, quotes included, becomes null; its country stays beside.
                        made = made.with_columns(
                            token=pl.when("erased").then(None).otherwise("token"),
                            beside=pl.when("erased")
                            .then(pl.lit("null") + pl.col("beside").str.slice(66))
                            .otherwise("beside"),
                        )
                outs[name] = made.get_column("token").alias(name)
                countries += [
                    made.get_column("place").alias(f"{side}_phone_country"),
                    made.get_column("code").alias(f"{side}_phone_calling_code"),
                ]
                numbers[name] = made.get_column("beside").alias(name)
                continue
            out: dict[str, str | None] = {}
            distinct = column.drop_nulls().unique()
            for v in distinct.to_list():
                token = self.identifier(v) if name in _IDENT_VALUES else self.text(v)
                out[v] = token
                if forgotten and token in forgotten:
                    gone.setdefault(name, set()).add(v)
                    out[v] = None
                if v not in others or name not in _NAME_VALUES:
                    pairs[f'"{key}":"{v}"'] = f'"{key}":{_json(out[v])}'
            outs[name] = column.replace_strict(
                list(out), list(out.values()), default=None, return_dtype=pl.String()
            ).alias(name)
        text = _replace_numbers(
            text, {n: values.get_column(n) for n in numbers}, numbers, _NUMBER_VALUES
        )
        drop = self.policy.sms_bodies == "drop"
        if drop:
            for message in values.get_column("_message").drop_nulls().unique().to_list():
                pairs[f'"message":"{message}"'] = '"message":null'
        if pairs:  # names and identifiers (conversations), SMS bodies: their records only
            rows = values.select(
                pl.any_horizontal(
                    pl.col(n).is_not_null()
                    for n in (*present, "_message")
                    if n not in _NUMBER_VALUES
                )
            ).to_series()
            index = rows.arg_true()
            text = text.scatter(
                index, text.gather(index).str.replace_many(list(pairs), list(pairs.values()))
            )
        # By path instead: a record with an escaped character (it may spell a value
        # differently); one the typed decode could not read (it is quarantined: no typed
        # values to look for); one where the replacement missed a value (written otherwise
        # than its JSON string under its key: a number sent as a JSON integer, spaces kept
        # from an odd page); and one whose customer is named like an agent or a queue.
        slow = records.str.contains("\\", literal=True).fill_null(False) | (
            frame.get_column("struct_reason").is_not_null() | r.field("id").is_null()
        ).fill_null(True)
        checked = [*present, *(["_message"] if drop else [])]
        missed = [
            pl.col("_record").str.contains(pl.col(n), literal=True).fill_null(False)
            for n in checked
        ]
        if others:
            missed += [pl.col(n).is_in(sorted(others)).fill_null(False) for n in names]
        if drop:
            # A body under a second `message` key (the decode read one of the two).
            missed.append(
                pl.col("_message").is_not_null()
                & pl.col("_record").str.contains(r'"message"\s*:\s*"').fill_null(False)
            )
        if missed:
            check = values.select(checked).with_columns(text.alias("_record"))
            slow = slow | check.select(pl.any_horizontal(*missed)).to_series()
        unknown = ~frame.get_column("known_keys").fill_null(False)  # keys the spec may not name
        if unknown.any():
            # A number in a field the spec does not name, as a JSON string or integer: by path,
            # which knows the fields the spec names (`_numbers_in`: their values stay). Looked
            # for in the text as rewritten so far, where the record's own numbers are tokens.
            index = unknown.arg_true()
            found = (
                text.gather(index).str.contains(NUMBER_LITERAL)
                | records.gather(index).str.contains(INTEGER_LITERAL)
            ).fill_null(False)
            slow = slow | pl.repeat(False, frame.height, eager=True).scatter(index, found)
        erased = (
            values.select(
                pl.any_horizontal(
                    pl.col(n).is_in(sorted(texts)).fill_null(False) for n, texts in gone.items()
                )
            ).to_series()
            if gone
            else pl.repeat(False, frame.height, eager=True)
        )
        if slow.any():
            by_path = slow.arg_true().to_list()
            redone = [self._record(records[i]) for i in by_path]
            text = text.scatter(by_path, [t for t, _, _ in redone])
            erased = erased.scatter(by_path, [e for _, e, _ in redone])
            again = [i for i, (_, _, retype) in zip(by_path, redone, strict=True) if retype]
            if again:
                frame = frame.with_columns(_read_again(frame, again, text))
        for side in SIDES:
            if f"{side}.phone_number" not in present:
                countries += [
                    pl.repeat(None, frame.height, dtype=c.dtype, eager=True).alias(c.name)
                    for c in PARTY_COLUMNS
                    if c.name.startswith(f"{side}_")
                ]
        return frame.with_columns(
            text.alias("record"),
            *self._reasons(frame),
            erased.alias(FORGOTTEN),
            self._tokens_in_r(frame.schema["r"], outs),
            *countries,
        )

    def _reasons(self, frame: pl.DataFrame) -> list[pl.Series]:
        """The decode's reasons with the numbers they quote (a key such as
        `x_calls.4915… is not a JSON number`) as tokens: a reason is in the quarantine and in
        Dagster's check metadata."""
        out = []
        for name in ("struct_reason", "money_reason"):
            reasons = frame.get_column(name)
            rows = reasons.str.contains(r"[0-9]{7}").fill_null(False)
            if rows.any():
                index = rows.arg_true()
                redone = [
                    _SCRUB_DIGITS.sub(lambda m: self._out(self.phone(m[0])) or "null", t)
                    for t in reasons.gather(index).to_list()
                ]
                reasons = reasons.scatter(index, redone)
            out.append(reasons)
        return out

    def _made(self, value: str) -> _Number:
        return self._numbers.get(value) or self._numbers_before.get(value) or self._number(value)

    def _number(self, value: str) -> _Number:
        """`value`'s token, country, calling code, and the JSON text that replaces it under
        `phone_number` (the token, and the country beside it); each number is made once."""
        digits = value
        # The usual number: E.164 digits already (the API's own form), read here at ~1 us;
        # any other goes through `e164_digits` (phonenumbers), as `phone_token` does.
        code = None
        if digits.isascii() and digits.isdigit() and 8 <= len(digits) <= 15:
            code = _PREFIXES.get(digits[:1]) or _PREFIXES.get(digits[:2])
            code = code or _PREFIXES.get(digits[:3])
        if code is not None and digits[code[2]] != "0":
            place = code[1] if code[1] is not _SHARED else _country_name(_region(digits, code[0]))
            number: int | None = code[0]
        else:
            digits = e164_digits(value)
            place, number = country(digits)
        token = _keyed(self.policy.key).hex(digits)
        if len(self._numbers) >= _NUMBERS_HELD:
            # A day of new callers each: memory stays bounded, and the numbers made last
            # (a page keyed, its group not yet rewritten) are kept.
            self._numbers_before, self._numbers = self._numbers, {}
        # An ISO code and an int: JSON as they are (`_json` would check what they are).
        beside = f'"{token}","phone_country":' + (f'"{place}"' if place else "null")
        beside += ',"phone_calling_code":' + ("null" if number is None else str(number))
        made = self._numbers[value] = (token, place, number, beside)
        return made

    def _made_all(self, values: pl.Series) -> pl.DataFrame:
        """`_made` of each distinct value at once: value, token, place, code and beside (the
        JSON text that replaces it under `phone_number`), the same as `_number` makes them.
        The usual number (E.164 digits, the API's own form) is read by vectorized lookups of
        its calling code, and only its HMAC is computed per value (`_Keyed.hex`, once per
        landing); any other number goes through `_made`."""
        distinct = values.drop_nulls().unique(maintain_order=True).alias("value")
        frame = distinct.to_frame()
        # Calling codes are a prefix code: at most one of a number's first 1-3 digits is one.
        code = pl.coalesce(
            pl.col("value").str.slice(0, n).replace_strict(_CODE_OF, default=None)
            for n in (1, 2, 3)
        )
        frame = frame.with_columns(code=code).with_columns(
            usual=pl.col("value").str.contains(r"^[0-9]{8,15}$")
            & pl.col("code").is_not_null()
            & (
                pl.col("value").str.slice(pl.col("code").cast(pl.String()).str.len_bytes(), 1)
                != "0"
            )
        )
        usual = frame.filter(pl.col("usual"))
        other = frame.filter(~pl.col("usual")).get_column("value").to_list()
        places = usual.select(
            pl.col("code").replace_strict(_PLACE_OF, default=None, return_dtype=pl.String())
        ).to_series()
        shared = usual.get_column("code").is_in(list(_SHARED_CODES))
        if shared.any():
            # Several countries share the code: each number's by its first digits (`_region`,
            # phonenumbers once per prefix).
            numbers = usual.filter(shared)
            regions = [
                _country_name(_region(v, c))
                for v, c in zip(
                    numbers.get_column("value").to_list(),
                    numbers.get_column("code").to_list(),
                    strict=True,
                )
            ]
            places = places.scatter(shared.arg_true(), pl.Series(regions, dtype=pl.String()))
        keyed, tokens = _keyed(self.policy.key), self._tokens
        if len(tokens) >= _NUMBERS_HELD:
            tokens.clear()
        hexed = [tokens.get(v) or tokens.setdefault(v, keyed.hex(v)) for v in usual["value"]]
        out = pl.DataFrame(
            {
                "value": usual.get_column("value"),
                "token": pl.Series(hexed, dtype=pl.String()),
                "place": places,
                "code": usual.get_column("code").cast(pl.Int64()),
            }
        )
        if other:
            made = [self._made(v) for v in other]
            out = pl.concat(
                [
                    out,
                    pl.DataFrame(
                        {
                            "value": other,
                            "token": [m[0] for m in made],
                            "place": [m[1] for m in made],
                            "code": [m[2] for m in made],
                        },
                        schema=out.schema,
                    ),
                ]
            )
        return out.with_columns(
            beside=pl.concat_str(
                pl.lit('"'),
                "token",
                pl.lit('","phone_country":'),
                pl.when(pl.col("place").is_null())
                .then(pl.lit("null"))
                .otherwise(pl.lit('"') + pl.col("place") + pl.lit('"')),
                pl.lit(',"phone_calling_code":'),
                pl.col("code").cast(pl.String()).fill_null("null"),
            )
        )

    def _tokens_in_r(self, dtype: Any, outs: Mapping[str, pl.Series]) -> pl.Expr:
        """`r` with each value (`outs`: per row, its token or null) replaced, and the SMS
        body null unless kept."""
        tree: dict[str, Any] = {}
        for name, out in outs.items():
            *path, leaf = _VALUE_PATHS[name]
            node = tree
            for key in path:
                node = node.setdefault(key, {})
            node[leaf] = pl.lit(out).alias(leaf)
        if self.policy.sms_bodies == "drop":
            message = dict(dtype.to_schema()["data"].to_schema())["message"]
            tree.setdefault("data", {})["message"] = pl.lit(None, message).alias("message")

        def fields(node: dict[str, Any]) -> list[pl.Expr]:
            return [
                v if isinstance(v, pl.Expr) else pl.field(k).struct.with_fields(*fields(v))
                for k, v in node.items()
            ]

        return pl.col("r").struct.with_fields(*fields(tree)) if tree else pl.col("r")

    def record(self, text: str | None) -> tuple[str | None, bool]:
        """One record rewritten by path (the slow, exact way): (new text, anything erased)."""
        out, erased, _ = self._record(text)
        return out, erased

    def _record(self, text: str | None) -> tuple[str | None, bool, bool]:
        """`record`, and whether a value the typed decode reads was replaced besides the
        customer's own fields (a tag that is the caller's number): `r` must be read again."""
        if text is None:
            return None, False, False
        if text.startswith(BASE64_PREFIX):
            # Not UTF-8 (kept as base64 of its bytes, quarantined): its digit runs still go.
            raw = base64.b64decode(text[len(BASE64_PREFIX) :])
            raw = _NUMBER_BYTES.sub(lambda m: self._token_bytes(m[0].decode()), raw)
            return BASE64_PREFIX + base64.b64encode(raw).decode(), False, False
        try:
            rec = _DECODE.decode(text)
            odd: dict[str, bytes] = {}
        except (msgspec.DecodeError, RecursionError):
            # Quarantined: a value no JSON reader takes (`NaN`) is held aside while the rest is
            # replaced by path; text that is not JSON at all has every value replaced.
            try:
                rec, odd = _tolerant(text)
            except (PageSyntaxError, msgspec.DecodeError, RecursionError):
                return self._scrub(text), False, False
        erased: list[bool] = []

        def put(token: str) -> str | None:
            out = self._out(token)
            erased.append(out is None)
            return out

        own: set[str] = set()  # the customer's numbers as sent, wherever else they are written
        if isinstance(rec, dict):
            for side in SIDES:
                end = rec.get(side)
                if not isinstance(end, dict):
                    continue
                own |= _own_numbers(end)
                if isinstance(end.get("phone_number"), str | int) and not isinstance(
                    end["phone_number"], bool
                ):
                    token = self.phone(str(end["phone_number"]))
                    place, code = self._countries[token]
                    rec[side] = _beside(end, put(token), place, code)
                account = rec[side].get("channel_account")
                if isinstance(account, dict):
                    ident = account.get("identifier")
                    if isinstance(ident, str | int) and not isinstance(ident, bool):
                        account["identifier"] = put(self.identifier(str(ident)))
                    if isinstance(account.get("name_snapshot"), str):
                        account["name_snapshot"] = put(self.text(account["name_snapshot"]))
                    data = account.get("data")
                    if isinstance(data, dict):
                        for key in ("name", "username"):
                            if isinstance(data.get(key), str):
                                data[key] = put(self.text(data[key]))
            data = rec.get("data")
            if (
                self.policy.sms_bodies == "drop"
                and isinstance(data, dict)
                and isinstance(data.get("message"), str)
            ):
                data["message"] = None
        retyped: list[bool] = []

        def put_own(value: str) -> str | None:
            retyped.append(True)
            return put(self.phone(value))

        rec = _numbers_in(rec, lambda v: put(self.phone(v)), _spec_tree(), own, put_own)
        out = _ENCODE.encode(rec).decode()
        for held, value in odd.items():
            out = out.replace(held, value.decode(), 1)
        return out, any(erased), bool(retyped)

    def _scrub(self, text: str) -> str:
        """Text that is not JSON (quarantined as it is): keys stay, unless a number; every
        string value and every 7-15 digit run become tokens (names, bodies, numbers: which
        is which cannot be read)."""

        def one(m: re.Match[str]) -> str:
            value, key = m[1], m[2]
            if value is None:  # a bare digit run
                return _json(self._out(self.phone(m[0])))
            if looks_like_number(value):
                return _json(self._out(self.phone(value))) + (key or "")
            if key:
                return m[0]
            return _json(self._out(self.text(value))) if value else m[0]

        return _SCRUB.sub(one, text)

    # -- typed tables -----------------------------------------------------------------------

    def tables(
        self, tables: Mapping[str, pl.DataFrame], erased_ids: Iterable[str] = ()
    ) -> dict[str, pl.DataFrame]:
        """The typed tables of a row group, as the lake holds them: tokens in `cdrs`' person
        columns (under `token`), the numbers' countries, `pii_forgotten`; `erased_ids`: the
        rows whose record lost a forgotten value (`page`)."""
        if not self.policy.tokens and not self._countries:
            return dict(tables)  # `raw`: as normalized (the lake's pre-privacy schema)
        gone = list(erased_ids)
        out: dict[str, pl.DataFrame] = {}
        for name, frame in tables.items():
            flag = (pl.col("id").is_in(gone).fill_null(False) if gone else pl.lit(False)).alias(
                FORGOTTEN
            )
            if name == "cdrs" and self.landed:
                # Read back from the lake, not through `page`: tokens and countries here.
                frame = self._cdrs(frame)
                flag = (pl.col(FORGOTTEN) | flag).alias(FORGOTTEN)
            elif name == "cdr_sms":
                frame = self.sms(frame)
            out[name] = frame.with_columns(flag).select(landed(TABLES[name]).column_names)
        return out

    def _token_bytes(self, number: str) -> bytes:
        out = self._out(self.phone(number))
        return (out or "").encode()

    def learn(self, group: pl.DataFrame) -> None:
        """The countries written beside the tokens of records read back from the lake."""
        records = group.get_column("record")
        for side in SIDES:
            found = pl.DataFrame(
                {
                    "id": group.get_column("id"),
                    "token": records.str.json_path_match(f"$.{side}.phone_number"),
                    "country": records.str.json_path_match(f"$.{side}.phone_country"),
                    "code": records.str.json_path_match(f"$.{side}.phone_calling_code"),
                }
            )
            erased = found.filter(
                pl.col("token").is_null()
                & pl.col("id").is_not_null()
                & (pl.col("country").is_not_null() | pl.col("code").is_not_null())
            )
            for cdr_id, _, place, code in erased.iter_rows():
                self._erased_countries[(side, cdr_id)] = (place, int(code) if code else None)
            for _, token, place, code in found.unique("token").iter_rows():
                if isinstance(token, str) and is_token(token):
                    self._countries[token] = (place, int(code) if code else None)

    def _cdrs(self, frame: pl.DataFrame) -> pl.DataFrame:
        countries = []
        for side in SIDES:
            numbers = frame.get_column(f"{side}_phone_number")
            mapping = {v: self.country_of(v) for v in _values(numbers)}
            countries += [
                numbers.replace_strict(
                    {k: c for k, (c, _) in mapping.items()}, default=None, return_dtype=pl.String()
                ).alias(f"{side}_phone_country"),
                numbers.replace_strict(
                    {k: n for k, (_, n) in mapping.items()}, default=None, return_dtype=pl.Int64()
                ).alias(f"{side}_phone_calling_code"),
            ]
        frame = frame.with_columns(countries)
        if self._erased_countries:
            frame = frame.with_columns(self._erased_beside(frame))
        if not self.policy.tokens:  # tokens read back from the lake, now landed under `raw`
            return frame.with_columns(pl.lit(False).alias(FORGOTTEN))
        erased = pl.lit(False)
        replaced = []
        for column in TOKEN_COLUMNS:
            values = frame.get_column(column)
            tokenize = (
                self.phone
                if column in PHONE_COLUMNS
                else self.identifier
                if column in IDENTIFIER_COLUMNS
                else self.text
            )
            tokens = {v: tokenize(v) for v in _values(values)}
            replaced.append(
                values.replace_strict(
                    {v: self._out(t) for v, t in tokens.items()}, default=None
                ).alias(column)
            )
            gone = [v for v, t in tokens.items() if t in self.forgotten]
            if gone:
                erased = erased | pl.col(column).is_in(gone).fill_null(False)
        return frame.with_columns(erased.alias(FORGOTTEN)).with_columns(replaced)

    def _erased_beside(self, frame: pl.DataFrame) -> list[pl.Series]:
        """Each side's country and calling code where its number was erased (`learn`)."""
        ids = frame.get_column("id").to_list()
        out = []
        for side in SIDES:
            found = [self._erased_countries.get((side, i)) for i in ids]
            for n, (name, dtype) in enumerate(
                ((f"{side}_phone_country", pl.String()), (f"{side}_phone_calling_code", pl.Int64()))
            ):
                column = frame.get_column(name)
                beside = pl.Series(name, [f[n] if f else None for f in found], dtype=dtype)
                out.append(column.fill_null(beside))
        return out

    def sms(self, frame: pl.DataFrame) -> pl.DataFrame:
        if self.policy.tokens and self.policy.sms_bodies == "drop":
            return frame.with_columns(pl.lit(None, pl.String()).alias("message"))
        return frame


def _replace_numbers(
    text: pl.Series,
    values: Mapping[str, pl.Series],
    replacements: Mapping[str, pl.Series],
    sides: tuple[str, ...],
) -> pl.Series:
    """Each row's `from` and `to` numbers replaced (`values` -> `replacements`, by side). The
    usual record holds `"phone_number":"<from's>"` before `"phone_number":"<to's>"`: both are
    found (byte offsets) and the record is spliced around their replacements at once; any
    other row goes by `_replace_each`, one side at a time. A second `"phone_number":"<its
    value>"` in a record is left to `page`'s check, which finds the value still there."""
    if tuple(values) != sides:  # one side has no number in any row
        for name, column in values.items():
            text = _replace_each(text, _PHONE_KEY, column, replacements[name])
        return text
    first, second = sides
    key = f'"{_PHONE_KEY}":'
    found = {
        side: (pl.lit(key + '"') + pl.col(side) + pl.lit('"'), pl.col(side).str.len_bytes() + 2)
        for side in ("a", "b")
    }
    # Sliced as bytes: `str.find` gives byte offsets, `str.slice` counts characters. Every
    # cut is at a `"` (ASCII), so each piece is valid UTF-8 again.
    raw = pl.col("t").cast(pl.Binary())

    def piece(start: pl.Expr | int, length: pl.Expr | None = None) -> pl.Expr:
        return raw.bin.slice(start, length).cast(pl.String())

    after_a = pl.col("pa") + pl.col("la") + len(key)
    both = (
        pl.DataFrame(
            {"t": text, "a": values[first], "b": values[second]}
            | {"ra": replacements[first], "rb": replacements[second]}
        )
        .lazy()
        .with_columns(
            *(pl.col("t").str.find(f, literal=True).alias(f"p{s}") for s, (f, _) in found.items()),
            *(n.alias(f"l{s}") for s, (_, n) in found.items()),
        )
        .select(
            pl.when(after_a <= pl.col("pb")).then(
                pl.concat_str(
                    piece(0, pl.col("pa")),
                    pl.lit(key),
                    "ra",
                    piece(after_a, pl.col("pb") - after_a),
                    pl.lit(key),
                    "rb",
                    piece(pl.col("pb") + pl.col("lb") + len(key)),
                )
            )
        )
        .collect()
        .to_series()
    )
    rest = both.is_null().arg_true()
    if rest.is_empty():
        return both
    others = text.gather(rest)
    for name in sides:
        others = _replace_each(
            others, _PHONE_KEY, values[name].gather(rest), replacements[name].gather(rest)
        )
    return both.scatter(rest, others)


_PHONE_KEY = "phone_number"


def _replace_each(
    text: pl.Series, key: str, values: pl.Series, replacements: pl.Series
) -> pl.Series:
    """In each row, `"key":"<its value>"` (the value's exact JSON text in a record without a
    backslash) replaced by `"key":<its replacement>`, everywhere in the row; a row without a
    value or a replacement keeps its text."""
    rows = (values.is_not_null() & replacements.is_not_null() & text.is_not_null()).arg_true()
    if rows.is_empty():
        return text
    dense = len(rows) == len(text)
    some = pl.DataFrame(
        {"t": text, "v": values, "r": replacements}
        if dense
        else {"t": text.gather(rows), "v": values.gather(rows), "r": replacements.gather(rows)}
    )
    done = some.select(
        pl.col("t")
        .str.split(pl.concat_str(pl.lit(f'"{key}":"'), pl.col("v"), pl.lit('"')))
        .list.join(pl.concat_str(pl.lit(f'"{key}":'), pl.col("r")))
    ).to_series()
    return done if dense else text.clone().scatter(rows, done)  # `text` stays as it was


# The customer's values in a decoded row (`r`), by the name `Pseudonymizer.page` gives them;
# the last key is the one each is written under in the record.
_VALUE_PATHS: dict[str, tuple[str, ...]] = {
    **{f"{side}.phone_number": (side, "phone_number") for side in SIDES},
    **{f"{side}.identifier": (side, "channel_account", "identifier") for side in SIDES},
    **{
        f"{side}.{key}": (
            side,
            "channel_account",
            *(() if key == "name_snapshot" else ("data",)),
            key,
        )
        for side in SIDES
        for key in NAME_KEYS
    },
}
_NUMBER_VALUES = tuple(n for n in _VALUE_PATHS if n.endswith(".phone_number"))
_NUMBER_PATHS = tuple(_VALUE_PATHS[n] for n in _NUMBER_VALUES)
_IDENT_VALUES = tuple(n for n in _VALUE_PATHS if n.endswith(".identifier"))
_NAME_VALUES = tuple(n for n in _VALUE_PATHS if n not in _NUMBER_VALUES + _IDENT_VALUES)


def _at(path: tuple[str, ...]) -> pl.Expr:
    expr = pl.col("r")
    for key in path:
        expr = expr.struct.field(key)
    return expr


def _country_name(region: str | None) -> str | None:
    return None if region in (None, "001", "ZZ") else region


# Calling codes are a prefix code: a number's is the one of its first 1, 2 or 3 digits.
# Each: (code, its one country, or _SHARED when several share it, its length).
_SHARED = "shared"
_PREFIXES: dict[str, tuple[int, str | None, int]] = {
    str(c): (c, _country_name(regions[0]) if len(regions) == 1 else _SHARED, len(str(c)))
    for c, regions in COUNTRY_CODE_TO_REGION_CODE.items()
}


# The same, as the vectorized lookups of `Pseudonymizer._made_all` read them.
_CODE_OF: dict[str, int] = {prefix: code for prefix, (code, _, _) in _PREFIXES.items()}
_PLACE_OF: dict[int, str | None] = {
    code: place for code, place, _ in _PREFIXES.values() if place is not _SHARED
}
_SHARED_CODES = frozenset(code for code, place, _ in _PREFIXES.values() if place is _SHARED)


def _other_names(r: Any) -> pl.Series:
    """The names of the agents and referenced objects (queue, flow...) in a page: a record
    whose customer has one of them is rewritten by path (a literal replacement under
    `"name"` would rename the agent too)."""
    user = r.field("user").struct
    names = [user.field("name"), user.field("name_snapshot")]
    data = r.field("data").struct
    for ref in _NAMED_REFS:
        if ref in data.fields:
            value = data.field(ref)
            keys = {f.name for f in value.dtype.fields}
            names += [value.struct.field(key) for key in NAME_KEYS if key in keys]
    found: pl.Series = pl.concat([n.cast(pl.String()) for n in names])
    return found.drop_nulls().unique()


_NAMED_REFS = ("queue", "campaign", "flow", "canned_message")


def _values(series: pl.Series) -> set[str]:
    return {v for v in series.drop_nulls().unique().to_list() if isinstance(v, str)}


def _json(value: str | int | None) -> str:
    if value is None:
        return "null"
    if isinstance(value, int) or value.isalnum():  # a token, a country code
        return f'"{value}"' if isinstance(value, str) else str(value)
    return json.dumps(value)


_SCRUB_DIGITS = re.compile(r"(?<![0-9A-Za-z])\+?[0-9]{7,15}(?![0-9A-Za-z])")
# A JSON string (its text, and the colon after a key), or a bare run of 7-15 digits.
_SCRUB = re.compile(r'"((?:[^"\\]|\\.)*)"(\s*:)?|(?<![0-9A-Za-z.])\+?[0-9]{7,15}(?![0-9A-Za-z.])')
# In a record's raw bytes (not UTF-8, so not JSON text either): a run of 7 to 15 digits.
_NUMBER_BYTES = re.compile(rb"\+?(?<![0-9])[0-9]{7,15}(?![0-9])")


def _beside(end: dict[str, Any], token: str | None, place: str | None, code: int | None) -> Any:
    """`end` with its number replaced and the country written beside it, in the same order."""
    out: dict[str, Any] = {}
    for key, value in end.items():
        if key == "phone_number":
            out[key] = token
            out["phone_country"] = place
            out["phone_calling_code"] = code
        else:
            out[key] = value
    return out


def _numbers_in(value: Any, replace: Any, spec: Any, own: Collection[str], replace_own: Any) -> Any:
    """`value` (a decoded record, changed in place) with each number in a field the spec does
    not name replaced by `replace`: every string that is a number (7 to 15 digits), every
    integer that is a valid phone number with its calling code. `spec` is what the spec names
    (`_spec_tree`). A value the spec names keeps its value (a tag, a queue's or a campaign's
    name, free text: numbers in them are not the customer's, or not searched for), unless it
    is, whole, one of the record's own customer's numbers (`own`, replaced by `replace_own`:
    a tag that is the caller's number). A value of another shape than the spec's object, list
    or value (`"from": "4915…"`, a list where a text is named; the typed decode quarantines
    such a record) is read as one the spec does not name.

    Walked with a stack, not by recursion: a field nested a few hundred levels deep (the
    decoders take up to ~1,000) must not stop the day with a RecursionError."""
    root = [value]
    own_digits = {e164_digits(number) for number in own}  # the same number written otherwise
    # (container, key in it, what the spec names there or None, inside an unnamed field)
    stack: list[tuple[Any, Any, Any, bool]] = [(root, 0, spec, False)]
    while stack:
        parent, key, named, unknown = stack.pop()
        item = parent[key]
        if not unknown:
            if isinstance(item, dict) and isinstance(named, dict):
                stack.extend((item, k, named.get(k), False) for k in item)
                continue
            if isinstance(item, list) and isinstance(named, list):
                stack.extend((item, i, named[0], False) for i in range(len(item)))
                continue
            if named is True and not isinstance(item, dict | list):
                if isinstance(item, str) and (
                    item in own
                    or (own_digits and looks_like_number(item) and e164_digits(item) in own_digits)
                ):
                    parent[key] = replace_own(item)
                continue
        if isinstance(item, dict):
            if any(looks_like_number(k) for k in item):
                # A number as a key (`{"4915…": 3}`): its token is the key.
                item = parent[key] = {
                    (_json_key(replace(k)) if looks_like_number(k) else k): v
                    for k, v in item.items()
                }
            stack.extend((item, k, None, True) for k in item)
        elif isinstance(item, list):
            stack.extend((item, i, None, True) for i in range(len(item)))
        elif isinstance(item, str):
            if looks_like_number(item):
                parent[key] = replace(item)
        elif isinstance(item, int) and not isinstance(item, bool) and _valid_number(str(item)):
            parent[key] = replace(str(item))
    return root[0]


def _tolerant(text: str) -> tuple[Any, dict[str, bytes]]:
    """A record with values no JSON reader takes (`NaN`, `Infinity`, a bare word): decoded
    with each held aside as a string of its own, and those strings (JSON, quotes included)
    with the values to put back."""
    toks = tokens(text.encode())
    odd: dict[str, bytes] = {}
    for _, index in scalars(toks):
        if not is_json_scalar(toks[index]):
            held = f'"cdrhouse:held:{len(odd)}:{_HELD_MARK}"'
            odd[held] = toks[index]
            toks[index] = held.encode()
    return _DECODE.decode(b"".join(toks)), odd


# Marks a value held aside by `_tolerant`: no record holds this text.
_HELD_MARK = hashlib.sha256(b"cdrhouse held value").hexdigest()[:16]


def _json_key(token: str | None) -> str:
    return "null" if token is None else token  # a key is a string: an erased one says so


def _read_again(frame: pl.DataFrame, rows: list[int], text: pl.Series) -> pl.Series:
    """`r` with the rows at `rows` decoded again from their rewritten records (`text`), as a
    day normalized again from `raw_cdrs` reads them; a row whose record the typed decode
    refused (quarantined) keeps its `r`."""
    r = frame.get_column("r")
    reasons = frame.get_column("struct_reason")
    rows = [i for i in rows if reasons[i] is None]
    if not rows:
        return r
    again = with_decoded(pl.DataFrame({"record": text.gather(rows)}))
    fine = again.get_column("struct_reason").is_null().to_list()
    order = list(range(len(r)))
    for k, (i, ok) in enumerate(zip(rows, fine, strict=True)):
        if ok:
            order[i] = len(r) + k
    typed = again.get_column("r").cast(r.dtype).alias(r.name)
    return pl.concat([r, typed]).gather(order)


def _own_numbers(end: dict[str, Any]) -> set[str]:
    """The numbers of one side of a record (`from`, `to`) as sent: its phone number, and its
    channel account's identifier when it is a number."""
    out = set()
    number = end.get("phone_number")
    if isinstance(number, str | int) and not isinstance(number, bool):
        out.add(str(number))
    account = end.get("channel_account")
    if isinstance(account, dict):
        ident = account.get("identifier")
        if isinstance(ident, str) and looks_like_number(ident):
            out.add(ident)
    return out


def _valid_number(digits: str) -> bool:
    """E.164 digits a phone number can be (not an epoch time, a duration or an id)."""
    if not 7 <= len(digits) <= 15 or not digits.isdigit():
        return False
    try:
        return bool(phonenumbers.is_valid_number(phonenumbers.parse("+" + digits, None)))
    except NumberParseException:
        return False


@lru_cache(maxsize=1)
def _spec_tree() -> Any:
    """What the spec names in a record (`record_dtype`, whose `data` holds every type's
    fields, as the typed decode reads it): a dict per object, a one-item list per list, True
    per value."""

    def tree(dtype: Any) -> Any:
        if isinstance(dtype, pl.Struct):
            return {f.name: tree(f.dtype) for f in dtype.fields}
        if isinstance(dtype, pl.List):
            return [tree(dtype.inner)]
        return True

    return tree(record_dtype())


__all__ = [
    "FORGOTTEN",
    "PARTY_COLUMNS",
    "PHONE_NUMBERS_VAR",
    "PII_KEY_VAR",
    "RAW",
    "SMS_BODIES_VAR",
    "PrivacyPolicy",
    "Pseudonymizer",
    "country",
    "e164_digits",
    "is_token",
    "phone_token",
    "text_token",
]
