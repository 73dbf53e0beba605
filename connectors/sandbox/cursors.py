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
    """(started_ms, id) of a valid cursor for this query; None when invalid. Any text is a
    cursor to read, so every shape is checked rather than assumed: base64 of anything, JSON of
    any type (`e30` is `{}`), a signed payload of the wrong shape."""
    try:
        token = orjson.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
    except (ValueError, orjson.JSONDecodeError):  # binascii.Error is a ValueError
        return None
    if not (
        isinstance(token, list)
        and len(token) == 2
        and isinstance(token[0], str)
        and isinstance(token[1], str)
    ):
        return None
    payload = token[0].encode()
    if _sign(payload, seed) != token[1]:
        return None
    try:
        fields = orjson.loads(payload)
    except orjson.JSONDecodeError:
        return None
    if not (isinstance(fields, list) and len(fields) == 4):
        return None
    version, start_ms, cdr_id, key = fields
    if version != 1 or key != flt_key or type(start_ms) is not int or not isinstance(cdr_id, str):
        return None
    return start_ms, cdr_id
