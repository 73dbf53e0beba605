"""A field added to a copy of the CDR field table reaches every place built from it, with no
other edit: the decode struct, the typed tables, the data dictionary and the Dagster catalog."""

from __future__ import annotations

import json

import dagster as dg
import polars as pl
import pytest

from models.cdr_fields import CDR_FIELDS, CdrField, CdrFieldTable
from pipelines.catalog import column_lineage, column_schema
from warehouse.decode import decode_page, decode_page_typed
from warehouse.dictionary import render
from warehouse.normalize import NormalizedTables, normalize, normalize_decoded

RING = CdrField(
    "data.durations.ring", "int", "duration_ring", "durations.ring, seconds ringing.", "call"
)
CHANNEL_GROUP = CdrField(
    "routing.channel_group",
    "text",
    "channel_group",
    "routing.channel_group: the channel group that routed it.",
    per_type="Channel group that routed the CDR.",
)
WIDER = CDR_FIELDS.with_field(RING).with_field(CHANNEL_GROUP)


def _page() -> bytes:
    call = {
        "id": "c1",
        "type": "call",
        "subtype": "inbound",
        "routing": {"channel_group": "voice-eu"},
        "cost": 0.25,
        "started_at": "2026-11-02T10:00:00.000Z",
        "ended_at": "2026-11-02T10:05:00.000Z",
        "data": {"durations": {"overall": 300, "talk": 280, "ring": 12}},
    }
    sms = {
        "id": "s1",
        "type": "sms",
        "cost": 0.01,
        "started_at": "2026-11-02T11:00:00.000Z",
        "data": {"sent": True, "segments_count": 1},
    }
    records = ",".join(json.dumps(r, separators=(",", ":")) for r in (call, sms))
    return f'{{"cdrs":[{records}],"metadata":{{"total":2}}}}'.encode()


def _normalized(fields: CdrFieldTable, path: str) -> NormalizedTables:
    """The page through the fetch path (decode once, project) or the lake path (its raw rows
    normalized again)."""
    page = _page()
    if path == "fetch":
        return normalize_decoded(decode_page_typed(page, fields), fields)
    return normalize(decode_page(page), fields)


@pytest.mark.parametrize("path", ["fetch", "lake"])
def test_an_added_field_arrives_in_its_warehouse_column(path: str) -> None:
    wider, today = _normalized(WIDER, path), _normalized(CDR_FIELDS, path)
    assert wider.quarantine.height == 0
    calls = wider.cdr_calls.row(0, named=True)
    assert wider.cdr_calls.schema["duration_ring"] == pl.Int64()
    assert (calls["duration_ring"], calls["duration_talk"]) == (12, 280.0)
    # A top-level field lands in `cdrs` and, repeated, on every per-type table.
    cdrs = {r["id"]: r for r in wider.cdrs.iter_rows(named=True)}
    assert cdrs["c1"]["channel_group"] == "voice-eu"
    assert cdrs["c1"]["extra"] is None  # known now: no longer an unknown field
    assert cdrs["s1"]["channel_group"] is None
    assert calls["channel_group"] == "voice-eu"
    assert wider.cdr_sms["channel_group"].to_list() == [None]
    # The same page with today's table: no such column, the unknown field kept in `extra`.
    assert "duration_ring" not in today.cdr_calls.columns
    assert "channel_group" not in today.cdrs.columns
    extra = today.cdrs.filter(pl.col("id") == "c1")["extra"].item()
    assert json.loads(extra) == {"routing": {"channel_group": "voice-eu"}}
    # Every other column is what today's table gives (`extra` aside, checked above).
    for name, frame in today.tables().items():
        same = [c for c in frame.columns if c != "extra"]
        assert wider.tables()[name].select(same).equals(frame.select(same)), name


def test_an_added_field_is_in_the_dictionary() -> None:
    wider, today = render(WIDER), render()
    assert "| `duration_ring` | BIGINT | durations.ring, seconds ringing. |" in wider
    assert "| `duration_ring` |" not in today
    cdrs = wider.split("### `cdrs`")[1].split("### ")[0]
    assert "| `channel_group` | VARCHAR | routing.channel_group: the channel group" in cdrs
    sms = wider.split("### `cdr_sms`")[1].split("### ")[0]
    assert "| `channel_group` | VARCHAR | Channel group that routed the CDR. |" in sms


def test_an_added_field_is_in_the_catalog() -> None:
    schema = {c.name: c for c in column_schema("cdr_calls", WIDER).columns}
    assert (schema["duration_ring"].type, schema["duration_ring"].description) == (
        "BIGINT",
        "durations.ring, seconds ringing.",
    )
    assert "duration_ring" not in {c.name for c in column_schema("cdr_calls").columns}
    raw = dg.AssetKey("raw_cdrs")
    calls = column_lineage("cdr_calls", WIDER).deps_by_column
    assert calls["duration_ring"] == [
        dg.TableColumnDep(asset_key=raw, column_name="record.data.durations.ring")
    ]
    cdrs = column_lineage("cdrs", WIDER).deps_by_column
    assert cdrs["channel_group"] == [
        dg.TableColumnDep(asset_key=raw, column_name="record.routing.channel_group")
    ]
    assert "channel_group" in {c.name for c in column_schema("cdr_hlr_lookups", WIDER).columns}
