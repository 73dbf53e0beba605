"""The campaign rule table: one checker per config field, and the context they need.

Each checker takes ``(errs, path, value, ctx)``, appends 422 messages under the field's dotted
path, and returns the normalized value (what is stored when no error was added).
:data:`FIELD_RULES` gives every config field its default and its checker; ``campaigns.py``
runs them.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from typing import Any, Final, NamedTuple

from connectors.sandbox.fieldcheck import (
    MISSING_REF,
    FieldErrors,
    check_enum,
    check_phone,
    check_range,
    check_type,
    check_unknown,
    is_int,
    join,
    require_all,
)

STRATEGIES: Final = ("simple", "predictive_ai")
DIALING_ORDERS: Final = ("fifo", "lifo")
FOLLOW_UP_MODES: Final = ("timer", "lowest_attempts")
WAIT_UNITS: Final = ("seconds", "minutes", "hours")
FOLLOW_UP_GROUPS: Final = (
    "machine_answered",
    "abandoned",
    "no_answer",
    "rejected",
    "failed",
    "busy",
    "wrapup_code",
)
MAX_RULES: Final = 20
MAX_CALLER_ID_SETS: Final = 20
MAX_NAME: Final = 100
_HOUR_RE: Final = re.compile(r"([01][0-9]|2[0-3]):00")

# Two nested objects' defaults, shared with their checkers (which take the keys from them).
DIAL_LEVEL_OVERRIDE_DEFAULT: Final[Mapping[str, Any]] = {
    "enabled": True,
    "value": 1.5,
    "active_agents_threshold": 3,
}
RATING_REFS: Final = (
    "notification_voice_message_id",
    "instructions_voice_message_id",
    "complete_voice_message_id",
)
POST_CALL_RATING_DEFAULT: Final[Mapping[str, Any]] = {
    "enabled": False,
    **dict.fromkeys(RATING_REFS),
}


@dataclass(frozen=True)
class CampaignContext:
    """What validation needs to know about the contact center."""

    voice_message_ids: frozenset[int]
    taken_names: frozenset[str]  # names of the *other* campaigns
    dialer_ai: bool = True
    dialing_order: bool = True
    contact_local_time: bool = True


Checker = Callable[[FieldErrors, str, Any, CampaignContext], Any]


def _name(errs: FieldErrors, path: str, value: Any, ctx: CampaignContext) -> Any:
    if check_type(errs, path, value, "string"):
        if not value.strip():
            errs.add(path, "can't be blank")
        elif len(value) > MAX_NAME:
            errs.add(path, f"must be at most {MAX_NAME} characters")
        elif value in ctx.taken_names:
            errs.add(path, "has already been taken")
    return value


def _strategy(errs: FieldErrors, path: str, value: Any, ctx: CampaignContext) -> Any:
    if check_enum(errs, path, value, STRATEGIES) and value == "predictive_ai" and not ctx.dialer_ai:
        errs.add(path, "predictive_ai is not enabled for this contact center")
    return value


def _dial_level(errs: FieldErrors, path: str, value: Any, ctx: CampaignContext) -> Any:
    if check_type(errs, path, value, "number"):
        check_range(errs, path, value, low=1, high=6)
        return float(value)
    return value


def _int_between(low: int, high: int) -> Checker:
    def check(errs: FieldErrors, path: str, value: Any, ctx: CampaignContext) -> Any:
        if check_type(errs, path, value, "integer"):
            check_range(errs, path, value, low=low, high=high)
        return value

    return check


def _boolean(errs: FieldErrors, path: str, value: Any, ctx: CampaignContext) -> Any:
    check_type(errs, path, value, "boolean")
    return value


def _voice_message_ref(
    errs: FieldErrors, path: str, value: Any, ctx: CampaignContext, *, nullable: bool = True
) -> Any:
    if value is None and nullable:
        return None
    if check_type(errs, path, value, "integer") and value not in ctx.voice_message_ids:
        errs.add(path, MISSING_REF)
    return value


def _object(
    errs: FieldErrors, path: str, value: Any, allowed: Collection[str], required: Collection[str]
) -> bool:
    if not check_type(errs, path, value, "object"):
        return False
    check_unknown(errs, path, value, allowed)
    return require_all(errs, path, value, required)


def _dial_level_override(errs: FieldErrors, path: str, value: Any, ctx: CampaignContext) -> Any:
    if not _object(errs, path, value, tuple(DIAL_LEVEL_OVERRIDE_DEFAULT), ("enabled",)):
        return value
    out = {**DIAL_LEVEL_OVERRIDE_DEFAULT, **value}
    check_type(errs, join(path, "enabled"), value["enabled"], "boolean")
    if "value" in value and check_type(errs, join(path, "value"), value["value"], "number"):
        check_range(errs, join(path, "value"), value["value"], low=0, high=4, low_exclusive=True)
        out["value"] = float(value["value"])
    if "active_agents_threshold" in value:
        sub = join(path, "active_agents_threshold")
        if check_type(errs, sub, value["active_agents_threshold"], "integer"):
            check_range(
                errs, sub, value["active_agents_threshold"], low=1, high=4, low_exclusive=True
            )
    return out


def _amd_voicemail_message(errs: FieldErrors, path: str, value: Any, ctx: CampaignContext) -> Any:
    if value is None:
        return None
    if not _object(errs, path, value, ("enabled", "voice_message_id"), ("enabled",)):
        return value
    check_type(errs, join(path, "enabled"), value["enabled"], "boolean")
    ref = value.get("voice_message_id")
    _voice_message_ref(errs, join(path, "voice_message_id"), ref, ctx)
    return {"enabled": value["enabled"], "voice_message_id": ref}


def _live(errs: FieldErrors, path: str, value: Any, ctx: CampaignContext) -> Any:
    if value is None:
        return None
    if not _object(errs, path, value, ("enabled", "dialing_order"), ("enabled",)):
        return value
    enabled_ok = check_type(errs, join(path, "enabled"), value["enabled"], "boolean")
    order = value.get("dialing_order")
    sub = join(path, "dialing_order")
    if order is not None and check_enum(errs, sub, order, DIALING_ORDERS):
        if not ctx.dialing_order:
            errs.add(sub, "dialing order is not enabled for this contact center")
        elif enabled_ok and value["enabled"] is not True:
            errs.add(sub, "is only allowed when live is enabled")
    return {"enabled": value["enabled"], "dialing_order": order}


def _caller_id_sets(errs: FieldErrors, path: str, value: Any, ctx: CampaignContext) -> Any:
    if not check_type(errs, path, value, "array"):
        return value
    if not 1 <= len(value) <= MAX_CALLER_ID_SETS:
        errs.add(path, f"must contain between 1 and {MAX_CALLER_ID_SETS} sets")
    for i, item in enumerate(value):
        item_path = join(path, i)
        if not _object(errs, item_path, item, ("phone_numbers",), ("phone_numbers",)):
            continue
        numbers_path = join(item_path, "phone_numbers")
        numbers = item["phone_numbers"]
        if not check_type(errs, numbers_path, numbers, "array"):
            continue
        if not numbers:
            errs.add(numbers_path, "must contain at least 1 phone number")
        for j, number in enumerate(numbers):
            check_phone(errs, join(numbers_path, j), number)
    if errs.errors.keys() & {path} or any(k.startswith(path + ".") for k in errs.errors):
        return value
    return [{"phone_numbers": list(item["phone_numbers"])} for item in value]


def _post_call_rating(errs: FieldErrors, path: str, value: Any, ctx: CampaignContext) -> Any:
    if value is None:
        return None
    if not _object(errs, path, value, ("enabled", *RATING_REFS), ("enabled",)):
        return value
    check_type(errs, join(path, "enabled"), value["enabled"], "boolean")
    for ref in RATING_REFS:
        _voice_message_ref(errs, join(path, ref), value.get(ref), ctx)
    return {"enabled": value["enabled"], **{ref: value.get(ref) for ref in RATING_REFS}}


def _contact_local_time(errs: FieldErrors, path: str, value: Any, ctx: CampaignContext) -> Any:
    if value is None:
        return None  # null clears it, and needs no feature
    if not ctx.contact_local_time:
        errs.add(path, "contact local time is not enabled for this contact center")
        return value
    keys = ("start_time", "end_time", "days_of_week")
    if not _object(errs, path, value, keys, keys):
        return value
    hours = [_hour(errs, join(path, k), value[k]) for k in ("start_time", "end_time")]
    start, end = hours
    if start is not None and end is not None and end <= start:
        errs.add(join(path, "end_time"), "must be later than start_time")
    days_path = join(path, "days_of_week")
    days = value["days_of_week"]
    if check_type(errs, days_path, days, "array"):
        if not days:
            errs.add(days_path, "must contain at least 1 day")
        for i, day in enumerate(days):
            if check_type(errs, join(days_path, i), day, "integer"):
                check_range(errs, join(days_path, i), day, low=1, high=7)
        # 1 and 1.0 are the same integer (JSON Schema's uniqueItems agrees): stored as ints.
        days = [int(day) if is_int(day) else day for day in days]
        if len(set(map(repr, days))) != len(days):
            errs.add(days_path, "must not contain duplicates")
    return {**{k: value[k] for k in keys}, "days_of_week": days}


def _hour(errs: FieldErrors, path: str, value: Any) -> int | None:
    if not check_type(errs, path, value, "string"):
        return None
    if not _HOUR_RE.fullmatch(value):
        errs.add(path, "must be a whole hour in HH:00 format")
        return None
    hour = int(value[:2])
    if not 8 <= hour <= 22:
        errs.add(path, "must be between 08:00 and 22:00")
        return None
    return hour


def _follow_up_rules(errs: FieldErrors, path: str, value: Any, ctx: CampaignContext) -> Any:
    if value is None:
        return None
    if not _object(errs, path, value, FOLLOW_UP_GROUPS, ()):
        return value
    # Whole replacement: every group is stored, omitted ones as empty (spec PATCH rule 3).
    out: dict[str, list[dict[str, Any]]] = {group: [] for group in FOLLOW_UP_GROUPS}
    for group in FOLLOW_UP_GROUPS:
        if group not in value:
            continue
        group_path = join(path, group)
        rules = value[group]
        if not check_type(errs, group_path, rules, "array"):
            continue
        if len(rules) > MAX_RULES:
            errs.add(group_path, f"must contain at most {MAX_RULES} rules")
        for i, rule in enumerate(rules):
            checked = _rule(errs, join(group_path, i), rule, wrapup=group == "wrapup_code")
            if checked is not None:
                out[group].append(checked)
    return out


def _rule(errs: FieldErrors, path: str, rule: Any, *, wrapup: bool) -> dict[str, Any] | None:
    # The wrapup_code group's structure is "not shown": we add a required wrapup_code_id.
    keys: tuple[str, ...] = ("wait_time", "wait_time_unit", "switch_caller_id_set")
    required: tuple[str, ...] = ("wait_time", "wait_time_unit")
    if wrapup:
        keys, required = (*keys, "wrapup_code_id"), (*required, "wrapup_code_id")
    if not _object(errs, path, rule, keys, ()):
        return None
    ok = require_all(errs, path, rule, required)
    if "wait_time" in rule and check_type(
        errs, join(path, "wait_time"), rule["wait_time"], "integer"
    ):
        ok &= check_range(errs, join(path, "wait_time"), rule["wait_time"], low=1)
    if "wait_time_unit" in rule:
        ok &= check_enum(errs, join(path, "wait_time_unit"), rule["wait_time_unit"], WAIT_UNITS)
    switch = rule.get("switch_caller_id_set", False)
    ok &= check_type(errs, join(path, "switch_caller_id_set"), switch, "boolean")
    if wrapup and "wrapup_code_id" in rule:
        sub = join(path, "wrapup_code_id")
        if check_type(errs, sub, rule["wrapup_code_id"], "integer"):
            ok &= check_range(errs, sub, rule["wrapup_code_id"], low=1)
    if not ok:
        return None
    return {k: rule.get(k, False) for k in keys}


def _follow_up_mode(errs: FieldErrors, path: str, value: Any, ctx: CampaignContext) -> Any:
    if value is not None:
        check_enum(errs, path, value, FOLLOW_UP_MODES)
    return value


class FieldRule(NamedTuple):
    """A config field's default (what a create without it stores) and its checker."""

    default: Any
    check: Checker


