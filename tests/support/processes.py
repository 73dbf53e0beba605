"""A sandbox server started as its own process (`cdrhouse sandbox`, `python -m
connectors.sandbox.serve`), for tests of the command itself and of tools that need a socket."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

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
        stop_process(proc)


def stop_process(
    proc: subprocess.Popen[Any], *, group: bool = False, grace_s: float = 15.0
) -> None:
    """SIGTERM `proc` (its whole process group when `group`), SIGKILL it after `grace_s`, and
    reap it. Never leaves a child running or unreaped: a `wait(timeout=...)` that expires on a
    loaded machine used to leave one, which pytest then reported in a later test."""

    def signal_it(sig: signal.Signals) -> None:
        with contextlib.suppress(ProcessLookupError):
            if group:
                os.killpg(proc.pid, sig)
            else:
                proc.send_signal(sig)

    if proc.poll() is None:
        signal_it(signal.SIGTERM)
        try:
            proc.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            signal_it(signal.SIGKILL)
            proc.wait()  # SIGKILL cannot be ignored: this returns
    if group:
        signal_it(signal.SIGKILL)  # children that outlived the leader
    for stream in (proc.stdin, proc.stdout, proc.stderr):
        if stream is not None:
            with contextlib.suppress(OSError):
                stream.close()
