"""Campaign and lead writes: create, PATCH, start/pause/stop, add and update leads.

Validation is in `campaigns.py` (config fields, state machine) and below (leads); a handler
then makes one locked mutation of `SandboxState`. An operation the campaign's status forbids
answers 409 ``{"errors": {"state": ["conflict"]}}``.
"""

from __future__ import annotations

import copy
from collections import Counter
from collections.abc import Callable, Mapping
from typing import Any, Final

from starlette.requests import Request
from starlette.responses import Response

from connectors.sandbox import campaigns
from connectors.sandbox.fieldcheck import (
    FieldErrors,
    check_phone,
    check_type,
    check_unknown,
    join,
    require,
)
from connectors.sandbox.http import ApiError, fail, get_sandbox, json_object, json_response
from connectors.sandbox.reads import int_id
from connectors.sandbox.state import SandboxState
from connectors.sandbox.writes import (
    CONFLICT,
    V4,
    Handler,
    WriteRoutes,
    by_id,
    dataset,
    locked_state,
)
from models.timestamps import iso_ms

WRITES = WriteRoutes()
MAX_LEADS_PER_REQUEST: Final = 1000
_CAMPAIGN: Final = f"{V4}/campaigns/{{campaign_id}}"
_SCOPE: Final = "campaigns.manage"
_LEAD_FIELDS: Final = ("phone_number", "name", "email", "data")


# --- campaigns --------------------------------------------------------------------------------


def _campaign_context(request: Request, exclude: int | None = None) -> campaigns.CampaignContext:
    sandbox = get_sandbox(request)
    cfg = sandbox.config
    names = frozenset(
        str(c.get("name")) for cid, c in sandbox.state.campaigns.items() if cid != exclude
    )
    return campaigns.CampaignContext(
        voice_message_ids=frozenset(vm["id"] for vm in sandbox.dataset.voice_messages),
        taken_names=names,
        dialer_ai=cfg.dialer_ai,
        dialing_order=cfg.dialing_order,
        contact_local_time=cfg.contact_local_time,
    )


def _render(request: Request, campaign: Mapping[str, Any]) -> dict[str, Any]:
    return campaigns.render(campaign, by_id(dataset(request).voice_messages))


def _campaign(state: SandboxState, campaign_id: int) -> dict[str, Any]:
    found = state.campaigns.get(campaign_id)
    if found is None:
        raise ApiError(404)
    return found


@WRITES.route("POST", f"{V4}/campaigns", _SCOPE, "Campaigns", "Create")
async def create_campaign(request: Request) -> Response:
    body = await json_object(request)
    with locked_state(request) as state:
        config, errors = campaigns.validate_create(body, _campaign_context(request))
        if config is None:
            raise fail(errors)
        campaign_id = state.next_campaign_id()
        stamp = iso_ms(state.clock.now())
        record = {"id": campaign_id, "status": "draft", **config}
        record.update(created_at=stamp, updated_at=stamp)
        # Stored in response shape (voice message resolved), like the generated campaigns,
        # so every reader of state.campaigns serves the same thing.
        out = _render(request, record)
        state.campaigns[campaign_id] = copy.deepcopy(out)
    return json_response({"campaign": out}, 201)


@WRITES.route("PATCH", _CAMPAIGN, _SCOPE, "Campaigns", "Update a campaign")
async def patch_campaign(request: Request) -> Response:
    body = await json_object(request)
    campaign_id = int_id(request, "campaign_id")
    with locked_state(request) as state:
        current = _campaign(state, campaign_id)
        try:
            config, errors = campaigns.validate_patch(
                body, current, _campaign_context(request, exclude=campaign_id)
            )
        except campaigns.CampaignConflict:
            raise fail(CONFLICT, 409) from None
        if config is None:
            raise fail(errors)
        current.update(config)
        current["updated_at"] = iso_ms(state.clock.now())
        out = _render(request, current)
        current.clear()
        current.update(copy.deepcopy(out))
    return json_response({"campaign": out})


def _operation(operation: campaigns.Operation) -> Handler:
    async def handler(request: Request) -> Response:
        campaign_id = int_id(request, "campaign_id")
        with locked_state(request) as state:
            current = _campaign(state, campaign_id)
            try:
                current["status"] = campaigns.transition(str(current.get("status")), operation)
            except campaigns.CampaignConflict:
                raise fail(CONFLICT, 409) from None
            current["updated_at"] = iso_ms(state.clock.now())
            out = _render(request, current)
        return json_response({"campaign": out})

    handler.__name__ = f"{operation}_campaign"
    return handler


for _name in campaigns.TRANSITIONS:
    WRITES.route("POST", f"{_CAMPAIGN}/{_name}", _SCOPE, "Campaigns", _name.title())(
        _operation(_name)
    )


# --- leads ------------------------------------------------------------------------------------


def _leads_list(errs: FieldErrors, body: Mapping[str, Any]) -> list[Any]:
    check_unknown(errs, "", body, ("leads",))
    if not require(errs, "", body, "leads") or not check_type(
        errs, "leads", body["leads"], "array"
    ):
        return []
    leads: list[Any] = body["leads"]
    if not 1 <= len(leads) <= MAX_LEADS_PER_REQUEST:
        errs.add("leads", f"must contain between 1 and {MAX_LEADS_PER_REQUEST} leads")
    return leads


