"""Campaign validation, defaults, PATCH semantics, state machine and response shape.

Pure functions over JSON-ready dicts; no HTTP and no shared state here. The per-field checks
are the rule table in ``campaign_rules.py``. The routes call
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
from collections.abc import Mapping
from typing import Any, Final, Literal

from connectors.sandbox.campaign_rules import CHECKERS, FIELD_RULES, CampaignContext
from connectors.sandbox.fieldcheck import FieldErrors, body_errors, require

Operation = Literal["start", "pause", "stop"]

STATUSES: Final = ("draft", "running", "paused", "stopped", "completed")
TRANSITIONS: Final[Mapping[Operation, Mapping[str, str]]] = {
    "start": {"draft": "running", "paused": "running", "stopped": "running"},
    "pause": {"running": "paused"},
    "stop": {"running": "stopped", "paused": "stopped"},
}
NOT_PATCHABLE: Final = frozenset({"stopped", "completed"})

# PATCH-only booleans (spec rule 6 leaves their names "not shown").
PATCH_ONLY: Final = ("amd_comfort_noise_enabled", "allow_duplicate_phone_numbers")

DEFAULTS: Final[Mapping[str, Any]] = {key: rule.default for key, rule in FIELD_RULES.items()}
CONFIG_FIELDS: Final = ("name", *DEFAULTS)


class CampaignConflict(Exception):
    """The campaign's status does not allow the requested operation (answers 409)."""


# --- public API -------------------------------------------------------------------------------


def validate_create(
    body: Mapping[str, Any], ctx: CampaignContext
) -> tuple[dict[str, Any] | None, dict[str, list[str]]]:
    """Return ``(config, {})`` with defaults applied, or ``(None, field_errors)``."""
    errs = body_errors(body, CONFIG_FIELDS)
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
    errs = body_errors(body, CONFIG_FIELDS)
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
    full = _with_defaults(campaign)  # a deep copy already: its values are ours to hand out
    out: dict[str, Any] = {"id": full.get("id"), "name": full.get("name")}
    out["status"] = full.get("status")
    for key in DEFAULTS:
        out[key] = full[key]
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


# --- helpers ---------------------------------------------------------------------------------


def _with_defaults(record: Mapping[str, Any]) -> dict[str, Any]:
    return {**copy.deepcopy(dict(DEFAULTS)), **copy.deepcopy(dict(record))}


def _normalize(errs: FieldErrors, body: Mapping[str, Any], ctx: CampaignContext) -> dict[str, Any]:
    """Check each present field on its own; return the normalized values of those that pass."""
    out: dict[str, Any] = {}
    for key, value in body.items():
        checker = CHECKERS.get(key)
        if checker is None:
            continue
        before = len(errs.errors)
        normalized = checker(errs, key, value, ctx)
        if len(errs.errors) == before:
            out[key] = normalized
    return out


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


__all__ = [
    "CONFIG_FIELDS",
    "DEFAULTS",
    "NOT_PATCHABLE",
    "PATCH_ONLY",
    "STATUSES",
    "CampaignConflict",
    "CampaignContext",
    "render",
    "transition",
    "validate_create",
    "validate_patch",
]
