"""Pydantic models of the Contact Center API v4 resources.

Two families:

- **Read models** (`ApiModel`): tolerant. Unknown fields are kept (`extra="allow"`), enums are
  `Literal[...] | str` so a value the spec does not list survives as a string, and nearly every
  field is optional because the spec marks many as nullable "depending on channel and flow".
  Money the API sends as strings (number pricing, balance) is parsed to `Decimal`.
- **Write models** (`WriteModel`): strict. Unknown fields are refused (`extra="forbid"`) and the
  spec's bounds and enums are enforced with the spec's field names, so a bad request fails
  before it is sent. `to_body()` dumps only the fields the caller set (`exclude_unset`), which is
  how `CampaignPatch` tells an absent field (unchanged) from an explicit null (cleared).

The CDR hot path does not use these models (see connectors/contact_center/client.py).
"""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal
from typing import Annotated, Any, ClassVar, Literal, Self

from pydantic import (
    AwareDatetime,
    BaseModel,
    ConfigDict,
    Field,
    ModelWrapValidatorHandler,
    PlainSerializer,
    StrictInt,
    StringConstraints,
    ValidationError,
    field_validator,
    model_validator,
)

from models.timestamps import iso_ms

# --- shared types ---------------------------------------------------------------------------

# E.164 without the leading plus: a non-zero first digit, 7 to 15 digits in all.
Phone = Annotated[str, StringConstraints(pattern=r"^[1-9][0-9]{6,14}$")]
Uuid = Annotated[
    str,
    StringConstraints(
        pattern=r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$"
    ),
]
UtcTimestamp = Annotated[AwareDatetime, PlainSerializer(iso_ms, return_type=str)]


# The extra key under which a read model keeps, as received, the optional known fields whose
# value it could not read (`ApiModel`).
UNREADABLE = "_unreadable"


class ApiModel(BaseModel):
    """Base of read models: keep what we do not know, and what we cannot read.

    An optional known field whose value has another type than the spec's (a date that is no
    date, a list that is a string) is left unset, and its value is kept as received under
    `UNREADABLE` (`{"_unreadable": {"created_at": "yesterday"}}`), an extra field like any
    unknown one: one odd value in one agent's record used to fail the whole directory snapshot.
    A required field (an `id`) that cannot be read still fails the record."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)

    @model_validator(mode="wrap")
    @classmethod
    def _keep_unreadable(cls, data: Any, handler: ModelWrapValidatorHandler[Self]) -> Self:
        try:
            return handler(data)
        except ValidationError as exc:
            if not isinstance(data, dict) or UNREADABLE in data:
                raise
            fields = cls.model_fields
            names = {name: name for name in fields}
            names.update({f.alias: name for name, f in fields.items() if f.alias})
            bad: set[str] = set()
            for error in exc.errors():
                key = error["loc"][0] if error["loc"] else None
                if not isinstance(key, str) or key not in names or key not in data:
                    raise  # a model-level error, or a field not sent: nothing to leave out
                if fields[names[key]].is_required():
                    raise
                bad.add(key)
            unreadable = {k: v for k, v in data.items() if k in bad}  # in the record's order
            model = handler({k: v for k, v in data.items() if k not in unreadable})
            assert model.__pydantic_extra__ is not None  # (extra="allow")
            model.__pydantic_extra__[UNREADABLE] = unreadable
            return model

    def unreadable_fields(self) -> list[str]:
        """Dotted paths of the fields this record (and the records in it) could not read."""
        found = [str(k) for k in (self.model_extra or {}).get(UNREADABLE, {})]
        for name, value in self:
            items = value if isinstance(value, list) else [value]
            for n, item in enumerate(items):
                if isinstance(item, ApiModel):
                    where = f"{name}[{n}]" if isinstance(value, list) else name
                    found += [f"{where}.{path}" for path in item.unreadable_fields()]
        return found


class WriteModel(BaseModel):
    """Base of request bodies: refuse what the API would refuse."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)
    # Defaults the server does not apply itself: sent even when the caller left them out.
    always_sent: ClassVar[tuple[str, ...]] = ()

    def model_post_init(self, _context: Any, /) -> None:
        """Count `always_sent` defaults as set, so `to_body()` includes them."""
        self.__pydantic_fields_set__.update(self.always_sent)

    def to_body(self) -> dict[str, Any]:
        """The JSON body: only fields the caller set (explicit nulls included)."""
        return self.model_dump(mode="json", exclude_unset=True, by_alias=True)


