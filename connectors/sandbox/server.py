"""`ServerHandle`: a real uvicorn server for a `Sandbox` on a background thread (tests use it)."""

from __future__ import annotations

import logging
import socket
import threading
import time
from typing import TYPE_CHECKING

from connectors.sandbox.faults import InjectedReset

if TYPE_CHECKING:
    from connectors.sandbox.emulator import Sandbox


# The event loop of a server on a background thread, in a process doing other work (a test
# worker, a bench): the stdlib's, not uvloop (uvicorn's "auto" choice). uvloop has open
# segfault reports (MagicStack/uvloop#706, #538), and the one segfault of the test suite
# (faulthandler, stop 38) was in a worker running four such servers. `cdrhouse sandbox`, a
# server in a process of its own, keeps uvicorn's choice.
SERVER_THREAD_LOOP = "asyncio"


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
            sandbox.app,
            log_level="warning",
            lifespan="off",
            access_log=False,
            log_config=None,
            loop=SERVER_THREAD_LOOP,
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

    def __exit__(self, *_exc_info: object) -> None:
        self.close()
