"""The CDR's shape, declared once: every field of every CDR type and the column it becomes.

One `CdrField` per leaf of the record: its JSON path, its type (with the exact decimal scale for
money), which warehouse table and column it lands in, and what it means. Everything else is
built from `CDR_FIELDS` (and takes a table as a parameter, this one by default):

* the Arrow schema of the native decode (`warehouse.native.record_type`: every leaf typed, money
  as `decimal128(precision, scale)`) and the tolerant decode's struct
  (`warehouse.decode.record_dtype`: every leaf read as text);
* the typed tables' projections, casts and per-field quarantine rules (`warehouse.normalize`);
* the `TableSpec`s of `cdrs` and the per-type tables (`models.tables.cdr_table_specs`), hence the
  data dictionary (`docs/warehouse.md`) and the DuckDB views;
* Dagster's `dagster/column_schema` and `dagster/column_lineage` (`pipelines.catalog`).

A top-level field (`cdr_type=None`) lands in `cdrs` (and, when it has a `per_type` description,
on every per-type table too); a `data` field lands in its type's table. Adding a field is one
entry here. `models.resources.Cdr` (the tolerant API model) is held to the same paths by a test.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Literal

import polars as pl

Kind = Literal["text", "bool", "int", "float", "decimal", "timestamp", "text_list"]

_DTYPES: dict[str, pl.DataType] = {
    "text": pl.String(),
    "bool": pl.Boolean(),
    "int": pl.Int64(),
    "float": pl.Float64(),
    "timestamp": pl.Datetime("ms", "UTC"),
    "text_list": pl.List(pl.String()),
}


@dataclass(frozen=True)
class CdrField:
    """One leaf of a CDR record and the warehouse column it becomes."""

    path: str  # dotted JSON path from the record's root, e.g. `data.durations.talk`
    kind: Kind
    column: str
    description: str
    # None: a top-level field of every CDR (lands in `cdrs`); else the type whose `data` holds it.
    cdr_type: str | None = None
    # Top-level fields repeated on every per-type table (no join to `cdrs`): their meaning there.
    per_type: str | None = None
    precision: int | None = None  # decimal only: Decimal(precision, scale), never rounded
    scale: int | None = None
    required: bool = False  # a record without it (or, a timestamp, unparseable) is quarantined
    non_negative: bool = False  # a negative value quarantines the record
    raw_column: str | None = None  # the `raw_cdrs` column that keeps it as sent
    free_text: bool = False  # long, rarely repeated text: written without dictionary/statistics

    def __post_init__(self) -> None:
        if (self.kind == "decimal") != (self.precision is not None and self.scale is not None):
            raise ValueError(f"{self.path}: precision and scale go with kind decimal, only")

    @property
    def keys(self) -> tuple[str, ...]:
        return tuple(self.path.split("."))

    @property
    def dtype(self) -> pl.DataType:
        """The column's polars type."""
        if self.kind == "decimal":
            return pl.Decimal(self.precision, self.scale or 0)  # both set: __post_init__
        return _DTYPES[self.kind]

    @property
    def lineage(self) -> str:
        """Where in `raw_cdrs` the column comes from: a raw column or a path in `record`."""
        return self.raw_column or f"record.{self.path}"


@dataclass(frozen=True)
class CdrType:
    """A CDR `type` the spec knows, and the table its `data` fields land in."""

    name: str
    table: str
    description: str


@dataclass(frozen=True)
class CdrFieldTable:
    types: tuple[CdrType, ...]
    fields: tuple[CdrField, ...]

    def __post_init__(self) -> None:
        names = {t.name for t in self.types}
        for f in self.fields:
            if f.cdr_type is not None and (f.cdr_type not in names or f.keys[0] != "data"):
                raise ValueError(f"{f.path}: a {f.cdr_type!r} field must be under `data`")
            if f.cdr_type is None and f.keys[0] == "data":
                raise ValueError(f"{f.path}: a `data` field needs its cdr_type")
        paths = [f.path for f in self.fields]
        leaves = set(paths)
        for path in paths:
            prefixes = {".".join(path.split(".")[:i]) for i in range(1, path.count(".") + 1)}
            if prefixes & leaves:
                raise ValueError(f"{path}: under another field's path")
        for table, columns in self.columns_by_table().items():
            if len(columns) != len(set(columns)):
                raise ValueError(f"{table}: two fields land in the same column")

    @property
    def top(self) -> tuple[CdrField, ...]:
        """The top-level fields every CDR has, in column order."""
        return tuple(f for f in self.fields if f.cdr_type is None)

    @property
    def common(self) -> tuple[CdrField, ...]:
        """The top-level fields repeated on every per-type table."""
        return tuple(f for f in self.top if f.per_type is not None)

    def of_type(self, cdr_type: str) -> tuple[CdrField, ...]:
        """The `data` fields of one CDR type, in column order."""
        return tuple(f for f in self.fields if f.cdr_type == cdr_type)

    def columns_by_table(self) -> dict[str, list[str]]:
        out = {"cdrs": [f.column for f in self.top]}
        for t in self.types:
            out[t.table] = [f.column for f in self.common] + [
                f.column for f in self.of_type(t.name)
            ]
        return out

    def with_field(self, field: CdrField) -> CdrFieldTable:
        """A copy with one more field (its column last among its table's fields)."""
        return replace(self, fields=(*self.fields, field))


