"""Opaque keyset cursors: the last (started_at, id) and the filter hash, signed with the seed.

A cursor stays valid while new CDRs arrive, and is bound to the query that issued it."""

from __future__ import annotations

import base64
import hashlib

import orjson


def _sign(payload: bytes, seed: int) -> str:
    return hashlib.blake2b(payload, key=str(seed).encode(), digest_size=6).hexdigest()


def make_cursor(seed: int, start_ms: int, cdr_id: str, flt_key: str) -> str:
    payload = orjson.dumps([1, start_ms, cdr_id, flt_key])
    token = orjson.dumps([payload.decode(), _sign(payload, seed)])
    return base64.urlsafe_b64encode(token).decode().rstrip("=")


def read_cursor(seed: int, cursor: str, flt_key: str) -> tuple[int, str] | None:
    """(started_ms, id) of a valid cursor for this query; None when invalid."""
    try:
        token = orjson.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
        payload, sig = token[0].encode(), token[1]
        if _sign(payload, seed) != sig:
            return None
        version, start_ms, cdr_id, key = orjson.loads(payload)
    except (ValueError, TypeError, IndexError, AttributeError, orjson.JSONDecodeError):
        return None
    if version != 1 or key != flt_key or not isinstance(start_ms, int):
        return None
    return start_ms, str(cdr_id)
