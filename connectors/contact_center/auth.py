"""Bearer authentication and redaction: the key goes only into the Authorization header.

`BearerAuth` adds the header per request (so the key is not in the client's default headers).
Our messages are built from method, path template and status, never from the key; but a server
may echo the key in what it sends back, and the client quotes the server's error text and field
errors. `Redactor` scrubs the key from that text before it is cut to length (a cut key would
no longer match), and from every exception that leaves the client: its args, its attributes
(the 422's field errors, keys included) and every exception chained to it.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

import httpx
from pydantic import SecretStr

REDACTED = "***"


class BearerAuth(httpx.Auth):
    """`Authorization: Bearer <key>` on every request; the repr never shows the key."""

    def __init__(self, key: SecretStr) -> None:
        self._key = key

    def auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
        request.headers["Authorization"] = f"Bearer {self._key.get_secret_value()}"
        yield request

    def __repr__(self) -> str:
        return f"BearerAuth(key={REDACTED})"


class Redactor:
    """Replaces every occurrence of the secret in a text, a structure or an exception."""

    def __init__(self, key: SecretStr) -> None:
        self._key = key

    def __call__(self, text: str) -> str:
        raw = self._key.get_secret_value()
        return text.replace(raw, REDACTED) if raw else text

    def value(self, value: Any) -> Any:
        """`value` with the key replaced in every string of it: dict keys and values, list
        and tuple items, bytes; anything else is returned as it is."""
        if isinstance(value, str):
            return self(value)
        if isinstance(value, bytes):
            raw = self._key.get_secret_value().encode()
            return value.replace(raw, REDACTED.encode()) if raw else value
        if isinstance(value, dict):
            return {self.value(k): self.value(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self.value(v) for v in value]
        if type(value) is tuple:  # a named tuple keeps its fields as they are
            return tuple(self.value(v) for v in value)
        return value

    def exception(self, exc: BaseException) -> None:
        """Scrub the key, in place, from `exc` and every exception chained to it (cause,
        context, members of a group): args, notes and plain attributes, since a renderer may
        use any of them (Dagster stores the message of each link of the chain)."""
        seen: set[int] = set()
        pending = [exc]
        while pending:
            current = pending.pop()
            if id(current) in seen:
                continue
            seen.add(id(current))
            current.args = tuple(self.value(a) for a in current.args)
            for name, attr in list(getattr(current, "__dict__", {}).items()):
                if isinstance(attr, str | bytes | dict | list | tuple):
                    setattr(current, name, self.value(attr))
            pending += [e for e in (current.__cause__, current.__context__) if e is not None]
            if isinstance(current, BaseExceptionGroup):
                pending += current.exceptions

    def __repr__(self) -> str:
        return f"Redactor(key={REDACTED})"
