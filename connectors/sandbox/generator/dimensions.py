"""The dimensions: users, teams, queues, skills, numbers, campaigns, channel accounts and
messaging, built once at start from the seed, as JSON-ready dicts in the spec's shapes."""

from __future__ import annotations

import random
from datetime import UTC, date, datetime, timedelta

from connectors.sandbox import names
from connectors.sandbox.generator.daystore import Json
from connectors.sandbox.generator.draws import ri, uuid4
from models.timestamps import iso_ms

_EXT = {"image": "jpg", "audio": "ogg"}


class Dimensions:
    """Every dimension of one dataset; the CDR generators draw their references from it."""

    def __init__(self, seed: int, start_date: date, days: int) -> None:
        self.seed = seed
        self.start_date = start_date
        self.days = days
        self._build_dimensions(random.Random(f"{seed}:dimensions"))

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
            {"id": uuid4(rng), "name": n} for n in ("Main IVR", "WhatsApp bot", "After hours")
        ]
        self._build_numbers(rng)
        self._build_users(rng)
        self._build_campaigns(rng)
        self._build_channel_accounts(rng)
        self._build_messaging(rng)
        self.balance = f"{ri(rng, 2_000, 9_000)}.{ri(rng, 0, 9999):04d}"

    def _build_numbers(self, rng: random.Random) -> None:
        self.numbers: list[Json] = []
        for i in range(12):
            country, cc, city, area = names.CITIES[i % len(names.CITIES)]
            local = f"{ri(rng, 10**6, 10**7 - 1)}"
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
                    "activation_fee": f"{ri(rng, 0, 5)}.00",
                    "monthly_fee": f"{ri(rng, 1, 12)}.{ri(rng, 0, 99):02d}",
                    "partial_month_fee": f"{ri(rng, 0, 6)}.{ri(rng, 0, 9999):04d}",
                    "price_per_min": f"0.{ri(rng, 50, 400):05d}",
                },
                "caller_id_groups": [self.caller_id_groups[i % 3]],
                "created_at": iso_ms(self.created_base + timedelta(days=i * 9, seconds=i * 37)),
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
                user["deleted_at"] = iso_ms(gone)
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
        queues = rng.sample(self.queues, ri(rng, 1, 3))
        supervisor = i % 10 == 0
        created = self.created_base + timedelta(days=i * 3, minutes=i * 17, milliseconds=i * 7)
        updated = created + timedelta(days=ri(rng, 1, 200), milliseconds=ri(rng, 0, 999))
        channels = ["voice", *rng.sample(["chat", "whatsapp"], ri(rng, 0, 2))]
        return {
            "id": uuid4(rng),
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
            "channel_group_capacity": {"chat": ri(rng, 1, 5), "instant": ri(rng, 1, 3)},
            "channel_profiles": rng.sample(self.channel_profiles, ri(rng, 0, 2)),
            "speech_language": rng.choice(("en-US", "en-GB", "de-DE", "es-ES")),
            "skills": [
                {"skill": s, "value": ri(rng, 1, 10)}
                for s in rng.sample(self.skills, ri(rng, 1, 3))
            ],
            "status": "available",
            "created_at": iso_ms(created),
            "updated_at": iso_ms(updated),
            "deleted_at": None,
        }

    def _build_campaigns(self, rng: random.Random) -> None:
        statuses = ("running", "running", "paused", "stopped", "completed", "draft", "running")
        self.campaigns: list[Json] = []
        for i, name in enumerate(names.CAMPAIGNS):
            created = self.created_base + timedelta(days=200 + i * 11, milliseconds=i * 3)
            vm = self.voice_messages[0]
            # Only what varies: the state serves every campaign through `campaigns.render`,
            # which fills the other config fields from `campaigns.DEFAULTS`.
            self.campaigns.append(
                {
                    "id": i + 1,
                    "name": name,
                    "status": statuses[i % len(statuses)],
                    "strategy": "predictive_ai" if i % 4 == 1 else "simple",
                    "dial_level": rng.choice((1.0, 1.5, 2.0, 3.0)),
                    "max_dial_time": rng.choice((30, 45, 60)),
                    "max_wait_time": rng.choice((5, 10, 30)),
                    "max_dial_attempts": ri(rng, 1, 5),
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
                    "created_at": iso_ms(created),
                    "updated_at": iso_ms(created + timedelta(days=3)),
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
            phone = f"49151{ri(rng, 10**7, 10**8 - 1)}"
            deleted = i % 13 == 0
            self.channel_accounts.append(
                {
                    "id": uuid4(rng),
                    "channel": "whatsapp",
                    "identifier": phone,
                    "data": {"name": f"{first} {last}", "username": f"{first.lower()}{i}"},
                    "name_snapshot": f"{first} {last[0]}." if deleted else f"{first} {last}",
                    "deleted": deleted,
                }
            )
        self.business_accounts = [
            {
                "id": uuid4(rng),
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
            conv_id = uuid4(rng)
            msgs: list[Json] = []
            at = base + timedelta(days=c % max(1, self.days), hours=9, seconds=c * 61)
            count = 150 if c == 0 else ri(rng, 0, 25)
            agent = self.users[c % len(self.users)]
            for k in range(count):
                at += timedelta(seconds=ri(rng, 5, 300), milliseconds=ri(rng, 0, 999))
                direction = ("inbound", "outbound", "outbound", "whisper")[k % 4]
                kind = "text" if k % 5 else rng.choice(("image", "audio", "document", "text"))
                content: Json = (
                    {"text": rng.choice(names.SMS_TEXTS)}
                    if kind == "text"
                    else {
                        "url": f"https://files.example.net/{conv_id}/{k}.bin",
                        "filename": f"file-{k}.{_EXT.get(kind, 'pdf')}",
                        "size": ri(rng, 1_000, 900_000),
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
                        "id": uuid4(rng),
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
                        "created_at": iso_ms(at),
                        "updated_at": iso_ms(at + timedelta(seconds=1)),
                    }
                )
            self.conversations[conv_id] = msgs
        self.webhook_failures: list[Json] = []
        for i in range(7):
            at = base + timedelta(days=i, hours=3 + i, milliseconds=i * 111)
            self.webhook_failures.append(
                {
                    "id": uuid4(rng),
                    "webhook": {"id": i % 3 + 1, "url": f"https://hooks.acme.example/cc/{i % 3}"},
                    "event": ("call.ended", "sms.sent", "conversation.closed")[i % 3],
                    "status_code": (500, 502, 404, 410)[i % 4],
                    "error": "non-2xx response from endpoint",
                    "attempts": 1 + i % 5,
                    "failed_at": iso_ms(at),
                    "retriggered_at": None,
                }
            )
