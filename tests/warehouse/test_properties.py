"""Property tests: `decode_page` / `decode_page_typed` and `normalize` / `normalize_decoded` on
any page the spec allows.

Pages carry drift (unknown page, top-level and `data` fields, unknown CDR types, nested unknown
objects that reuse known key names such as `cost`), nulls where the spec allows them, odd cost
tokens (ints, exponents, many digits, negative zero, values near the Decimal(18,6) limit),
pages of 0, 1 or many records, pretty-printed pages and revisions (duplicate ids).

Properties:
* every record lands in exactly one of `cdrs` or `cdr_quarantine` (the last copy of an id
  wins), never both, never dropped; spec-valid records land in `cdrs`, corrupt ones in
  quarantine;
* every frame's schema is its TableSpec's `polars_schema()`;
* the cost is `Decimal(<the JSON token as written>)`, to the last digit; a cost Decimal(18,6)
  cannot hold exactly (issue 22: money is never rounded) is quarantined with the reason why;
* `raw_cdrs.record` is the record's exact (minified) text;
* the typed path (`decode_page_typed` + `normalize_decoded`) equals the lake path
  (`decode_page` + `normalize`) frame by frame.

Examples are bounded and derandomized so CI never flakes.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import orjson
import polars as pl
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from polars.testing import assert_frame_equal

from models.tables import CDR_QUARANTINE, CDRS, TYPE_TABLES, TableSpec
from models.timestamps import iso_ms
from warehouse.decode import DATA_FIELDS, TOP_FIELDS, decode_page, decode_page_typed
from warehouse.normalize import NormalizedTables, normalize, normalize_decoded

SETTINGS = settings(
    max_examples=40,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
SIX = Decimal("0.000001")
MAX_COST = Decimal("999999999999.999999")  # Decimal(18, 6)


def fits(token: str) -> bool:
    """Whether Decimal(18, 6) holds the cost token exactly (else it is quarantined)."""
    value = Decimal(token)
    return value == value.quantize(SIX) and abs(value) <= MAX_COST


SPECS: dict[str, TableSpec] = {
    CDRS.name: CDRS,
    CDR_QUARANTINE.name: CDR_QUARANTINE,
    **{spec.name: spec for spec in TYPE_TABLES.values()},
}

# ---------------------------------------------------------------------------------------------
# strategies

text = st.text(st.characters(exclude_categories=["Cs"]), max_size=12)
# Strings that stress the key counting in `_extras`: quotes, colons, backslashes, key names.
tricky = st.sampled_from(['"cost":', '\\":', "\\\\", '"cost":"1"', "é/☎", "", "data"])
strings = st.one_of(text, tricky, st.builds(lambda a, b: a + b, text, tricky))
uuids = st.uuids().map(str)


@st.composite
def decimals(draw: st.DrawFn) -> Decimal:
    places = draw(st.integers(0, 30))
    lo = -MAX_COST if draw(st.booleans()) else Decimal(0)
    small = draw(st.booleans())
    hi = Decimal(1000) if small else MAX_COST
    return draw(
        st.decimals(
            min_value=max(lo, -hi),
            max_value=hi,
            places=places,
            allow_nan=False,
            allow_infinity=False,
        )
    )


def json_number(d: Decimal, form: str) -> str:
    """A JSON number token for `d`: plain, with an exponent, or with trailing zeros."""
    sign, digits, exp = d.as_tuple()
    assert isinstance(exp, int)
    neg = "-" if sign else ""
    if form == "exp":
        mant = "".join(map(str, digits)).lstrip("0") or "0"
        e = exp + len(mant) - 1
        frac = mant[1:]
        marker = ("E" if e % 2 else "e") + ("+" if e > 0 and e % 3 == 0 else "")
        return f"{neg}{mant[0]}{'.' + frac if frac else ''}{marker}{e}"
    plain = format(d, "f")
    if form == "zeros":
        plain += ("" if "." in plain else ".") + "000"
    return plain


@st.composite
def cost_tokens(draw: st.DrawFn) -> str | None:
    kind = draw(st.sampled_from(["decimal", "decimal", "decimal", "int", "special", "null"]))
    if kind == "null":
        return None
    if kind == "int":
        return str(draw(st.integers(-999_999_999_999, 999_999_999_999)))
    if kind == "special":
        return draw(
            st.sampled_from(
                [
                    "-0",
                    "-0.0",
                    "0e5",
                    "1.50",
                    "0.1000000000000000055511151231257827",
                    "999999999999.999999",
                    "-999999999999.999999",
                    "999999999999.9999994999",
                    "123456789012.123456",
                    "0.0000025",
                    "0.00000250000000000000001",
                    "-0.0000015",
                    "1E-7",
                    "12.5e-1",
                    "9999999999999999e-4",
                    "0.1e1",
                ]
            )
        )
    return json_number(draw(decimals()), draw(st.sampled_from(["plain", "exp", "zeros"])))


def timestamps() -> st.SearchStrategy[str]:
    moments = st.datetimes(dt.datetime(2020, 1, 1), dt.datetime(2030, 12, 31))

    def fmt(m: dt.datetime, style: int) -> str:
        if style == 0:
            return iso_ms(m.replace(tzinfo=dt.UTC))  # the API's own form
        if style == 1:
            return m.strftime("%Y-%m-%dT%H:%M:%SZ")
        return m.strftime("%Y-%m-%dT%H:%M:%S.%f") + "+02:00"

    return st.builds(fmt, moments, st.integers(0, 2))


json_leaf = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**63), 2**63 - 1), strings, st.floats(-1e9, 1e9)
)
json_values = st.recursive(
    json_leaf,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.dictionaries(
            st.one_of(strings, st.sampled_from(["cost", "id", "data"])), inner, max_size=3
        ),
    ),
    max_leaves=4,
)


def nullable(s: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.one_of(st.none(), s)


ref = nullable(
    st.fixed_dictionaries(
        {"id": st.integers(1, 10**9), "name": strings},
        optional={"name_snapshot": strings, "deleted": st.booleans()},
    )
)
num = st.one_of(st.integers(0, 10**6), st.floats(0, 1e6, allow_nan=False))
DATA: dict[str, st.SearchStrategy[dict[str, Any]]] = {
    "call": st.fixed_dictionaries(
        {},
        optional={
            "queue": ref,
            "campaign": ref,
            "destination_country": nullable(strings),
            "durations": st.fixed_dictionaries(
                {},
                optional=dict.fromkeys(("overall", "dialing", "ivr", "queue", "talk", "hold"), num),
            ),
            "end_reason": nullable(strings),
            "wrapup_code": nullable(st.fixed_dictionaries({"code_snapshot": strings})),
            "summary": nullable(strings),
            "conversation_score": nullable(num),
            "mos": nullable(num),
            "mos_tc": nullable(num),
        },
    ),
    "conversation": st.fixed_dictionaries(
        {},
        optional={
            "channel": strings,
            "flow": nullable(st.fixed_dictionaries({"id": uuids, "name": strings})),
            "queue": ref,
            "durations": st.fixed_dictionaries(
                {}, optional=dict.fromkeys(("overall", "queue", "talk"), nullable(num))
            ),
            "service_level_agreements": st.fixed_dictionaries(
                {},
                optional=dict.fromkeys(
                    ("first_response", "resolution", "avg_reply"),
                    nullable(st.fixed_dictionaries({"value": num, "status": strings})),
                ),
            ),
        },
    ),
    "sms": st.fixed_dictionaries(
        {},
        optional={
            "sent": st.booleans(),
            "segments_count": st.integers(1, 50),
            "message": nullable(strings),
            "canned_message": ref,
            "related_call": nullable(st.fixed_dictionaries({"id": uuids})),
        },
    ),
    "hlr_lookup": st.fixed_dictionaries(
        {},
        optional={
            "reachable": nullable(st.booleans()),
            "roaming": nullable(st.booleans()),
            "related_call": nullable(st.fixed_dictionaries({"id": uuids})),
        },
    ),
}
endpoint = st.one_of(
    st.fixed_dictionaries({"type": st.just("phone_number"), "phone_number": strings}),
    st.fixed_dictionaries(
        {
            "type": st.just("channel_account"),
            "channel_account": st.fixed_dictionaries(
                {"id": uuids, "channel": strings, "identifier": strings},
                optional={
                    "data": st.fixed_dictionaries({"name": strings, "username": nullable(strings)}),
                    "name_snapshot": strings,
                    "deleted": st.booleans(),
                },
            ),
        }
    ),
)
unknown_keys = st.text("abcxyz_", min_size=1, max_size=6).filter(
    lambda k: k not in TOP_FIELDS and k not in {"cost"}
)


@dataclass
class Rec:
    id: str
    obj: dict[str, Any]  # the record, its cost "@COST@" unless corrupt
    token: str | None  # the cost token as written (None: null)
    valid: bool  # every field as the spec has it: must land in `cdrs`
    type: str

    def render(self, option: int = 0) -> str:
        return (
            orjson.dumps(self.obj, option=option)
            .decode()
            .replace('"@COST@"', self.token or "null", 1)
        )

    @property
    def text(self) -> str:  # the record exactly as minified JSON
        return self.render()

    @property
    def cost(self) -> str | None:  # the expected cost's token
        return self.token if self.valid else None


@st.composite
def records(draw: st.DrawFn, ids: list[str]) -> Rec:
    kind = draw(st.sampled_from([*DATA_FIELDS, "fax", "video_call"]))
    if kind in DATA:
        data = draw(DATA[kind])
        for k, v in draw(st.dictionaries(unknown_keys, json_values, max_size=2)).items():
            if k not in DATA_FIELDS[kind]:
                data[k] = v  # drift inside data
    else:
        data = draw(
            st.dictionaries(st.one_of(unknown_keys, st.just("cost")), json_values, max_size=3)
        )
    rec: dict[str, Any] = {
        "id": draw(st.sampled_from(ids)),
        "type": kind,
        "subtype": draw(strings),
        "disposition": draw(nullable(strings)),
        "from": draw(endpoint),
        "to": draw(endpoint),
        "user": draw(
            nullable(
                st.fixed_dictionaries(
                    {"id": uuids, "name": strings},
                    optional={"email": strings, "name_snapshot": strings, "deleted": st.booleans()},
                )
            )
        ),
        "cost": "@COST@",
        "tags": draw(st.lists(strings, max_size=3)),
        "started_at": draw(timestamps()),
        "ended_at": draw(nullable(timestamps())),
        "data": data,
    }
    for k, v in draw(st.dictionaries(unknown_keys, json_values, max_size=2)).items():
        rec[k] = v  # top-level drift
    order = draw(st.permutations(list(rec)))
    rec = {k: rec[k] for k in order}
    token = draw(cost_tokens())
    valid = token is None or fits(token)
    corrupt = draw(st.sampled_from([None] * 8 + ["string cost", "bad started_at"]))
    if corrupt == "string cost" and token is not None:
        rec["cost"] = token  # a JSON string where the spec has a number
        valid = False
    elif corrupt == "bad started_at":
        rec["started_at"] = "yesterday"
        valid = False
    return Rec(rec["id"], rec, token, valid, kind)


@st.composite
def page_sets(draw: st.DrawFn) -> tuple[list[bytes], list[Rec]]:
    ids = [f"{i:08d}-0000-4000-8000-000000000000" for i in range(draw(st.integers(1, 12)))]
    pages: list[bytes] = []
    recs: list[Rec] = []
    for _ in range(draw(st.integers(1, 3))):
        size = draw(st.sampled_from([0, 1, 3, 12]))
        page_recs = [draw(records(ids)) for _ in range(size)]
        recs += page_recs
        body: dict[str, Any] = {
            "cdrs": [f"@R{i}@" for i in range(size)],
            "metadata": {"total": size, "next_cursor": draw(nullable(strings))},
        }
        if draw(st.booleans()):
            body["links"] = draw(json_values)  # page-level drift
        pretty = draw(st.booleans())
        out = orjson.dumps(body, option=orjson.OPT_INDENT_2 if pretty else 0).decode()
        for i, r in enumerate(page_recs):
            rec_text = r.text
            if pretty:  # the record pretty-printed as well, the cost token kept as written
                rec_text = r.render(orjson.OPT_INDENT_2)
            out = out.replace(f'"@R{i}@"', rec_text, 1)
        pages.append(out.encode())
    return pages, recs


def last_copies(recs: list[Rec]) -> dict[str, Rec]:
    out: dict[str, Rec] = {}
    for r in recs:
        out.pop(r.id, None)
        out[r.id] = r
    return out


def both_paths(pages: list[bytes]) -> tuple[NormalizedTables, NormalizedTables]:
    typed = normalize_decoded(
        pl.concat([decode_page_typed(p) for p in pages], how="vertical_relaxed")
    )
    lake = normalize(pl.concat([decode_page(p) for p in pages], how="vertical_relaxed"))
    return typed, lake


# ---------------------------------------------------------------------------------------------
# properties


@SETTINGS
@given(page_sets())
def test_every_record_lands_once_with_exact_types_and_costs(
    case: tuple[list[bytes], list[Rec]],
) -> None:
    pages, recs = case
    typed, lake = both_paths(pages)
    latest = last_copies(recs)
    for tables in (typed, lake):
        for name, frame in tables.tables().items():
            assert frame.schema == SPECS[name].polars_schema(), name
        cdr_ids = tables.cdrs["id"].to_list()
        q_ids = tables.quarantine["id"].to_list()
        assert len(cdr_ids) == len(set(cdr_ids))
        assert len(q_ids) == len(set(q_ids))
        assert not set(cdr_ids) & set(q_ids)
        assert set(cdr_ids) | set(q_ids) == set(latest)
        assert set(cdr_ids) == {i for i, r in latest.items() if r.valid}, tables.quarantine
        # Per-type tables: exactly the cdrs rows of their type.
        per_type = {kind: getattr(tables, spec.name) for kind, spec in TYPE_TABLES.items()}
        for kind, frame in per_type.items():
            assert sorted(frame["id"].to_list()) == sorted(
                i for i, r in latest.items() if r.valid and r.type == kind
            )
        # Costs to the last digit, in cdrs and in every per-type table.
        expected = {
            i: None if r.cost is None else Decimal(r.cost) for i, r in latest.items() if r.valid
        }
        for frame in (tables.cdrs, *per_type.values()):
            got = dict(zip(frame["id"].to_list(), frame["cost"].to_list(), strict=True))
            assert got == {i: expected[i] for i in got}


@SETTINGS
@given(page_sets())
def test_both_paths_agree_and_raw_records_are_exact(case: tuple[list[bytes], list[Rec]]) -> None:
    pages, recs = case
    typed, lake = both_paths(pages)
    for name, frame in typed.tables().items():
        assert_frame_equal(frame, lake.tables()[name], check_exact=True)
    columns = ["id", "type", "started_at_raw", "record"]
    raw = pl.concat([decode_page(p) for p in pages], how="vertical_relaxed")
    assert raw["record"].to_list() == [r.text for r in recs]
    assert raw["id"].to_list() == [r.id for r in recs]
    for page in pages:
        assert_frame_equal(
            decode_page_typed(page).select(columns), decode_page(page).select(columns)
        )


@SETTINGS
@given(st.lists(cost_tokens(), min_size=1, max_size=40))
def test_costs_survive_to_the_last_digit(tokens: list[str | None]) -> None:
    recs = [
        orjson.dumps(
            {"id": f"c{i}", "type": "sms", "cost": "@C@", "started_at": "2026-11-05T10:00:00Z"}
        )
        .decode()
        .replace('"@C@"', t or "null")
        for i, t in enumerate(tokens)
    ]
    page = ('{"cdrs":[' + ",".join(recs) + "]}").encode()
    exact = [t is None or fits(t) for t in tokens]
    for tables in both_paths([page]):
        want = [
            None if t is None else Decimal(t) for t, ok in zip(tokens, exact, strict=True) if ok
        ]
        assert tables.cdrs["cost"].to_list() == want
        assert tables.cdr_sms["cost"].to_list() == want
        # A cost that does not fit exactly is quarantined, never rounded.
        quarantined = [f"c{i}" for i, ok in enumerate(exact) if not ok]
        assert tables.quarantine["id"].to_list() == quarantined
        assert all("cost has more than" in r for r in tables.quarantine["reason"].to_list())
