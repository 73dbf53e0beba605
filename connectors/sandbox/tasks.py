"""Scheduled callbacks and webhook-failure retriggers: validation and records.

Choices for what the spec leaves "not shown" (see docs/sandbox.md):
- POST /tasks/scheduled_callbacks (also spelled /tasks/schedule_callbacks, as the migration
  mapping does) takes ``{phone_number, scheduled_at, user_id?, queue_id?, note?}`` and answers
  201 ``{"scheduled_callback": {id, phone_number, scheduled_at, user, queue, note, status:
  "scheduled", created_at}}``. ``scheduled_at`` must be in the future.
- POST /tasks/webhook_failures/{id}/retrigger (and the mapping's GET
  /tasks/webhooks/failures/{id}/retrigger) answers 200 ``{"webhook_failure": {...}}`` with
  ``retriggered_at`` set and ``attempts`` incremented; retriggering again is allowed (the hook
  is simply sent again).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from datetime import datetime
from typing import Any, Final

from connectors.sandbox.fieldcheck import (
    MISSING_REF,
    body_errors,
    check_timestamp,
    check_type,
    check_uuid,
    require,
    require_phone,
)
from models.timestamps import iso_ms

MAX_NOTE: Final = 1000


def validate_callback(
    body: Mapping[str, Any],
    *,
    now: datetime,
    user_ids: Collection[str],
    queue_ids: Collection[int],
) -> tuple[datetime | None, dict[str, list[str]]]:
    """Returns the parsed ``scheduled_at`` or field errors."""
    errs = body_errors(body, ("phone_number", "scheduled_at", "user_id", "queue_id", "note"))
    require_phone(errs, body)
    when = None
    if require(errs, "", body, "scheduled_at"):
        when = check_timestamp(errs, "scheduled_at", body["scheduled_at"])
        if when is not None and when <= now:
            errs.add("scheduled_at", "must be in the future")
    user_id = body.get("user_id")
    if user_id is not None and check_uuid(errs, "user_id", user_id) and user_id not in user_ids:
        errs.add("user_id", MISSING_REF)
    queue_id = body.get("queue_id")
    if (
        queue_id is not None
        and check_type(errs, "queue_id", queue_id, "integer")
        and queue_id not in queue_ids
    ):
        errs.add("queue_id", MISSING_REF)
    note = body.get("note")
    if note is not None and check_type(errs, "note", note, "string") and len(note) > MAX_NOTE:
        errs.add("note", f"must be at most {MAX_NOTE} characters")
    return (None, errs.errors) if errs else (when, {})


def new_callback(
    callback_id: str,
    body: Mapping[str, Any],
    *,
    scheduled_at: datetime,
    user: Mapping[str, Any] | None,
    queue: Mapping[str, Any] | None,
    now: datetime,
) -> dict[str, Any]:
    return {
        "id": callback_id,
        "phone_number": body["phone_number"],
        "scheduled_at": iso_ms(scheduled_at),
        "user": None
        if user is None
        else {"id": user["id"], "name": user.get("name"), "email": user.get("email")},
        "queue": None if queue is None else {"id": queue["id"], "name": queue.get("name")},
        "note": body.get("note"),
        "status": "scheduled",
        "created_at": iso_ms(now),
    }


def retrigger(failure: dict[str, Any], *, now: datetime) -> dict[str, Any]:
    """Mark a webhook failure as sent again (mutates and returns it)."""
    failure["retriggered_at"] = iso_ms(now)
    failure["attempts"] = int(failure.get("attempts") or 0) + 1
    return failure
