"""The Contact Center API v4 sandbox: a deterministic, stateful, fault-injecting emulator.

`Sandbox(config)` wires the layers: `generator.Dataset` (pure data), `state.SandboxState`
(mutable state and the clock), `app.create_app` (routes), `faults.FaultMiddleware` (faults).
"""

from __future__ import annotations

import logging
import socket
import threading
import time
from datetime import datetime
from types import TracebackType
from typing import Any

import httpx

from connectors.sandbox.config import ALL_SCOPES, DEFAULT_API_KEY, SandboxConfig
from connectors.sandbox.faults import FaultConfig, FaultState, InjectedReset
from connectors.sandbox.generator import Dataset
from connectors.sandbox.state import Clock, SandboxState

__all__ = [
    "ALL_SCOPES",
    "DEFAULT_API_KEY",
    "Clock",
    "FaultConfig",
    "Sandbox",
    "SandboxConfig",
    "ServerHandle",
]


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
        self.fault_state = FaultState(config.seed, config.faults)
        from connectors.sandbox.app import create_app  # app imports this module's types

        self.app = create_app(self)

    def __repr__(self) -> str:
        return f"Sandbox({self.config!r})"

    @property
    def clock(self) -> Clock:
        return self.state.clock

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
        from connectors.sandbox.cdrquery import truth

        return truth(self, start, end)

    def serve(self, host: str = "127.0.0.1", port: int = 0) -> ServerHandle:
        """Start a real uvicorn server in a background thread (stop it with `.close()`)."""
        return ServerHandle(self, host, port)


class _DropInjectedResets(logging.Filter):
    # uvicorn logs every app exception; an injected reset is intended, not an error.
    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        return not isinstance(exc, InjectedReset)


class ServerHandle:
    """A uvicorn server for a Sandbox on a background thread; a context manager."""

    def __init__(self, sandbox: Sandbox, host: str, port: int) -> None:
        import uvicorn

        self.sandbox = sandbox
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind((host, port))
        self.host, self.port = self._sock.getsockname()[:2]
        logging.getLogger("uvicorn.error").addFilter(_DropInjectedResets())
        config = uvicorn.Config(
            sandbox.app, log_level="warning", lifespan="off", access_log=False, log_config=None
        )
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [self._sock]}, daemon=True
        )
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("sandbox server failed to start")
            time.sleep(0.01)

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def close(self) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=10)
        self._sock.close()

    def __enter__(self) -> ServerHandle:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
