"""A test-side API whose CDR pages carry chosen odd records.

`RewritingApp` and `serve_app` live in `connectors.sandbox.rewriting` (the benches use them
too); this module adds the cost rewrites the tests use.
"""

from __future__ import annotations

import re
from decimal import Decimal

from connectors.sandbox.rewriting import (
    CDRS_PATH,
    App,
    Message,
    Receive,
    Rewrite,
    RewritingApp,
    Scope,
    Send,
    page_records,
    record_id,
    serve_app,
)

__all__ = [
    "CDRS_PATH",
    "App",
    "Message",
    "Receive",
    "Rewrite",
    "RewritingApp",
    "Scope",
    "Send",
    "cost_token",
    "page_records",
    "record_id",
    "serve_app",
    "seven_decimals",
    "with_cost",
]

_COST = re.compile(rb'"cost":(-?[0-9][0-9.eE+-]*)')


def cost_token(record: bytes) -> bytes:
    """The record's top-level cost token as written (a sandbox record has one `"cost":`)."""
    found = _COST.search(record)
    assert found is not None, record[:80]
    return found.group(1)


def with_cost(record: bytes, token: bytes) -> bytes:
    """The record with its cost token replaced by `token`, every other byte kept."""
    return _COST.sub(lambda _: b'"cost":' + token, record, count=1)


def seven_decimals(token: bytes) -> bytes:
    """A cost 0.0000004 above `token`: 7 decimals, e.g. 0.6984 -> 0.6984004."""
    return format(Decimal(token.decode()) + Decimal("0.0000004"), "f").encode()
