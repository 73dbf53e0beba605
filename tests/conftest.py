"""Suite-wide: the session clock and the reliability summary of every worker.

`make test` runs each module whole on one worker (`--dist loadscope`, the Makefile), so its
module-scoped fixtures (a `dagster dev`, a served sandbox) are built once.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.reliability.conftest import LEDGER_KEY, Ledger, summary_line
from tests.support.clock import SessionClock


@pytest.fixture(scope="session")
def clock() -> SessionClock:
    """The session's "now", read once: the sandboxes are frozen at it, the days derive from it."""
    return SessionClock.read()


# The reliability figures of every worker, merged for one summary line.
_MERGED = Ledger()
_SEEN: list[bool] = []


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: Any) -> None:
    data = getattr(node, "workeroutput", {}).get(LEDGER_KEY)
    if not data:
        return
    _SEEN.append(True)
    _MERGED.faults |= set(data["faults"])
    _MERGED.bad_inputs |= set(data["bad_inputs"])
    for name in ("compared", "lost", "duplicated", "stale", "key_hits", "key_places"):
        setattr(_MERGED, name, getattr(_MERGED, name) + int(data[name]))


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if _SEEN:
        terminalreporter.write_line(summary_line(_MERGED))
