"""Each fault knob acting, in-process and over a real socket, plus the admin routes."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

import httpx
import orjson
import pytest

from connectors.sandbox import Sandbox
from connectors.sandbox.datafaults import DRIFT_TYPE
from connectors.sandbox.faults import FaultConfig
from connectors.sandbox.routes_cdrs import FALLBACK_HEADER
from tests.connectors.sandbox.conftest import DAYS, NOW, START, Api, make_sandbox

CDRS = "/api/v4/reporting/cdrs"
DAY1 = datetime(START.year, START.month, START.day, tzinfo=UTC)


def walk(api: Api, **params: Any) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    cursor = None
    while True:
        body = api.json(
            CDRS, params={**params, "limit": 1000, **({"cursor": cursor} if cursor else {})}
        )
        out += body["cdrs"]
        cursor = body["metadata"]["next_cursor"]
        if cursor is None:
            return out


@pytest.fixture
def sbx() -> Sandbox:
    return make_sandbox()


@pytest.fixture
def client(sbx: Sandbox) -> Any:
    with Api(sbx) as api:
        yield api


def test_latency_delays_responses(sbx: Sandbox, client: Api) -> None:
    sbx.faults = FaultConfig(latency_ms=250, jitter_ms=50)
    t0 = time.perf_counter()
    assert client.get("/api/v4/billing/balance").status_code == 200
    assert time.perf_counter() - t0 >= 0.25  # a lower bound only: sleep never returns early


def test_rate_limit_token_bucket_per_key(sbx: Sandbox, client: Api) -> None:
    sbx.faults = FaultConfig(rate_limit_rps=0.01, rate_limit_burst=2, retry_after_s=7)
    codes = [client.get("/api/v4/billing/balance").status_code for _ in range(3)]
    assert codes == [200, 200, 429]
    limited = client.get("/api/v4/billing/balance")
    assert limited.json() == {"error": "Too many requests"}
    assert limited.headers["retry-after"] == "7"
    with Api(sbx, key="narrow-key") as other:  # its own bucket
        assert other.get("/api/v4/billing/balance").status_code == 200


def test_random_429_and_after_requests(sbx: Sandbox, client: Api) -> None:
    sbx.faults = FaultConfig(error_429_rate=1.0, after_requests=2)
    codes = [client.get("/api/v4/routing/queues").status_code for _ in range(4)]
    assert codes == [200, 200, 429, 429]
    assert "retry-after" not in client.get("/api/v4/routing/queues").headers


def test_random_5xx(sbx: Sandbox, client: Api) -> None:
    sbx.faults = FaultConfig(error_5xx_rate=1.0)
    codes = {client.get("/api/v4/routing/queues").status_code for _ in range(12)}
    assert codes <= {500, 502, 503}
    assert len(codes) > 1


def test_paths_limit_where_faults_apply(sbx: Sandbox, client: Api) -> None:
    sbx.faults = FaultConfig(error_5xx_rate=1.0, paths=("/api/v4/reporting",))
    assert client.get("/api/v4/routing/queues").status_code == 200
    assert client.get(CDRS).status_code >= 500


def test_random_faults_repeat_with_the_same_config(sbx: Sandbox, client: Api) -> None:
    def run() -> list[int]:
        sbx.faults = FaultConfig(error_429_rate=0.5)
        return [client.get("/api/v4/routing/queues").status_code for _ in range(20)]

    first = run()
    assert set(first) == {200, 429}
    assert run() == first


def test_reset_in_process_is_a_read_error(sbx: Sandbox, client: Api) -> None:
    sbx.faults = FaultConfig(reset_rate=1.0)
    with pytest.raises(httpx.ReadError):
        client.get(CDRS)


def test_reset_over_a_socket_drops_the_connection(sbx: Sandbox) -> None:
    sbx.faults = FaultConfig(reset_rate=1.0)
    with sbx.serve() as server, httpx.Client(base_url=server.base_url) as http:
        with pytest.raises((httpx.RemoteProtocolError, httpx.ReadError)):
            http.get(CDRS, headers={"Authorization": "Bearer sbx-full-access-key"})
        sbx.faults = FaultConfig()
        ok = http.get(
            "/api/v4/billing/balance", headers={"Authorization": "Bearer sbx-full-access-key"}
        )
        assert ok.status_code == 200


def test_truncated_body_has_consistent_length(sbx: Sandbox, client: Api) -> None:
    sbx.faults = FaultConfig(truncate_rate=1.0)
    response = client.get(CDRS, params={"limit": 10})
    assert response.status_code == 200
    assert int(response.headers["content-length"]) == len(response.content)
    with pytest.raises(orjson.JSONDecodeError):
        orjson.loads(response.content)


def test_html_and_empty_bodies(sbx: Sandbox, client: Api) -> None:
    sbx.faults = FaultConfig(html_rate=1.0)
    html = client.get(CDRS)
    assert html.status_code == 200
    assert html.headers["content-type"].startswith("text/html")
    sbx.faults = FaultConfig(empty_body_rate=1.0)
    empty = client.get(CDRS)
    assert empty.status_code == 200
    assert empty.content == b""


def test_missing_list_key(sbx: Sandbox, client: Api) -> None:
    sbx.faults = FaultConfig(missing_key_rate=1.0)
    body = client.json(CDRS)
    assert "cdrs" not in body
    assert body["metadata"]["total"] == DAYS * 400


def test_total_mismatch(sbx: Sandbox, client: Api) -> None:
    sbx.faults = FaultConfig(total_mismatch=3)
    assert client.json(CDRS)["metadata"]["total"] == DAYS * 400 + 3
    assert client.json("/api/v4/routing/queues")["metadata"]["total"] == 13


def test_cursor_invalid_rate_forces_offset_fallback(sbx: Sandbox, client: Api) -> None:
    cursor = client.json(CDRS, params={"limit": 5})["metadata"]["next_cursor"]
    sbx.faults = FaultConfig(cursor_invalid_rate=1.0)
    response = client.get(CDRS, params={"limit": 5, "cursor": cursor})
    assert response.headers[FALLBACK_HEADER] == "offset"
    sbx.faults = FaultConfig()
    assert FALLBACK_HEADER not in client.get(CDRS, params={"limit": 5, "cursor": cursor}).headers


def test_late_cdrs_arrive_after_a_delay(sbx: Sandbox, client: Api) -> None:
    sbx.faults = FaultConfig(late_rate=0.5, late_max_minutes=120)
    at = DAY1 + timedelta(hours=14)
    sbx.clock.set(at)
    window = {"started_at[lt]": (DAY1 + timedelta(hours=13)).isoformat()}
    early = {r["id"] for r in walk(client, **window)}
    truth_early = sbx.truth_cdrs(DAY1, DAY1 + timedelta(hours=13))
    assert set(truth_early) == early
    sbx.clock.set(at + timedelta(hours=3))
    later = {r["id"] for r in walk(client, **window)}
    assert early < later  # late records arrived; nothing vanished
    sbx.faults = FaultConfig()
    assert {r["id"] for r in walk(client, **window)} >= later


def test_revised_costs_change_after_first_appearance(sbx: Sandbox, client: Api) -> None:
    sbx.faults = FaultConfig(revise_rate=1.0, revise_after_minutes=30)
    rec_end = None
    first_page = client.json(CDRS, params={"limit": 50})["cdrs"]
    sbx.clock.set(datetime.fromisoformat(first_page[0]["ended_at"]) + timedelta(minutes=1))
    before = {r["id"]: r["cost"] for r in client.json(CDRS, params={"limit": 50})["cdrs"]}
    rec_end = datetime.fromisoformat(first_page[-1]["ended_at"])
    sbx.clock.set(rec_end + timedelta(minutes=31))
    after = {r["id"]: r["cost"] for r in client.json(CDRS, params={"limit": 50})["cdrs"]}
    changed = [i for i in before if before[i] != after[i]]
    assert changed
    truth = sbx.truth_cdrs(DAY1, DAY1 + timedelta(days=1))
    assert all(Decimal(truth[i]) == Decimal(str(after[i])) for i in after)
    detail = client.json(f"{CDRS}/{changed[0]}")["cdr"]
    assert detail["cost"] == after[changed[0]]


def test_drift_extra_field_and_unknown_type(sbx: Sandbox, client: Api) -> None:
    sbx.faults = FaultConfig(drift_extra_field=True, drift_unknown_type_rate=0.2)
    records = walk(client)
    assert all("sentiment_v2" in r for r in records)
    drifted = [r for r in records if r["type"] == DRIFT_TYPE]
    assert 0 < len(drifted) < len(records)
    calls = walk(client, type="call")
    assert all(r["type"] == "call" for r in calls)
    truth = sbx.truth_cdrs(DAY1, DAY1 + timedelta(days=DAYS))
    assert {r["id"] for r in drifted} <= set(truth)
    assert len(truth) == len(records)


def test_corrupt_records(sbx: Sandbox, client: Api) -> None:
    sbx.faults = FaultConfig(corrupt_rate=1.0)
    records = client.json(CDRS, params={"limit": 200})["cdrs"]
    string_costs = [r for r in records if isinstance(r["cost"], str)]
    bad_times = [r for r in records if not r["started_at"].startswith("2026-")]
    assert string_costs
    assert bad_times
    assert len(string_costs) + len(bad_times) == len(records)


def test_admin_faults_refuse_a_bad_body_naming_the_field(sbx: Sandbox) -> None:
    with Api(sbx, key=None) as admin:
        bad = admin.request("PUT", "/_sandbox/faults", json={"error_429_rate": 2, "bogus": 1})
        assert bad.status_code == 422
        errors = bad.json()["errors"]
        assert set(errors) == {"error_429_rate", "bogus"}
        assert errors["error_429_rate"] == ["Input should be less than or equal to 1"]
        assert sbx.faults == FaultConfig()  # the live config is unchanged
        ok = admin.request("PUT", "/_sandbox/faults", json={"paths": ["/api/v4/users"]})
        assert (ok.status_code, ok.json()["paths"]) == (200, ["/api/v4/users"])


def test_admin_routes_drive_a_sandbox_remotely(sbx: Sandbox) -> None:
    with sbx.serve() as server, httpx.Client(base_url=server.base_url) as http:
        assert http.get("/_sandbox/faults").json()["error_429_rate"] == 0.0
        put = http.put("/_sandbox/faults", json={"total_mismatch": 5})
        assert put.json()["total_mismatch"] == 5
        assert sbx.faults.total_mismatch == 5
        assert http.put("/_sandbox/faults", json={"bogus": 1}).status_code == 422
        clock = http.put("/_sandbox/clock", json={"now": "2026-11-02T00:00:00Z"}).json()
        assert clock == {"now": "2026-11-02T00:00:00.000Z", "frozen": True}
        advanced = http.put("/_sandbox/clock", json={"advance_s": 1.5}).json()
        assert advanced["now"] == "2026-11-02T00:00:01.500Z"
        http.get(CDRS)  # unauthenticated, still counted
        counters = http.get("/_sandbox/counters").json()
        assert counters[CDRS] == 1
        truth = http.get(
            "/_sandbox/truth/cdrs",
            params={"start": "2026-11-01T00:00:00Z", "end": "2026-11-02T00:00:00Z"},
        )
        assert len(truth.json()["cdrs"]) == len(sbx.truth_cdrs(DAY1, DAY1 + timedelta(days=1)))
        assert NOW > DAY1