class OpenWriteModel(WriteModel):
    """A request body whose shape the spec does not show (leads, conversations, messages,
    callbacks): the fields we know are checked, any other field is passed through as given,
    since a real server may take fields the sandbox's choice lacks."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)


# --- references and small objects ------------------------------------------------------------


class NamedRef(ApiModel):
    """{id: integer, name: string} as used for teams, queues, groups."""

    id: int
    name: str | None = None


class FlowRef(ApiModel):
    """A flow reference; flow ids are UUIDs."""

    id: str
    name: str | None = None


class SecurityAccessGroup(NamedRef):
    """The user's security access group."""


class Ringtone(ApiModel):
    """WebRTC ringtone."""

    type: str | None = None
    name: str | None = None


class ChannelProfile(ApiModel):
    """A user's channel profile."""

    id: int | None = None
    channel: str | None = None
    identifier: str | None = None
    name: str | None = None


class UserSkill(ApiModel):
    """A skill with its level for a user."""

    skill: NamedRef | None = None
    value: int | None = None


UserStatus = Literal["available"] | str
Channel = Literal["voice", "chat", "whatsapp"] | str


class User(ApiModel):
    """An agent (active or deleted)."""

    id: str
    name: str | None = None
    email: str | None = None
    sip_account: str | None = None
    extension: str | None = None
    caller_id: str | None = None
    employee_id: str | None = None
    timezone: str | None = None
    security_access_group: SecurityAccessGroup | None = None
    teams: list[NamedRef] = Field(default_factory=list)
    supervised_teams: list[NamedRef] = Field(default_factory=list)
    queues: list[NamedRef] = Field(default_factory=list)
    supervised_queues: list[NamedRef] = Field(default_factory=list)
    webrtc_ringtone: Ringtone | None = None
    channels: list[Channel] = Field(default_factory=list)
    channel_group_capacity: dict[str, int] = Field(default_factory=dict)
    channel_profiles: list[ChannelProfile] = Field(default_factory=list)
    speech_language: str | None = None
    skills: list[UserSkill] = Field(default_factory=list)
    status: UserStatus | None = None
    created_at: datetime | None = None
    updated_at: datetime | None = None
    deleted_at: datetime | None = None


class Queue(NamedRef):
    """A routing queue (further fields not shown; kept as extras)."""


class Skill(NamedRef):
    """A routing skill."""


class Team(NamedRef):
    """A team of users."""


# --- campaigns (read) ------------------------------------------------------------------------

CampaignStatus = Literal["draft", "running", "paused", "stopped", "completed"] | str
Strategy = Literal["simple", "predictive_ai"]
FollowUpMode = Literal["timer", "lowest_attempts"]
WaitTimeUnit = Literal["seconds", "minutes", "hours"]


class VoiceMessage(ApiModel):
    """A resolved voice message {type, name}."""

    type: str | None = None
    name: str | None = None


class AmdVoicemailMessageOut(ApiModel):
    """Response form: the voice message resolved in place of its id."""

    enabled: bool | None = None
    voice_message: VoiceMessage | None = None


class Campaign(ApiModel):
    """An outbound dialer campaign as the API returns it."""

    id: int
    name: str | None = None
    status: CampaignStatus | None = None
    strategy: Strategy | str | None = None
    dial_level: float | None = None
    max_dial_time: int | None = None
    max_wait_time: int | None = None
    max_dial_attempts: int | None = None
    amd_enabled: bool | None = None
    amd_voicemail_message: AmdVoicemailMessageOut | None = None
    caller_id_sets: list[dict[str, Any]] | None = None
    follow_up_mode: FollowUpMode | str | None = None
    # Response fields the spec leaves "not shown": the sandbox's (every configuration field).
    dial_level_override: dict[str, Any] | None = None
    voice_message_id: int | None = None
    live: dict[str, Any] | None = None
    use_local_caller_id: bool | None = None
    asr_optimization_enabled: bool | None = None
    post_call_rating: dict[str, Any] | None = None
    contact_local_time: dict[str, Any] | None = None
    follow_up_rules: dict[str, Any] | None = None
    amd_comfort_noise_enabled: bool | None = None
    allow_duplicate_phone_numbers: bool | None = None
    created_at: datetime | None = None
    updated_at: datetime | None = None


