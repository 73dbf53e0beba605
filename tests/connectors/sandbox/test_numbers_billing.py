"""Numbers (+ detail, caller-ID groups) and the billing balance."""

from __future__ import annotations

import re
from decimal import Decimal

from tests.connectors.sandbox.conftest import Api

DECIMAL = re.compile(r"^\d+\.\d+$")


def test_numbers_shape(api: Api) -> None:
    body = api.json("/api/v4/numbers")
    assert body["metadata"] == {"total": len(body["numbers"])}
    with_flow = 0
    for n in body["numbers"]:
        base = {"id", "phone_number", "label", "type", "country", "city", "channels", "provider",
                "pricing", "caller_id_groups", "created_at"}  # fmt: skip
        assert set(n) - {"flow"} == base
        assert n["phone_number"].isdigit()
        assert n["type"] == "geographic"
        assert isinstance(n["channels"], int)
        assert set(n["pricing"]) == {
            "activation_fee", "monthly_fee", "partial_month_fee", "price_per_min"
        }  # fmt: skip
        assert all(DECIMAL.match(v) for v in n["pricing"].values())
        assert all(set(g) == {"id", "name"} for g in n["caller_id_groups"])
        if "flow" in n:
            with_flow += 1
            assert set(n["flow"]) == {"id", "name"}
    assert 0 < with_flow < len(body["numbers"])


def test_number_detail_and_limits(api: Api) -> None:
    n = api.json("/api/v4/numbers")["numbers"][1]
    assert api.json(f"/api/v4/numbers/{n['id']}") == {"number": n}
    assert api.get("/api/v4/numbers/999").status_code == 404
    assert api.get("/api/v4/numbers", params={"limit": 101}).status_code == 422
    assert len(api.json("/api/v4/numbers", params={"limit": 2, "offset": 1})["numbers"]) == 2


def test_caller_id_groups(api: Api) -> None:
    body = api.json("/api/v4/numbers/caller-id-groups")
    assert body["caller_id_groups"]
    assert all(set(g) == {"id", "name"} for g in body["caller_id_groups"])
    assert body["metadata"] == {"total": len(body["caller_id_groups"])}
    assert api.get("/api/v4/numbers/caller-id-groups", params={"limit": 101}).status_code == 422


def test_balance_is_an_exact_decimal_string(api: Api) -> None:
    body = api.json("/api/v4/billing/balance")
    assert list(body) == ["balance"]
    assert list(body["balance"]) == ["amount"]
    assert DECIMAL.match(body["balance"]["amount"])
    assert Decimal(body["balance"]["amount"]) > 0


def test_balance_follows_state(fresh_api: Api, fresh: object) -> None:
    from connectors.sandbox import Sandbox

    assert isinstance(fresh, Sandbox)
    before = Decimal(fresh_api.json("/api/v4/billing/balance")["balance"]["amount"])
    fresh.state.charge(Decimal("0.0123"))
    after = Decimal(fresh_api.json("/api/v4/billing/balance")["balance"]["amount"])
    assert before - after == Decimal("0.0123")
