"""Campaign validation, defaults, PATCH semantics, state machine and response shape.

Pure functions over JSON-ready dicts; no HTTP and no shared state here. The routes call
:func:`validate_create` / :func:`validate_patch`, store the returned record, and answer with
:func:`render`.

State machine (the spec names only ``stopped`` and ``completed``; the rest is our choice)::

    draft ──start──▶ running ──pause──▶ paused
                       ▲  │               │
                       │  └────stop───┐   ├──start──▶ running
                     start            ▼   │
                       └─────────── stopped ◀──stop── paused
    completed: terminal (no operation leaves it)

Any other move answers 409 ``{"errors": {"state": ["conflict"]}}``. PATCH on a ``stopped`` or
``completed`` campaign answers the same 409.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal

from connectors.sandbox.fieldcheck import (
    MISSING_REF,
    REQUIRED,
    FieldErrors,
    check_enum,
    check_phone,
    check_range,
    check_type,
    check_unknown,
    join,
    require,
    require_all,
)

Operation = Literal["start", "pause", "stop"]

STATUSES: Final = ("draft", "running", "paused", "stopped", "completed")
TRANSITIONS: Final[Mapping[Operation, Mapping[str, str]]] = {
    "start": {"draft": "running", "paused": "running", "stopped": "running"},
    "pause": {"running": "paused"},
    "stop": {"running": "stopped", "paused": "stopped"},
}
NOT_PATCHABLE: Final = frozenset({"stopped", "completed"})

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

# PATCH-only booleans (spec rule 6 leaves their names "not shown").
PATCH_ONLY: Final = ("amd_comfort_noise_enabled", "allow_duplicate_phone_numbers")

DEFAULTS: Final[Mapping[str, Any]] = {
    "strategy": "simple",
    "dial_level": 1.0,
    "dial_level_override": {"enabled": True, "value": 1.5, "active_agents_threshold": 3},
    "max_dial_time": 60,
    "max_wait_time": 5,
    "max_dial_attempts": 3,
    "voice_message_id": None,
    "amd_enabled": True,
    "amd_voicemail_message": None,
    "live": {"enabled": False, "dialing_order": None},
    "caller_id_sets": [],
    "use_local_caller_id": False,
    "asr_optimization_enabled": True,
    "post_call_rating": {
        "enabled": False,
        "notification_voice_message_id": None,
        "instructions_voice_message_id": None,
        "complete_voice_message_id": None,
    },
    "contact_local_time": None,
    "follow_up_rules": None,
    "follow_up_mode": "timer",
    "amd_comfort_noise_enabled": False,
    "allow_duplicate_phone_numbers": False,
}
CONFIG_FIELDS: Final = ("name", *DEFAULTS)


class CampaignConflict(Exception):
    """The campaign's status does not allow the requested operation (answers 409)."""


@dataclass(frozen=True)
class CampaignContext:
    """What validation needs to know about the contact center."""

    voice_message_ids: frozenset[int]
    taken_names: frozenset[str]  # names of the *other* campaigns
    dialer_ai: bool = True
    dialing_order: bool = True
    contact_local_time: bool = True


# --- public API -------------------------------------------------------------------------------


def validate_create(
    body: Mapping[str, Any], ctx: CampaignContext
) -> tuple[dict[str, Any] | None, dict[str, list[str]]]:
    """Return ``(config, {})`` with defaults applied, or ``(None, field_errors)``."""
    errs = FieldErrors()
    check_unknown(errs, "", body, CONFIG_FIELDS)
    for key in PATCH_ONLY:
        if key in body:
            errs.errors[key] = ["is only accepted on update"]
    require(errs, "", body, "name")
    require(errs, "", body, "caller_id_sets")
    given = _normalize(errs, body, ctx)
    merged = {**copy.deepcopy(dict(DEFAULTS)), **given}
    _cross_checks(errs, merged, body)
    return (None, errs.errors) if errs else (merged, {})


def validate_patch(
    body: Mapping[str, Any], current: Mapping[str, Any], ctx: CampaignContext
) -> tuple[dict[str, Any] | None, dict[str, list[str]]]:
    """Return the whole updated config, or field errors. Raises CampaignConflict when the
    campaign's status forbids updates (checked first: the state outranks the body)."""
    if current.get("status") in NOT_PATCHABLE:
        raise CampaignConflict(str(current.get("status")))
    errs = FieldErrors()
    check_unknown(errs, "", body, CONFIG_FIELDS)
    given = _normalize(errs, body, ctx)
    merged = {**_with_defaults(current), **given}
    _cross_checks(errs, merged, body)
    return (None, errs.errors) if errs else (merged, {})


def transition(status: str, operation: Operation) -> str:
    """The status after ``operation``, or CampaignConflict for an illegal move."""
    target = TRANSITIONS[operation].get(status)
    if target is None:
        raise CampaignConflict(f"{operation} from {status}")
    return target