# --- CDRs ------------------------------------------------------------------------------------

CdrType = Literal["call", "conversation", "hlr_lookup", "sms"]


class CdrRef(ApiModel):
    """Referenced object in a CDR (queue, campaign, flow, canned_message)."""

    id: int | str | None = None
    name: str | None = None
    name_snapshot: str | None = None
    deleted: bool | None = None


class CdrUser(ApiModel):
    """The agent of a CDR."""

    id: str | None = None
    name: str | None = None
    email: str | None = None
    name_snapshot: str | None = None
    deleted: bool | None = None


class ChannelAccountData(ApiModel):
    """Display data of a channel account."""

    name: str | None = None
    username: str | None = None


class ChannelAccount(ApiModel):
    """A messaging account (e.g. a WhatsApp contact)."""

    id: str | None = None
    channel: str | None = None
    identifier: str | None = None
    data: ChannelAccountData | None = None
    name_snapshot: str | None = None
    deleted: bool | None = None


class CdrEndpoint(ApiModel):
    """`from` / `to`: a phone number or a channel account."""

    type: Literal["phone_number", "channel_account"] | str | None = None
    phone_number: str | None = None
    channel_account: ChannelAccount | None = None


class CallDurations(ApiModel):
    """Seconds per call phase."""

    overall: float | None = None
    dialing: float | None = None
    ivr: float | None = None
    queue: float | None = None
    talk: float | None = None
    hold: float | None = None


class WrapupCodeSnapshot(ApiModel):
    """The wrap-up code as it was at the time of the interaction."""

    code_snapshot: str | None = None


class CallData(ApiModel):
    """`data` of a call CDR."""

    queue: CdrRef | None = None
    campaign: CdrRef | None = None
    destination_country: str | None = None
    durations: CallDurations | None = None
    end_reason: str | None = None
    wrapup_code: WrapupCodeSnapshot | None = None
    summary: str | None = None
    conversation_score: float | None = None
    mos: float | None = None
    mos_tc: float | None = None


class SlaValue(ApiModel):
    """One service-level measure."""

    value: float | None = None
    status: str | None = None


class ServiceLevelAgreements(ApiModel):
    """Conversation SLAs."""

    first_response: SlaValue | None = None
    resolution: SlaValue | None = None
    avg_reply: SlaValue | None = None


class ConversationDurations(ApiModel):
    """Seconds per conversation phase."""

    overall: float | None = None
    queue: float | None = None
    talk: float | None = None


class ConversationData(ApiModel):
    """`data` of a conversation CDR."""

    channel: str | None = None
    flow: CdrRef | None = None
    queue: CdrRef | None = None
    wrapup_code: WrapupCodeSnapshot | None = None
    durations: ConversationDurations | None = None
    service_level_agreements: ServiceLevelAgreements | None = None


class RelatedCall(ApiModel):
    """{id: UUID} of the call a lookup or SMS belongs to."""

    id: str | None = None


class HlrLookupData(ApiModel):
    """`data` of an HLR lookup CDR."""

    reachable: bool | None = None
    roaming: bool | None = None
    related_call: RelatedCall | None = None


class SmsData(ApiModel):
    """`data` of an SMS CDR."""

    sent: bool | None = None
    segments_count: int | None = None
    message: str | None = None
    canned_message: CdrRef | None = None
    related_call: RelatedCall | None = None


CdrData = CallData | ConversationData | HlrLookupData | SmsData

_DATA_BY_TYPE: dict[str, type[ApiModel]] = {
    "call": CallData,
    "conversation": ConversationData,
    "hlr_lookup": HlrLookupData,
    "sms": SmsData,
}


