"""The progress lines of a step that calls the API: every `progress_every_s` seconds (a
`ContactCenterResource` setting), in the run's log, where the UI shows them; `cdrhouse ingest`
prints the lines that start with `PROGRESS_MARK` as they come. A day of a million CDRs behind a
rate limit, or the members of a thousand queues, otherwise said nothing until the step ended."""

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

import dagster as dg

PROGRESS_MARK = "progress: "


async def _report(
    log: logging.Logger | dg.DagsterLogManager, every_s: float, line: Callable[[float], str]
) -> None:
    """`line(seconds since the start)` in the run's log every `every_s` seconds, until
    cancelled."""
    begun = time.monotonic()
    while True:
        await asyncio.sleep(every_s)
        log.info(PROGRESS_MARK + line(time.monotonic() - begun))


@asynccontextmanager
async def progress_lines(
    log: logging.Logger | dg.DagsterLogManager, every_s: float, line: Callable[[float], str]
) -> AsyncIterator[None]:
    """`line` in the run's log every `every_s` seconds while inside (none if `every_s` is 0)."""
    task = asyncio.create_task(_report(log, every_s, line)) if every_s else None
    try:
        yield
    finally:
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
