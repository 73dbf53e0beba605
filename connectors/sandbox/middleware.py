"""The ASGI stack around the Starlette routes: request counting outermost, then faults."""

from __future__ import annotations

from typing import TYPE_CHECKING

from starlette.applications import Starlette

from connectors.sandbox.faults import ASGIApp, FaultMiddleware, Receive, Scope, Send

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


class SandboxApp:
    """The ASGI callable: counting -> faults -> Starlette routes."""

    def __init__(self, starlette: Starlette, sandbox: Sandbox) -> None:
        inner: ASGIApp = starlette
        self._stack: ASGIApp = CountRequests(FaultMiddleware(inner, sandbox.fault_state), sandbox)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self._stack(scope, receive, send)
