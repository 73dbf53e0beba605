"""`warehouse.interrupt.held_signals`: a section a signal must not cut in two (a day's tables
renamed into place one after the other, `pipelines.cdr_day.land_day`)."""

from __future__ import annotations

import os
import signal
import time

import pytest

from warehouse.interrupt import held_signals


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_inside_is_delivered_once_the_section_ends(sig: signal.Signals) -> None:
    steps: list[str] = []

    def section() -> None:
        with held_signals():
            os.kill(os.getpid(), sig)
            time.sleep(0.05)  # Python would have run the handler by now
            steps.append("first rename")
            os.kill(os.getpid(), sig)  # twice: delivered once
            steps.append("second rename")

    previous = signal.signal(signal.SIGTERM, signal.default_int_handler)  # as `cdrhouse` sets
    try:
        with pytest.raises(KeyboardInterrupt):
            section()
        assert steps == ["first rename", "second rename"]
        assert signal.getsignal(sig) is signal.default_int_handler
    finally:
        signal.signal(signal.SIGTERM, previous)


def test_without_a_signal_the_section_ends_as_it_began() -> None:
    before = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    with held_signals():
        pass
    assert {s: signal.getsignal(s) for s in before} == before
