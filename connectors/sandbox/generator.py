"""The deterministic dataset: dimensions built at start, CDRs generated per day on first use.

Everything here is pure: the same `(seed, start_date, days, cdrs_per_day)` gives byte-identical
records. A day's CDRs are kept as pre-encoded compact JSON (one `bytes` per record, sorted by
`(started_at, id)`) plus columnar arrays for filtering, so serving a page is a slice and a join.
"""

from __future__ import annotations

import gc
import random
import threading
from array import array
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from typing import Any

import orjson

from connectors.sandbox import names

DAY_MS = 86_400_000
HOUR_MS = 3_600_000
# No generated CDR lasts longer than this; lets `ended_at` filters narrow the day range.
MAX_DURATION_MS = 6 * HOUR_MS
_EPOCH_ORDINAL = date(1970, 1, 1).toordinal()
# Relative traffic per hour of the day (UTC): quiet nights, a late-morning and afternoon peak.
HOURLY_WEIGHTS = (1, 1, 1, 1, 1, 2, 4, 8, 14, 18, 20, 19, 16, 17, 19, 18, 15, 11, 8, 6, 4, 3, 2, 1)
CDR_TYPES = ("call", "conversation", "hlr_lookup", "sms")
_MIX = 0x9E3779B1
_UNMIX = pow(_MIX, -1, 2**32)
_EXT = {"image": "jpg", "audio": "ogg"}

Json = dict[str, Any]


# ---------------------------------------------------------------- encoding helpers


_DAY_PREFIX: dict[int, str] = {}


def iso_ms(ms: int) -> str:
    """Epoch milliseconds to `YYYY-MM-DDTHH:MM:SS.mmmZ` (cheap: the date part is cached)."""
    day, rem = divmod(ms, DAY_MS)
    prefix = _DAY_PREFIX.get(day)
    if prefix is None:
        prefix = _DAY_PREFIX[day] = date.fromordinal(_EPOCH_ORDINAL + day).isoformat() + "T"
    hours, rem = divmod(rem, HOUR_MS)
    minutes, rem = divmod(rem, 60_000)
    seconds, millis = divmod(rem, 1000)
    return f"{prefix}{hours:02d}:{minutes:02d}:{seconds:02d}.{millis:03d}Z"


def day_start_ms(d: date) -> int:
    return (d.toordinal() - _EPOCH_ORDINAL) * DAY_MS


def ms_of(dt: datetime) -> int:
    """Aware datetime to epoch milliseconds (truncating sub-millisecond digits)."""
    delta = dt.astimezone(UTC) - datetime(1970, 1, 1, tzinfo=UTC)
    return (delta.days * 86_400 + delta.seconds) * 1000 + delta.microseconds // 1000


