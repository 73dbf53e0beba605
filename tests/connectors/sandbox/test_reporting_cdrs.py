"""GET /api/v4/reporting/cdrs (+ /{id}, /events): shapes per type, filters, 422s, paging rules."""

from __future__ import annotations

import re
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from connectors.sandbox import Sandbox
from connectors.sandbox.cursors import make_cursor
from connectors.sandbox.query import OFFSET_WINDOW
from connectors.sandbox.routes_cdrs import FALLBACK_HEADER
from models.timestamps import iso_ms
from tests.connectors.sandbox.conftest import DAYS, PER_DAY, START, Api

CDRS = "/api/v4/reporting/cdrs"
TS = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$")
COST = re.compile(r'"cost":(-?\d+(\.\d{1,4})?)[,}]')


def all_cdrs(api: Api, **params: Any) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    cursor = None
    while True:
        query = {**params, "limit": 1000, **({"cursor": cursor} if cursor else {})}
        body = api.json(CDRS, params=query)
        out += body["cdrs"]
        cursor = body["metadata"]["next_cursor"]
        if cursor is None:
            return out


@pytest.fixture(scope="module")
def everything(api: Api) -> list[dict[str, Any]]:
    return all_cdrs(api)


def check_ref(obj: dict[str, Any], id_type: type) -> None:
    assert set(obj) == {"id", "name", "name_snapshot", "deleted"}
    assert isinstance(obj["id"], id_type)
    assert isinstance(obj["name"], str)
    assert isinstance(obj["name_snapshot"], str)
    assert isinstance(obj["deleted"], bool)


def check_endpoint(ep: dict[str, Any]) -> None:
    if ep["type"] == "phone_number":
        assert set(ep) == {"type", "phone_number"}
        assert ep["phone_number"].isdigit()
    else:
        assert ep["type"] == "channel_account"
        acc = ep["channel_account"]
        assert set(acc) == {"id", "channel", "identifier", "data", "name_snapshot", "deleted"}
        uuid.UUID(acc["id"])
        assert set(acc["data"]) == {"name", "username"}
        assert isinstance(acc["deleted"], bool)


def check_data(kind: str, data: dict[str, Any]) -> None:
    if kind == "call":
        assert set(data) == {
            "queue", "campaign", "destination_country", "durations", "end_reason",
            "wrapup_code", "summary", "conversation_score", "mos", "mos_tc",
        }  # fmt: skip
        assert set(data["durations"]) == {"overall", "dialing", "ivr", "queue", "talk", "hold"}
        assert all(isinstance(v, int | float) for v in data["durations"].values())
        if data["queue"] is not None:
            check_ref(data["queue"], int)
        if data["campaign"] is not None:
            check_ref(data["campaign"], int)
        if data["wrapup_code"] is not None:
            assert set(data["wrapup_code"]) == {"code_snapshot"}
        for f in ("conversation_score", "mos", "mos_tc"):
            assert data[f] is None or isinstance(data[f], int | float)
    elif kind == "conversation":
        assert set(data) == {
            "channel", "flow", "queue", "wrapup_code", "durations", "service_level_agreements"
        }  # fmt: skip
        assert set(data["durations"]) == {"overall", "queue", "talk"}
        if data["flow"] is not None:
            check_ref(data["flow"], str)
            uuid.UUID(data["flow"]["id"])
        slas = data["service_level_agreements"]
        assert set(slas) == {"first_response", "resolution", "avg_reply"}
        for sla in slas.values():
            assert sla is None or (set(sla) == {"value", "status"})
    elif kind == "hlr_lookup":
        assert set(data) == {"reachable", "roaming", "related_call"}
        assert isinstance(data["reachable"], bool)
        assert isinstance(data["roaming"], bool)
    else:
        assert set(data) == {"sent", "segments_count", "message", "canned_message", "related_call"}
        assert isinstance(data["segments_count"], int)
        if data["canned_message"] is not None:
            check_ref(data["canned_message"], int)
    related = data.get("related_call")
    if related is not None:
        assert set(related) == {"id"}
        uuid.UUID(related["id"])


