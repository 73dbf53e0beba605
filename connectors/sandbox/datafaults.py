"""Per-record data faults of the CDR endpoints: late arrival, cost revision, schema drift and
corrupt values. Each is a pure function of (seed, CDR id, fault config), so a record is chosen
the same way on every request; the transport faults are in `faults.py`."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from connectors.sandbox.faults import FaultConfig, unit_hash
from connectors.sandbox.generator import DayCdrs, cost_json

if TYPE_CHECKING:
    from connectors.sandbox.emulator import Sandbox

DRIFT_TYPE = "video_call"  # the unknown CDR type served under schema drift


def _chosen(seed: int, salt: str, cdr_id: str, rate: float) -> bool:
    return rate > 0 and unit_hash(seed, salt, cdr_id) < rate


def visible_at(seed: int, faults: FaultConfig, cdr_id: str, ended_ms: int) -> int:
    """A CDR exists once it ended; a late one only `delay` after that."""
    if _chosen(seed, "late", cdr_id, faults.late_rate):
        delay = 1 + int(unit_hash(seed, "late-delay", cdr_id) * faults.late_max_minutes)
        return ended_ms + delay * 60_000
    return ended_ms


def current_cost(seed: int, faults: FaultConfig, cdr_id: str, cost: int, vis: int, now: int) -> int:
    """The cost as of `now`: revised CDRs change `revise_after_minutes` after appearing."""
    revised = now >= vis + faults.revise_after_minutes * 60_000
    if revised and _chosen(seed, "revise", cdr_id, faults.revise_rate):
        return cost + 1 + cost // 10  # +10% and a ten-thousandth: never equal to before
    return cost


def is_drifted(seed: int, faults: FaultConfig, cdr_id: str) -> bool:
    return _chosen(seed, "drift-type", cdr_id, faults.drift_unknown_type_rate)


def data_faults_on(faults: FaultConfig) -> bool:
    return bool(
        faults.late_rate
        or faults.revise_rate
        or faults.drift_extra_field
        or faults.drift_unknown_type_rate
        or faults.corrupt_rate
    )


def render(sandbox: Sandbox, day: DayCdrs, i: int, now: int) -> bytes:
    """Record `i` as served at `now`, with the data faults applied."""
    rec = day.records[i]
    faults = sandbox.faults
    if not data_faults_on(faults):
        return rec
    seed = sandbox.config.seed
    cdr_id = day.ids[i]
    base = day.costs[i]
    cost = current_cost(
        seed, faults, cdr_id, base, visible_at(seed, faults, cdr_id, day.ended_ms[i]), now
    )
    if cost != base:
        rec = rec.replace(b'"cost":' + cost_json(base), b'"cost":' + cost_json(cost), 1)
    if is_drifted(seed, faults, cdr_id):
        head = f'"type":"{day.types[i]}","subtype":"{day.subtypes[i]}"'.encode()
        rec = rec.replace(head, f'"type":"{DRIFT_TYPE}","subtype":"{DRIFT_TYPE}"'.encode(), 1)
    if _chosen(seed, "corrupt", cdr_id, faults.corrupt_rate):
        if unit_hash(seed, "corrupt-kind", cdr_id) < 0.5:
            encoded = cost_json(cost)
            rec = rec.replace(b'"cost":' + encoded, b'"cost":"' + encoded + b'"', 1)
        else:
            rec = re.sub(rb'"started_at":"[^"]*"', b'"started_at":"31/02/2026 25:61"', rec, count=1)
    if faults.drift_extra_field:
        rec = rec[:-1] + b',"sentiment_v2":{"label":"neutral","score":0.5}}'
    return rec
