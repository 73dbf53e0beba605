"""The `call` CDR generator: One call CDR (voice: inbound or outbound, with legs and recordings)."""

from __future__ import annotations

import random

import orjson

from connectors.sandbox import names
from connectors.sandbox.generator.daystore import Generated, Json
from connectors.sandbox.generator.dimensions import Dimensions
from connectors.sandbox.generator.draws import ri, uuid4
from connectors.sandbox.generator.encoding import cost_json
from connectors.sandbox.generator.picks import (
    draw_account,
    draw_phone,
    draw_queue_ref,
    draw_tags,
    draw_user,
    draw_wrapup,
)
from models.timestamps import iso_ms_from_epoch


def generate(dims: Dimensions, rng: random.Random, start: int) -> Generated:
    """One call CDR (voice: inbound or outbound, with legs and recordings)."""
    outbound = rng.random() < 0.6
    customer, country = draw_phone(rng)
    cc_phone = dims.cc_phones[int(rng.random() * len(dims.cc_phones))]
    r = rng.random()
    disposition = (
        "answered" if r < 0.72 else "no_answer" if r < 0.87 else "busy" if r < 0.93 else "failed"
    )
    answered = disposition == "answered"
    user, teams = draw_user(dims, rng)
    has_user = answered or (outbound and rng.random() < 0.7)
    dialing = ri(rng, 2, 25) if outbound else 0
    ivr = 0 if outbound else ri(rng, 0, 40)
    queue_s = ri(rng, 0, 180) if not outbound else 0
    talk = ri(rng, 10, 1500) if answered else 0
    hold = ri(rng, 0, 120) if answered and rng.random() < 0.3 else 0
    overall = dialing + ivr + queue_s + talk + hold + 1
    campaign = (
        dims.campaign_refs[int(rng.random() * len(dims.campaign_refs))]
        if outbound and rng.random() < 0.4
        else None
    )
    cc_end = {"type": "phone_number", "phone_number": cc_phone}
    cust_end = {"type": "phone_number", "phone_number": customer}
    rate = ri(rng, 50, 300)  # per started minute, ten-thousandths
    cost = rate * (overall // 60 + 1) if answered or outbound else 0
    end = start + overall * 1000 + ri(rng, 0, 999)
    rec: Json = {
        "id": uuid4(rng),
        "type": "call",
        "subtype": "outbound" if outbound else "inbound",
        "disposition": disposition,
        "from": cc_end if outbound else cust_end,
        "to": cust_end if outbound else cc_end,
        "user": user if has_user else None,
        "cost": orjson.Fragment(cost_json(cost)),
        "tags": draw_tags(rng) if answered else [],
        "started_at": iso_ms_from_epoch(start),
        "ended_at": iso_ms_from_epoch(end),
        "data": {
            "queue": draw_queue_ref(dims, rng) if (not outbound or rng.random() < 0.3) else None,
            "campaign": campaign,
            "destination_country": country if outbound else "DE",
            "durations": {
                "overall": overall,
                "dialing": dialing,
                "ivr": ivr,
                "queue": queue_s,
                "talk": talk,
                "hold": hold,
            },
            "end_reason": (
                rng.choice(("caller_hangup", "agent_hangup")) if answered else disposition
            ),
            "wrapup_code": draw_wrapup(rng) if answered else None,
            "summary": (
                names.SUMMARIES[int(rng.random() * len(names.SUMMARIES))]
                if answered and rng.random() < 0.5
                else None
            ),
            "conversation_score": round(rng.uniform(1, 5), 1)
            if answered and rng.random() < 0.6
            else None,
            "mos": round(rng.uniform(3.2, 4.5), 2) if answered else None,
            "mos_tc": round(rng.uniform(3.0, 4.4), 2) if answered and rng.random() < 0.8 else None,
        },
    }
    return (
        rec,
        start,
        end,
        cost,
        teams if has_user else (),
        draw_account(rng) if outbound else None,
    )
