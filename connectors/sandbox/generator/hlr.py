"""The `hlr_lookup` CDR generator: One HLR lookup CDR."""

from __future__ import annotations

import random

import orjson

from connectors.sandbox.generator.daystore import Generated, Json
from connectors.sandbox.generator.dimensions import Dimensions
from connectors.sandbox.generator.draws import ri, uuid4
from connectors.sandbox.generator.encoding import cost_json
from connectors.sandbox.generator.picks import draw_phone
from models.timestamps import iso_ms_from_epoch


def generate(dims: Dimensions, rng: random.Random, start: int) -> Generated:
    """One HLR lookup CDR."""
    customer, _country = draw_phone(rng)
    reachable = rng.random() < 0.85
    end = start + ri(rng, 150, 2500)
    cost = 50
    rec: Json = {
        "id": uuid4(rng),
        "type": "hlr_lookup",
        "subtype": "hlr_lookup",
        "disposition": "available" if reachable else "unavailable",
        "from": {"type": "phone_number", "phone_number": dims.cc_phones[0]},
        "to": {"type": "phone_number", "phone_number": customer},
        "user": None,
        "cost": orjson.Fragment(cost_json(cost)),
        "tags": [],
        "started_at": iso_ms_from_epoch(start),
        "ended_at": iso_ms_from_epoch(end),
        "data": {
            "reachable": reachable,
            "roaming": reachable and rng.random() < 0.07,
            "related_call": {"id": uuid4(rng)} if rng.random() < 0.5 else None,
        },
    }
    return rec, start, end, cost, (), None