def test_every_record_matches_the_spec_tables(everything: list[dict[str, Any]]) -> None:
    assert len(everything) == DAYS * PER_DAY
    common = {
        "id", "type", "subtype", "disposition", "from", "to", "user", "cost", "tags",
        "started_at", "ended_at", "data",
    }  # fmt: skip
    for rec in everything:
        assert set(rec) == common
        uuid.UUID(rec["id"])
        assert rec["type"] in ("call", "conversation", "hlr_lookup", "sms")
        assert TS.match(rec["started_at"])
        assert TS.match(rec["ended_at"])
        assert rec["ended_at"] >= rec["started_at"]
        check_endpoint(rec["from"])
        check_endpoint(rec["to"])
        if rec["user"] is not None:
            assert set(rec["user"]) == {"id", "name", "email", "name_snapshot", "deleted"}
        assert isinstance(rec["cost"], int | float)
        assert all(isinstance(t, str) for t in rec["tags"])
        check_data(rec["type"], rec["data"])


def test_dataset_variety(everything: list[dict[str, Any]]) -> None:
    kinds = {r["type"] for r in everything}
    assert kinds == {"call", "conversation", "hlr_lookup", "sms"}
    endpoint_kinds = {r["from"]["type"] for r in everything} | {r["to"]["type"] for r in everything}
    assert endpoint_kinds == {"phone_number", "channel_account"}
    users = [r["user"] for r in everything if r["user"]]
    assert any(u["deleted"] for u in users)
    assert any(u["name_snapshot"] != u["name"] for u in users)
    queues = [r["data"]["queue"] for r in everything if r["data"].get("queue")]
    deleted_q = [q for q in queues if q["deleted"]]
    assert deleted_q
    assert all(q["name_snapshot"] != q["name"] for q in deleted_q)
    assert any(r["user"] is None for r in everything)
    assert any(r["tags"] for r in everything)
    calls = [r for r in everything if r["type"] == "call"]
    assert any(c["data"]["summary"] is None for c in calls)
    assert any(c["data"]["summary"] is not None for c in calls)
    # A daily curve: the busiest hour carries several times the quietest one.
    per_hour = [0] * 24
    for r in everything:
        per_hour[int(r["started_at"][11:13])] += 1
    assert max(per_hour) > 4 * max(1, min(per_hour))


def test_costs_are_json_numbers_with_at_most_4_decimals(api: Api) -> None:
    raw = api.get(CDRS, params={"limit": 1000}).text
    costs = COST.findall(raw)
    assert len(costs) == 1000
    assert any("." in c[0] for c in costs)


def test_day_boundary_records_exist(everything: list[dict[str, Any]]) -> None:
    starts = {r["started_at"] for r in everything}
    day = START.isoformat()
    assert f"{day}T00:00:00.000Z" in starts
    assert f"{day}T23:59:59.999Z" in starts


def test_order_is_started_at_then_id(everything: list[dict[str, Any]]) -> None:
    keys = [(r["started_at"], r["id"]) for r in everything]
    assert keys == sorted(keys)


def test_detail_returns_the_same_record(api: Api, everything: list[dict[str, Any]]) -> None:
    rec = everything[123]
    assert api.json(f"{CDRS}/{rec['id']}") == {"cdr": rec}
    assert api.get(f"{CDRS}/{uuid.uuid4()}").status_code == 404
    assert api.get(f"{CDRS}/not-a-uuid").json() == {"error": "Not found"}


def test_events_shape(api: Api) -> None:
    body = api.json(f"{CDRS}/events", params={"limit": 5})
    assert len(body["events"]) == 5
    assert set(body["metadata"]) == {"total", "next_cursor"}
    for ev in body["events"]:
        assert set(ev) == {"id", "type", "cdr", "occurred_at"}
        assert ev["type"] == "cdr.created"
        assert TS.match(ev["occurred_at"])


# ---------------------------------------------------------------- filters


DAY1 = datetime(START.year, START.month, START.day, tzinfo=UTC)

