"""Served CDRs/s of the sandbox over a real uvicorn socket, warm (pages of 1,000 records).

Runs the server in a separate process (as `cdrhouse sandbox` would), generates the day once
(cold), then walks every hour window of the day by cursor with a few concurrent clients and
prints the warm figure. Usage: .venv/bin/python bench/sandbox_serve.py [--cdrs-per-day N]
"""

from __future__ import annotations

import argparse
import asyncio
import http.client
import socket
import subprocess
import sys
import time
import urllib.parse
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, date, datetime, timedelta

import httpx

from connectors.sandbox.config import DEFAULT_API_KEY
from models.timestamps import iso_ms


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _window_params(start: datetime, end: datetime) -> dict[str, str]:
    """The CDR list query of one window, in pages of 1,000 (both clients walk the same)."""
    return {"limit": "1000", "started_at[gte]": iso_ms(start), "started_at[lt]": iso_ms(end)}


async def walk(client: httpx.AsyncClient, start: datetime, end: datetime) -> tuple[int, int]:
    params = _window_params(start, end)
    records = nbytes = 0
    cursor: str | None = None
    while True:
        r = await client.get(
            "/api/v4/reporting/cdrs", params={**params, **({"cursor": cursor} if cursor else {})}
        )
        r.raise_for_status()
        body = r.content
        nbytes += len(body)
        tail = body[body.rfind(b'"metadata":') :]
        # Count records without decoding them: `started_at` occurs once per record.
        records += body.count(b'"started_at":"')
        cursor = (
            None
            if b'"next_cursor":null' in tail
            else tail.split(b'"next_cursor":"')[1].split(b'"')[0].decode()
        )
        if cursor is None:
            return records, nbytes


async def run_pass(base: str, day: date, workers: int) -> tuple[int, int, float]:
    start = datetime(day.year, day.month, day.day, tzinfo=UTC)
    windows = [(start + timedelta(hours=h), start + timedelta(hours=h + 1)) for h in range(24)]
    queue: asyncio.Queue[tuple[datetime, datetime]] = asyncio.Queue()
    for w in windows:
        queue.put_nowait(w)
    totals = [0, 0]
    limits = httpx.Limits(max_connections=workers)
    async with httpx.AsyncClient(
        base_url=base,
        headers={"Authorization": f"Bearer {DEFAULT_API_KEY}"},
        limits=limits,
        timeout=60,
    ) as client:

        async def worker() -> None:
            while not queue.empty():
                a, b = queue.get_nowait()
                n, nb = await walk(client, a, b)
                totals[0] += n
                totals[1] += nb

        t0 = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(workers)))
        return totals[0], totals[1], time.perf_counter() - t0


def walk_lean(port: int, start: datetime, end: datetime) -> tuple[int, int]:
    """The same walk with http.client: a client light enough not to bound the server figure."""
    conn = http.client.HTTPConnection("127.0.0.1", port)
    params = _window_params(start, end)
    records = nbytes = 0
    cursor: str | None = None
    try:
        while True:
            query = urllib.parse.urlencode({**params, **({"cursor": cursor} if cursor else {})})
            conn.request(
                "GET",
                "/api/v4/reporting/cdrs?" + query,
                headers={"Authorization": f"Bearer {DEFAULT_API_KEY}"},
            )
            body = conn.getresponse().read()
            nbytes += len(body)
            records += body.count(b'"started_at":"')
            tail = body[body.rfind(b'"metadata":') :]
            if b'"next_cursor":null' in tail:
                return records, nbytes
            cursor = tail.split(b'"next_cursor":"')[1].split(b'"')[0].decode()
    finally:
        conn.close()


def run_lean(port: int, day: date, workers: int) -> tuple[int, int, float]:
    start = datetime(day.year, day.month, day.day, tzinfo=UTC)
    windows = [(start + timedelta(hours=h), start + timedelta(hours=h + 1)) for h in range(24)]
    t0 = time.perf_counter()
    with ThreadPoolExecutor(workers) as pool:
        results = list(pool.map(lambda w: walk_lean(port, *w), windows))
    return sum(r[0] for r in results), sum(r[1] for r in results), time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cdrs-per-day", type=int, default=200_000)
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--passes", type=int, default=3)
    args = ap.parse_args()
    port = free_port()
    day = date(2026, 11, 2)
    cmd = [
        sys.executable,
        "-m",
        "connectors.sandbox.serve",
        "--port",
        str(port),
        "--start-date",
        "2026-11-01",
        "--days",
        "3",
        "--cdrs-per-day",
        str(args.cdrs_per_day),
    ]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    try:
        for _ in range(200):
            try:
                httpx.get(base + "/_sandbox/counters", timeout=1)
                break
            except httpx.TransportError:
                time.sleep(0.1)
        t0 = time.perf_counter()
        r = httpx.get(
            base + "/api/v4/reporting/cdrs",
            params={
                "limit": 1,
                "started_at[gte]": "2026-11-02T00:00:00Z",
                "started_at[lt]": "2026-11-03T00:00:00Z",
            },
            headers={"Authorization": f"Bearer {DEFAULT_API_KEY}"},
            timeout=120,
        )
        print(
            f"cold: generating one day of {args.cdrs_per_day:,} CDRs took {time.perf_counter() - t0:.2f}s (total={r.json()['metadata']['total']:,})"
        )
        for name, runner in (
            ("http.client threads", lambda: run_lean(port, day, args.workers)),
            ("httpx.AsyncClient", lambda: asyncio.run(run_pass(base, day, args.workers))),
        ):
            best = 0.0
            for i in range(args.passes):
                n, nb, dt = runner()
                best = max(best, n / dt)
                print(
                    f"{name} pass {i + 1}: {n:,} CDRs, {nb / 1e6:.0f} MB in {dt:.2f}s -> {n / dt:,.0f} CDRs/s"
                )
            print(
                f"warm served CDRs/s via {name} (best of {args.passes}, limit=1000, {args.workers} clients): {best:,.0f}"
            )
    finally:
        proc.terminate()
        proc.wait(timeout=10)


if __name__ == "__main__":
    main()