class Cdr(ApiModel):
    """A call detail record; `data` is typed by `type` (a raw dict for unknown types)."""

    id: str
    type: CdrType | str | None = None
    subtype: str | None = None
    disposition: str | None = None
    from_: CdrEndpoint | None = Field(default=None, alias="from")
    to: CdrEndpoint | None = None
    user: CdrUser | None = None
    cost: Decimal | None = None
    tags: list[str] = Field(default_factory=list)
    started_at: datetime | None = None
    ended_at: datetime | None = None
    # left_to_right: a raw dict (unknown type) stays a dict; typed data arrives as an instance.
    data: dict[str, Any] | CdrData | None = Field(default=None, union_mode="left_to_right")

    @model_validator(mode="before")
    @classmethod
    def _type_data(cls, raw: Any) -> Any:
        # The union cannot tell the data shapes apart (all fields optional): `type` decides.
        if isinstance(raw, dict) and isinstance(raw.get("data"), dict):
            model = _DATA_BY_TYPE.get(str(raw.get("type")))
            if model is not None:
                return {**raw, "data": model.model_validate(raw["data"])}
        return raw

    @field_validator("cost", mode="before")
    @classmethod
    def _exact_cost(cls, value: Any) -> Any:
        # JSON numbers arrive as float: go through repr so 0.045 stays 0.045.
        return repr(value) if isinstance(value, float) else value


# --- messaging, numbers, billing -------------------------------------------------------------


class ConversationRef(ApiModel):
    """{id: UUID}."""

    id: str


class MessageUser(ApiModel):
    """The agent who sent a message."""

    id: str | None = None
    name: str | None = None
    email: str | None = None


class MessageContent(ApiModel):
    """text: {text}; media: url, filename, size, caption."""

    text: str | None = None
    url: str | None = None
    filename: str | None = None
    size: int | None = None
    caption: str | None = None


class Message(ApiModel):
    """A conversation message."""

    id: str
    conversation: ConversationRef | None = None
    direction: Literal["inbound", "outbound", "whisper"] | str | None = None
    user: MessageUser | None = None
    target_user: MessageUser | None = None
    content_type: Literal["text", "audio", "document", "image", "video", "voice"] | str | None = (
        None
    )
    content_data: MessageContent | None = None
    status: Literal["delivered", "sent"] | str | None = None
    status_reason: str | None = None
    created_at: datetime | None = None
    updated_at: datetime | None = None


class NumberPricing(ApiModel):
    """Fees as exact decimals (the API sends strings to keep their precision)."""

    activation_fee: Decimal | None = None
    monthly_fee: Decimal | None = None
    partial_month_fee: Decimal | None = None
    price_per_min: Decimal | None = None


class Number(ApiModel):
    """A purchased phone number."""

    id: int
    phone_number: str | None = None
    label: str | None = None
    type: Literal["geographic"] | str | None = None
    country: str | None = None
    city: str | None = None
    channels: int | None = None
    provider: str | None = None
    pricing: NumberPricing | None = None
    caller_id_groups: list[NamedRef] = Field(default_factory=list)
    flow: FlowRef | None = None
    created_at: datetime | None = None


class CallerIdGroup(NamedRef):
    """A caller ID group."""


class Balance(ApiModel):
    """The account balance, exact."""

    amount: Decimal


class CallRef(ApiModel):
    """{id} of a started or ended call."""

    id: str


class SmsRef(ApiModel):
    """{id} of an accepted SMS."""

    id: str


class ScheduledCallback(ApiModel):
    """A scheduled callback (shape not shown by the spec; the sandbox's choice)."""

    id: str | int
    phone_number: str | None = None
    scheduled_at: datetime | None = None
    user: MessageUser | None = None
    queue: NamedRef | None = None
    note: str | None = None
    status: str | None = None
    created_at: datetime | None = None


class WebhookFailure(ApiModel):
    """A failed webhook delivery (shape not shown by the spec; the sandbox's choice)."""

    id: str | int
    webhook: dict[str, Any] | None = None
    event: str | None = None
    status_code: int | None = None
    error: str | None = None
    attempts: int | None = None
    failed_at: datetime | None = None
    retriggered_at: datetime | None = None


class WhatsappTemplate(ApiModel):
    """A WhatsApp template (fields not shown by the spec; the sandbox's)."""

    id: int | str
    name: str | None = None
    language: str | None = None
    category: str | None = None
    status: str | None = None
    body: str | None = None


class CannedMessage(ApiModel):
    """A canned SMS message (fields not shown by the spec; the sandbox's)."""

    id: int | str
    name: str | None = None
    body: str | None = None
    params: list[str] | None = None


class WrapupCode(ApiModel):
    """A wrap-up code (fields not shown by the spec; the sandbox's)."""

    id: int | str
    code: str | None = None
    name: str | None = None
    group: NamedRef | None = None


