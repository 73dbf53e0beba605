"""A signal that lands inside one of the event loop's callbacks stops a step's fetch.

tests/pipelines/test_interrupt_mid_step.py sends the signal from outside, at a moment the
main thread is most often waiting in `select` (where `asyncio.run` passes the interrupt on):
it failed now and then under load, when the signal met a socket callback instead. Here the
callback sends it itself, so it lands there every time."""

from __future__ import annotations

import asyncio
import os
import signal
import threading
import time
from collections.abc import Callable, Coroutine
from typing import Any

import dagster as dg
import pytest

from pipelines.aio import run_interruptible

# Long enough that a fetch going on past the signal is unmistakable.
FETCH_S = 3.0


def _fetch(sent: list[float], unwound: list[str]) -> Coroutine[Any, Any, str]:
    """A stand-in for a day's fetch: a "request" every 50 ms for FETCH_S, and a callback of the
    loop's own (as a socket's read is) in which SIGINT arrives."""

    async def main() -> str:
        loop = asyncio.get_running_loop()
        loop.call_later(0.2, os.kill, os.getpid(), signal.SIGINT)
        try:
            end = time.monotonic() + FETCH_S
            while time.monotonic() < end:
                sent.append(time.monotonic())
                await asyncio.sleep(0.05)
            return "finished"
        finally:
            unwound.append("finally")

    return main()


def _in_a_step(body: Callable[[], object]) -> dg.ExecuteInProcessResult:
    """`body` run as a Dagster step (in this process: its signal handlers are Dagster's)."""

    @dg.op
    def fetch_step() -> None:
        body()

    @dg.job
    def fetch_job() -> None:
        fetch_step()

    return fetch_job.execute_in_process(raise_on_error=False)


def test_an_interrupt_inside_a_loop_callback_ends_the_step_at_once() -> None:
    assert threading.current_thread() is threading.main_thread()
    sent: list[float] = []
    unwound: list[str] = []
    outcome: list[object] = []
    result = _in_a_step(lambda: outcome.append(run_interruptible(_fetch(sent, unwound))))

    # Dagster's handler raised its interrupt in the callback; the fetch stopped there.
    assert not result.success
    assert outcome == []
    assert unwound == ["finally"]  # the fetch's cleanup ran
    assert sent
    assert sent[-1] - sent[0] < 1.0, f"asked on for {sent[-1] - sent[0]:.1f} s"
    (failure,) = [e for e in result.all_events if e.is_step_failure]
    assert failure.step_failure_data.error is not None
    assert failure.step_failure_data.error.cls_name == "DagsterExecutionInterruptedError"


def test_an_interrupt_outside_a_step_is_a_keyboard_interrupt_as_before() -> None:
    # Python's own handler: the interrupt leaves the loop by itself; nothing is held back.
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    sent: list[float] = []
    unwound: list[str] = []
    with pytest.raises(KeyboardInterrupt):
        run_interruptible(_fetch(sent, unwound))
    assert unwound == ["finally"]
    assert sent[-1] - sent[0] < 1.0


def test_a_fetch_without_a_signal_returns_its_result() -> None:
    async def main() -> int:
        await asyncio.sleep(0)
        return 7

    assert run_interruptible(main()) == 7


def test_an_interrupt_inside_a_task_nobody_awaits_yet_ends_the_step_at_once() -> None:
    # A page's landing is a task the fetch awaits only pages later: the interrupt raised in
    # it was its exception, and the fetch went on asking until it came to that page.
    sent: list[float] = []
    outcome: list[object] = []

    async def main() -> str:
        async def land() -> None:
            await asyncio.sleep(0.2)
            os.kill(os.getpid(), signal.SIGINT)
            await asyncio.sleep(0.05)

        landing = asyncio.create_task(land())
        end = time.monotonic() + FETCH_S
        while time.monotonic() < end:
            sent.append(time.monotonic())
            await asyncio.sleep(0.05)
        await landing
        return "finished"

    result = _in_a_step(lambda: outcome.append(run_interruptible(main())))
    assert not result.success
    assert outcome == []
    assert sent[-1] - sent[0] < 1.0, f"asked on for {sent[-1] - sent[0]:.1f} s"


def test_an_error_raised_while_the_fetch_unwinds_does_not_hide_the_interrupt() -> None:
    # A cleanup that fails once cancelled (a pool's shutdown, a writer's close): the step must
    # still end as interrupted, not retried as if the server had failed.
    async def main() -> None:
        asyncio.get_running_loop().call_soon(os.kill, os.getpid(), signal.SIGINT)
        try:
            await asyncio.sleep(FETCH_S)
        except asyncio.CancelledError:
            raise RuntimeError("the writer could not close") from None

    result = _in_a_step(lambda: run_interruptible(main()))
    (failure,) = [e for e in result.all_events if e.is_step_failure]
    assert failure.step_failure_data.error is not None
    assert failure.step_failure_data.error.cls_name == "DagsterExecutionInterruptedError"
