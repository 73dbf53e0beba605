"""Warehouse table specs: the single source for lake schemas, DuckDB empty views and the docs.

Every lake table is one `TableSpec`; those of `cdrs` and the per-type CDR tables are built from
the CDR field table (`models.cdr_fields`, `cdr_table_specs`). Normalization casts to
`spec.polars_schema()`, the lake writes `spec.arrow_schema()`, the DuckDB builder makes an empty
typed view from the spec when a table has no files yet, and `warehouse.dictionary` renders the
specs into `docs/warehouse.md`.

The partition column (`date` or `snapshot_date`) is part of the spec but is **not** stored in the
Parquet files: it lives in the hive path (`date=2026-11-20/`) and readers add it back.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Literal

import polars as pl

from models.cdr_fields import CDR_FIELDS, CdrField, CdrFieldTable

PartitionKey = Literal["date", "snapshot_date"]

# Money and unit prices: exact decimals, never floats.
MONEY = pl.Decimal(18, 6)
TS = pl.Datetime("ms", "UTC")
S = pl.String()
I64 = pl.Int64()


@dataclass(frozen=True)
class Column:
    name: str
    dtype: pl.DataType
    description: str
    # CDR tables: the `raw_cdrs` field the column comes from (a raw column or `record.<path>`).
    lineage: str | None = None
    # Text of any length, rarely repeated (a whole record, a summary): the lake writes it
    # without a dictionary and without min/max statistics, which are useless for it and would
    # each copy a 40 MB value once more while its row group is written.
    free_text: bool = False
    # Added when a day lands (the privacy stage, `warehouse.privacy`), not by normalization: a
    # frame written without it (a lake older than the column, a test's own frame) gets nulls.
    landed: bool = False


@dataclass(frozen=True)
class TableSpec:
    name: str
    description: str
    grain: str
    primary_key: tuple[str, ...]
    partition_key: PartitionKey | None
    columns: tuple[Column, ...]
    kind: Literal["fact", "snapshot"] = "fact"
    # Snapshot tables: the natural key used for history (valid_from/valid_to).
    history_key: tuple[str, ...] = field(default=())

    @property
    def column_names(self) -> list[str]:
        return [c.name for c in self.columns]

    def polars_schema(self, *, with_partition: bool = True) -> pl.Schema:
        return pl.Schema(
            [
                (c.name, c.dtype)
                for c in self.columns
                if with_partition or c.name != self.partition_key
            ]
        )

    def file_schema(self) -> pl.Schema:
        """Schema of the Parquet files (no partition column: it is in the path)."""
        return self.polars_schema(with_partition=False)

    def arrow_schema(self, *, with_partition: bool = False) -> Any:
        """pyarrow schema of the Parquet files (pyarrow is untyped, hence Any)."""
        empty = pl.DataFrame(schema=self.polars_schema(with_partition=with_partition))
        return empty.to_arrow().schema

    def empty(self) -> pl.DataFrame:
        return pl.DataFrame(schema=self.polars_schema())

    @property
    def free_text_columns(self) -> frozenset[str]:
        return frozenset(c.name for c in self.columns if c.free_text)

    @property
    def unique_columns(self) -> frozenset[str]:
        """The key, when it is one column besides the partition's: unique in each file (a
        bridge's columns each repeat)."""
        key = [c for c in self.primary_key if c != self.partition_key]
        return frozenset(key) if len(key) == 1 else frozenset()


def _c(name: str, dtype: pl.DataType, description: str, *, free_text: bool = False) -> Column:
    return Column(name, dtype, description, free_text=free_text)


DATE = _c("date", pl.Date(), "UTC day of started_at; the hive partition (date=YYYY-MM-DD).")
_UNKNOWN_FIELDS = "JSON object of fields the spec does not know (null when none)."
# A snapshot's: its record went through the API's read models (models.resources.ApiModel).
EXTRA = _c(
    "extra",
    S,
    "JSON object of fields the spec does not know and, under `_unreadable`, of known fields "
    "whose value had another type than the spec's, as received (their column is null); of an "
    "object held as columns (a user's `security_access_group` and `webrtc_ringtone`, a "
    "number's `pricing` and `flow`), the fields no column holds, under its name; a list made "
    "into bridge rows (a user's `teams`, `queues`, `skills`..., a number's "
    "`caller_id_groups`), whole as received, when an item has a field no column holds; null "
    "when none.",
    free_text=True,
)

PII_FORGOTTEN = Column(
    "pii_forgotten",
    pl.Boolean(),
    "True when a person's number or identity was erased from this row (`cdrhouse privacy "
    "forget`, or the forget-list at ingest): its token columns are null.",
    lineage="record",
    landed=True,
)
_CDR_GRAIN = "one row per CDR id (latest revision)"

