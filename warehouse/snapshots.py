"""Typed snapshot frames from JSON-ready dicts (the API's shapes, e.g. `model_dump(mode="json")`).

Dimensions are small (hundreds of rows), so building them row by row in Python is fine. Every
frame carries `snapshot_at` (when it was read) and `snapshot_date` (its hive partition); fields
the spec does not know go to an `extra` JSON column.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping
from typing import Any

import orjson
import polars as pl

from models.tables import (
    BALANCE_SNAPSHOTS,
    CALLER_ID_GROUPS,
    CAMPAIGNS,
    NUMBERS,
    QUEUE_MEMBERS,
    QUEUE_SUPERVISORS,
    QUEUES,
    SKILLS,
    TEAM_MEMBERS,
    TEAM_SUPERVISORS,
    TEAMS,
    USER_QUEUES,
    USER_SKILLS,
    USER_SUPERVISED_QUEUES,
    USER_SUPERVISED_TEAMS,
    USER_TEAMS,
    USERS,
    TableSpec,
)
from warehouse.decode import parse_ts
from warehouse.money import exact_text

Row = dict[str, Any]
ByGroup = Mapping[int, list[Row]]  # a queue's or team's members (or supervisors) by its id

_USER_KNOWN = {
    "id",
    "name",
    "email",
    "sip_account",
    "extension",
    "caller_id",
    "employee_id",
    "timezone",
    "security_access_group",
    "teams",
    "supervised_teams",
    "queues",
    "supervised_queues",
    "webrtc_ringtone",
    "channels",
    "channel_group_capacity",
    "channel_profiles",
    "speech_language",
    "skills",
    "status",
    "created_at",
    "updated_at",
    "deleted_at",
}


def _utc_ms(at: dt.datetime) -> dt.datetime:
    if at.tzinfo is None:
        raise ValueError("snapshot_at must be timezone-aware (UTC)")
    at = at.astimezone(dt.UTC)
    return at.replace(microsecond=at.microsecond // 1000 * 1000)


# The fields of a list's items that columns hold (bridge rows, id lists): a key's value is the
# shape of its own object, or None.
Shape = Mapping[str, "Shape | None"]
_REF: Shape = {"id": None, "name": None}  # a team, queue, skill or group: its table has the name


def _held(item: Any, shape: Shape) -> bool:
    """Whether a column holds every field of `item`, an object of `shape`."""
    if not isinstance(item, Mapping):
        return False
    for key, value in item.items():
        if key not in shape:
            return False
        inner = shape[key]
        if inner is not None and value is not None and not _held(value, inner):
            return False
    return True


def _items(value: Any) -> list[Mapping[str, Any]]:
    """A list field's objects (what else it holds, or a value that is no list, makes no row:
    `_extra` keeps the list as sent)."""
    return [i for i in value if isinstance(i, Mapping)] if isinstance(value, list) else []


def _extra(
    record: Mapping[str, Any],
    known: Iterable[str],
    flattened: Mapping[str, tuple[str, ...]] | None = None,
    listed: Mapping[str, Shape] | None = None,
) -> str | None:
    """The record's fields outside `known`, as JSON; of each object `flattened` into columns
    (`security_access_group` -> `_id`, `_name`), the fields no column holds (unknown ones, or
    `_unreadable`: models.resources.ApiModel) under its own name; and each list of objects
    `listed` (made into bridge rows), whole as sent, when one of its items has a field no
    column holds, or it is not a list of such objects."""
    known = set(known)  # (once, not per field: a members list holds thousands of records)
    rest = {k: v for k, v in record.items() if k not in known}
    for key, columns in (flattened or {}).items():
        obj = record.get(key)
        if key in rest or not isinstance(obj, Mapping):
            continue  # (kept whole already, or no object)
        if left := {k: v for k, v in obj.items() if k not in columns}:
            rest[key] = left
    for key, shape in (listed or {}).items():
        value = record.get(key)
        if key in rest or value is None:
            continue
        if not isinstance(value, list) or not all(_held(i, shape) for i in value):
            rest[key] = value
    return orjson.dumps(rest).decode() if rest else None


def _json(value: Any) -> str | None:
    return None if value is None else orjson.dumps(value).decode()


def _get(obj: Any, key: str) -> Any:
    return obj.get(key) if isinstance(obj, Mapping) else None


def _frame(spec: TableSpec, rows: list[Row], snapshot_at: dt.datetime) -> pl.DataFrame:
    """Rows (timestamps as ISO strings) -> a frame of exactly the spec's schema."""
    at = _utc_ms(snapshot_at)
    schema = spec.polars_schema()
    ts_cols = [n for n, t in schema.items() if t == pl.Datetime("ms", "UTC") and n != "snapshot_at"]
    money = [n for n, t in schema.items() if isinstance(t, pl.Decimal)]
    build = {
        n: (pl.String() if n in ts_cols or n in money else t)
        for n, t in schema.items()
        if n not in ("snapshot_at", "snapshot_date")
    }
    df = pl.DataFrame(rows, schema=build, orient="row" if not rows else None, strict=False)
    return df.with_columns(
        *[
            parse_ts(pl.col(c)).alias(c)  # every form the spec shows, like the CDRs'
            for c in ts_cols
        ],
        *[pl.col(c).cast(schema[c], strict=False) for c in money],
        pl.lit(at).cast(pl.Datetime("ms", "UTC")).alias("snapshot_at"),
        pl.lit(at.date()).alias("snapshot_date"),
    ).select(spec.column_names)