H10, H12 = iso_ms(DAY1 + timedelta(hours=10)), iso_ms(DAY1 + timedelta(hours=12))
E0, E6 = iso_ms(DAY1 + timedelta(days=1)), iso_ms(DAY1 + timedelta(days=1, hours=6))
FIRST_MS, LAST_MS = f"{START}T00:00:00.000Z", f"{START}T23:59:59.999Z"


def _queue(r: dict[str, Any]) -> Any:
    return (r["data"].get("queue") or {}).get("id")


def _campaign(r: dict[str, Any]) -> Any:
    return (r["data"].get("campaign") or {}).get("id")


FILTER_CASES: list[tuple[str, dict[str, Any], Any]] = [
    ("type", {"type": "sms"}, lambda r: r["type"] == "sms"),
    ("type_array", {"type[]": ["sms", "hlr_lookup"]}, lambda r: r["type"] in ("sms", "hlr_lookup")),
    ("subtype", {"subtype": "inbound"}, lambda r: r["subtype"] == "inbound"),
    (
        "subtype_array",
        {"subtype[]": ["inbound", "whatsapp"]},
        lambda r: r["subtype"] in ("inbound", "whatsapp"),
    ),
    ("disposition", {"disposition": "answered"}, lambda r: r["disposition"] == "answered"),
    (
        "disposition_array",
        {"disposition[]": ["sent", "busy"]},
        lambda r: r["disposition"] in ("sent", "busy"),
    ),
    ("queue_id", {"queue_id": "3"}, lambda r: _queue(r) == 3),
    ("deleted_queue_id", {"queue_id": "11"}, lambda r: _queue(r) == 11),
    ("campaign_id", {"campaign_id": "2"}, lambda r: _campaign(r) == 2),
    ("tag", {"tag": "conference"}, lambda r: "conference" in r["tags"]),
    (
        "started_gte_lt",
        {"started_at[gte]": H10, "started_at[lt]": H12},
        lambda r: H10 <= r["started_at"] < H12,
    ),
    (
        "started_gt_lte",
        {"started_at[gt]": FIRST_MS, "started_at[lte]": LAST_MS},
        lambda r: FIRST_MS < r["started_at"] <= LAST_MS,
    ),
    ("ended_at", {"ended_at[gte]": E0, "ended_at[lt]": E6}, lambda r: E0 <= r["ended_at"] < E6),
    (
        "to_phone_like",
        {"to_phone_number_like": "4930"},
        lambda r: "4930" in (r["to"].get("phone_number") or ""),
    ),
    (
        "from_phone_like",
        {"from_phone_number_like": "44"},
        lambda r: "44" in (r["from"].get("phone_number") or ""),
    ),
]


@pytest.mark.parametrize(
    ("params", "predicate"), [c[1:] for c in FILTER_CASES], ids=[c[0] for c in FILTER_CASES]
)
def test_filter(
    api: Api, everything: list[dict[str, Any]], params: dict[str, Any], predicate: Any
) -> None:
    expected = [r["id"] for r in everything if predicate(r)]
    got = [r["id"] for r in all_cdrs(api, **params)]
    assert expected, "the filter case must select something"
    assert got == expected


def test_exact_phone_user_and_team_filters(api: Api, everything: list[dict[str, Any]]) -> None:
    rec = next(r for r in everything if r["user"] and r["type"] == "call")
    phone = rec["to"]["phone_number"]
    got = all_cdrs(api, to_phone_number=phone)
    assert got
    assert all(r["to"]["phone_number"] == phone for r in got)
    frm = rec["from"]["phone_number"]
    assert all(r["from"].get("phone_number") == frm for r in all_cdrs(api, from_phone_number=frm))
    user_id = rec["user"]["id"]
    by_user = all_cdrs(api, user_id=user_id)
    assert [r["id"] for r in by_user] == [
        r["id"] for r in everything if r["user"] and r["user"]["id"] == user_id
    ]
    team = api.json(f"/api/v4/users/{user_id}")["user"]["teams"][0]["id"]
    by_team = all_cdrs(api, team_id=str(team))
    assert any(r["id"] == rec["id"] for r in by_team)
    assert len(by_team) < len(everything)


