"""Draws shared by the CDR generators: phones, user and queue references, tags, wrap-up;
and `live_ref`, the reference shape of a row that still exists."""

from __future__ import annotations

import random

from connectors.sandbox import names
from connectors.sandbox.generator.daystore import Json
from connectors.sandbox.generator.dimensions import Dimensions
from connectors.sandbox.generator.draws import ri


def draw_phone(rng: random.Random) -> tuple[str, str]:
    country, cc, _city, area = names.CITIES[int(rng.random() * len(names.CITIES))]
    digits = 10 - len(area) if cc != "1" else 7
    return f"{cc}{area}{ri(rng, 10 ** (digits - 1), 10**digits - 1)}", country


def draw_user(dims: Dimensions, rng: random.Random) -> tuple[Json, tuple[int, ...]]:
    # ~8% of references point at deleted users.
    refs = dims.user_refs if rng.random() < 0.08 else dims.active_refs
    return refs[int(rng.random() * len(refs))]


def draw_queue_ref(dims: Dimensions, rng: random.Random) -> Json:
    if rng.random() < 0.05:
        q = dims.deleted_queues[int(rng.random() * len(dims.deleted_queues))]
        return {
            "id": q["id"],
            "name": q["name"],
            "name_snapshot": q["name_snapshot"],
            "deleted": True,
        }
    return live_ref(dims.queues[int(rng.random() * len(dims.queues))])


def live_ref(item: Json) -> Json:
    """A CDR's reference to a row that still exists: its snapshot is its current name."""
    return {"id": item["id"], "name": item["name"], "name_snapshot": item["name"], "deleted": False}


def draw_tags(rng: random.Random) -> list[str]:
    r = rng.random()
    if r < 0.10:
        return ["conference"]
    if r < 0.15:
        return ["whisper"]
    if r < 0.18:
        return ["conference", "whisper"]
    if r < 0.25:
        return ["transfer"]
    return []


def draw_wrapup(rng: random.Random) -> Json | None:
    if rng.random() < 0.35:
        return None
    return {"code_snapshot": names.WRAPUP[int(rng.random() * len(names.WRAPUP))][0]}


def draw_account(rng: random.Random) -> str | None:
    return f"ACC-{ri(rng, 1, 500):05d}" if rng.random() < 0.3 else None
