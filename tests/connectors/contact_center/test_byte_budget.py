"""Issue 22: the CDR fetch holds page bodies within a byte budget, not only a page count.

`ByteBudget` admits bytes up to its limit, first come first served, and a body bigger than
the limit alone; the fetch admits each body by its Content-Length before reading it, so
parallel sub-windows whose pages each carry a multi-MB record never hold more than the
budget, and every record still arrives once."""

from __future__ import annotations

import asyncio
import re

import httpx
import pytest

from connectors.contact_center import ByteBudget, CdrPage
from connectors.sandbox.rewriting import RewritingApp, big_text, record_id, with_summary

from .conftest import day, make_client, make_sandbox

MIB = 2**20
RECORD_ID = re.compile(rb'\{"id":"([0-9a-f-]{36})","type"')


def test_the_budget_admits_up_to_its_limit_then_in_arrival_order() -> None:
    async def scenario() -> list[str]:
        budget = ByteBudget(100)
        order: list[str] = []

        async def take(name: str, n: int) -> None:
            await budget.acquire(n)
            order.append(name)

        await budget.acquire(60)
        big = asyncio.create_task(take("big", 70))  # does not fit beside the 60
        await asyncio.sleep(0)
        small = asyncio.create_task(take("small", 10))  # would fit, but arrived after `big`
        await asyncio.sleep(0)
        assert order == []
        assert budget.held == 60
        budget.release(60)
        await asyncio.gather(big, small)
        assert budget.held == 80
        return order

    assert asyncio.run(scenario()) == ["big", "small"]


def test_a_body_bigger_than_the_budget_is_admitted_alone() -> None:
    async def scenario() -> None:
        budget = ByteBudget(10)
        await budget.acquire(5)
        huge = asyncio.create_task(budget.acquire(50))
        await asyncio.sleep(0)
        assert not huge.done()  # not beside anything else
        budget.release(5)
        await huge
        assert budget.held == 50
        follower = asyncio.create_task(budget.acquire(1))
        await asyncio.sleep(0)
        assert not follower.done()  # over the limit already: nothing more until it goes
        budget.release(50)
        await follower
        assert budget.held == 1

    asyncio.run(scenario())


def test_a_cancelled_waiter_gives_its_place_to_the_next() -> None:
    async def scenario() -> None:
        budget = ByteBudget(10)
        await budget.acquire(8)
        first = asyncio.create_task(budget.acquire(5))
        await asyncio.sleep(0)
        second = asyncio.create_task(budget.acquire(2))
        await asyncio.sleep(0)
        assert not second.done()  # behind `first`
        first.cancel()
        with pytest.raises(asyncio.CancelledError):
            await first
        await second
        assert budget.held == 10

    asyncio.run(scenario())


def test_parallel_sub_windows_of_big_pages_hold_at_most_the_budget() -> None:
    """Every hourly page carries a 2 MiB summary; with 8 sub-windows in parallel and a 3 MiB
    budget, at most one big body is held at a time (the old fetch queued 16 pages ahead,
    whatever their size), and every record arrives once, exact."""
    sandbox = make_sandbox(cdrs_per_day=240, days=1)
    start, end = day(0)
    size = 2 * MIB
    chosen: set[str] = set()

    def rewrite(record: bytes) -> bytes:
        cdr_id = record_id(record)
        return with_summary(record, big_text(cdr_id, size)) if cdr_id in chosen else record

    app = RewritingApp(sandbox.app, rewrite)

    async def fetch(budget: ByteBudget | None) -> tuple[list[CdrPage], list[int]]:
        held: list[int] = []
        pages: list[CdrPage] = []
        transport = httpx.ASGITransport(app=app)
        async with make_client(sandbox, transport=transport, concurrency=8) as client:
            async for page in client.fetch_cdr_pages(start, end, budget=budget):
                if budget is not None:
                    held.append(budget.held)
                    await asyncio.sleep(0.01)  # the consumer works on the page a while
                    budget.release(len(page.body))
                pages.append(page)
        return pages, held

    clean, _ = asyncio.run(fetch(None))
    # The first call record of each hourly sub-window (one page each) gets a big summary.
    for page in clean:
        call = re.search(rb'\{"id":"([0-9a-f-]{36})","type":"call"', page.body)
        if call is not None:
            chosen.add(call.group(1).decode())
    assert len(chosen) >= 12
    budget = ByteBudget(3 * MIB)
    pages, held = asyncio.run(fetch(budget))

    assert sorted(i for p in pages for i in RECORD_ID.findall(p.body)) == sorted(
        i for p in clean for i in RECORD_ID.findall(p.body)
    )
    big_pages = [p for p in pages if len(p.body) > size]
    assert len(big_pages) == len(chosen)
    assert max(held) <= 3 * MIB  # one 2 MiB page and small ones, never two big ones
    assert budget.peak <= 3 * MIB
    assert budget.held == 0
    for page in big_pages:
        (cdr_id,) = [i.decode() for i in RECORD_ID.findall(page.body) if i.decode() in chosen]
        assert big_text(cdr_id, size) in page.body