def test_account_id_filter(api: Api, everything: list[dict[str, Any]]) -> None:
    ids = set()
    for acc in ("ACC-00001", "ACC-00002", "ACC-00003", "ACC-00004", "ACC-00005"):
        ids |= {r["id"] for r in all_cdrs(api, account_id=acc)}
    both = {r["id"] for r in all_cdrs(api, **{"account_id[]": ["ACC-00001", "ACC-00002"]})}
    assert ids
    assert both <= ids
    assert len(ids) < len(everything)


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"started_at[gte]": "yesterday"}, "started_at[gte]"),
        ({"started_at[lt]": "1700000000"}, "started_at[lt]"),
        ({"ended_at[gt]": "2026-13-45T00:00:00Z"}, "ended_at[gt]"),
        ({"type": "Call"}, "type"),  # enums are case-sensitive
        ({"type[]": ["sms", "fax"]}, "type"),
        ({"subtype": "carrier_pigeon"}, "subtype"),
        ({"disposition": "lost"}, "disposition"),
        ({"user_id": "42"}, "user_id"),
        ({"team_id": "x"}, "team_id"),
        ({"queue_id": "1.5"}, "queue_id"),
        ({"campaign_id": "abc"}, "campaign_id"),
        ({"from_phone_number": "+4930123"}, "from_phone_number"),
        ({"to_phone_number_like": "49-30"}, "to_phone_number_like"),
        ({"limit": "0"}, "limit"),
        ({"limit": "1001"}, "limit"),
        ({"limit": "ten"}, "limit"),
        ({"offset": "-1"}, "offset"),
    ],
    ids=lambda v: str(v) if isinstance(v, str) else "",
)
def test_invalid_values_are_422_with_field_errors(
    api: Api, params: dict[str, Any], field: str
) -> None:
    response = api.get(CDRS, params=params)
    assert response.status_code == 422
    errors = response.json()["errors"]
    assert list(errors) == [field]
    assert all(isinstance(m, str) for m in errors[field])


# ---------------------------------------------------------------- paging rules


def test_default_limit_is_100_and_max_1000(api: Api) -> None:
    assert len(api.json(CDRS)["cdrs"]) == 100
    assert len(api.json(CDRS, params={"limit": 1000})["cdrs"]) == 1000


def test_next_cursor_null_on_last_page(api: Api) -> None:
    body = api.json(CDRS, params={"limit": 1000, "offset": DAYS * PER_DAY - 5})
    assert len(body["cdrs"]) == 5
    assert body["metadata"]["next_cursor"] is None
    assert body["metadata"]["total"] == DAYS * PER_DAY


def test_invalid_cursor_falls_back_to_offset(api: Api, everything: list[dict[str, Any]]) -> None:
    response = api.get(CDRS, params={"cursor": "garbage!", "offset": 7, "limit": 3})
    assert response.status_code == 200
    assert response.headers[FALLBACK_HEADER] == "offset"
    assert [r["id"] for r in response.json()["cdrs"]] == [r["id"] for r in everything[7:10]]


def test_cursor_for_another_query_is_invalid(api: Api) -> None:
    cursor = api.json(CDRS, params={"limit": 2, "type": "sms"})["metadata"]["next_cursor"]
    response = api.get(CDRS, params={"limit": 2, "cursor": cursor})
    assert response.headers.get(FALLBACK_HEADER) == "offset"


@pytest.mark.parametrize("offset", ["-3", "x", "10000"])
def test_invalid_fallback_offset_is_400(api: Api, offset: str) -> None:
    response = api.get(CDRS, params={"cursor": "garbage", "offset": offset})
    assert response.status_code == 400
    assert response.json() == {"error": "Bad Request"}


def test_valid_cursor_ignores_offset(api: Api, everything: list[dict[str, Any]]) -> None:
    first = api.json(CDRS, params={"limit": 4})
    body = api.json(
        CDRS, params={"limit": 4, "offset": 500, "cursor": first["metadata"]["next_cursor"]}
    )
    assert [r["id"] for r in body["cdrs"]] == [r["id"] for r in everything[4:8]]