RAW_CDRS = TableSpec(
    name="raw_cdrs",
    description="Every CDR exactly as the API returned it, one JSON string per record.",
    grain="one row per CDR record fetched (a partition is re-fetched whole, so unique by id)",
    primary_key=("id",),
    partition_key="date",
    columns=(
        _c("id", S, "CDR id as sent (null if missing)."),
        _c("type", S, "CDR type as sent."),
        _c("started_at_raw", S, "started_at exactly as sent."),
        _c(
            "record",
            S,
            "The full record as minified JSON; unknown fields included. A record that is not "
            "UTF-8 is `base64:` followed by its exact bytes in base64. Under "
            "CDRHOUSE_PHONE_NUMBERS=token, the customer's values are replaced: `from` and `to` "
            "`phone_number` by tokens (with `phone_country` and `phone_calling_code` beside "
            "them), channel-account `identifier`, `data.name`, `data.username` and "
            "`name_snapshot` by tokens, `data.message` by null (unless CDRHOUSE_SMS_BODIES="
            "keep), and number strings in fields the spec does not name by tokens.",
            free_text=True,
        ),
        DATE,
    ),
)


def cdr_table_specs(fields: CdrFieldTable = CDR_FIELDS) -> dict[str, TableSpec]:
    """`cdrs` and one table per CDR type, by name, from the field table (`models.cdr_fields`):
    the fields' columns in their order, then `data` (cdrs), `extra` and the partition."""

    def columns(of: tuple[CdrField, ...], *, per_type: bool = False) -> list[Column]:
        return [
            Column(
                f.column,
                f.dtype,
                (f.per_type or "") if per_type else f.description,
                f.lineage,
                f.free_text,
            )
            for f in of
        ]

    extra = replace(EXTRA, description=_UNKNOWN_FIELDS, lineage="record")
    date = Column(DATE.name, DATE.dtype, DATE.description, "date")
    data = Column("data", S, "Raw `data` JSON, kept only for CDR types the spec does not know.")
    specs = {
        "cdrs": TableSpec(
            name="cdrs",
            description="The CDR fact table: common fields of every CDR, from/to and user "
            "flattened.",
            grain=_CDR_GRAIN,
            primary_key=("id",),
            partition_key="date",
            columns=(*columns(fields.top), replace(data, lineage="record.data"), extra, date),
        )
    }
    for t in fields.types:
        specs[t.table] = TableSpec(
            name=t.table,
            description=t.description,
            grain=_CDR_GRAIN,
            primary_key=("id",),
            partition_key="date",
            columns=(
                *columns(fields.common, per_type=True),
                *columns(fields.of_type(t.name)),
                extra,
                date,
            ),
        )
    return specs


def _side_country(side: str) -> list[Column]:
    source = f"record.{side}.phone_number"
    return [
        Column(
            f"{side}_phone_country",
            S,
            f"`{side}` number's country (ISO 3166 code, by phonenumbers); kept beside its token.",
            source,
            landed=True,
        ),
        Column(
            f"{side}_phone_calling_code",
            I64,
            f"`{side}` number's country calling code (49 for +49); kept beside its token.",
            source,
            landed=True,
        ),
    ]


PARTY_COLUMNS: tuple[Column, ...] = (*_side_country("from"), *_side_country("to"))


def landed(spec: TableSpec) -> TableSpec:
    """A CDR table as the lake holds it under CDRHOUSE_PHONE_NUMBERS=token: its columns, then
    those the privacy stage adds when a day lands (the numbers' countries on `cdrs`, the
    erasure flag on every CDR table), before the partition. Under `raw` nothing is added, so
    a partition keeps the schema it had before privacy existed; readers take the added
    columns from the files that have them (`warehouse.viewsql`)."""
    if spec.kind != "fact" or any(c.landed for c in spec.columns):
        return spec
    added = (*PARTY_COLUMNS, PII_FORGOTTEN) if spec.name == "cdrs" else (PII_FORGOTTEN,)
    cols = [c for c in spec.columns if c.name != spec.partition_key]
    part = [c for c in spec.columns if c.name == spec.partition_key]
    return replace(spec, columns=(*cols, *added, *part))


_CDR_SPECS = cdr_table_specs()
CDRS = _CDR_SPECS["cdrs"]
CDR_CALLS = _CDR_SPECS["cdr_calls"]
CDR_CONVERSATIONS = _CDR_SPECS["cdr_conversations"]
CDR_SMS = _CDR_SPECS["cdr_sms"]
CDR_HLR_LOOKUPS = _CDR_SPECS["cdr_hlr_lookups"]