def _endpoint(side: str) -> list[CdrField]:
    acct = f"{side}.channel_account"
    return [
        CdrField(
            f"{side}.type",
            "text",
            f"{side}_type",
            f"`{side}` endpoint type: phone_number or channel_account.",
        ),
        CdrField(
            f"{side}.phone_number",
            "text",
            f"{side}_phone_number",
            f"`{side}` phone number (E.164 without +).",
        ),
        CdrField(
            f"{acct}.id",
            "text",
            f"{side}_channel_account_id",
            f"`{side}` channel account id (UUID).",
        ),
        CdrField(
            f"{acct}.channel",
            "text",
            f"{side}_channel",
            f"`{side}` channel account channel, e.g. whatsapp.",
        ),
        CdrField(
            f"{acct}.identifier",
            "text",
            f"{side}_identifier",
            f"`{side}` channel account identifier.",
        ),
        CdrField(
            f"{acct}.data.name",
            "text",
            f"{side}_account_name",
            f"`{side}` channel account data.name.",
        ),
        CdrField(
            f"{acct}.data.username",
            "text",
            f"{side}_account_username",
            f"`{side}` channel account data.username.",
        ),
        CdrField(
            f"{acct}.name_snapshot",
            "text",
            f"{side}_name_snapshot",
            f"`{side}` channel account name at the time.",
        ),
        CdrField(
            f"{acct}.deleted", "bool", f"{side}_deleted", f"`{side}` channel account deleted flag."
        ),
    ]


def _ref(cdr_type: str, key: str, what: str, id_kind: Kind = "int") -> list[CdrField]:
    """A referenced object (queue, campaign, flow, canned message): id, names, deleted flag."""
    path = f"data.{key}"
    return [
        CdrField(f"{path}.id", id_kind, f"{key}_id", f"{what} id.", cdr_type),
        CdrField(
            f"{path}.name",
            "text",
            f"{key}_name",
            f"{what} name now (as the API returned it with the CDR).",
            cdr_type,
        ),
        CdrField(
            f"{path}.name_snapshot",
            "text",
            f"{key}_name_snapshot",
            f"{what} name at the time of the interaction.",
            cdr_type,
        ),
        CdrField(
            f"{path}.deleted",
            "bool",
            f"{key}_deleted",
            f"True when the {what.lower()} has been deleted.",
            cdr_type,
        ),
    ]


def _duration(cdr_type: str, key: str, what: str = "") -> CdrField:
    return CdrField(
        f"data.durations.{key}",
        "float",
        f"duration_{key}",
        f"durations.{key}{what}, seconds.",
        cdr_type,
        non_negative=True,
    )


def _sla(name: str) -> list[CdrField]:
    path = f"data.service_level_agreements.{name}"
    return [
        CdrField(
            f"{path}.value",
            "float",
            f"sla_{name}_value",
            f"service_level_agreements.{name}.value.",
            "conversation",
        ),
        CdrField(
            f"{path}.status",
            "text",
            f"sla_{name}_status",
            f"service_level_agreements.{name}.status (met/breached).",
            "conversation",
        ),
    ]


def _related_call(cdr_type: str) -> CdrField:
    return CdrField(
        "data.related_call.id", "text", "related_call_id", "related_call.id (UUID).", cdr_type
    )


def _wrapup(cdr_type: str) -> CdrField:
    return CdrField(
        "data.wrapup_code.code_snapshot",
        "text",
        "wrapup_code_snapshot",
        "Wrap-up code at the time.",
        cdr_type,
    )


