"""Field validation helpers shared by the sandbox's write endpoints.

Every check appends human-readable messages to a :class:`FieldErrors` under the field's dotted
path (``dial_level_override.value``, ``caller_id_sets.0.phone_numbers``), which is what a 422
``{"errors": {...}}`` body carries. Checks return whether the value passed, so callers can skip
dependent checks on a value of the wrong type.
"""

from __future__ import annotations

import math
import re
import uuid
from collections.abc import Callable, Collection, Mapping
from datetime import datetime
from typing import Any, Final, Literal

from models.timestamps import parse_ts

# E.164 without the plus: a non-zero country digit and at most 15 digits in all.
PHONE_RE: Final = re.compile(r"[1-9][0-9]{6,14}")
ALNUM_RE: Final = re.compile(r"[A-Za-z0-9]{1,30}")

Kind = Literal["string", "integer", "number", "boolean", "object", "array"]

REQUIRED: Final = "is required"
UNKNOWN: Final = "is not a known field"
MISSING_REF: Final = "does not exist"


class FieldErrors:
    """An ordered mapping of field path to messages, ready for a 422 body."""

    def __init__(self) -> None:
        self.errors: dict[str, list[str]] = {}

    def add(self, path: str, message: str) -> None:
        self.errors.setdefault(path, []).append(message)

    def __bool__(self) -> bool:
        return bool(self.errors)


def join(prefix: str, key: str | int) -> str:
    return f"{prefix}.{key}" if prefix else str(key)


def is_int(value: Any) -> bool:
    # JSON booleans parse to bool, which Python treats as an int subclass. A number with a
    # zero fraction (5.0) is an integer in JSON Schema, so it is one here too.
    if isinstance(value, float):
        return value.is_integer()
    return isinstance(value, int) and not isinstance(value, bool)


def is_number(value: Any) -> bool:
    if isinstance(value, float):
        return math.isfinite(value)
    return is_int(value)


_KIND_TEST: Final[dict[str, Callable[[Any], bool]]] = {
    "string": lambda v: isinstance(v, str),
    "integer": is_int,
    "number": is_number,
    "boolean": lambda v: isinstance(v, bool),
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
}

_ARTICLE: Final = {"integer": "an integer", "object": "an object", "array": "an array"}


def type_message(kind: Kind) -> str:
    return f"must be {_ARTICLE.get(kind, 'a ' + kind)}"


def check_type(errs: FieldErrors, path: str, value: Any, kind: Kind) -> bool:
    if _KIND_TEST[kind](value):
        return True
    errs.add(path, type_message(kind))
    return False


def check_range(
    errs: FieldErrors,
    path: str,
    value: float,
    *,
    low: float | None = None,
    high: float | None = None,
    low_exclusive: bool = False,
) -> bool:
    """Bounds are inclusive unless ``low_exclusive`` (for "greater than 0")."""
    if low is not None and (value <= low if low_exclusive else value < low):
        word = "greater than" if low_exclusive else "greater than or equal to"
        errs.add(path, f"must be {word} {_fmt(low)}")
        return False
    if high is not None and value > high:
        errs.add(path, f"must be less than or equal to {_fmt(high)}")
        return False
    return True


def _fmt(bound: float) -> str:
    return str(int(bound)) if float(bound).is_integer() else str(bound)


def check_enum(errs: FieldErrors, path: str, value: Any, allowed: Collection[str]) -> bool:
    if not check_type(errs, path, value, "string"):
        return False
    # Case-sensitive on purpose: the spec lists "enum mismatch including case" under 422.
    if value in allowed:
        return True
    errs.add(path, "must be one of: " + ", ".join(allowed))
    return False


def check_phone(errs: FieldErrors, path: str, value: Any) -> bool:
    if not check_type(errs, path, value, "string"):
        return False
    if PHONE_RE.fullmatch(value):
        return True
    errs.add(path, "must be a valid E.164 phone number without a leading plus")
    return False


def check_uuid(errs: FieldErrors, path: str, value: Any) -> bool:
    if not check_type(errs, path, value, "string"):
        return False
    try:
        uuid.UUID(value)
    except ValueError:
        errs.add(path, "must be a UUID")
        return False
    return True


def check_timestamp(errs: FieldErrors, path: str, value: Any) -> datetime | None:
    """An ISO 8601 date-time; naive values are read as UTC."""
    if not check_type(errs, path, value, "string"):
        return None
    try:
        return parse_ts(value)
    except ValueError:
        errs.add(path, "must be an ISO 8601 date-time")
    except OverflowError:  # e.g. 9999-12-31T23:59:59-01:00: past the last UTC year
        errs.add(path, "must lie between 0001-01-01 and 9999-12-31 in UTC")
    return None


def check_unknown(
    errs: FieldErrors, prefix: str, body: Mapping[str, Any], allowed: Collection[str]
) -> None:
    """Reject fields the endpoint does not accept (catches client typos early)."""
    for key in body:
        if key not in allowed:
            errs.add(join(prefix, key), UNKNOWN)


def body_errors(body: Mapping[str, Any], allowed: Collection[str]) -> FieldErrors:
    """The field errors of a request body, starting with the fields it may not have."""
    errs = FieldErrors()
    check_unknown(errs, "", body, allowed)
    return errs


def require(errs: FieldErrors, prefix: str, body: Mapping[str, Any], key: str) -> bool:
    if key in body:
        return True
    errs.add(join(prefix, key), REQUIRED)
    return False


def require_all(
    errs: FieldErrors, prefix: str, body: Mapping[str, Any], keys: Collection[str]
) -> bool:
    """Like :func:`require`, but reports every missing key, not just the first."""
    missing = [key for key in keys if not require(errs, prefix, body, key)]
    return not missing


def check_string_fields(
    errs: FieldErrors, path: str, value: Any, keys: Collection[str], *, required: bool
) -> None:
    """An object of string fields: only ``keys``, all of them when ``required``."""
    if not check_type(errs, path, value, "object"):
        return
    check_unknown(errs, path, value, keys)
    for key in keys:
        present = require(errs, path, value, key) if required else key in value
        if present:
            check_type(errs, join(path, key), value[key], "string")


def require_phone(errs: FieldErrors, body: Mapping[str, Any], key: str = "phone_number") -> None:
    """A required top-level E.164 number (every write that reaches a contact has one)."""
    if require(errs, "", body, key):
        check_phone(errs, key, body[key])
