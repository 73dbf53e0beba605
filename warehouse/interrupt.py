"""Ctrl-C stops a running DuckDB query.

Python runs its SIGINT handler only between bytecodes, and DuckDB returns rows to Python only
when the query ends: `cdrhouse sql` as a table ran a long cross join on for minutes after
Ctrl-C, and a file format stopped with a `RuntimeError: Query interrupted` traceback. Python's
C-level handler also writes the signal's number to the wakeup fd at once, whatever the main
thread is doing: a thread waiting on that fd interrupts the connection (DuckDB's
`interrupt()` is made to be called from another thread), the query ends with DuckDB's
interrupt error, and the command ends as interrupted (`KeyboardInterrupt`).
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Iterator
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import duckdb

# No signal is numbered 0: the byte that tells the watcher to end.
_STOP = b"\0"


@contextlib.contextmanager
def interruptible(con: duckdb.DuckDBPyConnection) -> Iterator[None]:
    """While inside, a SIGINT interrupts `con`'s query, and the block ends with
    `KeyboardInterrupt` whatever DuckDB raised. Nothing is done off the main thread (only it
    may set the wakeup fd) or where SIGINT is ignored or not Python's (no wakeup is written)."""
    if (
        threading.current_thread() is not threading.main_thread()
        or signal.getsignal(signal.SIGINT) is not signal.default_int_handler
    ):
        yield
        return
    read_end, write_end = os.pipe()
    os.set_blocking(write_end, False)  # set_wakeup_fd's requirement: a signal never blocks
    fired = threading.Event()

    def watch() -> None:
        while True:
            data = os.read(read_end, 64)
            if signal.SIGINT.to_bytes(1, "little") in data:
                fired.set()
                con.interrupt()
            if not data or _STOP in data:
                return

    def on_sigint(_signum: int, _frame: object) -> None:
        # Python's own handler, which also says it ran: DuckDB's streaming fetch runs it while
        # it reads, and turns the KeyboardInterrupt into a RuntimeError, maybe before the
        # watcher has read the fd.
        fired.set()
        raise KeyboardInterrupt

    watcher = threading.Thread(target=watch, name="cdrhouse-sigint", daemon=True)
    previous = signal.set_wakeup_fd(write_end, warn_on_full_buffer=False)
    handler = signal.signal(signal.SIGINT, on_sigint)
    watcher.start()
    try:
        yield
    except BaseException as exc:
        if fired.is_set() and not isinstance(exc, KeyboardInterrupt):
            raise KeyboardInterrupt from None
        raise
    finally:
        signal.signal(signal.SIGINT, handler)
        signal.set_wakeup_fd(previous)
        os.write(write_end, _STOP)
        watcher.join()
        os.close(read_end)
        os.close(write_end)
    if fired.is_set():  # the query had ended: Python's own handler raises at once anyway
        raise KeyboardInterrupt