def date_of_ms(ms: int) -> date:
    return date.fromordinal(_EPOCH_ORDINAL + ms // DAY_MS)


def cost_json(cost_e4: int) -> bytes:
    """Ten-thousandths to a JSON number with at most 4 decimals and no float noise."""
    whole, frac = divmod(cost_e4, 10_000)
    text = f"{whole}.{frac:04d}".rstrip("0").rstrip(".")
    return text.encode()


def cost_str(cost_e4: int) -> str:
    """The same amount as a decimal string (ground truth, `Decimal`-ready)."""
    return cost_json(cost_e4).decode()


def _uuid(rng: random.Random) -> str:
    h = f"{rng.getrandbits(128):032x}"
    return f"{h[:8]}-{h[8:12]}-4{h[13:16]}-{'89ab'[int(h[16], 16) & 3]}{h[17:20]}-{h[20:]}"


def _ts(d: datetime) -> str:
    return iso_ms(ms_of(d))


def encode_page(records: Sequence[bytes], total: int, next_cursor: str | None) -> bytes:
    """`{"cdrs":[...],"metadata":{"total":..,"next_cursor":..}}` by joining encoded records."""
    meta = orjson.dumps({"total": total, "next_cursor": next_cursor})
    return b'{"cdrs":[' + b",".join(records) + b'],"metadata":' + meta + b"}"


# ---------------------------------------------------------------- per-day CDR store


@dataclass
class DayCdrs:
    """One day of CDRs sorted by (started_at, id): encoded records plus filter columns."""

    day: date
    records: list[bytes] = field(default_factory=list)
    ids: list[str] = field(default_factory=list)
    started_ms: array[int] = field(default_factory=lambda: array("q"))
    ended_ms: array[int] = field(default_factory=lambda: array("q"))
    costs: array[int] = field(default_factory=lambda: array("q"))  # ten-thousandths
    types: list[str] = field(default_factory=list)
    subtypes: list[str] = field(default_factory=list)
    dispositions: list[str] = field(default_factory=list)
    user_ids: list[str | None] = field(default_factory=list)
    team_ids: list[tuple[int, ...]] = field(default_factory=list)
    queue_ids: list[int | None] = field(default_factory=list)
    campaign_ids: list[int | None] = field(default_factory=list)
    from_phones: list[str | None] = field(default_factory=list)
    to_phones: list[str | None] = field(default_factory=list)
    tags: list[tuple[str, ...]] = field(default_factory=list)
    account_ids: list[str | None] = field(default_factory=list)
    _index: dict[str, int] | None = None

    def __len__(self) -> int:
        return len(self.records)

    def position(self, cdr_id: str) -> int | None:
        if self._index is None:
            self._index = {cid: i for i, cid in enumerate(self.ids)}
        return self._index.get(cdr_id)

    def append(
        self,
        rec: Json,
        start: int,
        end: int,
        cost: int,
        teams: tuple[int, ...],
        account_id: str | None,
    ) -> None:
        """Encode and index one record; `rec["cost"]` must already be the encoded cost."""
        data = rec["data"]
        self.records.append(orjson.dumps(rec))
        self.ids.append(rec["id"])
        self.started_ms.append(start)
        self.ended_ms.append(end)
        self.costs.append(cost)
        self.types.append(rec["type"])
        self.subtypes.append(rec["subtype"])
        self.dispositions.append(rec["disposition"])
        user = rec["user"]
        self.user_ids.append(user["id"] if user else None)
        self.team_ids.append(teams)
        queue = data.get("queue") if isinstance(data, dict) else None
        self.queue_ids.append(queue["id"] if queue else None)
        campaign = data.get("campaign") if isinstance(data, dict) else None
        self.campaign_ids.append(campaign["id"] if campaign else None)
        self.from_phones.append(rec["from"].get("phone_number"))
        self.to_phones.append(rec["to"].get("phone_number"))
        self.tags.append(tuple(rec["tags"]))
        self.account_ids.append(account_id)

    def sorted(self) -> DayCdrs:
        """Self if already in (started_at, id) order, else a sorted copy."""
        st, ids = self.started_ms, self.ids
        if all(
            st[i] < st[i + 1] or (st[i] == st[i + 1] and ids[i] < ids[i + 1])
            for i in range(len(ids) - 1)
        ):
            return self
        order = sorted(range(len(self.ids)), key=lambda i: (self.started_ms[i], self.ids[i]))
        out = DayCdrs(self.day)
        for name in _COLUMNS:
            column = getattr(self, name)
            picked = [column[i] for i in order]
            setattr(out, name, array("q", picked) if isinstance(column, array) else picked)
        return out

    def merged(self, other: DayCdrs) -> DayCdrs:
        """Self plus `other` (dynamic CDRs), re-sorted."""
        out = DayCdrs(self.day)
        for name in _COLUMNS:
            setattr(out, name, getattr(self, name) + getattr(other, name))
        return out.sorted()


_COLUMNS = (
    "records",
    "ids",
    "started_ms",
    "ended_ms",
    "costs",
    "types",
    "subtypes",
    "dispositions",
    "user_ids",
    "team_ids",
    "queue_ids",
    "campaign_ids",
    "from_phones",
    "to_phones",
    "tags",
    "account_ids",
)

Generated = tuple[Json, int, int, int, tuple[int, ...], str | None]


def _ri(rng: random.Random, low: int, high: int) -> int:
    """randint without randint's overhead (the generator draws millions of these)."""
    return low + int(rng.random() * (high - low + 1))


# ---------------------------------------------------------------- the dataset


class Dataset:
    """Dimensions (JSON-ready lists of dicts in the spec's shapes) and per-day CDRs."""

    def __init__(
        self,
        seed: int = 7,
        start_date: date | None = None,
        days: int = 30,
        cdrs_per_day: int = 20000,
        *,
        max_cached_records: int = 1_500_000,
    ) -> None:
        self.seed = seed
        self.start_date = start_date or (datetime.now(UTC).date() - timedelta(days=30))
        self.days = days
        self.cdrs_per_day = cdrs_per_day
        self.max_cached_records = max_cached_records
        self._cache: OrderedDict[date, DayCdrs] = OrderedDict()
        self._lock = threading.Lock()
        self._day_locks: dict[date, threading.Lock] = {}
        self._build_dimensions(random.Random(f"{seed}:dimensions"))

    @property
    def end_date(self) -> date:
        return self.start_date + timedelta(days=self.days)

    def in_range(self, d: date) -> bool:
        return self.start_date <= d < self.end_date

    # ------------------------------------------------------------ dimensions

    def _build_dimensions(self, rng: random.Random) -> None:
        epoch = datetime.combine(self.start_date, datetime.min.time(), UTC)
        self.created_base = epoch - timedelta(days=400)
        self.cluster = f"cc{self.seed % 100:02d}"
        self.security_groups: list[Json] = [
            {"id": 1, "name": "Agents"},
            {"id": 2, "name": "Supervisors"},
            {"id": 3, "name": "Administrators"},
        ]
        self.skills: list[Json] = [{"id": i + 1, "name": n} for i, n in enumerate(names.SKILLS)]
        self.teams: list[Json] = [{"id": i + 1, "name": n} for i, n in enumerate(names.TEAMS)]
        self.queues: list[Json] = [{"id": i + 1, "name": n} for i, n in enumerate(names.QUEUES)]
        # Deleted queues exist only as CDR references (deleted: true, a name_snapshot).
        self.deleted_queues: list[Json] = [
            {"id": 11, "name": "Legacy Hotline", "name_snapshot": "Hotline (old)"},
            {"id": 12, "name": "Black Friday 2025", "name_snapshot": "Black Friday"},
        ]
        self.channel_profiles: list[Json] = [
            {"id": 1, "channel": "whatsapp", "identifier": "4930555000111", "name": "WA Sales"},
            {"id": 2, "channel": "whatsapp", "identifier": "4930555000222", "name": "WA Care"},
            {"id": 3, "channel": "chat", "identifier": "web-widget-main", "name": "Web chat"},
            {"id": 4, "channel": "sms", "identifier": "CDRHOUSE", "name": "SMS sender"},
        ]
        self.sender_ids = ["CDRHOUSE", "Support", "ACMEINFO"]
        self.voice_messages: list[Json] = [
            {"id": 1, "type": "tts", "name": "Voicemail greeting"},
            {"id": 2, "type": "audio", "name": "Hold music"},
            {"id": 3, "type": "tts", "name": "Rating intro"},
            {"id": 4, "type": "tts", "name": "Rating instructions"},
            {"id": 5, "type": "tts", "name": "Thank you"},
            {"id": 6, "type": "audio", "name": "Campaign intro"},
        ]
        self.wrapup_code_groups: list[Json] = [
            {"id": 1, "name": "Sales outcomes"},
            {"id": 2, "name": "Service outcomes"},
        ]
        self.wrapup_codes: list[Json] = [
            {"id": i + 1, "code": code, "name": label, "group": self.wrapup_code_groups[i % 2]}
            for i, (code, label) in enumerate(names.WRAPUP)
        ]
        self.canned_messages: list[Json] = [
            {
                "id": 1,
                "name": "Appointment reminder",
                "body": "Hi {{first_name}}, see you on {{date}}.",
                "params": ["first_name", "date"],
            },
            {"id": 2, "name": "Callback", "body": "We will call you back shortly.", "params": []},
            {
                "id": 3,
                "name": "Verification",
                "body": "Your code is {{code}}.",
                "params": ["code"],
            },
        ]
        self.whatsapp_templates: list[Json] = [
            {
                "id": i + 1,
                "name": n,
                "language": lang,
                "category": cat,
                "status": "approved",
                "body": body,
            }
            for i, (n, lang, cat, body) in enumerate(
                [
                    ("order_update", "en", "utility", "Your order {{1}} is on its way."),
                    ("welcome", "en", "marketing", "Welcome to ACME, {{1}}!"),
                    ("termin", "de", "utility", "Ihr Termin am {{1}} ist bestaetigt."),
                ]
            )
        ]
        self.caller_id_groups: list[Json] = [
            {"id": 1, "name": "Germany"},
            {"id": 2, "name": "United Kingdom"},
            {"id": 3, "name": "Outbound campaigns"},
        ]
        self.flows: list[Json] = [
            {"id": _uuid(rng), "name": n} for n in ("Main IVR", "WhatsApp bot", "After hours")
        ]
        self._build_numbers(rng)
        self._build_users(rng)
        self._build_campaigns(rng)
        self._build_channel_accounts(rng)
        self._build_messaging(rng)
        self.balance = f"{_ri(rng, 2_000, 9_000)}.{_ri(rng, 0, 9999):04d}"

    def _build_numbers(self, rng: random.Random) -> None:
        self.numbers: list[Json] = []
        for i in range(12):
            country, cc, city, area = names.CITIES[i % len(names.CITIES)]
            local = f"{_ri(rng, 10**6, 10**7 - 1)}"
            number: Json = {
                "id": i + 1,
                "phone_number": f"{cc}{area}{local}",
                "label": f"{city} line {i + 1}",
                "type": "geographic",
                "country": country,
                "city": city,
                "channels": rng.choice((2, 5, 10, 30)),
                "provider": rng.choice(("Telekom Wholesale", "Twilight Carrier", "EuroVoice")),
                "pricing": {
                    "activation_fee": f"{_ri(rng, 0, 5)}.00",
                    "monthly_fee": f"{_ri(rng, 1, 12)}.{_ri(rng, 0, 99):02d}",
                    "partial_month_fee": f"{_ri(rng, 0, 6)}.{_ri(rng, 0, 9999):04d}",
                    "price_per_min": f"0.{_ri(rng, 50, 400):05d}",
                },
                "caller_id_groups": [self.caller_id_groups[i % 3]],
                "created_at": _ts(self.created_base + timedelta(days=i * 9, seconds=i * 37)),
            }
            if i % 3 == 0:  # some numbers route into a flow
                flow = self.flows[i % len(self.flows)]
                number["flow"] = {"id": flow["id"], "name": flow["name"]}
            self.numbers.append(number)
        self.cc_phones = [n["phone_number"] for n in self.numbers]

    def _build_users(self, rng: random.Random) -> None:
        self.users: list[Json] = []
        self.deleted_users: list[Json] = []
        self.queue_members: dict[int, list[str]] = {q["id"]: [] for q in self.queues}
        self.queue_supervisors: dict[int, list[str]] = {q["id"]: [] for q in self.queues}
        self.team_members: dict[int, list[str]] = {t["id"]: [] for t in self.teams}
        self.team_supervisors: dict[int, list[str]] = {t["id"]: [] for t in self.teams}
        self.skill_users: dict[int, list[str]] = {s["id"]: [] for s in self.skills}
        seen: set[str] = set()
        for i in range(60):
            first, last = rng.choice(names.FIRST), rng.choice(names.LAST)
            while f"{first} {last}" in seen:
                first, last = rng.choice(names.FIRST), rng.choice(names.LAST)
            seen.add(f"{first} {last}")
            user = self._user(rng, i, first, last)
            deleted = i >= 50
            if deleted:
                gone = self.created_base + timedelta(days=300 + i, hours=i % 7)
                user["deleted_at"] = _ts(gone)
                user["updated_at"] = user["deleted_at"]
                user["status"] = "offline"
                self.deleted_users.append(user)
            else:
                self.users.append(user)
                for ref in user["teams"]:
                    self.team_members[ref["id"]].append(user["id"])
                for ref in user["supervised_teams"]:
                    self.team_supervisors[ref["id"]].append(user["id"])
                for ref in user["queues"]:
                    self.queue_members[ref["id"]].append(user["id"])
                for ref in user["supervised_queues"]:
                    self.queue_supervisors[ref["id"]].append(user["id"])
                for s in user["skills"]:
                    self.skill_users[s["skill"]["id"]].append(user["id"])
        self.users_by_id = {u["id"]: u for u in self.users}
        self.deleted_by_id = {u["id"]: u for u in self.deleted_users}
        # CDR user references: every 7th active user was renamed since (snapshot differs).
        self.user_refs: list[tuple[Json, tuple[int, ...]]] = []
        for j, u in enumerate(self.users + self.deleted_users):
            deleted = u["deleted_at"] is not None
            snapshot = u["name"] if not deleted and j % 7 else u["name"].split()[0] + " (old)"
            ref = {
                "id": u["id"],
                "name": u["name"],
                "email": u["email"],
                "name_snapshot": snapshot,
                "deleted": deleted,
            }
            self.user_refs.append((ref, tuple(t["id"] for t in u["teams"])))
        self.active_refs = self.user_refs[: len(self.users)]

    def _user(self, rng: random.Random, i: int, first: str, last: str) -> Json:
        username = f"{first}.{last}".lower()
        teams = rng.sample(self.teams, rng.choice((1, 1, 2)))
        queues = rng.sample(self.queues, _ri(rng, 1, 3))
        supervisor = i % 10 == 0
        created = self.created_base + timedelta(days=i * 3, minutes=i * 17, milliseconds=i * 7)
        updated = created + timedelta(days=_ri(rng, 1, 200), milliseconds=_ri(rng, 0, 999))
        channels = ["voice", *rng.sample(["chat", "whatsapp"], _ri(rng, 0, 2))]
        return {
            "id": _uuid(rng),
            "name": f"{first} {last}",
            "email": f"{username}@acme-support.example",
            "sip_account": f"{username}@{self.cluster}.sip.example.net",
            "extension": f"{1000 + i}",
            "caller_id": rng.choice(self.cc_phones),
            "employee_id": f"E{10000 + i * 13}",
            "timezone": rng.choice(names.TIMEZONES),
            "security_access_group": self.security_groups[2 if i == 0 else int(supervisor)],
            "teams": teams,
            "supervised_teams": teams[:1] if supervisor else [],
            "queues": queues,
            "supervised_queues": queues[:1] if supervisor else [],
            "webrtc_ringtone": rng.choice(
                ({"type": "default", "name": "Classic"}, {"type": "custom", "name": "Chime"})
            ),
            "channels": channels,
            "channel_group_capacity": {"chat": _ri(rng, 1, 5), "instant": _ri(rng, 1, 3)},
            "channel_profiles": rng.sample(self.channel_profiles, _ri(rng, 0, 2)),
            "speech_language": rng.choice(("en-US", "en-GB", "de-DE", "es-ES")),
            "skills": [
                {"skill": s, "value": _ri(rng, 1, 10)}
                for s in rng.sample(self.skills, _ri(rng, 1, 3))
            ],
            "status": "available",
            "created_at": _ts(created),
            "updated_at": _ts(updated),
            "deleted_at": None,
        }

    def _build_campaigns(self, rng: random.Random) -> None:
        statuses = ("running", "running", "paused", "stopped", "completed", "draft", "running")
        self.campaigns: list[Json] = []
        for i, name in enumerate(names.CAMPAIGNS):
            created = self.created_base + timedelta(days=200 + i * 11, milliseconds=i * 3)
            vm = self.voice_messages[0]
            self.campaigns.append(
                {
                    "id": i + 1,
                    "name": name,
                    "status": statuses[i % len(statuses)],
                    "strategy": "predictive_ai" if i % 4 == 1 else "simple",
                    "dial_level": rng.choice((1.0, 1.5, 2.0, 3.0)),
                    "dial_level_override": {
                        "enabled": True,
                        "value": 1.5,
                        "active_agents_threshold": 3,
                    },
                    "max_dial_time": rng.choice((30, 45, 60)),
                    "max_wait_time": rng.choice((5, 10, 30)),
                    "max_dial_attempts": _ri(rng, 1, 5),
                    "voice_message_id": 6 if i % 2 else None,
                    "amd_enabled": i % 3 != 2,
                    "amd_voicemail_message": (
                        {"enabled": True, "voice_message": {"type": vm["type"], "name": vm["name"]}}
                        if i % 2 == 0
                        else None
                    ),
                    "live": {"enabled": i % 2 == 0, "dialing_order": "fifo"}
                    if i % 2 == 0
                    else None,
                    "caller_id_sets": [{"phone_numbers": [self.cc_phones[i % 4]]}],
                    "use_local_caller_id": False,
                    "asr_optimization_enabled": True,
                    "post_call_rating": {
                        "enabled": False,
                        "notification_voice_message_id": None,
                        "instructions_voice_message_id": None,
                        "complete_voice_message_id": None,
                    },
                    "contact_local_time": {
                        "start_time": "09:00",
                        "end_time": "18:00",
                        "days_of_week": [1, 2, 3, 4, 5],
                    },
                    "follow_up_rules": {
                        "no_answer": [
                            {
                                "wait_time": 2,
                                "wait_time_unit": "hours",
                                "switch_caller_id_set": False,
                            }
                        ],
                        "busy": [
                            {
                                "wait_time": 15,
                                "wait_time_unit": "minutes",
                                "switch_caller_id_set": False,
                            }
                        ],
                    },
                    "follow_up_mode": "timer" if i % 2 else "lowest_attempts",
                    "created_at": _ts(created),
                    "updated_at": _ts(created + timedelta(days=3)),
                }
            )
        # Campaign membership (GET /campaigns/{id}/users and /teams).
        self.campaign_teams = {
            c["id"]: [self.teams[c["id"] % len(self.teams)]] for c in self.campaigns
        }
        self.campaign_users = {
            c["id"]: self.team_members[self.campaign_teams[c["id"]][0]["id"]]
            for c in self.campaigns
        }
        self.campaign_refs = [
            {"id": c["id"], "name": c["name"], "name_snapshot": c["name"], "deleted": False}
            for c in self.campaigns
        ]

    def _build_channel_accounts(self, rng: random.Random) -> None:
        self.channel_accounts: list[Json] = []
        for i in range(40):
            first, last = rng.choice(names.FIRST), rng.choice(names.LAST)
            phone = f"49151{_ri(rng, 10**7, 10**8 - 1)}"
            deleted = i % 13 == 0
            self.channel_accounts.append(
                {
                    "id": _uuid(rng),
                    "channel": "whatsapp",
                    "identifier": phone,
                    "data": {"name": f"{first} {last}", "username": f"{first.lower()}{i}"},
                    "name_snapshot": f"{first} {last[0]}." if deleted else f"{first} {last}",
                    "deleted": deleted,
                }
            )
        self.business_accounts = [
            {
                "id": _uuid(rng),
                "channel": p["channel"],
                "identifier": p["identifier"],
                "data": {"name": p["name"], "username": p["name"].lower().replace(" ", "_")},
                "name_snapshot": p["name"],
                "deleted": False,
            }
            for p in self.channel_profiles[:2]
        ]

    def _build_messaging(self, rng: random.Random) -> None:
        self.conversations: dict[str, list[Json]] = {}
        base = datetime.combine(self.start_date, datetime.min.time(), UTC)
        for c in range(12):
            conv_id = _uuid(rng)
            msgs: list[Json] = []
            at = base + timedelta(days=c % max(1, self.days), hours=9, seconds=c * 61)
            count = 150 if c == 0 else _ri(rng, 0, 25)
            agent = self.users[c % len(self.users)]
            for k in range(count):
                at += timedelta(seconds=_ri(rng, 5, 300), milliseconds=_ri(rng, 0, 999))
                direction = ("inbound", "outbound", "outbound", "whisper")[k % 4]
                kind = "text" if k % 5 else rng.choice(("image", "audio", "document", "text"))
                content: Json = (
                    {"text": rng.choice(names.SMS_TEXTS)}
                    if kind == "text"
                    else {
                        "url": f"https://files.example.net/{conv_id}/{k}.bin",
                        "filename": f"file-{k}.{_EXT.get(kind, 'pdf')}",
                        "size": _ri(rng, 1_000, 900_000),
                        "caption": "",
                    }
                )
                user_obj = (
                    None
                    if direction == "inbound"
                    else {"id": agent["id"], "name": agent["name"], "email": agent["email"]}
                )
                target = self.users[(c + 1) % len(self.users)]
                msgs.append(
                    {
                        "id": _uuid(rng),
                        "conversation": {"id": conv_id},
                        "direction": direction,
                        "user": user_obj,
                        "target_user": (
                            {"id": target["id"], "name": target["name"], "email": target["email"]}
                            if direction == "whisper"
                            else None
                        ),
                        "content_type": kind,
                        "content_data": content,
                        "status": "delivered" if direction == "inbound" else "sent",
                        "status_reason": None,
                        "created_at": _ts(at),
                        "updated_at": _ts(at + timedelta(seconds=1)),
                    }
                )
            self.conversations[conv_id] = msgs
        self.webhook_failures: list[Json] = []
        for i in range(7):
            at = base + timedelta(days=i, hours=3 + i, milliseconds=i * 111)
            self.webhook_failures.append(
                {
                    "id": _uuid(rng),
                    "webhook": {"id": i % 3 + 1, "url": f"https://hooks.acme.example/cc/{i % 3}"},
                    "event": ("call.ended", "sms.sent", "conversation.closed")[i % 3],
                    "status_code": (500, 502, 404, 410)[i % 4],
                    "error": "non-2xx response from endpoint",
                    "attempts": 1 + i % 5,
                    "failed_at": _ts(at),
                    "retriggered_at": None,
                }
            )

    # ------------------------------------------------------------ CDRs

    def day(self, d: date) -> DayCdrs:
        """The CDRs that started on `d` (empty outside the date range), cached LRU."""
        with self._lock:
            hit = self._cache.get(d)
            if hit is not None:
                self._cache.move_to_end(d)
                return hit
            day_lock = self._day_locks.setdefault(d, threading.Lock())
        with day_lock:  # one generation per day even under concurrent requests
            with self._lock:
                hit = self._cache.get(d)
            if hit is not None:
                return hit
            built = self._generate(d) if self.in_range(d) else DayCdrs(d)
            with self._lock:
                self._cache[d] = built
                self._evict()
            return built

    def _evict(self) -> None:
        total = sum(len(v) for v in self._cache.values())
        while len(self._cache) > 2 and total > self.max_cached_records:
            _, old = self._cache.popitem(last=False)
            total -= len(old)

    def _generate(self, d: date) -> DayCdrs:
        rng = random.Random(f"{self.seed}:cdrs:{d.isoformat()}")
        n = self.cdrs_per_day
        base = day_start_ms(d)
        hours = rng.choices(range(24), weights=HOURLY_WEIGHTS, k=n)
        starts = [base + h * HOUR_MS + int(rng.random() * HOUR_MS) for h in hours]
        # Boundary records for the day-edge tests: first and last millisecond of the day.
        if n >= 2:
            starts[0], starts[1] = base, base + DAY_MS - 1
        starts.sort()  # then only equal-millisecond ties can need reordering (by id)
        out = DayCdrs(d)
        # Hundreds of thousands of new objects: cyclic GC passes would dominate the run time.
        was_enabled = gc.isenabled()
        gc.disable()
        try:
            tag = self._day_tag(d)
            for s in starts:
                rec, start, end, cost, teams, account = self._cdr(rng, s)
                rec["id"] = tag + rec["id"][8:]  # the id names its day: O(1) detail lookups
                out.append(rec, start, end, cost, teams, account)
            return out.sorted()
        finally:
            if was_enabled:
                gc.enable()

    def _day_tag(self, d: date) -> str:
        # Invertible mix of (day, seed) -> 8 hex digits; `day_of_id` undoes it.
        return f"{((d.toordinal() ^ self.seed) * _MIX) & 0xFFFFFFFF:08x}"

    def day_of_id(self, cdr_id: str) -> date | None:
        """The day a generated CDR id belongs to (None when it cannot be one of ours)."""
        try:
            mixed = int(cdr_id[:8], 16)
        except ValueError:
            return None
        ordinal = ((mixed * _UNMIX) & 0xFFFFFFFF) ^ self.seed
        if not self.start_date.toordinal() <= ordinal < self.end_date.toordinal():
            return None
        return date.fromordinal(ordinal)

    def _phone(self, rng: random.Random) -> tuple[str, str]:
        country, cc, _city, area = names.CITIES[int(rng.random() * len(names.CITIES))]
        digits = 10 - len(area) if cc != "1" else 7
        return f"{cc}{area}{_ri(rng, 10 ** (digits - 1), 10**digits - 1)}", country

    def _cdr(self, rng: random.Random, start: int) -> Generated:
        r = rng.random()
        kind = "call" if r < 0.55 else "conversation" if r < 0.75 else "sms" if r < 0.9 else "hlr"
        if kind == "call":
            return self._call(rng, start)
        if kind == "conversation":
            return self._conversation(rng, start)
        if kind == "sms":
            return self._sms(rng, start)
        return self._hlr(rng, start)

    def _pick_user(self, rng: random.Random) -> tuple[Json, tuple[int, ...]]:
        # ~8% of references point at deleted users.
        refs = self.user_refs if rng.random() < 0.08 else self.active_refs
        return refs[int(rng.random() * len(refs))]

    def _queue_ref(self, rng: random.Random) -> Json:
        if rng.random() < 0.05:
            q = self.deleted_queues[int(rng.random() * len(self.deleted_queues))]
            return {
                "id": q["id"],
                "name": q["name"],
                "name_snapshot": q["name_snapshot"],
                "deleted": True,
            }
        q = self.queues[int(rng.random() * len(self.queues))]
        return {"id": q["id"], "name": q["name"], "name_snapshot": q["name"], "deleted": False}

    def _tags(self, rng: random.Random) -> list[str]:
        r = rng.random()
        if r < 0.10:
            return ["conference"]
        if r < 0.15:
            return ["whisper"]
        if r < 0.18:
            return ["conference", "whisper"]
        if r < 0.25:
            return ["transfer"]
        return []

    def _wrapup(self, rng: random.Random) -> Json | None:
        if rng.random() < 0.35:
            return None
        return {"code_snapshot": names.WRAPUP[int(rng.random() * len(names.WRAPUP))][0]}

    def _account(self, rng: random.Random) -> str | None:
        return f"ACC-{_ri(rng, 1, 500):05d}" if rng.random() < 0.3 else None

    def _call(self, rng: random.Random, start: int) -> Generated:
        outbound = rng.random() < 0.6
        customer, country = self._phone(rng)
        cc_phone = self.cc_phones[int(rng.random() * len(self.cc_phones))]
        r = rng.random()
        disposition = (
            "answered"
            if r < 0.72
            else "no_answer"
            if r < 0.87
            else "busy"
            if r < 0.93
            else "failed"
        )
        answered = disposition == "answered"
        user, teams = self._pick_user(rng)
        has_user = answered or (outbound and rng.random() < 0.7)
        dialing = _ri(rng, 2, 25) if outbound else 0
        ivr = 0 if outbound else _ri(rng, 0, 40)
        queue_s = _ri(rng, 0, 180) if not outbound else 0
        talk = _ri(rng, 10, 1500) if answered else 0
        hold = _ri(rng, 0, 120) if answered and rng.random() < 0.3 else 0
        overall = dialing + ivr + queue_s + talk + hold + 1
        campaign = (
            self.campaign_refs[int(rng.random() * len(self.campaign_refs))]
            if outbound and rng.random() < 0.4
            else None
        )
        cc_end = {"type": "phone_number", "phone_number": cc_phone}
        cust_end = {"type": "phone_number", "phone_number": customer}
        rate = _ri(rng, 50, 300)  # per started minute, ten-thousandths
        cost = rate * (overall // 60 + 1) if answered or outbound else 0
        end = start + overall * 1000 + _ri(rng, 0, 999)
        rec: Json = {
            "id": _uuid(rng),
            "type": "call",
            "subtype": "outbound" if outbound else "inbound",
            "disposition": disposition,
            "from": cc_end if outbound else cust_end,
            "to": cust_end if outbound else cc_end,
            "user": user if has_user else None,
            "cost": orjson.Fragment(cost_json(cost)),
            "tags": self._tags(rng) if answered else [],
            "started_at": iso_ms(start),
            "ended_at": iso_ms(end),
            "data": {
                "queue": self._queue_ref(rng) if (not outbound or rng.random() < 0.3) else None,
                "campaign": campaign,
                "destination_country": country if outbound else "DE",
                "durations": {
                    "overall": overall,
                    "dialing": dialing,
                    "ivr": ivr,
                    "queue": queue_s,
                    "talk": talk,
                    "hold": hold,
                },
                "end_reason": (
                    rng.choice(("caller_hangup", "agent_hangup")) if answered else disposition
                ),
                "wrapup_code": self._wrapup(rng) if answered else None,
                "summary": (
                    names.SUMMARIES[int(rng.random() * len(names.SUMMARIES))]
                    if answered and rng.random() < 0.5
                    else None
                ),
                "conversation_score": round(rng.uniform(1, 5), 1)
                if answered and rng.random() < 0.6
                else None,
                "mos": round(rng.uniform(3.2, 4.5), 2) if answered else None,
                "mos_tc": round(rng.uniform(3.0, 4.4), 2)
                if answered and rng.random() < 0.8
                else None,
            },
        }
        return (
            rec,
            start,
            end,
            cost,
            teams if has_user else (),
            self._account(rng) if outbound else None,
        )

    def _conversation(self, rng: random.Random, start: int) -> Generated:
        account = self.channel_accounts[int(rng.random() * len(self.channel_accounts))]
        business = self.business_accounts[int(rng.random() * len(self.business_accounts))]
        archived = rng.random() < 0.8
        user, teams = self._pick_user(rng)
        has_user = archived and rng.random() < 0.9
        queue_s = _ri(rng, 0, 600)
        talk = _ri(rng, 30, 5400) if has_user else 0
        overall = queue_s + talk + _ri(rng, 1, 60)
        end = start + overall * 1000 + _ri(rng, 0, 999)

        def sla(value_max: int) -> Json | None:
            if rng.random() < 0.15:
                return None
            value = _ri(rng, 1, value_max)
            return {"value": value, "status": "met" if value < value_max * 0.7 else "breached"}

        flow = self.flows[1] if rng.random() < 0.7 else None
        cost = (0, 50, 100, 120)[int(rng.random() * 4)]
        rec: Json = {
            "id": _uuid(rng),
            "type": "conversation",
            "subtype": "whatsapp",
            "disposition": "archived" if archived else "available",
            "from": {"type": "channel_account", "channel_account": account},
            "to": (
                {"type": "channel_account", "channel_account": business}
                if rng.random() < 0.7
                else {"type": "phone_number", "phone_number": business["identifier"]}
            ),
            "user": user if has_user else None,
            "cost": orjson.Fragment(cost_json(cost)),
            "tags": ["whisper"] if rng.random() < 0.05 else [],
            "started_at": iso_ms(start),
            "ended_at": iso_ms(end),
            "data": {
                "channel": "whatsapp",
                "flow": (
                    {
                        "id": flow["id"],
                        "name": flow["name"],
                        "name_snapshot": flow["name"],
                        "deleted": False,
                    }
                    if flow
                    else None
                ),
                "queue": self._queue_ref(rng) if rng.random() < 0.85 else None,
                "wrapup_code": self._wrapup(rng) if has_user else None,
                "durations": {"overall": overall, "queue": queue_s, "talk": talk},
                "service_level_agreements": {
                    "first_response": sla(300),
                    "resolution": sla(86_400),
                    "avg_reply": sla(600),
                },
            },
        }
        return rec, start, end, cost, teams if has_user else (), None

    def _sms(self, rng: random.Random, start: int) -> Generated:
        customer, _country = self._phone(rng)
        sent = rng.random() < 0.95
        canned = rng.random() < 0.3
        cm = self.canned_messages[int(rng.random() * len(self.canned_messages))]
        text = cm["body"] if canned else names.SMS_TEXTS[int(rng.random() * len(names.SMS_TEXTS))]
        segments = 1 + len(text) // 160
        user, teams = self._pick_user(rng)
        has_user = rng.random() < 0.6
        sender = {"type": "phone_number", "phone_number": self.cc_phones[int(rng.random() * 4)]}
        end = start + _ri(rng, 300, 4000)
        cost = 650 * segments if sent else 0
        rec: Json = {
            "id": _uuid(rng),
            "type": "sms",
            "subtype": "outbound_sms",
            "disposition": "sent" if sent else "failed",
            "from": sender,
            "to": {"type": "phone_number", "phone_number": customer},
            "user": user if has_user else None,
            "cost": orjson.Fragment(cost_json(cost)),
            "tags": [],
            "started_at": iso_ms(start),
            "ended_at": iso_ms(end),
            "data": {
                "sent": sent,
                "segments_count": segments,
                "message": text,
                "canned_message": (
                    {
                        "id": cm["id"],
                        "name": cm["name"],
                        "name_snapshot": cm["name"],
                        "deleted": False,
                    }
                    if canned
                    else None
                ),
                "related_call": {"id": _uuid(rng)} if rng.random() < 0.25 else None,
            },
        }
        return rec, start, end, cost, teams if has_user else (), self._account(rng)

    def _hlr(self, rng: random.Random, start: int) -> Generated:
        customer, _country = self._phone(rng)
        reachable = rng.random() < 0.85
        end = start + _ri(rng, 150, 2500)
        cost = 50
        rec: Json = {
            "id": _uuid(rng),
            "type": "hlr_lookup",
            "subtype": "hlr_lookup",
            "disposition": "available" if reachable else "unavailable",
            "from": {"type": "phone_number", "phone_number": self.cc_phones[0]},
            "to": {"type": "phone_number", "phone_number": customer},
            "user": None,
            "cost": orjson.Fragment(cost_json(cost)),
            "tags": [],
            "started_at": iso_ms(start),
            "ended_at": iso_ms(end),
            "data": {
                "reachable": reachable,
                "roaming": reachable and rng.random() < 0.07,
                "related_call": {"id": _uuid(rng)} if rng.random() < 0.5 else None,
            },
        }
        return rec, start, end, cost, (), None
