"""`Sandbox(config)`: one emulator instance, wiring the layers.

`generator.Dataset` (pure data), `state.SandboxState` (mutable state and the clock),
`app.create_app` (routes), `faults.FaultMiddleware` (faults), `query.QueryCache` (per-instance
query caches). `server.ServerHandle` serves it over a real socket.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import httpx

from connectors.sandbox.app import create_app
from connectors.sandbox.config import SandboxConfig
from connectors.sandbox.faults import FaultConfig, FaultState, InjectedReset
from connectors.sandbox.generator import Dataset
from connectors.sandbox.query import QueryCache, truth
from connectors.sandbox.server import ServerHandle
from connectors.sandbox.state import Clock, SandboxState


class _SandboxTransport(httpx.ASGITransport):
    """In-process transport; an injected reset surfaces as `httpx.ReadError`, like a socket."""

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        try:
            return await super().handle_async_request(request)
        except InjectedReset:
            raise httpx.ReadError(
                "connection reset by peer (sandbox fault)", request=request
            ) from None


class Sandbox:
    """One emulator instance: `.app` (ASGI), `.transport()`, `.serve()`, state and faults."""

    base_url = "http://127.0.0.1"

    def __init__(self, config: SandboxConfig | None = None, **overrides: Any) -> None:
        if config is None:
            config = SandboxConfig(**overrides)
        elif overrides:
            raise TypeError("pass either a SandboxConfig or keyword overrides, not both")
        self.config = config
        self.dataset = Dataset(config.seed, config.start_date, config.days, config.cdrs_per_day)
        self.state = SandboxState(self.dataset)
        self.clock: Clock = self.state.clock  # the state's, fixed for the instance's life
        self.fault_state = FaultState(config.seed, config.faults)
        self.query_cache = QueryCache()
        self.app = create_app(self)

    def __repr__(self) -> str:
        return f"Sandbox({self.config!r})"

    @property
    def counters(self) -> dict[str, int]:
        """A snapshot: requests per path plus `sms_received`, `calls_started`."""
        with self.state.lock:
            return dict(self.state.counters)

    @property
    def faults(self) -> FaultConfig:
        return self.fault_state.config

    @faults.setter
    def faults(self, value: FaultConfig) -> None:
        self.fault_state.replace(value)

    def transport(self) -> httpx.AsyncBaseTransport:
        """An httpx transport that calls the app in-process (no socket)."""
        return _SandboxTransport(app=self.app)

    def truth_cdrs(self, start: datetime, end: datetime) -> dict[str, str]:
        """Ground truth visible now: CDR id -> cost (decimal string, latest revision)."""
        return truth(self, start, end)

    def serve(self, host: str = "127.0.0.1", port: int = 0) -> ServerHandle:
        """Start a real uvicorn server in a background thread (stop it with `.close()`)."""
        return ServerHandle(self, host, port)
