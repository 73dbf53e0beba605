"""`ContactCenterClient`: the endpoint facade, one short method per v4 endpoint.

Voice, campaigns, reporting, messaging and tasks are here; the directory's reads (routing,
users and teams, numbers, the balance) are the `DirectoryEndpoints` mixin (directory.py). The
request path, retries and generic endpoint shapes are in `core.py`; the parallel CDR fetch
is in `cdr.py`; response parsing and result types in `responses.py`. The names other packages
import from here (`CdrPage`, `WriteResult`, ...) are re-exported from those modules.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from datetime import datetime
from typing import Any

import httpx

from connectors.contact_center import cdr
from connectors.contact_center.budget import ByteBudget
from connectors.contact_center.cdr import (
    CdrPage,
    Filters,
    cdr_filter_params,
    split_window,
)
from connectors.contact_center.directory import DirectoryEndpoints
from connectors.contact_center.endpoints import ENDPOINTS
from connectors.contact_center.errors import InvalidBodyError
from connectors.contact_center.paginators import null_list_is_empty
from connectors.contact_center.responses import (
    ListPage,
    WriteResult,
    json_object,
    request_body,
    to_models,
)
from models.resources import (
    CallRef,
    Campaign,
    CampaignCreate,
    CampaignPatch,
    CannedMessage,
    Cdr,
    Conversation,
    CreateConversation,
    Hangup,
    Lead,
    LeadsRequest,
    LeadsUpdateRequest,
    Message,
    NewMessage,
    ScheduleCallback,
    ScheduledCallback,
    SendSms,
    SmsRef,
    StartCall,
    WebhookFailure,
    WhatsappTemplate,
    WrapupCode,
)
from models.timestamps import iso_ms

__all__ = [
    "CdrPage",
    "ContactCenterClient",
    "ListPage",
    "WriteResult",
    "cdr_filter_params",
    "split_window",
]


class ContactCenterClient(DirectoryEndpoints):
    """Async client of the Contact Center API v4. Use as `async with ContactCenterClient(...)`.

    `transport` replaces the network (e.g. the sandbox's in-process ASGI transport).
    """

    # --- voice -------------------------------------------------------------------------------

    async def start_call(self, request: StartCall | Mapping[str, Any]) -> WriteResult[CallRef]:
        """POST /voice/calls (201 {call: {id}}). Never retried unless provably unsent."""
        return await self._write("start_call", "call", CallRef, request_body(request, StartCall))

    async def hangup_call(self, call_id: str, user_id: str | int) -> WriteResult[CallRef]:
        """POST /voice/calls/{call_id}/hangup. The spec types the agent's `user_id` both as a
        UUID string and as an integer, so either is accepted and sent exactly as given (a UUID
        string stays a string, an integer an integer). The sandbox answers 409 (ConflictError)
        when the call already ended."""
        body = request_body(Hangup(user_id=user_id), Hangup)
        return await self._write("hangup_call", "call", CallRef, body, call_id=call_id)

    # --- campaigns ---------------------------------------------------------------------------

    async def list_campaigns(
        self, *, limit: int | None = None, offset: int = 0
    ) -> ListPage[Campaign]:
        """GET /campaigns (one page)."""
        return await self._list_page("list_campaigns", Campaign, limit=limit, offset=offset)

    async def list_all_campaigns(self) -> list[Campaign]:
        """Every campaign."""
        return await self._list_all("list_campaigns", Campaign)

    async def get_campaign(self, campaign_id: int) -> Campaign:
        """GET /campaigns/{campaign_id}."""
        return await self._get_one("get_campaign", "campaign", Campaign, campaign_id=campaign_id)

    async def create_campaign(
        self, request: CampaignCreate | Mapping[str, Any]
    ) -> WriteResult[Campaign]:
        """POST /campaigns; validated client-side first (pydantic ValidationError, with the
        spec's field names, before anything is sent). Not retried unless provably unsent."""
        return await self._write(
            "create_campaign", "campaign", Campaign, request_body(request, CampaignCreate)
        )

    async def update_campaign(
        self, campaign_id: int, patch: CampaignPatch | Mapping[str, Any]
    ) -> WriteResult[Campaign]:
        """PATCH /campaigns/{campaign_id}: only the fields set are sent; an explicit None
        clears a nullable field. Retried: the same PATCH twice gives the same campaign.
        A stopped/completed campaign answers 409 in the sandbox (status "not shown")."""
        body = request_body(patch, CampaignPatch)
        return await self._write(
            "update_campaign", "campaign", Campaign, body, campaign_id=campaign_id
        )

    async def start_campaign(self, campaign_id: int) -> WriteResult[Campaign]:
        """POST /campaigns/{id}/start. A transition: not retried after it may have arrived
        (a second start could hit a 409). Response {campaign} is the sandbox's choice."""
        return await self._write(
            "start_campaign", "campaign", Campaign, None, campaign_id=campaign_id
        )

    async def stop_campaign(self, campaign_id: int) -> WriteResult[Campaign]:
        """POST /campaigns/{id}/stop (a transition; see `start_campaign`)."""
        return await self._write(
            "stop_campaign", "campaign", Campaign, None, campaign_id=campaign_id
        )

    async def pause_campaign(self, campaign_id: int) -> WriteResult[Campaign]:
        """POST /campaigns/{id}/pause (a transition; see `start_campaign`)."""
        return await self._write(
            "pause_campaign", "campaign", Campaign, None, campaign_id=campaign_id
        )

    async def add_leads(
        self, campaign_id: int, request: LeadsRequest | Mapping[str, Any]
    ) -> WriteResult[list[Lead]]:
        """POST /campaigns/{id}/leads; body {leads: [...]} (1-1000) is the sandbox's shape
        (the spec shows none: extra fields are passed through)."""
        body = request_body(request, LeadsRequest)
        return await self._write_many("add_leads", "leads", Lead, body, campaign_id=campaign_id)

    async def update_leads(
        self, campaign_id: int, request: LeadsUpdateRequest | Mapping[str, Any]
    ) -> WriteResult[list[Lead]]:
        """PATCH /campaigns/{id}/leads; leads by id (the sandbox's shape). Not retried:
        its semantics are not shown, so we do not assume it is idempotent."""
        body = request_body(request, LeadsUpdateRequest)
        return await self._write_many("update_leads", "leads", Lead, body, campaign_id=campaign_id)

    # --- reporting ---------------------------------------------------------------------------

    async def list_cdrs(
        self,
        start: datetime,
        end: datetime,
        *,
        filters: Filters | None = None,
        limit: int = 100,
        cursor: str | None = None,
    ) -> tuple[list[Cdr], int | None, str | None]:
        """GET /reporting/cdrs, one page as models: (cdrs, total, next_cursor). For bulk
        reads use `fetch_cdr_pages`, which builds no object per CDR."""
        endpoint = ENDPOINTS["list_cdrs"]
        params: list[tuple[str, str | int]] = [
            ("started_at[gte]", iso_ms(start)),
            ("started_at[lt]", iso_ms(end)),
            ("limit", min(limit, endpoint.max_limit or limit)),
            *cdr_filter_params(filters),
        ]
        if cursor is not None:
            params.append(("cursor", cursor))

        def parse(response: httpx.Response) -> tuple[list[Any], int | None, str | None]:
            obj = json_object(response)
            items = obj.get("cdrs")
            meta = obj.get("metadata")
            meta = meta if isinstance(meta, dict) else {}
            if not isinstance(items, list):
                if not null_list_is_empty("cdrs" in obj and items is None, meta.get("total")):
                    raise InvalidBodyError("200 CDR page has no 'cdrs' array; retry later")
                items = []
            return items, meta.get("total"), meta.get("next_cursor")

        items, total, next_cursor = await self._send(endpoint, parse, params=params)
        return to_models(Cdr, items, endpoint.method, endpoint.path), total, next_cursor

    async def get_cdr(self, cdr_id: str) -> Cdr:
        """GET /reporting/cdrs/{cdr_id}; the body is {cdr} (the spec's singular convention)."""
        return await self._get_one("get_cdr", "cdr", Cdr, cdr_id=cdr_id)

    def fetch_cdr_pages(
        self,
        start: datetime,
        end: datetime,
        filters: Filters | None = None,
        budget: ByteBudget | None = None,
    ) -> AsyncIterator[CdrPage]:
        """Every CDR with started_at in [start, end), as raw pages (see `cdr.fetch_cdr_pages`):
        sub-windows walked in parallel; each yields at least one page, its last `last=True`.
        With `budget`, the caller releases each page's `len(page.body)` when done with it."""
        return cdr.fetch_cdr_pages(self, start, end, filters, budget)

    # --- messaging ---------------------------------------------------------------------------

    async def list_messages(
        self, conversation_id: str, *, limit: int | None = None, offset: int = 0
    ) -> ListPage[Message]:
        """GET /messaging/conversations/{id}/messages (one page; limit max 100)."""
        return await self._list_page(
            "list_messages", Message, limit=limit, offset=offset, conversation_id=conversation_id
        )

    async def list_all_messages(self, conversation_id: str) -> list[Message]:
        """Every message of a conversation."""
        return await self._list_all("list_messages", Message, conversation_id=conversation_id)

    async def send_sms(self, request: SendSms | Mapping[str, Any]) -> WriteResult[SmsRef]:
        """POST /messaging/sms ({sms: {id}}; the sandbox answers 201, the spec says only
        "200-class"). Retried only after a 429 (a refusal) or when the request provably never
        left (connect errors): a 5xx or a reset raise, because the SMS may already be sent."""
        return await self._write("send_sms", "sms", SmsRef, request_body(request, SendSms))

    async def create_conversation(
        self, request: CreateConversation | Mapping[str, Any]
    ) -> WriteResult[Conversation]:
        """POST /messaging/conversations (shape not shown; the sandbox's: an outbound
        WhatsApp text, answering 201 {conversation})."""
        body = request_body(request, CreateConversation)
        return await self._write("create_conversation", "conversation", Conversation, body)

    async def post_message(
        self, conversation_id: str, request: NewMessage | Mapping[str, Any]
    ) -> WriteResult[Message]:
        """POST /messaging/conversations/{id}/messages (the sandbox's shape; 201 {message})."""
        body = request_body(request, NewMessage)
        return await self._write(
            "post_message", "message", Message, body, conversation_id=conversation_id
        )

    async def list_all_whatsapp_templates(self) -> list[WhatsappTemplate]:
        """GET /messaging/whatsapp_templates, every page (record fields not shown)."""
        return await self._list_all("list_whatsapp_templates", WhatsappTemplate)

    async def list_all_canned_messages(self) -> list[CannedMessage]:
        """GET /messaging/canned_messages, every page (record fields not shown)."""
        return await self._list_all("list_canned_messages", CannedMessage)

    async def list_all_wrapup_codes(self) -> list[WrapupCode]:
        """GET /contact_center/wrapup_codes, every page (record fields not shown)."""
        return await self._list_all("list_wrapup_codes", WrapupCode)

    # --- tasks -------------------------------------------------------------------------------

    async def schedule_callback(
        self, request: ScheduleCallback | Mapping[str, Any]
    ) -> WriteResult[ScheduledCallback]:
        """POST /tasks/scheduled_callbacks (the scope table's spelling; the sandbox also serves
        /tasks/schedule_callbacks). Body and {scheduled_callback} answer: the sandbox's."""
        body = request_body(request, ScheduleCallback)
        return await self._write("schedule_callback", "scheduled_callback", ScheduledCallback, body)

    async def list_webhook_failures(
        self, *, limit: int | None = None, offset: int = 0
    ) -> ListPage[WebhookFailure]:
        """GET /tasks/webhook_failures (the scope table's spelling; one page)."""
        return await self._list_page(
            "list_webhook_failures", WebhookFailure, limit=limit, offset=offset
        )

    async def list_all_webhook_failures(self) -> list[WebhookFailure]:
        """Every webhook failure."""
        return await self._list_all("list_webhook_failures", WebhookFailure)

    async def retrigger_webhook_failure(
        self, webhook_failure_id: str | int
    ) -> WriteResult[WebhookFailure]:
        """POST /tasks/webhook_failures/{id}/retrigger (the scope table's method and spelling;
        the migration mapping says GET /tasks/webhooks/failures/...). Not retried: a retrigger
        sends the hook again."""
        return await self._write(
            "retrigger_webhook_failure",
            "webhook_failure",
            WebhookFailure,
            None,
            webhook_failure_id=webhook_failure_id,
        )
