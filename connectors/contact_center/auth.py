"""Bearer authentication and redaction: the key goes only into the Authorization header.

`BearerAuth` adds the header per request (so the key is not in the client's default headers),
and `Redactor` scrubs the key from any text before it is logged or raised, as a second line of
defence: our messages are built from method, path template and status, never from the key.
"""

from __future__ import annotations

from collections.abc import Generator

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
    """Replaces every occurrence of the secret in a text."""

    def __init__(self, key: SecretStr) -> None:
        self._key = key

    def __call__(self, text: str) -> str:
        raw = self._key.get_secret_value()
        return text.replace(raw, REDACTED) if raw else text

    def __repr__(self) -> str:
        return f"Redactor(key={REDACTED})"
