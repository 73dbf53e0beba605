"""The `conversation` CDR generator: One conversation CDR (WhatsApp, chat)."""

from __future__ import annotations

import random

import orjson

from connectors.sandbox.generator.daystore import Generated, Json
from connectors.sandbox.generator.dimensions import Dimensions
from connectors.sandbox.generator.draws import ri, uuid4
from connectors.sandbox.generator.encoding import cost_json
from connectors.sandbox.generator.picks import draw_queue_ref, draw_user, draw_wrapup, live_ref
from models.timestamps import iso_ms_from_epoch


def generate(dims: Dimensions, rng: random.Random, start: int) -> Generated:
    """One conversation CDR (WhatsApp, chat)."""
    account = dims.channel_accounts[int(rng.random() * len(dims.channel_accounts))]
    business = dims.business_accounts[int(rng.random() * len(dims.business_accounts))]
    archived = rng.random() < 0.8
    user, teams = draw_user(dims, rng)
    has_user = archived and rng.random() < 0.9
    queue_s = ri(rng, 0, 600)
    talk = ri(rng, 30, 5400) if has_user else 0
    overall = queue_s + talk + ri(rng, 1, 60)
    end = start + overall * 1000 + ri(rng, 0, 999)

    def sla(value_max: int) -> Json | None:
        if rng.random() < 0.15:
            return None
        value = ri(rng, 1, value_max)
        return {"value": value, "status": "met" if value < value_max * 0.7 else "breached"}

    flow = dims.flows[1] if rng.random() < 0.7 else None
    cost = (0, 50, 100, 120)[int(rng.random() * 4)]
    rec: Json = {
        "id": uuid4(rng),
        "type": "conversation",
        "subtype": "whatsapp",
        "disposition": "archived" if archived else "available",
        "from": {"type": "channel_account", "channel_account": account},
        "to": (
            {"type": "channel_account", "channel_account": business}
            if rng.random() < 0.7
            else {"type": "phone_number", "phone_number": business["identifier"]}
        ),
        "user": user if has_user else None,
        "cost": orjson.Fragment(cost_json(cost)),
        "tags": ["whisper"] if rng.random() < 0.05 else [],
        "started_at": iso_ms_from_epoch(start),
        "ended_at": iso_ms_from_epoch(end),
        "data": {
            "channel": "whatsapp",
            "flow": live_ref(flow) if flow else None,
            "queue": draw_queue_ref(dims, rng) if rng.random() < 0.85 else None,
            "wrapup_code": draw_wrapup(rng) if has_user else None,
            "durations": {"overall": overall, "queue": queue_s, "talk": talk},
            "service_level_agreements": {
                "first_response": sla(300),
                "resolution": sla(86_400),
                "avg_reply": sla(600),
            },
        },
    }
    return rec, start, end, cost, teams if has_user else (), None
