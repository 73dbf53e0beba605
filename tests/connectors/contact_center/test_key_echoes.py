"""A server that echoes the API key, in any form it may take on the way back, never gets it
into what the client returns, logs or raises.

`tests/reliability/test_writes_and_secrets.py` covers the key as sent, in error bodies. Here:
the key in a 200 answer's records (they would land in `raw_cdrs` and in `cdrs.extra`), and in
the forms a server's framework gives it (JSON-escaped `\\/`, percent-encoded, base64, another
case, a Python repr with an escaped control character), in a cursor returned twice, and a key
holding a control character, which the HTTP layer would refuse in an error quoting it."""

from __future__ import annotations

import asyncio
import base64
import logging
import traceback
from urllib.parse import quote

import httpx
import orjson
import pytest
from pydantic import SecretStr, ValidationError

from connectors.contact_center import CdrPage, ClientSettings, PaginationError
from connectors.contact_center.auth import Redactor
from connectors.contact_center.paginators import CursorPaginator, PageInfo
from connectors.sandbox.config import ALL_SCOPES
from tests.support.sandboxes import make_sandbox

from .conftest import NOW, START, day, make_client

KEY = "sk_live/Ab+Cd9XyZ0123456789abcdef=="


class _EchoingKey(httpx.AsyncBaseTransport):
    """The sandbox's 200 answers with the request's Authorization header in every CDR and user
    record, once as sent and once JSON-escaped the way PHP writes `/`."""

    def __init__(self, inner: httpx.AsyncBaseTransport) -> None:
        self.inner = inner
        self.escaped = 0  # records that got the key JSON-escaped

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        response = await self.inner.handle_async_request(request)
        body = await response.aread()
        if response.status_code == 200:
            doc = orjson.loads(body)
            auth = request.headers["Authorization"]
            for key in ("cdrs", "users"):
                for record in doc.get(key) or []:
                    record["debug_auth"] = record["debug_php"] = auth
            php = b'"debug_php":"' + auth.replace("/", "\\/").encode()  # the JSON text `\/`
            body = orjson.dumps(doc).replace(b'"debug_php":"' + auth.encode(), php)
            self.escaped += body.count(php)
        headers = [(k, v) for k, v in response.headers.items() if k.lower() != "content-length"]
        return httpx.Response(response.status_code, headers=headers, content=body)


def _forms(text: str) -> list[str]:
    return [text, text.replace("/", "\\/"), quote(text, safe=""), text.upper(), text.lower()]


def test_a_key_echoed_in_200_answers_never_reaches_what_the_client_returns(
    caplog: pytest.LogCaptureFixture,
) -> None:
    sandbox = make_sandbox(
        start_date=START, days=1, cdrs_per_day=60, now=NOW, extra_keys={KEY: ALL_SCOPES}
    )

    echoing = _EchoingKey(sandbox.transport())

    async def main() -> tuple[list[CdrPage], list[str], dict[str, int]]:
        async with make_client(sandbox, key=KEY, transport=echoing) as c:
            pages = [p async for p in c.fetch_cdr_pages(*day())]
            users = [u.model_dump_json() for u in await c.list_all_users()]
            return pages, users, dict(c.stats)

    with caplog.at_level(logging.WARNING, logger="connectors.contact_center"):
        pages, users, stats = asyncio.run(main())
    records = [r for p in pages for r in orjson.loads(p.body)["cdrs"] or []]
    assert records
    assert users
    assert all(r["debug_auth"] == "Bearer ***" for r in records)
    assert all(r["debug_php"] == "Bearer ***" for r in records)
    texts = [p.body.decode() for p in pages] + users + [caplog.text]
    for text in texts:
        assert KEY not in text
        assert KEY.replace("/", "\\/") not in text
    assert echoing.escaped == len(records) + len(users)
    assert stats["key_echoed"] == 2 * (len(records) + len(users))
    assert "held the API key" in caplog.text


@pytest.mark.parametrize(
    "echo",
    [
        *_forms(KEY),
        base64.b64encode(f"Bearer {KEY}".encode()).decode(),
        base64.b64encode(KEY.encode()).decode().rstrip("="),
        repr(f"Bearer {KEY}".encode()),
    ],
)
def test_every_form_of_the_key_in_a_server_text_is_replaced(echo: str) -> None:
    redact = Redactor(SecretStr(KEY))
    text = f"field 'x' not allowed for {{'auth': {echo}}}"
    assert echo not in redact(text)
    assert "***" in redact(text)
    assert echo.encode() not in redact.value(text.encode())
    error = ValueError(text)
    redact.exception(error)
    assert echo not in "".join(traceback.format_exception(error))


def test_a_key_with_a_control_character_is_refused_without_being_shown() -> None:
    key = "SKLIVEsecretABC\fDEFGH1234567890"
    with pytest.raises(ValidationError) as refused:
        ClientSettings(base_url="https://cc.example.com", api_key=SecretStr(key))
    assert "control characters" in str(refused.value)
    assert "SKLIVEsecret" not in str(refused.value)
    assert "DEFGH123" not in repr(refused.value)


def test_a_cursor_returned_twice_is_not_quoted() -> None:
    pager = CursorPaginator(100)
    page = PageInfo(count=100, total=1000, next_cursor=KEY)
    pager.validate(page)
    pager.update(page)
    with pytest.raises(PaginationError) as twice:
        pager.validate(PageInfo(count=100, total=1000, next_cursor=KEY))
    assert KEY[:8] not in str(twice.value)
    assert "same cursor twice" in str(twice.value)