def _id_name_rows(records: list[Row]) -> list[Row]:
    return [
        {"id": r.get("id"), "name": r.get("name"), "extra": _extra(r, ("id", "name"))}
        for r in records
    ]


# The user's objects held as columns: their other fields go to `extra`; and its lists made
# into bridge rows.
_USER_FLATTENED = {"security_access_group": ("id", "name"), "webrtc_ringtone": ("type", "name")}
_USER_LISTED: dict[str, Shape] = {
    **dict.fromkeys(("teams", "supervised_teams", "queues", "supervised_queues"), _REF),
    "skills": {"skill": _REF, "value": None},
}


def users_frames(
    active: list[Row], deleted: list[Row], snapshot_at: dt.datetime
) -> dict[str, pl.DataFrame]:
    """`users` (active and deleted together) and the bridge tables built from the user records."""
    users: list[Row] = []
    bridges: dict[str, list[Row]] = {
        t.name: [] for t in (USER_TEAMS, USER_SUPERVISED_TEAMS, USER_QUEUES, USER_SUPERVISED_QUEUES)
    }
    skills: list[Row] = []
    # A user listed as deleted wins over an active copy (deleted list is read second).
    by_id: dict[Any, tuple[Row, bool]] = {u.get("id"): (u, False) for u in active}
    by_id.update({u.get("id"): (u, True) for u in deleted})
    for uid, (u, is_deleted) in by_id.items():
        sag, ring = u.get("security_access_group"), u.get("webrtc_ringtone")
        users.append(
            {
                **{k: u.get(k) for k in USERS.column_names if k in _USER_KNOWN},
                "security_access_group_id": _get(sag, "id"),
                "security_access_group_name": _get(sag, "name"),
                "webrtc_ringtone_type": _get(ring, "type"),
                "webrtc_ringtone_name": _get(ring, "name"),
                "channel_group_capacity": _json(u.get("channel_group_capacity")),
                "channel_profiles": _json(u.get("channel_profiles")),
                "deleted": is_deleted,
                "extra": _extra(u, _USER_KNOWN, _USER_FLATTENED, _USER_LISTED),
            }
        )
        for field, table, col in (
            ("teams", USER_TEAMS, "team"),
            ("supervised_teams", USER_SUPERVISED_TEAMS, "team"),
            ("queues", USER_QUEUES, "queue"),
            ("supervised_queues", USER_SUPERVISED_QUEUES, "queue"),
        ):
            for ref in _items(u.get(field)):
                bridges[table.name].append(
                    {"user_id": uid, f"{col}_id": _get(ref, "id"), f"{col}_name": _get(ref, "name")}
                )
        for s in _items(u.get("skills")):
            skill = _get(s, "skill")
            skills.append(
                {
                    "user_id": uid,
                    "skill_id": _get(skill, "id"),
                    "skill_name": _get(skill, "name"),
                    "value": _get(s, "value"),
                }
            )
    out = {USERS.name: _frame(USERS, users, snapshot_at)}
    for table in (USER_TEAMS, USER_SUPERVISED_TEAMS, USER_QUEUES, USER_SUPERVISED_QUEUES):
        out[table.name] = _frame(table, bridges[table.name], snapshot_at)
    out[USER_SKILLS.name] = _frame(USER_SKILLS, skills, snapshot_at)
    return out


def _members(spec: TableSpec, group_col: str, members: ByGroup, at: dt.datetime) -> pl.DataFrame:
    rows = [
        {
            group_col: gid,
            "user_id": u.get("id"),
            "user_name": u.get("name"),
            "extra": _extra(u, _USER_KNOWN),
        }
        for gid, users in members.items()
        for u in users
    ]
    return _frame(spec, rows, at)


