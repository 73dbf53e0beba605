"""Snapshot money as the snapshot assets fetch and build it (the client, its models, the
frames): a balance the API sends with more decimals than `amount`'s scale, or out of its range,
lands null with its text in `amount_raw`; it was rounded (or null) without a word."""

from __future__ import annotations

import asyncio
from datetime import UTC, date, datetime
from decimal import Decimal

import pytest
from pydantic import SecretStr

from connectors.contact_center import ClientSettings, ContactCenterClient
from connectors.sandbox.config import DEFAULT_API_KEY
from pipelines.snapshot_sources import SNAPSHOT_SOURCES, Fetched, build_snapshot_frames
from tests.support.sandboxes import make_sandbox

AT = datetime(2026, 11, 21, 1, tzinfo=UTC)


@pytest.mark.parametrize(
    ("sent", "typed"),
    [("4990.0034", Decimal("4990.0034")), ("1.23456789", None), ("1E+30", None)],
    ids=["fits", "more-decimals", "out-of-range"],
)
def test_a_fetched_balance_is_exact_or_null_never_rounded(sent: str, typed: Decimal | None) -> None:
    sandbox = make_sandbox(start_date=date(2026, 11, 1), days=1, cdrs_per_day=1, now=AT)
    sandbox.state.balance = Decimal(sent)  # the emulated account's balance, as its API sends it
    (source,) = [s for s in SNAPSHOT_SOURCES if s.name == "balance"]
    settings = ClientSettings(base_url="http://127.0.0.1", api_key=SecretStr(DEFAULT_API_KEY))

    async def fetch() -> Fetched:
        client = ContactCenterClient(settings, transport=sandbox.transport())
        async with client:
            return await source.fetch(client)

    fetched = asyncio.run(fetch())
    frames = build_snapshot_frames("balance", fetched, AT)
    row = frames["balance_snapshots"].row(0, named=True)
    assert row["amount"] == typed
    assert Decimal(row["amount_raw"]) == Decimal(sent)