class Conversation(ApiModel):
    """A messaging conversation (shape not shown by the spec; the sandbox's choice)."""

    id: str
    channel: str | None = None
    status: str | None = None
    phone_number: str | None = None
    user: MessageUser | None = None
    messages_count: int | None = None
    created_at: datetime | None = None
    updated_at: datetime | None = None


# --- write models ----------------------------------------------------------------------------


class CallSource(WriteModel):
    """The external system that supplied the contact."""

    account_id: str | None = None
    name: str | None = None


class StartCall(WriteModel):
    """POST /voice/calls."""

    phone_number: Phone
    user_id: Uuid
    caller_id: Phone | None = None
    source: CallSource | None = None


class Hangup(WriteModel):
    """POST /voice/calls/{id}/hangup. The spec types user_id both as a UUID string (the
    machine-readable description) and as an integer (the reference page): either is accepted
    and sent exactly as given, never converted (a digit string is neither, so it is refused)."""

    user_id: Uuid | StrictInt


class SmsTextContent(WriteModel):
    """content_data of a text SMS."""

    body: Annotated[str, StringConstraints(min_length=1)]


class SmsCannedContent(WriteModel):
    """content_data of a canned-message SMS."""

    canned_message_id: int
    params: dict[str, str] | None = None


class SmsMessage(WriteModel):
    """The SMS message object; content_data must match content_type."""

    content_type: Literal["text", "canned_message"]
    content_data: SmsTextContent | SmsCannedContent

    @model_validator(mode="after")
    def _matching(self) -> Self:
        want = SmsTextContent if self.content_type == "text" else SmsCannedContent
        if not isinstance(self.content_data, want):
            # pydantic turns a ValueError (not a TypeError) into a validation error.
            raise ValueError(f"content_data does not match content_type {self.content_type!r}")  # noqa: TRY004
        return self


class SmsSource(WriteModel):
    """Both fields are required when source is present."""

    system: str
    account_id: str


class SendSms(WriteModel):
    """POST /messaging/sms."""

    phone_number: Phone
    message: SmsMessage
    sender_id: Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9]{1,30}$")] | None = None
    source: SmsSource | None = None

    @classmethod
    def text(cls, phone_number: str, body: str, **extra: Any) -> SendSms:
        """Shortcut for a free-text SMS."""
        return cls.model_validate(
            {
                "phone_number": phone_number,
                "message": {"content_type": "text", "content_data": {"body": body}},
                **extra,
            }
        )


class ScheduleCallback(OpenWriteModel):
    """POST /tasks/scheduled_callbacks (the sandbox's shape; the spec does not show one)."""

    phone_number: Phone
    scheduled_at: UtcTimestamp
    user_id: Uuid | None = None
    queue_id: int | None = None
    note: Annotated[str, StringConstraints(max_length=1000)] | None = None


# Campaign configuration pieces.


class DialLevelOverride(WriteModel):
    """Dial level override; enabled is required."""

    enabled: bool
    value: Annotated[float, Field(gt=0, le=4)] | None = None
    active_agents_threshold: Annotated[int, Field(gt=1, le=4)] | None = None


class AmdVoicemailMessage(WriteModel):
    """Voicemail message used when a machine answers; enabled is required when present."""

    enabled: bool
    voice_message_id: int | None = None


class Live(WriteModel):
    """Live mode; dialing_order only when live is enabled."""

    enabled: bool
    dialing_order: Literal["fifo", "lifo"] | None = None

    @model_validator(mode="after")
    def _order_needs_live(self) -> Self:
        if self.dialing_order is not None and not self.enabled:
            raise ValueError("dialing_order is only allowed when live is enabled")
        return self


class CallerIdSet(WriteModel):
    """One caller ID set."""

    phone_numbers: Annotated[list[Phone], Field(min_length=1)]


class PostCallRating(WriteModel):
    """Post-call rating; enabled is required."""

    enabled: bool
    notification_voice_message_id: int | None = None
    instructions_voice_message_id: int | None = None
    complete_voice_message_id: int | None = None


Hour = Annotated[str, StringConstraints(pattern=r"^(0[89]|1[0-9]|2[0-2]):00$")]
Weekday = Annotated[int, Field(ge=1, le=7)]


