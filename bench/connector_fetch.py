"""Throughput of ContactCenterClient.fetch_cdr_pages against the in-process sandbox.

Usage: .venv/bin/python bench/connector_fetch.py [cdrs_per_day] [concurrency]
Prints CDRs/s for a clean day and for a day with a 30% 429 storm + 2 ms latency.
"""

from __future__ import annotations

import asyncio
import logging
import sys
import time
from datetime import UTC, date, datetime, timedelta

from pydantic import SecretStr

from connectors.contact_center import ClientSettings, ContactCenterClient
from connectors.sandbox import FaultConfig, Sandbox, SandboxConfig
from connectors.sandbox.config import DEFAULT_API_KEY


async def fetch(
    sandbox: Sandbox, start: datetime, concurrency: int
) -> tuple[int, int, dict[str, int]]:
    settings = ClientSettings(
        base_url="http://127.0.0.1",
        api_key=SecretStr(DEFAULT_API_KEY),
        page_size=1000,
        concurrency=concurrency,
        backoff_base_s=0.005,
        backoff_max_s=0.05,
        max_attempts=20,
    )
    records = pages = 0
    async with ContactCenterClient(settings, transport=sandbox.transport()) as client:
        async for page in client.fetch_cdr_pages(start, start + timedelta(days=1)):
            records += page.count
            pages += 1
        return records, pages, client.stats


def main() -> None:
    logging.basicConfig(level=logging.ERROR)  # retries log at WARNING: keep the figures readable
    per_day = int(sys.argv[1]) if len(sys.argv) > 1 else 100_000
    concurrency = int(sys.argv[2]) if len(sys.argv) > 2 else 8
    sandbox = Sandbox(SandboxConfig(start_date=date(2026, 3, 1), days=1, cdrs_per_day=per_day))
    sandbox.clock.set(datetime(2026, 3, 5, tzinfo=UTC))
    start = datetime(2026, 3, 1, tzinfo=UTC)
    sandbox.truth_cdrs(start, start + timedelta(days=1))  # warm the day's cache: time the client
    for label, faults in (
        ("clean", FaultConfig()),
        ("429 storm 30% + 2 ms latency", FaultConfig(error_429_rate=0.3, latency_ms=2)),
    ):
        sandbox.faults = faults
        began = time.perf_counter()
        records, pages, stats = asyncio.run(fetch(sandbox, start, concurrency))
        took = time.perf_counter() - began
        print(
            f"{label:32s} {records:>8d} CDRs {pages:>4d} pages {took:6.2f} s "
            f"{records / took:>10,.0f} CDRs/s  requests={stats['requests']} retries={stats['retries']}"
        )


if __name__ == "__main__":
    main()
