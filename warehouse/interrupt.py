"""Ctrl-C (and the SIGTERM a stopped pod gets) stops what a command is doing, at once.

Python runs its SIGINT handler only between bytecodes, and DuckDB returns rows to Python only
when the query ends: `cdrhouse sql` as a table ran a long cross join on for minutes after
Ctrl-C, and a file format stopped with a `RuntimeError: Query interrupted` traceback. Python's
C-level handler also writes the signal's number to the wakeup fd at once, whatever the main
thread is doing, and whichever Python handler is set (Dagster's, during a run, only notes
it): a thread waiting on that fd (`stop_signals`) sets an event and acts, here by
interrupting the connection (DuckDB's `interrupt()` is made to be called from another
thread; `interruptible`), for `cdrhouse ingest` by ending its steps without a retry
(`pipelines.preflight.stop_on_interrupt`).
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import duckdb

# No signal is numbered 0: the byte that tells the watcher to end.
_STOP = b"\0"
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


@contextlib.contextmanager
def stop_signals(act: Callable[[], object] = lambda: None) -> Iterator[threading.Event]:
    """The event set (and `act` called, on a thread of its own) as soon as SIGINT or SIGTERM
    arrives while inside, whatever the main thread is doing: in C code, or under a handler of
    another library's that does not raise (Dagster's, during a run). Off the main thread, or
    where no Python handler is set for them (no wakeup is written), the event is never set."""
    fired = threading.Event()
    if threading.current_thread() is not threading.main_thread():
        yield fired
        return
    read_end, write_end = os.pipe()
    os.set_blocking(write_end, False)  # set_wakeup_fd's requirement: a signal never blocks
    wanted = {sig.to_bytes(1, "little") for sig in STOP_SIGNALS}

    def watch() -> None:
        while True:
            data = os.read(read_end, 64)
            if any(b in data for b in wanted):  # (the main thread's handler may have set it)
                fired.set()
                act()
            if not data or _STOP in data:
                return

    watcher = threading.Thread(target=watch, name="cdrhouse-signals", daemon=True)
    previous = signal.set_wakeup_fd(write_end, warn_on_full_buffer=False)
    watcher.start()
    try:
        yield fired
    finally:
        signal.set_wakeup_fd(previous)
        os.write(write_end, _STOP)
        watcher.join()
        os.close(read_end)
        os.close(write_end)


@contextlib.contextmanager
def _handled(handler: Callable[[int, Any], object], where: Callable[[Any], bool]) -> Iterator[None]:
    """`handler` for SIGINT and SIGTERM while inside, where `where(their handler)`; both put
    back on the way out, replaced or not (Dagster maps SIGTERM to SIGINT's handler when a run
    ends: a handler of the block's would outlive it). Main thread only."""
    before = {sig: signal.getsignal(sig) for sig in STOP_SIGNALS}
    for sig, current in before.items():
        if where(current):
            signal.signal(sig, handler)
    try:
        yield
    finally:
        for sig, current in before.items():
            if current is not None:  # (None: not set from Python, nothing to put back)
                signal.signal(sig, current)


def _raises_ctrl_c(handler: Any) -> bool:
    return handler is signal.default_int_handler


@contextlib.contextmanager
def deferred_signals(stopped: threading.Event) -> Iterator[None]:
    """While inside, SIGINT and SIGTERM (where Python raises them as Ctrl-C) set `stopped`
    instead of raising wherever the main thread is: a KeyboardInterrupt inside Dagster's
    event storage was logged as a traceback, and could leave a run half-recorded. The code
    inside checks `stopped` at its safe points."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    with _handled(lambda _s, _f: stopped.set(), _raises_ctrl_c):
        yield


@contextlib.contextmanager
def held_signals() -> Iterator[None]:
    """A section a signal must not cut in two (a day's tables renamed into place one after
    the other): SIGINT and SIGTERM that arrive inside are delivered again, to the handlers
    that were set, when it ends. Off the main thread, nothing is held."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    arrived: list[int] = []
    try:
        # Any Python handler would raise in the section (Dagster's, during a step, too).
        with _handled(lambda signum, _f: arrived.append(signum), callable):
            yield
    finally:
        for signum in dict.fromkeys(arrived):
            signal.raise_signal(signum)


@contextlib.contextmanager
def interruptible(con: duckdb.DuckDBPyConnection) -> Iterator[None]:
    """While inside, a SIGINT (or a SIGTERM made alike) interrupts `con`'s query, and the
    block ends with `KeyboardInterrupt` whatever DuckDB raised. Nothing is done off the main
    thread (only it may set the wakeup fd) or where SIGINT is ignored or not Python's."""
    if threading.current_thread() is not threading.main_thread() or not _raises_ctrl_c(
        signal.getsignal(signal.SIGINT)
    ):
        yield
        return
    with stop_signals(con.interrupt) as fired:

        def on_signal(_signum: int, _frame: object) -> None:
            # Python's own handler, which also says it ran: DuckDB's streaming fetch runs it
            # while it reads, and turns the KeyboardInterrupt into a RuntimeError, maybe
            # before the watcher has read the fd.
            fired.set()
            raise KeyboardInterrupt

        try:
            with _handled(on_signal, _raises_ctrl_c):  # SIGTERM too where `cdrhouse` made it so
                yield
        except BaseException as exc:
            if fired.is_set() and not isinstance(exc, KeyboardInterrupt):
                raise KeyboardInterrupt from None
            raise
    if fired.is_set():  # the query had ended: raise as Python's handler would
        raise KeyboardInterrupt
