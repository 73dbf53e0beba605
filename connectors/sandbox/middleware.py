"""The ASGI stack around the Starlette routes: request counting outermost, then faults, then
the last resort that keeps an unexpected exception inside the sandbox."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from starlette.applications import Starlette

from connectors.sandbox.faults import ASGIApp, FaultMiddleware, Message, Receive, Scope, Send

_log = logging.getLogger(__name__)
SERVER_ERROR_BODY = b'{"error":"Internal server error"}'

if TYPE_CHECKING:
    from connectors.sandbox.emulator import Sandbox


class CountRequests:
    """Outermost: counts every request per path (faulted ones included)."""

    def __init__(self, app: ASGIApp, sandbox: Sandbox) -> None:
        self.app = app
        self.sandbox = sandbox

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"].startswith("/api/"):
            self.sandbox.state.count(scope["path"])
        await self.app(scope, receive, send)


class LastResort:
    """Innermost: an exception no route handled is logged and answered with the documented JSON
    500 (`{"error": "Internal server error"}`), never re-raised. Starlette's own error handler
    (app.py) has usually sent that body already and re-raises; the exception stops here, so a
    socket client and the in-process transport both get the answer, not a dropped connection
    or a raised error. Route code is meant never to get here: this is the net, not the rule.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        started = False

        async def tracking(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, receive, tracking)
        except Exception:
            if scope["type"] != "http":
                raise
            _log.exception("sandbox: unhandled error on %s %s", scope["method"], scope["path"])
            if not started:
                await send_server_error(send)


async def send_server_error(send: Send) -> None:
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(SERVER_ERROR_BODY)).encode()),
    ]
    await send({"type": "http.response.start", "status": 500, "headers": headers})
    await send({"type": "http.response.body", "body": SERVER_ERROR_BODY})


class SandboxApp:
    """The ASGI callable: counting -> faults -> last resort -> Starlette routes."""

    def __init__(self, starlette: Starlette, sandbox: Sandbox) -> None:
        inner: ASGIApp = LastResort(starlette)
        self._stack: ASGIApp = CountRequests(FaultMiddleware(inner, sandbox.fault_state), sandbox)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self._stack(scope, receive, send)