def _lead_fields(errs: FieldErrors, path: str, lead: Mapping[str, Any], *, create: bool) -> None:
    if (not create or require(errs, path, lead, "phone_number")) and "phone_number" in lead:
        check_phone(errs, join(path, "phone_number"), lead["phone_number"])
    for key in ("name", "email"):
        if lead.get(key) is not None:
            check_type(errs, join(path, key), lead[key], "string")
    data = lead.get("data")
    if data is not None and check_type(errs, join(path, "data"), data, "object"):
        for key, value in data.items():
            check_type(errs, join(path, f"data.{key}"), value, "string")


def _check_duplicates(
    errs: FieldErrors, campaign: Mapping[str, Any], existing: list[dict[str, Any]], leads: list[Any]
) -> None:
    """Each phone number at most once per campaign, unless the campaign allows duplicates."""
    if campaign.get("allow_duplicate_phone_numbers") is True:
        return
    final: dict[object, str] = {lead["id"]: lead["phone_number"] for lead in existing}
    changed: dict[int, object] = {}
    for i, lead in enumerate(leads):
        if "phone_number" in lead:
            key = lead.get("id", ("new", i))
            final[key] = lead["phone_number"]
            changed[i] = key
    counts = Counter(final.values())
    for i, key in changed.items():
        if counts[final[key]] > 1:
            errs.add(f"leads.{i}.phone_number", "has already been added to this campaign")


def _writable_leads(
    state: SandboxState, campaign_id: int
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The campaign and its leads, when it still takes leads."""
    campaign = _campaign(state, campaign_id)
    if campaign.get("status") == "completed":
        raise fail(CONFLICT, 409)  # a completed campaign dials no more
    return campaign, state.leads.setdefault(campaign_id, [])


def _reject_leads(
    errs: FieldErrors, campaign: Mapping[str, Any], existing: list[dict[str, Any]], leads: list[Any]
) -> None:
    """A 422 for any error; duplicates are looked for only among otherwise valid leads."""
    if not errs:
        _check_duplicates(errs, campaign, existing, leads)
    if errs:
        raise fail(errs.errors)


def _new_lead(errs: FieldErrors, path: str, lead: Mapping[str, Any]) -> None:
    check_unknown(errs, path, lead, _LEAD_FIELDS)
    _lead_fields(errs, path, lead, create=True)


def _lead_update(errs: FieldErrors, path: str, lead: Mapping[str, Any]) -> None:
    check_unknown(errs, path, lead, ("id", *_LEAD_FIELDS))
    if require(errs, path, lead, "id"):
        check_type(errs, join(path, "id"), lead["id"], "integer")
    _lead_fields(errs, path, lead, create=False)


async def _leads_request(
    request: Request, check_lead: Callable[[FieldErrors, str, Mapping[str, Any]], None]
) -> tuple[int, list[Any], FieldErrors]:
    """The campaign id, the body's leads, and their field errors (the state is not read yet)."""
    body = await json_object(request)
    campaign_id = int_id(request, "campaign_id")
    errs = FieldErrors()
    leads = _leads_list(errs, body)
    for i, lead in enumerate(leads):
        if check_type(errs, f"leads.{i}", lead, "object"):
            check_lead(errs, f"leads.{i}", lead)
    return campaign_id, leads, errs


@WRITES.route("POST", f"{_CAMPAIGN}/leads", _SCOPE, "Campaigns", "Add leads")
async def add_leads(request: Request) -> Response:
    campaign_id, leads, errs = await _leads_request(request, _new_lead)
    with locked_state(request) as state:
        campaign, existing = _writable_leads(state, campaign_id)
        _reject_leads(errs, campaign, existing, leads)
        stamp = iso_ms(state.clock.now())
        next_id = sum(len(items) for items in state.leads.values()) + 1
        created = []
        for offset, lead in enumerate(leads):
            record = {"id": next_id + offset, "campaign": {"id": campaign_id}, "status": "pending"}
            record.update({key: lead.get(key) for key in _LEAD_FIELDS})
            record["data"] = dict(lead.get("data") or {})
            record.update(created_at=stamp, updated_at=stamp)
            created.append(record)
        existing.extend(created)
    return json_response({"leads": created}, 201)


@WRITES.route("PATCH", f"{_CAMPAIGN}/leads", _SCOPE, "Campaigns", "Update leads")
async def update_leads(request: Request) -> Response:
    campaign_id, leads, errs = await _leads_request(request, _lead_update)
    with locked_state(request) as state:
        campaign, existing = _writable_leads(state, campaign_id)
        known = {lead["id"]: lead for lead in existing}
        if not errs:
            for i, lead in enumerate(leads):
                if lead["id"] not in known:
                    errs.add(f"leads.{i}.id", "does not exist")
        _reject_leads(errs, campaign, existing, leads)
        stamp = iso_ms(state.clock.now())
        updated = []
        for lead in leads:
            record = known[lead["id"]]
            record.update({key: lead[key] for key in _LEAD_FIELDS if key in lead})
            # `data` is always an object (the Lead schema): null clears it, as on create.
            record["data"] = dict(record.get("data") or {})
            record["updated_at"] = stamp
            updated.append(record)
    return json_response({"leads": updated})