class ContactLocalTime(WriteModel):
    """Calling hours in the contact's local time (HH:00 between 08:00 and 22:00)."""

    start_time: Hour
    end_time: Hour
    days_of_week: Annotated[list[Weekday], Field(min_length=1)]

    @model_validator(mode="after")
    def _ordered(self) -> Self:
        if self.end_time <= self.start_time:
            raise ValueError("end_time must be later than start_time")
        if len(set(self.days_of_week)) != len(self.days_of_week):
            raise ValueError("days_of_week must not contain duplicates")
        return self


class FollowUpRule(WriteModel):
    """One redial rule."""

    wait_time: Annotated[int, Field(ge=1)]
    wait_time_unit: WaitTimeUnit
    switch_caller_id_set: bool | None = None


class WrapupFollowUpRule(FollowUpRule):
    """A wrapup_code group rule; its structure is not shown, the sandbox adds wrapup_code_id."""

    wrapup_code_id: Annotated[int, Field(ge=1)]


Rules = Annotated[list[FollowUpRule], Field(max_length=20)]


class FollowUpRules(WriteModel):
    """Follow-up rules by disposition group (replaced as a whole on PATCH)."""

    machine_answered: Rules | None = None
    abandoned: Rules | None = None
    no_answer: Rules | None = None
    rejected: Rules | None = None
    failed: Rules | None = None
    busy: Rules | None = None
    wrapup_code: Annotated[list[WrapupFollowUpRule], Field(max_length=20)] | None = None

    def switches_caller_id_set(self) -> bool:
        """True when any rule asks to switch the caller ID set."""
        groups = (getattr(self, name) or [] for name in type(self).model_fields)
        return any(rule.switch_caller_id_set for group in groups for rule in group)


Name = Annotated[str, StringConstraints(min_length=1, max_length=100)]
DialLevel = Annotated[float, Field(ge=1, le=6)]
MaxDialTime = Annotated[int, Field(ge=1, le=600)]
MaxWaitTime = Annotated[int, Field(ge=0, le=3600)]
MaxDialAttempts = Annotated[int, Field(ge=1, le=99)]
CallerIdSets = Annotated[list[CallerIdSet], Field(min_length=1, max_length=20)]


def _check_switch(sets: list[CallerIdSet] | None, rules: FollowUpRules | None) -> None:
    if sets is not None and len(sets) == 1 and rules is not None and rules.switches_caller_id_set():
        raise ValueError(
            "follow_up_rules: switch_caller_id_set cannot be true when only one caller ID set "
            "is assigned"
        )


class CampaignCreate(WriteModel):
    """POST /campaigns. Omitted optional fields take the server's defaults (listed in the spec
    and repeated here as documentation; they are not sent)."""

    name: Name
    caller_id_sets: CallerIdSets
    strategy: Strategy = "simple"
    dial_level: DialLevel = 1.0
    dial_level_override: DialLevelOverride | None = None
    max_dial_time: MaxDialTime = 60
    max_wait_time: MaxWaitTime = 5
    max_dial_attempts: MaxDialAttempts = 3
    voice_message_id: int | None = None
    amd_enabled: bool = True
    amd_voicemail_message: AmdVoicemailMessage | None = None
    live: Live | None = None
    use_local_caller_id: bool = False
    asr_optimization_enabled: bool = True
    post_call_rating: PostCallRating | None = None
    contact_local_time: ContactLocalTime | None = None
    follow_up_rules: FollowUpRules | None = None
    follow_up_mode: FollowUpMode | None = "timer"

    @model_validator(mode="after")
    def _cross(self) -> Self:
        _check_switch(self.caller_id_sets, self.follow_up_rules)
        return self


# PATCH fields that the spec does not allow to be null: an explicit null is refused.
_NOT_NULLABLE = (
    "name",
    "caller_id_sets",
    "strategy",
    "dial_level",
    "dial_level_override",
    "max_dial_time",
    "max_wait_time",
    "max_dial_attempts",
    "amd_enabled",
    "use_local_caller_id",
    "asr_optimization_enabled",
    "amd_comfort_noise_enabled",
    "allow_duplicate_phone_numbers",
)