_TOP = [
    CdrField(
        "id",
        "text",
        "id",
        "CDR id (UUID).",
        per_type="CDR id (UUID); same as cdrs.id.",
        required=True,
        raw_column="id",
    ),
    CdrField(
        "type",
        "text",
        "type",
        "call, conversation, hlr_lookup, sms (or a type the spec does not know).",
        required=True,
        raw_column="type",
    ),
    CdrField(
        "subtype",
        "text",
        "subtype",
        "e.g. outbound, whatsapp, hlr_lookup, outbound_sms.",
        per_type="CDR subtype.",
    ),
    CdrField(
        "disposition",
        "text",
        "disposition",
        "e.g. answered, archived, available, sent.",
        per_type="CDR disposition.",
    ),
    *_endpoint("from"),
    *_endpoint("to"),
    CdrField("user.id", "text", "user_id", "Agent id (UUID).", per_type="Agent id (UUID)."),
    CdrField("user.name", "text", "user_name", "Agent name as returned with the CDR."),
    CdrField("user.email", "text", "user_email", "Agent email."),
    CdrField(
        "user.name_snapshot",
        "text",
        "user_name_snapshot",
        "Agent name at the time of the interaction.",
        per_type="Agent name at the time of the interaction.",
    ),
    CdrField("user.deleted", "bool", "user_deleted", "True when the agent has been deleted."),
    CdrField(
        "cost",
        "decimal",
        "cost",
        "Cost, exact decimal (18,6).",
        per_type="Cost of the interaction, exact decimal.",
        precision=18,
        scale=6,
    ),
    CdrField("tags", "text_list", "tags", "Event tags, e.g. conference, whisper."),
    CdrField(
        "started_at",
        "timestamp",
        "started_at",
        "Start (UTC, ms).",
        per_type="Start (UTC, ms).",
        required=True,
        raw_column="started_at_raw",
    ),
    CdrField("ended_at", "timestamp", "ended_at", "End (UTC, ms).", per_type="End (UTC, ms)."),
]

_CALL = [
    *_ref("call", "queue", "Queue"),
    *_ref("call", "campaign", "Campaign"),
    CdrField(
        "data.destination_country",
        "text",
        "destination_country",
        "Destination country code.",
        "call",
    ),
    _duration("call", "overall"),
    _duration("call", "dialing"),
    _duration("call", "ivr"),
    _duration("call", "queue", " (queue wait)"),
    _duration("call", "talk"),
    _duration("call", "hold"),
    CdrField("data.end_reason", "text", "end_reason", "Why the call ended.", "call"),
    _wrapup("call"),
    CdrField("data.summary", "text", "summary", "Call summary text.", "call", free_text=True),
    CdrField(
        "data.conversation_score", "float", "conversation_score", "Conversation score.", "call"
    ),
    CdrField("data.mos", "float", "mos", "Mean opinion score.", "call"),
    CdrField("data.mos_tc", "float", "mos_tc", "MOS (tc).", "call"),
]

_CONVERSATION = [
    CdrField("data.channel", "text", "channel", "Conversation channel.", "conversation"),
    *_ref("conversation", "flow", "Flow", "text"),
    *_ref("conversation", "queue", "Queue"),
    _wrapup("conversation"),
    _duration("conversation", "overall"),
    _duration("conversation", "queue"),
    _duration("conversation", "talk"),
    *_sla("first_response"),
    *_sla("resolution"),
    *_sla("avg_reply"),
]

_SMS = [
    CdrField("data.sent", "bool", "sent", "True when the SMS was sent.", "sms"),
    CdrField("data.segments_count", "int", "segments_count", "Number of SMS segments.", "sms"),
    CdrField("data.message", "text", "message", "Message text.", "sms", free_text=True),
    *_ref("sms", "canned_message", "Canned message"),
    _related_call("sms"),
]

_HLR_LOOKUP = [
    CdrField("data.reachable", "bool", "reachable", "Number reachable.", "hlr_lookup"),
    CdrField("data.roaming", "bool", "roaming", "Number roaming.", "hlr_lookup"),
    _related_call("hlr_lookup"),
]

CDR_FIELDS = CdrFieldTable(
    types=(
        CdrType(
            "call",
            "cdr_calls",
            "Call CDRs: every field of the spec's call `data` as a typed column.",
        ),
        CdrType(
            "conversation",
            "cdr_conversations",
            "Conversation CDRs (chat, WhatsApp, ...): typed `data` fields.",
        ),
        CdrType("sms", "cdr_sms", "SMS CDRs: typed `data` fields."),
        CdrType("hlr_lookup", "cdr_hlr_lookups", "HLR lookup CDRs: typed `data` fields."),
    ),
    fields=(*_TOP, *_CALL, *_CONVERSATION, *_SMS, *_HLR_LOOKUP),
)