# Every config field but the required `name`, in response order (render follows it).
FIELD_RULES: Final[Mapping[str, FieldRule]] = {
    "strategy": FieldRule("simple", _strategy),
    "dial_level": FieldRule(1.0, _dial_level),
    "dial_level_override": FieldRule(DIAL_LEVEL_OVERRIDE_DEFAULT, _dial_level_override),
    "max_dial_time": FieldRule(60, _int_between(1, 600)),
    "max_wait_time": FieldRule(5, _int_between(0, 3600)),
    "max_dial_attempts": FieldRule(3, _int_between(1, 99)),
    "voice_message_id": FieldRule(None, _voice_message_ref),
    "amd_enabled": FieldRule(True, _boolean),
    "amd_voicemail_message": FieldRule(None, _amd_voicemail_message),
    "live": FieldRule({"enabled": False, "dialing_order": None}, _live),
    "caller_id_sets": FieldRule([], _caller_id_sets),
    "use_local_caller_id": FieldRule(False, _boolean),
    "asr_optimization_enabled": FieldRule(True, _boolean),
    "post_call_rating": FieldRule(POST_CALL_RATING_DEFAULT, _post_call_rating),
    "contact_local_time": FieldRule(None, _contact_local_time),
    "follow_up_rules": FieldRule(None, _follow_up_rules),
    "follow_up_mode": FieldRule("timer", _follow_up_mode),
    "amd_comfort_noise_enabled": FieldRule(False, _boolean),
    "allow_duplicate_phone_numbers": FieldRule(False, _boolean),
}
CHECKERS: Final[Mapping[str, Checker]] = {
    "name": _name,
    **{key: rule.check for key, rule in FIELD_RULES.items()},
}