CDR_QUARANTINE = TableSpec(
    name="cdr_quarantine",
    description="CDRs that cannot land as they are (e.g. a string cost, a cost Decimal(18,6) "
    "would round, a number out of range, a negative duration, bytes that are not UTF-8); "
    "kept whole, with the reason.",
    grain="one row per quarantined CDR id",
    primary_key=("id",),
    partition_key="date",
    columns=(
        Column("id", S, "CDR id as sent.", "id"),
        Column("type", S, "CDR type as sent.", "type"),
        Column("started_at_raw", S, "started_at as sent.", "started_at_raw"),
        Column("reason", S, "Why the record was quarantined (; separated).", "record"),
        Column(
            "record",
            S,
            "The full record as `raw_cdrs.record` keeps it (exact bytes).",
            "record",
            free_text=True,
        ),
        replace(DATE, lineage="date"),
    ),
)

_SNAP = [
    _c("snapshot_at", TS, "When the snapshot was taken (UTC, ms)."),
    _c("snapshot_date", pl.Date(), "UTC day of the snapshot; the hive partition."),
]


def _snapshot(
    name: str,
    description: str,
    grain: str,
    key: tuple[str, ...],
    columns: list[Column],
) -> TableSpec:
    return TableSpec(
        name=name,
        description=description,
        grain=f"{grain} per snapshot_date",
        primary_key=("snapshot_date", *key),
        partition_key="snapshot_date",
        columns=(*columns, *_SNAP),
        kind="snapshot",
        history_key=key,
    )


def _idname(what: str) -> list[Column]:
    return [_c("id", pl.Int64(), f"{what} id."), _c("name", S, f"{what} name."), EXTRA]


def _bridge(name: str, left: str, right: str, desc: str, more: list[Column] = []) -> TableSpec:  # noqa: B006
    lname, rname = left.split("_")[0], right.split("_")[0]
    return _snapshot(
        name,
        desc,
        f"one row per ({left}, {right})",
        (left, right),
        [
            _c(left, S if left == "user_id" else pl.Int64(), f"{lname.title()} id."),
            _c(right, S if right == "user_id" else pl.Int64(), f"{rname.title()} id."),
            _c(f"{rname}_name", S, f"{rname.title()} name at snapshot time."),
            *more,
        ],
    )


USERS = _snapshot(
    "users",
    "Users (agents), active and deleted together.",
    "one row per user id",
    ("id",),
    [
        _c("id", S, "User id (UUID)."),
        _c("name", S, "Name."),
        _c("email", S, "Email."),
        _c("sip_account", S, "SIP account username@domain."),
        _c("extension", S, "Extension."),
        _c("caller_id", S, "Caller id phone number."),
        _c("employee_id", S, "Employee id."),
        _c("timezone", S, "IANA time zone."),
        _c("security_access_group_id", pl.Int64(), "Security access group id."),
        _c("security_access_group_name", S, "Security access group name."),
        _c("webrtc_ringtone_type", S, "WebRTC ringtone type."),
        _c("webrtc_ringtone_name", S, "WebRTC ringtone name."),
        _c("channels", pl.List(S), "Channel names (voice, chat, whatsapp)."),
        _c("channel_group_capacity", S, "JSON object: channel group -> capacity."),
        _c("channel_profiles", S, "JSON array of channel profiles."),
        _c("speech_language", S, "Speech language code."),
        _c("status", S, "Status, e.g. available."),
        _c("created_at", TS, "Created (UTC)."),
        _c("updated_at", TS, "Updated (UTC)."),
        _c("deleted_at", TS, "Deleted (UTC); null for active users."),
        _c("deleted", pl.Boolean(), "True when listed by /users/deleted."),
        EXTRA,
    ],
)

