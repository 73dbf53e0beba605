"""The `sms` CDR generator: One SMS CDR."""

from __future__ import annotations

import random

import orjson

from connectors.sandbox import names
from connectors.sandbox.generator.daystore import Generated, Json
from connectors.sandbox.generator.dimensions import Dimensions
from connectors.sandbox.generator.draws import ri, uuid4
from connectors.sandbox.generator.encoding import cost_json
from connectors.sandbox.generator.picks import draw_account, draw_phone, draw_user, live_ref
from models.timestamps import iso_ms_from_epoch


def generate(dims: Dimensions, rng: random.Random, start: int) -> Generated:
    """One SMS CDR."""
    customer, _country = draw_phone(rng)
    sent = rng.random() < 0.95
    canned = rng.random() < 0.3
    cm = dims.canned_messages[int(rng.random() * len(dims.canned_messages))]
    text = cm["body"] if canned else names.SMS_TEXTS[int(rng.random() * len(names.SMS_TEXTS))]
    segments = 1 + len(text) // 160
    user, teams = draw_user(dims, rng)
    has_user = rng.random() < 0.6
    sender = {"type": "phone_number", "phone_number": dims.cc_phones[int(rng.random() * 4)]}
    end = start + ri(rng, 300, 4000)
    cost = 650 * segments if sent else 0
    rec: Json = {
        "id": uuid4(rng),
        "type": "sms",
        "subtype": "outbound_sms",
        "disposition": "sent" if sent else "failed",
        "from": sender,
        "to": {"type": "phone_number", "phone_number": customer},
        "user": user if has_user else None,
        "cost": orjson.Fragment(cost_json(cost)),
        "tags": [],
        "started_at": iso_ms_from_epoch(start),
        "ended_at": iso_ms_from_epoch(end),
        "data": {
            "sent": sent,
            "segments_count": segments,
            "message": text,
            "canned_message": live_ref(cm) if canned else None,
            "related_call": {"id": uuid4(rng)} if rng.random() < 0.25 else None,
        },
    }
    return rec, start, end, cost, teams if has_user else (), draw_account(rng)
