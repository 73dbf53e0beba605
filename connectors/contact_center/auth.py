"""Bearer authentication and redaction: the key goes only into the Authorization header.

`BearerAuth` adds the header per request (so the key is not in the client's default headers).
Our messages are built from method, path template and status, never from the key; but a server
may echo the key in what it sends back, and the client quotes the server's error text and field
errors. `Redactor` scrubs the key from that text before it is cut to length (a cut key would
no longer match), and from every exception that leaves the client: its args, its attributes
(the 422's field errors, keys included) and every exception chained to it.
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Generator
from typing import Any
from urllib.parse import quote, quote_plus

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


def _forms(raw: str) -> list[str]:
    """The forms in which a server may echo the key: as sent, escaped in JSON (PHP writes `/`
    as `\\/`) or in a Python repr, percent-encoded, and in base64 (alone, or the whole
    `Bearer …` header). Matched in any case."""
    forms = {raw, json.dumps(raw)[1:-1], json.dumps(raw)[1:-1].replace("/", "\\/")}
    forms |= {repr(raw)[1:-1], repr(raw.encode())[2:-1], quote(raw, safe=""), quote_plus(raw)}
    for text in (raw, f"Bearer {raw}"):
        encoded = base64.b64encode(text.encode()).decode()
        forms |= {encoded, encoded.rstrip("="), encoded.translate(_URLSAFE).rstrip("=")}
    return sorted((f for f in forms if f), key=len, reverse=True)


_URLSAFE = str.maketrans("+/", "-_")


class Redactor:
    """Replaces every occurrence of the secret in a text, a structure or an exception."""

    def __init__(self, key: SecretStr) -> None:
        self._key = key
        raw = key.get_secret_value()
        forms = _forms(raw) if raw else []
        alternatives = "|".join(re.escape(f) for f in forms)
        self._text = re.compile(alternatives, re.IGNORECASE) if forms else None
        self._bytes = re.compile(alternatives.encode(), re.IGNORECASE) if forms else None
        # In a body, as JSON carries it: searched for at memory speed (a 1 MB page).
        self._in_body = sorted(
            {
                raw.encode(),
                json.dumps(raw)[1:-1].encode(),
                json.dumps(raw)[1:-1].replace("/", "\\/").encode(),
            }
            if raw
            else set(),
            key=len,
            reverse=True,
        )

    def __call__(self, text: str) -> str:
        return self._text.sub(REDACTED, text) if self._text is not None else text

    def body(self, body: bytes) -> tuple[bytes, int]:
        """A response body with the key replaced where a JSON body can hold it, and how many
        times it was."""
        found = 0
        for form in self._in_body:
            count = body.count(form)
            if count:
                found += count
                body = body.replace(form, REDACTED.encode())
        return body, found

    def value(self, value: Any) -> Any:
        """`value` with the key replaced in every string of it: dict keys and values, list
        and tuple items, bytes; anything else is returned as it is."""
        if isinstance(value, str):
            return self(value)
        if isinstance(value, bytes):
            return self._bytes.sub(REDACTED.encode(), value) if self._bytes is not None else value
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
