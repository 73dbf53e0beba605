"""Issue 22: one odd record never blocks a day, and money is never rounded.

A sandbox day is served through `RewritingApp` (tests/support/oddserver.py), which rewrites
chosen records' bytes, the same on every request, as a server holding that data would. The day
runs as `cdrhouse ingest` runs it (`run_ingest`: the CDR job, its checks, the aggregates, the
views), over a real socket. The odd record lands in `cdr_quarantine` with its exact bytes and a
reason, the rest of the day in `cdrs`, after one re-request at most (counted, not timed).
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import date
from decimal import Decimal
from pathlib import Path
from typing import Any

import dagster as dg
import httpx
import pytest

from connectors.sandbox.config import DEFAULT_API_KEY
from models.timestamps import iso_ms
from pipelines.cli_runs import IngestReport, RunLine, run_ingest
from pipelines.partitions import partition_window
from tests.support.clock import SessionClock
from tests.support.lake import warehouse
from tests.support.oddserver import (
    CDRS_PATH,
    Rewrite,
    RewritingApp,
    cost_token,
    page_records,
    record_id,
    serve_app,
    seven_decimals,
    with_cost,
)
from tests.support.sandboxes import make_sandbox
from tests.support.served import ServedSandbox
from warehouse.lake import Lake
from warehouse.normalize import normalize

CDRS_PER_DAY = 40
DEEP = 3000


def _same(record: bytes) -> bytes:
    return record


@dataclass
class OddApi:
    """The served day: its records as the sandbox writes them, and the rewrites to apply."""

    app: RewritingApp
    served: ServedSandbox
    day: date
    records: dict[str, bytes]  # id -> the sandbox's bytes, in API order
    rewrites: dict[str, Rewrite] = field(default_factory=dict)

    def serve(self, rewrites: dict[str, Rewrite]) -> None:
        self.rewrites.clear()
        self.rewrites.update(rewrites)
        self.app.pages.clear()
        self.app.served.clear()

    def ingest(self, data_dir: Path) -> RunLine:
        defs = self.served.defs(data_dir)
        with dg.DagsterInstance.ephemeral() as instance:
            report: IngestReport = run_ingest(
                defs, [self.day.isoformat()], instance=instance, data_dir=data_dir, snapshots=False
            )
        (line,) = report.runs
        assert line.success, line.failure
        return line

    def api_records(self) -> list[dict[str, Any]]:
        """The day as the API sends it now, every number read from its text as a Decimal."""
        page = json.loads(_day_body(self.served.base_url, self.day), parse_float=Decimal)
        assert page["metadata"]["total"] == len(page["cdrs"]) == len(self.records)
        records: list[dict[str, Any]] = page["cdrs"]
        return records


def _day_body(base_url: str, day: date) -> bytes:
    """The whole day's CDR list in one page, over HTTP like any client."""
    start, end = partition_window(day.isoformat())
    response = httpx.get(
        f"{base_url}{CDRS_PATH}",
        params={"started_at[gte]": iso_ms(start), "started_at[lt]": iso_ms(end), "limit": 1000},
        headers={"Authorization": f"Bearer {DEFAULT_API_KEY}"},
        timeout=30,
    )
    response.raise_for_status()
    return response.content


@pytest.fixture(scope="module")
def odd_api(clock: SessionClock) -> Iterator[OddApi]:
    first = clock.days_ago(3)
    sandbox = make_sandbox(start_date=first, days=3, cdrs_per_day=CDRS_PER_DAY, now=clock.now)
    rewrites: dict[str, Rewrite] = {}
    app = RewritingApp(sandbox.app, lambda r: rewrites.get(record_id(r), _same)(r))
    with serve_app(app) as base_url:
        defaults = {"page_size": 5, "concurrency": 4, "max_attempts": 4, "max_retry_s": 10.0}
        served = ServedSandbox(sandbox, base_url, first, clock, defaults)
        api = OddApi(app, served, clock.days_ago(2), {}, rewrites)
        api.records.update((record_id(r), r) for r in page_records(_day_body(base_url, api.day)))
        assert len(api.records) > 20
        yield api


