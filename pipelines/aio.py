"""`asyncio.run` for the API-calling steps, so that Ctrl-C or SIGTERM stops them wherever it lands.

During a step, Dagster's SIGINT handler raises `DagsterExecutionInterruptedError` (a
`BaseException`) wherever the main thread is. Inside one of the event loop's own callbacks (a
socket's read or write, a thread pool's result handed back to the loop), asyncio catches every
`BaseException` but `KeyboardInterrupt` and `SystemExit`, logs it as "Exception in callback"
and goes on: the day's fetch went on asking for pages after the signal, with a traceback on
stderr, or waited for ever on a result whose hand-back the interrupt had cut. Inside a task
(a page's landing), it becomes that task's exception, seen only when the task is awaited: pages
later.
"""

import asyncio
from collections.abc import Coroutine
from typing import Any, TypeVar

import dagster as dg

T = TypeVar("T")

# What a signal raises in the main thread: Dagster's during a step, Python's elsewhere.
_INTERRUPTS = (dg.DagsterExecutionInterruptedError, KeyboardInterrupt)


def run_interruptible(main: Coroutine[Any, Any, T]) -> T:
    """Run `main` in a new event loop, like `asyncio.run`; an interrupt that the loop would
    log and drop cancels `main` instead, and is raised once `main` has unwound (its `finally`
    blocks run, its requests are cancelled)."""
    interrupted: list[BaseException] = []

    async def guarded() -> T:
        loop = asyncio.get_running_loop()
        main_task = asyncio.current_task()
        assert main_task is not None

        def stop(exc: BaseException) -> None:
            if not interrupted:
                interrupted.append(exc)
                main_task.cancel()

        def handle(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
            exc = context.get("exception")
            if isinstance(exc, _INTERRUPTS):
                stop(exc)
                return
            loop.default_exception_handler(context)

        def done(task: asyncio.Future[Any]) -> None:
            exc = None if task.cancelled() else task.exception()
            if isinstance(exc, _INTERRUPTS):
                stop(exc)

        def factory(loop: asyncio.AbstractEventLoop, coro: Any, **kwargs: Any) -> asyncio.Task[Any]:
            task = asyncio.Task(coro, loop=loop, **kwargs)
            task.add_done_callback(done)
            return task

        loop.set_exception_handler(handle)
        loop.set_task_factory(factory)
        return await main

    try:
        result = asyncio.run(guarded())
    except BaseException:
        # Cancelled, or whatever `main`'s unwinding raised instead: the interrupt is why.
        if interrupted:
            raise interrupted[0] from None
        raise
    if interrupted:  # `main` ended before the cancellation reached it
        raise interrupted[0]
    return result
