"""A sandbox server started as its own process (`cdrhouse sandbox`, `python -m
connectors.sandbox.serve`), for tests of the command itself and of tools that need a socket."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager

import httpx


@contextmanager
def served_process(
    argv: Sequence[str],
    ready_url: str,
    headers: Mapping[str, str] | None = None,
    *,
    read_stdout: bool = False,
    timeout_s: float = 120.0,
) -> Iterator[subprocess.Popen[str]]:
    """Run `argv`, yield once `ready_url` answers at all, then terminate it.

    `read_stdout` keeps its standard output readable (what the command prints); otherwise
    output goes nowhere, so an unread pipe can never fill and stall the server. `timeout_s` is
    only a deadline (a loaded 2-core machine can take long to import); the wait ends when the
    server answers."""
    out = subprocess.PIPE if read_stdout else subprocess.DEVNULL
    proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.DEVNULL, text=True)
    try:
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                httpx.get(ready_url, headers=dict(headers or {}))
                break
            except httpx.TransportError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"{argv[0]} did not serve {ready_url}") from None
                time.sleep(0.1)
        yield proc
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        if proc.stdout is not None:
            proc.stdout.close()