def _call_with_talk(api: OddApi) -> str:
    """A call record in the middle of the day with a talk duration above zero."""
    calls = [
        i
        for i, r in api.records.items()
        if b'"type":"call"' in r and re.search(rb'"talk":[1-9]', r)
    ]
    return calls[len(calls) // 2]


def _not_utf8(record: bytes) -> bytes:
    return record.replace(b'"subtype":"', b'"subtype":"\xff', 1)


def _deep(record: bytes) -> bytes:
    return record[:-1] + b',"nested":' + b"[" * DEEP + b"]" * DEEP + b"}"


def _negative_talk(record: bytes) -> bytes:
    return re.sub(rb'"talk":([1-9])', rb'"talk":-\1', record, count=1)


# case -> (rewrite, the quarantine reason, requests of the odd record's page)
CASES: dict[str, tuple[Rewrite, str, int]] = {
    "out-of-range-number": (lambda r: with_cost(r, b"1e400"), "cost is out of range", 2),
    "invalid-utf8-in-a-string": (_not_utf8, "record is not valid UTF-8", 2),
    "3000-deep-array": (_deep, "nested deeper than 64 levels", 2),
    "seven-decimal-cost": (
        lambda r: with_cost(r, seven_decimals(cost_token(r))),
        "cost has more than 6 decimals",
        1,
    ),
    "negative-duration": (_negative_talk, "data.durations.talk is negative", 1),
    "non-numeric-cost": (lambda r: with_cost(r, b"NaN"), "cost is not a JSON number", 2),
}


def _exact_bytes(record: str) -> bytes:
    """A `record` column value's bytes (`base64:` marks bytes that are not UTF-8)."""
    if record.startswith("base64:"):
        return base64.b64decode(record.removeprefix("base64:"))
    return record.encode()


@pytest.mark.parametrize("case", list(CASES), ids=list(CASES))
def test_one_odd_record_is_quarantined_with_its_bytes_and_its_day_lands(
    odd_api: OddApi, tmp_path: Path, case: str
) -> None:
    rewrite, reason, page_requests = CASES[case]
    target = _call_with_talk(odd_api)
    sent = rewrite(odd_api.records[target])
    assert sent != odd_api.records[target]
    odd_api.serve({target: rewrite})
    line = odd_api.ingest(tmp_path)

    day = odd_api.day
    with warehouse(tmp_path) as con:
        cdrs = {i for (i,) in con.execute("select id from cdrs where date = ?", [day]).fetchall()}
        quarantine = con.execute(
            "select id, type, reason, record from cdr_quarantine where date = ?", [day]
        ).fetchall()
        raw = dict(con.execute("select id, record from raw_cdrs where date = ?", [day]).fetchall())
    # The record is in quarantine, with a reason and its exact bytes; the rest of the day lands.
    assert [(i, t) for i, t, _, _ in quarantine] == [(target, "call")]
    ((_, _, got_reason, record),) = quarantine
    assert reason in got_reason
    assert _exact_bytes(record) == sent
    assert _exact_bytes(raw[target]) == sent
    assert cdrs == set(odd_api.records) - {target}
    assert line.rows["cdrs"] == len(odd_api.records) - 1
    # The day's checks say so.
    assert line.checks_failed
    assert all("quarantine" in check for check in line.checks_failed), line.checks_failed
    # Normalizing the day again from the lake's raw_cdrs quarantines it the same way.
    raw_rows = Lake((tmp_path / "lake").as_uri()).read("raw_cdrs", f"date={day}")
    assert raw_rows is not None
    again = normalize(raw_rows)
    assert again.quarantine.select("id", "reason").rows() == [(target, got_reason)]
    assert again.quarantine["record"].to_list() == [record]
    # Bounded: the odd record's page was asked for `page_requests` times, every other page once.
    assert odd_api.app.served[target] == page_requests
    assert max(odd_api.app.pages.values()) == page_requests
    assert sum(odd_api.app.pages.values()) == len(odd_api.app.pages) + page_requests - 1


SIX = Decimal("0.000001")


def _fits(cost: Decimal) -> bool:
    """Whether Decimal(18, 6) holds the cost exactly."""
    return cost == cost.quantize(SIX) and abs(cost) < Decimal(10) ** 12


def _cost_rewrites(ids: list[str]) -> dict[str, Rewrite]:
    """Every form of cost a server may write, by record: 7 decimals (does not fit), 6 decimals,
    trailing zeros past 6 places (fits), an exponent, the column's ends, 13 integer digits."""

    def plus_millionth(r: bytes) -> bytes:
        return with_cost(r, format(Decimal(cost_token(r).decode()) + SIX, "f").encode())

    def zeros(r: bytes) -> bytes:
        token = cost_token(r)
        return with_cost(r, token + (b"0000000" if b"." in token else b".0000000"))

    cycle: list[Rewrite] = [
        lambda r: with_cost(r, seven_decimals(cost_token(r))),
        plus_millionth,
        zeros,
        _same,
    ]
    rewrites = {i: cycle[n % len(cycle)] for n, i in enumerate(ids)}
    fixed = [b"999999999999.999999", b"-0.000001", b"15e-4", b"1000000000000", b"0.6984004"]
    for i, token in zip(ids[1::7], fixed, strict=False):
        rewrites[i] = _cost_of(token)
    return rewrites


def _cost_of(token: bytes) -> Rewrite:
    return lambda r: with_cost(r, token)


def _sums(rows: list[tuple[Any, ...]]) -> dict[tuple[Any, ...], Decimal]:
    """(group key..., cost) rows -> {key: cost}."""
    return {tuple(row[:-1]): row[-1] for row in rows}


def test_no_cost_anywhere_differs_from_the_api_text_as_a_decimal(
    odd_api: OddApi, tmp_path: Path
) -> None:
    odd_api.serve(_cost_rewrites(list(odd_api.records)))
    line = odd_api.ingest(tmp_path)
    api = odd_api.api_records()
    costs: dict[str, Decimal] = {r["id"]: Decimal(r["cost"]) for r in api}
    landed = {i: c for i, c in costs.items() if _fits(c)}
    assert 0 < len(landed) < len(costs), "some costs fit exactly, some do not"
    assert Decimal("0.6984004") in costs.values()
    assert Decimal("999999999999.999999") in landed.values()

    day = odd_api.day
    with warehouse(tmp_path) as con:

        def rows(sql: str) -> list[tuple[Any, ...]]:
            return con.execute(sql, [day]).fetchall()

        cdrs = dict(rows("select id, cost from cdrs where date = ?"))
        typed: dict[str, Decimal] = {}
        for table in ("cdr_calls", "cdr_conversations", "cdr_sms", "cdr_hlr_lookups"):
            typed.update(rows(f"select id, cost from {table} where date = ?"))
        raw = dict(rows("select id, record from raw_cdrs where date = ?"))
        quarantine = rows("select id, reason, record from cdr_quarantine where date = ?")
        views = {
            name: {
                prefix: _sums(rows(f"select {keys}, cost from {prefix}_{name} where date = ?"))
                for prefix in ("agg", "rpt")
            }
            for name, keys in (
                ("daily_volume", "type, subtype, disposition"),
                ("cost_daily", "type, destination_country, campaign_id"),
                ("campaign_outcomes", "campaign_id"),
                ("sms_delivery", "'all'"),
            )
        }
    # Every cost of cdrs and the per-type tables is the API's text as a Decimal, to the digit.
    assert cdrs == landed
    assert typed == landed
    # raw_cdrs keeps every record's exact token; a cost that does not fit is quarantined whole.
    assert {i: json.loads(r, parse_float=Decimal)["cost"] for i, r in raw.items()} == costs
    assert {i for i, _, _ in quarantine} == costs.keys() - landed.keys()
    for i, reason, record in quarantine:
        assert "cost has more than" in reason
        assert Decimal(json.loads(record, parse_float=Decimal)["cost"]) == costs[i]
    assert any("quarantine" in check for check in line.checks_failed), line.checks_failed
    # The aggregates and the report views sum exactly those costs.
    sums: dict[str, dict[tuple[Any, ...], Decimal]] = {name: {} for name in views}

    def add(name: str, key: tuple[Any, ...], cost: Decimal) -> None:
        sums[name][key] = sums[name].get(key, Decimal(0)) + cost

    for r in api:
        if r["id"] not in landed:
            continue
        cost, data = landed[r["id"]], r.get("data") or {}
        campaign = (data.get("campaign") or {}).get("id") if r["type"] == "call" else None
        add("daily_volume", (r["type"], r["subtype"], r["disposition"]), cost)
        country = data.get("destination_country") if r["type"] == "call" else None
        add("cost_daily", (r["type"], country, campaign), cost)
        if campaign is not None:
            add("campaign_outcomes", (campaign,), cost)
        if r["type"] == "sms":
            add("sms_delivery", ("all",), cost)
    for name, by_prefix in views.items():
        for prefix, got in by_prefix.items():
            assert got == sums[name], f"{prefix}_{name}"
    assert sum(sums["daily_volume"].values()) == sum(landed.values())
    assert all(got for by_prefix in views.values() for got in by_prefix.values()), views