class CampaignPatch(WriteModel):
    """PATCH /campaigns/{id}: any subset; absent = unchanged, null = cleared (where nullable).

    `amd_comfort_noise_enabled` and `allow_duplicate_phone_numbers` are the two PATCH-only
    booleans whose names the spec does not show: these are the sandbox's names.
    `follow_up_rules` replaces all groups: groups left out are cleared.
    """

    name: Name | None = None
    caller_id_sets: CallerIdSets | None = None
    strategy: Strategy | None = None
    dial_level: DialLevel | None = None
    dial_level_override: DialLevelOverride | None = None
    max_dial_time: MaxDialTime | None = None
    max_wait_time: MaxWaitTime | None = None
    max_dial_attempts: MaxDialAttempts | None = None
    voice_message_id: int | None = None
    amd_enabled: bool | None = None
    amd_voicemail_message: AmdVoicemailMessage | None = None
    live: Live | None = None
    use_local_caller_id: bool | None = None
    asr_optimization_enabled: bool | None = None
    post_call_rating: PostCallRating | None = None
    contact_local_time: ContactLocalTime | None = None
    follow_up_rules: FollowUpRules | None = None
    follow_up_mode: FollowUpMode | None = None
    amd_comfort_noise_enabled: bool | None = None
    allow_duplicate_phone_numbers: bool | None = None

    @field_validator(*_NOT_NULLABLE, mode="before")
    @classmethod
    def _no_null(cls, value: Any) -> Any:
        # Runs only for fields the caller gave: absent stays absent, null is an error.
        if value is None:
            raise ValueError("may not be null")
        return value

    @model_validator(mode="after")
    def _cross(self) -> Self:
        _check_switch(self.caller_id_sets, self.follow_up_rules)
        if self.amd_comfort_noise_enabled and self.amd_enabled is False:
            raise ValueError("amd_comfort_noise_enabled requires amd_enabled")
        return self


# Leads and conversations: shapes not shown by the spec; these follow the sandbox's choice
# (docs/sandbox.md): {"leads": [...]} in and out, at most 1000 per request.


class Lead(ApiModel):
    """A campaign lead as returned by POST/PATCH /campaigns/{id}/leads."""

    id: int
    campaign: dict[str, Any] | None = None
    phone_number: str | None = None
    name: str | None = None
    email: str | None = None
    status: str | None = None
    data: dict[str, Any] = Field(default_factory=dict)
    created_at: datetime | None = None
    updated_at: datetime | None = None


class LeadCreate(OpenWriteModel):
    """One lead to add."""

    phone_number: Phone
    name: str | None = None
    email: str | None = None
    data: dict[str, str] | None = None


class LeadUpdate(OpenWriteModel):
    """One lead to change, by id."""

    id: int
    phone_number: Phone | None = None
    name: str | None = None
    email: str | None = None
    data: dict[str, str] | None = None


class LeadsRequest(OpenWriteModel):
    """Body of the leads endpoints."""

    leads: Annotated[list[LeadCreate], Field(min_length=1, max_length=1000)]


class LeadsUpdateRequest(OpenWriteModel):
    """Body of PATCH .../leads."""

    leads: Annotated[list[LeadUpdate], Field(min_length=1, max_length=1000)]


class TextContent(OpenWriteModel):
    """{text} content of a conversation message."""

    text: Annotated[str, StringConstraints(min_length=1)]


class MediaContent(OpenWriteModel):
    """{url, filename?, size?, caption?} content of a media message."""

    url: str
    filename: str | None = None
    size: Annotated[int, Field(ge=0)] | None = None
    caption: str | None = None


class MessageBody(OpenWriteModel):
    """A conversation message's content; content_data must match content_type."""

    always_sent: ClassVar[tuple[str, ...]] = ("content_type",)

    content_type: Literal["text", "audio", "document", "image", "video", "voice"] = "text"
    content_data: TextContent | MediaContent

    @model_validator(mode="after")
    def _matching(self) -> Self:
        want = TextContent if self.content_type == "text" else MediaContent
        if not isinstance(self.content_data, want):
            # pydantic turns a ValueError (not a TypeError) into a validation error.
            raise ValueError(f"content_data does not match content_type {self.content_type!r}")  # noqa: TRY004
        return self


class NewMessage(MessageBody):
    """POST /messaging/conversations/{id}/messages (the sandbox's shape)."""

    user_id: Uuid | None = None


class CreateConversation(OpenWriteModel):
    """POST /messaging/conversations (the sandbox's shape: an outbound WhatsApp text)."""

    always_sent: ClassVar[tuple[str, ...]] = ("channel",)

    phone_number: Phone
    channel: Literal["whatsapp"] = "whatsapp"
    user_id: Uuid | None = None
    message: MessageBody