def test_offset_window_of_10000() -> None:
    sandbox = Sandbox_with(cdrs_per_day=4000)
    with Api(sandbox) as api:
        assert api.get(CDRS, params={"offset": OFFSET_WINDOW}).status_code == 400
        body = api.json(CDRS, params={"offset": OFFSET_WINDOW - 10, "limit": 1000})
        assert len(body["cdrs"]) == 10  # the page is cut at the window's end
        cursor = body["metadata"]["next_cursor"]
        assert cursor is not None  # ...and the cursor continues past it
        rest = api.json(CDRS, params={"cursor": cursor, "limit": 1000})
        assert rest["cdrs"][0]["id"] != body["cdrs"][-1]["id"]
        assert rest["metadata"]["total"] == 12000


def Sandbox_with(**kw: Any) -> Sandbox:
    from tests.connectors.sandbox.conftest import make_sandbox

    return make_sandbox(**kw)


def test_cursor_stable_while_new_cdrs_arrive(fresh: Sandbox, fresh_api: Api) -> None:
    """Advance the clock mid-walk: records after the cursor arrive, none repeat or vanish."""
    fresh.clock.set(datetime(START.year, START.month, START.day, 14, tzinfo=UTC))
    params = {
        "limit": 50,
        "started_at[gte]": f"{START}T00:00:00Z",
        "started_at[lt]": f"{START}T12:00:00Z",
    }
    body = fresh_api.json(CDRS, params=params)
    seen = [r["id"] for r in body["cdrs"]]
    fresh.clock.set(datetime(START.year, START.month, START.day + 2, tzinfo=UTC))
    cursor = body["metadata"]["next_cursor"]
    while cursor:
        body = fresh_api.json(CDRS, params={**params, "cursor": cursor})
        seen += [r["id"] for r in body["cdrs"]]
        cursor = body["metadata"]["next_cursor"]
    assert len(seen) == len(set(seen))
    final = [r["id"] for r in all_cdrs(fresh_api, **params)]
    assert seen == final


def test_cdrs_appear_only_after_they_ended(fresh: Sandbox, fresh_api: Api) -> None:
    noon = datetime(START.year, START.month, START.day, 12, tzinfo=UTC)
    fresh.clock.set(noon)
    got = all_cdrs(fresh_api)
    assert got
    assert all(r["ended_at"] <= iso_ms(noon) for r in got)
    assert len(got) < PER_DAY


def test_cursor_is_opaque_and_signed(api: Api) -> None:
    forged = make_cursor(seed=999, start_ms=0, cdr_id="x", flt_key="y")
    response = api.get(CDRS, params={"cursor": forged})
    assert response.headers.get(FALLBACK_HEADER) == "offset"


FILTER_CHOICES = st.sampled_from(
    [
        {},
        {"type": "call"},
        {"type[]": ["sms", "conversation"]},
        {"disposition": "answered"},
        {"tag": "whisper"},
        {"queue_id": "2"},
        {"started_at[gte]": f"{START}T06:00:00Z", "started_at[lt]": f"{START}T20:30:00.500Z"},
        {"ended_at[gt]": f"{START}T23:00:00Z", "type": "call"},
    ]
)


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(limit=st.integers(min_value=1, max_value=1000), flt=FILTER_CHOICES, use_offset=st.booleans())
def test_walking_pages_yields_each_match_once(
    api: Api, everything: list[dict[str, Any]], limit: int, flt: dict[str, Any], use_offset: bool
) -> None:
    expected = [r["id"] for r in all_cdrs(api, **flt)]
    seen: list[str] = []
    cursor: str | None = None
    offset = 0
    while True:
        paging = {"offset": offset} if use_offset else ({"cursor": cursor} if cursor else {})
        body = api.json(CDRS, params={**flt, "limit": limit, **paging})
        assert body["metadata"]["total"] == len(expected)
        assert len(body["cdrs"]) <= limit
        seen += [r["id"] for r in body["cdrs"]]
        offset += len(body["cdrs"])
        cursor = body["metadata"]["next_cursor"]
        if cursor is None:
            break
    assert seen == expected