def render(
    campaign: Mapping[str, Any], voice_messages: Mapping[int, Mapping[str, Any]]
) -> dict[str, Any]:
    """The response shape: id, name, status, every config field, and ``amd_voicemail_message``
    with a resolved ``voice_message {type, name}`` in place of ``voice_message_id``.

    Missing config fields (e.g. in generated campaigns) render with their defaults."""
    full = _with_defaults(campaign)
    out: dict[str, Any] = {"id": full.get("id"), "name": full.get("name")}
    out["status"] = full.get("status")
    for key in DEFAULTS:
        out[key] = copy.deepcopy(full[key])
    vm = full.get("amd_voicemail_message")
    if isinstance(vm, dict) and "voice_message_id" in vm:
        ref = vm["voice_message_id"]
        found = voice_messages.get(ref) if isinstance(ref, int) else None
        resolved = None if found is None else {"type": found.get("type"), "name": found.get("name")}
        out["amd_voicemail_message"] = {"enabled": vm.get("enabled"), "voice_message": resolved}
    for key in ("created_at", "updated_at"):
        if key in full:
            out[key] = full[key]
    return out


# --- field by field ---------------------------------------------------------------------------

_Checker = Callable[[FieldErrors, str, Any, CampaignContext], Any]


def _with_defaults(record: Mapping[str, Any]) -> dict[str, Any]:
    return {**copy.deepcopy(dict(DEFAULTS)), **copy.deepcopy(dict(record))}


def _normalize(errs: FieldErrors, body: Mapping[str, Any], ctx: CampaignContext) -> dict[str, Any]:
    """Check each present field on its own; return the normalized values of those that pass."""
    out: dict[str, Any] = {}
    for key, value in body.items():
        checker = _CHECKERS.get(key)
        if checker is None:
            continue
        before = len(errs.errors)
        normalized = checker(errs, key, value, ctx)
        if len(errs.errors) == before:
            out[key] = normalized
    return out


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


def _int_between(low: int, high: int) -> _Checker:
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
    keys = ("enabled", "value", "active_agents_threshold")
    if not _object(errs, path, value, keys, ("enabled",)):
        return value
    out = {**DEFAULTS["dial_level_override"], **value}
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
    refs = (
        "notification_voice_message_id",
        "instructions_voice_message_id",
        "complete_voice_message_id",
    )
    if not _object(errs, path, value, ("enabled", *refs), ("enabled",)):
        return value
    check_type(errs, join(path, "enabled"), value["enabled"], "boolean")
    for ref in refs:
        _voice_message_ref(errs, join(path, ref), value.get(ref), ctx)
    return {"enabled": value["enabled"], **{ref: value.get(ref) for ref in refs}}


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
        if len(set(map(repr, days))) != len(days):
            errs.add(days_path, "must not contain duplicates")
    return {k: value[k] for k in keys}


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


def _cross_checks(errs: FieldErrors, merged: dict[str, Any], body: Mapping[str, Any]) -> None:
    """Rules that span fields, checked on the campaign as it would be after the write."""
    sets = merged.get("caller_id_sets")
    rules = merged.get("follow_up_rules")
    if isinstance(sets, list) and len(sets) == 1 and isinstance(rules, dict):
        for group, group_rules in rules.items():
            for i, rule in enumerate(group_rules):
                if isinstance(rule, dict) and rule.get("switch_caller_id_set") is True:
                    # Blame the field the request actually sent.
                    path = (
                        f"follow_up_rules.{group}.{i}.switch_caller_id_set"
                        if "follow_up_rules" in body
                        else "caller_id_sets"
                    )
                    errs.add(path, "cannot be true when only one caller ID set is assigned")
    if body.get("amd_comfort_noise_enabled") is True and merged.get("amd_enabled") is not True:
        errs.add("amd_comfort_noise_enabled", "requires amd_enabled")
    elif merged.get("amd_enabled") is False:
        # Turning AMD off turns its comfort noise off: the hold audio starts on answer.
        merged["amd_comfort_noise_enabled"] = False
    live = merged.get("live")
    if isinstance(live, dict) and live.get("enabled") is False:
        live["dialing_order"] = None


_CHECKERS: Final[Mapping[str, _Checker]] = {
    "name": _name,
    "strategy": _strategy,
    "dial_level": _dial_level,
    "dial_level_override": _dial_level_override,
    "max_dial_time": _int_between(1, 600),
    "max_wait_time": _int_between(0, 3600),
    "max_dial_attempts": _int_between(1, 99),
    "voice_message_id": _voice_message_ref,
    "amd_enabled": _boolean,
    "amd_voicemail_message": _amd_voicemail_message,
    "live": _live,
    "caller_id_sets": _caller_id_sets,
    "use_local_caller_id": _boolean,
    "asr_optimization_enabled": _boolean,
    "post_call_rating": _post_call_rating,
    "contact_local_time": _contact_local_time,
    "follow_up_rules": _follow_up_rules,
    "follow_up_mode": _follow_up_mode,
    "amd_comfort_noise_enabled": _boolean,
    "allow_duplicate_phone_numbers": _boolean,
}

__all__ = [
    "CONFIG_FIELDS",
    "DEFAULTS",
    "NOT_PATCHABLE",
    "PATCH_ONLY",
    "REQUIRED",
    "STATUSES",
    "CampaignConflict",
    "CampaignContext",
    "render",
    "transition",
    "validate_create",
    "validate_patch",
]