def _group_frames(
    specs: tuple[TableSpec, TableSpec, TableSpec],
    group_col: str,
    groups: list[Row],
    members: ByGroup,
    supervisors: ByGroup,
    at: dt.datetime,
) -> dict[str, pl.DataFrame]:
    """A group dimension (queues, teams) with its members and supervisors, by group id."""
    group, member, supervisor = specs
    return {
        group.name: _frame(group, _id_name_rows(groups), at),
        member.name: _members(member, group_col, members, at),
        supervisor.name: _members(supervisor, group_col, supervisors, at),
    }


def queues_frames(
    queues: list[Row], members: ByGroup, supervisors: ByGroup, snapshot_at: dt.datetime
) -> dict[str, pl.DataFrame]:
    specs = (QUEUES, QUEUE_MEMBERS, QUEUE_SUPERVISORS)
    return _group_frames(specs, "queue_id", queues, members, supervisors, snapshot_at)


def teams_frames(
    teams: list[Row], members: ByGroup, supervisors: ByGroup, snapshot_at: dt.datetime
) -> dict[str, pl.DataFrame]:
    specs = (TEAMS, TEAM_MEMBERS, TEAM_SUPERVISORS)
    return _group_frames(specs, "team_id", teams, members, supervisors, snapshot_at)


def skills_frame(skills: list[Row], snapshot_at: dt.datetime) -> pl.DataFrame:
    return _frame(SKILLS, _id_name_rows(skills), snapshot_at)


def caller_id_groups_frame(groups: list[Row], snapshot_at: dt.datetime) -> pl.DataFrame:
    return _frame(CALLER_ID_GROUPS, _id_name_rows(groups), snapshot_at)


_CAMPAIGN_TYPED = (
    "id",
    "name",
    "status",
    "strategy",
    "dial_level",
    "max_dial_attempts",
    "amd_enabled",
    "follow_up_mode",
)


def campaigns_frame(campaigns: list[Row], snapshot_at: dt.datetime) -> pl.DataFrame:
    rows = [
        {**{k: c.get(k) for k in _CAMPAIGN_TYPED}, "extra": _extra(c, _CAMPAIGN_TYPED)}
        for c in campaigns
    ]
    return _frame(CAMPAIGNS, rows, snapshot_at)


_NUMBER_KNOWN = (
    "id",
    "phone_number",
    "label",
    "type",
    "country",
    "city",
    "channels",
    "provider",
    "pricing",
    "caller_id_groups",
    "flow",
    "created_at",
)
_PRICES = ("activation_fee", "monthly_fee", "partial_month_fee", "price_per_min")
_NUMBER_FLATTENED = {"pricing": _PRICES, "flow": ("id", "name")}


def numbers_frame(numbers: list[Row], snapshot_at: dt.datetime) -> pl.DataFrame:
    """A price that does not fit its column exactly (more decimals than its scale, out of its
    range, not a number) is null there, and the API's `pricing` object stays whole in `extra`:
    nothing is rounded, nothing lost."""
    schema = NUMBERS.polars_schema()
    rows: list[Row] = []
    for n in numbers:
        pricing, flow = n.get("pricing"), n.get("flow")
        row = {k: n.get(k) for k in _NUMBER_KNOWN if k in NUMBERS.column_names}
        # Prices stay strings until the Decimal cast in _frame: exact, never via float.
        prices = {p: _get(pricing, p) for p in _PRICES}
        exact = {p: exact_text(v, schema[p]) for p, v in prices.items()}
        row.update(exact)
        row["caller_id_group_ids"] = [_get(g, "id") for g in _items(n.get("caller_id_groups"))]
        row["flow_id"], row["flow_name"] = _get(flow, "id"), _get(flow, "name")
        lost = any(exact[p] is None and prices[p] is not None for p in _PRICES)
        known = [k for k in _NUMBER_KNOWN if not (lost and k == "pricing")]
        row["extra"] = _extra(n, known, _NUMBER_FLATTENED, {"caller_id_groups": _REF})
        rows.append(row)
    return _frame(NUMBERS, rows, snapshot_at)


def balance_frame(
    amount: str, snapshot_at: dt.datetime, balance: Mapping[str, Any] | None = None
) -> pl.DataFrame:
    """`amount` is null where the API's text does not fit its column exactly; `amount_raw`
    keeps the text as sent, always; the `balance` object's other fields (a currency the spec
    does not show) go to `extra`."""
    dtype = BALANCE_SNAPSHOTS.polars_schema()["amount"]
    row = {
        "amount": exact_text(amount, dtype),
        "amount_raw": str(amount),
        "extra": _extra(balance or {}, ("amount",)),
    }
    return _frame(BALANCE_SNAPSHOTS, [row], snapshot_at)