USER_TEAMS = _bridge("user_teams", "user_id", "team_id", "User to team membership (from users).")
USER_SUPERVISED_TEAMS = _bridge(
    "user_supervised_teams", "user_id", "team_id", "Teams a user supervises (from users)."
)
USER_QUEUES = _bridge(
    "user_queues", "user_id", "queue_id", "User to queue membership (from users)."
)
USER_SUPERVISED_QUEUES = _bridge(
    "user_supervised_queues", "user_id", "queue_id", "Queues a user supervises (from users)."
)
USER_SKILLS = _bridge(
    "user_skills",
    "user_id",
    "skill_id",
    "User skills with level (from users).",
    [_c("value", pl.Int64(), "Skill level.")],
)
QUEUES = _snapshot("queues", "Routing queues.", "one row per queue id", ("id",), _idname("Queue"))
SKILLS = _snapshot("skills", "Routing skills.", "one row per skill id", ("id",), _idname("Skill"))
TEAMS = _snapshot("teams", "Teams.", "one row per team id", ("id",), _idname("Team"))
# A member's record is a whole user (the `users` table has its known fields): its fields the
# spec does not know (a membership's priority, say) stay on the member's row.
_MEMBER_EXTRA = replace(
    EXTRA,
    description="JSON object of the member's record's fields the spec does not know (a "
    "membership attribute such as a priority, or the user's own unknown fields) and, under "
    "`_unreadable`, of known fields of another type, as received; null when none. Its known "
    "fields are the `users` table's.",
)
QUEUE_MEMBERS = _bridge(
    "queue_members",
    "queue_id",
    "user_id",
    "Queue members (from /routing/queues/{id}/users).",
    [_MEMBER_EXTRA],
)
QUEUE_SUPERVISORS = _bridge(
    "queue_supervisors",
    "queue_id",
    "user_id",
    "Queue supervisors (/queues/{id}/supervisors).",
    [_MEMBER_EXTRA],
)
TEAM_MEMBERS = _bridge(
    "team_members", "team_id", "user_id", "Team members (from /teams/{id}/users).", [_MEMBER_EXTRA]
)
TEAM_SUPERVISORS = _bridge(
    "team_supervisors",
    "team_id",
    "user_id",
    "Team supervisors (team supervisors list).",
    [_MEMBER_EXTRA],
)
CAMPAIGNS = _snapshot(
    "campaigns",
    "Outbound dialer campaigns; configuration beyond the typed columns is in `extra`.",
    "one row per campaign id",
    ("id",),
    [
        _c("id", pl.Int64(), "Campaign id."),
        _c("name", S, "Name."),
        _c("status", S, "Status, e.g. running, paused, stopped, completed."),
        _c("strategy", S, "simple or predictive_ai."),
        _c("dial_level", pl.Float64(), "Dial level."),
        _c("max_dial_attempts", pl.Int64(), "Max dial attempts."),
        _c("amd_enabled", pl.Boolean(), "Answering machine detection on."),
        _c("follow_up_mode", S, "timer or lowest_attempts."),
        EXTRA,
    ],
)
NUMBERS = _snapshot(
    "numbers",
    "Purchased phone numbers with exact pricing.",
    "one row per number id",
    ("id",),
    [
        _c("id", pl.Int64(), "Number id."),
        _c("phone_number", S, "Phone number (E.164 without +)."),
        _c("label", S, "Label."),
        _c("type", S, "e.g. geographic."),
        _c("country", S, "Country."),
        _c("city", S, "City."),
        _c("channels", pl.Int64(), "Channels purchased."),
        _c("provider", S, "Provider name."),
        *(
            _c(fee, MONEY, f"pricing.{fee}, exact; null if it does not fit (`extra`: `pricing`).")
            for fee in ("activation_fee", "monthly_fee", "partial_month_fee", "price_per_min")
        ),
        _c("caller_id_group_ids", pl.List(pl.Int64()), "Ids of the caller ID groups."),
        _c("flow_id", S, "Flow id when assigned to a flow."),
        _c("flow_name", S, "Flow name."),
        _c("created_at", TS, "Created (UTC)."),
        EXTRA,
    ],
)
CALLER_ID_GROUPS = _snapshot(
    "caller_id_groups",
    "Caller ID groups.",
    "one row per group id",
    ("id",),
    _idname("Caller ID group"),
)
BALANCE_SNAPSHOTS = _snapshot(
    "balance_snapshots",
    "Account balance as read at each snapshot.",
    "one row",
    (),
    [
        _c(
            "amount",
            pl.Decimal(24, 6),
            "Balance, exact decimal; null if it does not fit (see `amount_raw`).",
        ),
        _c("amount_raw", S, "Balance string exactly as the API sent it."),
        EXTRA,
    ],
)

CDR_TABLES: tuple[TableSpec, ...] = (
    RAW_CDRS,
    CDRS,
    CDR_CALLS,
    CDR_CONVERSATIONS,
    CDR_SMS,
    CDR_HLR_LOOKUPS,
    CDR_QUARANTINE,
)
SNAPSHOT_TABLES: tuple[TableSpec, ...] = (
    USERS,
    USER_TEAMS,
    USER_SUPERVISED_TEAMS,
    USER_QUEUES,
    USER_SUPERVISED_QUEUES,
    USER_SKILLS,
    QUEUES,
    QUEUE_MEMBERS,
    QUEUE_SUPERVISORS,
    SKILLS,
    TEAMS,
    TEAM_MEMBERS,
    TEAM_SUPERVISORS,
    CAMPAIGNS,
    NUMBERS,
    CALLER_ID_GROUPS,
    BALANCE_SNAPSHOTS,
)
ALL_TABLES: tuple[TableSpec, ...] = CDR_TABLES + SNAPSHOT_TABLES
TABLES: dict[str, TableSpec] = {t.name: t for t in ALL_TABLES}
# Per-type tables keyed by the CDR `type` value they hold.
TYPE_TABLES: dict[str, TableSpec] = {t.name: _CDR_SPECS[t.table] for t in CDR_FIELDS.types}
