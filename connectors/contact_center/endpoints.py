"""One table of every v4 endpoint: method, path template, scope, retry safety, list limits.

Scopes come from the spec. Where the spec says "not shown" (queue detail, queue members,
skills, deleted-user detail, team detail, team members), the scope is the one the spec gives
for the surrounding domain (routing.queues.read, users.read, users.teams.read), which is also
the sandbox's choice (docs/sandbox.md). Skills: the sandbox's `routing.skills.read`.

`max_limit` is the per-endpoint page-size bound: numbers, messages, team members and caller-ID
groups are capped at 100 (the spec's prose; its parameter range for team members and caller-ID
groups reads 0-1000, we keep the safe 100), CDRs at 1000, and the "shared parameter" lists at
100 (their bounds are not shown, and 100 is the default everywhere).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum


class Safety(Enum):
    """What a retry of the request may do on the server."""

    READ = "read"  # GET: no side effect, always retried
    IDEMPOTENT = "idempotent"  # same body, same result (PATCH of a campaign): retried
    ONCE = "once"  # creates or transitions: retried only when provably never sent


@dataclass(frozen=True)
class Endpoint:
    """One route of the API as the client uses it."""

    method: str
    path: str
    scope: str
    safety: Safety
    list_key: str | None = None  # plural array of a list response
    max_limit: int | None = None  # page-size bound of a list endpoint

    def url(self, **ids: object) -> str:
        """The concrete path; ids are formatted into the template (never the key)."""
        return self.path.format(**{k: _path_id(v) for k, v in ids.items()})


def _path_id(value: object) -> str:
    text = str(value)
    # Ids come from API data or callers; refuse anything that would change the path.
    if not text or any(c in text for c in "/?#%\\ \t\r\n"):
        raise ValueError(f"invalid path id {text!r}")
    return text


_R, _I, _O = Safety.READ, Safety.IDEMPOTENT, Safety.ONCE
_V4 = "/api/v4"

ENDPOINTS: dict[str, Endpoint] = {
    # Voice
    "start_call": Endpoint("POST", f"{_V4}/voice/calls", "voice.call.manage", _O),
    "hangup_call": Endpoint(
        "POST", f"{_V4}/voice/calls/{{call_id}}/hangup", "voice.call.manage", _O
    ),
    # Routing
    "list_queues": Endpoint(
        "GET", f"{_V4}/routing/queues", "routing.queues.read", _R, "queues", 100
    ),
    "get_queue": Endpoint("GET", f"{_V4}/routing/queues/{{queue_id}}", "routing.queues.read", _R),
    "list_queue_users": Endpoint(
        "GET", f"{_V4}/routing/queues/{{queue_id}}/users", "routing.queues.read", _R, "users", 100
    ),
    "list_queue_supervisors": Endpoint(
        "GET",
        f"{_V4}/routing/queues/{{queue_id}}/supervisors",
        "routing.queues.read",
        _R,
        "users",
        100,
    ),
    "list_skills": Endpoint(
        "GET", f"{_V4}/routing/skills", "routing.skills.read", _R, "skills", 100
    ),
    "get_skill": Endpoint("GET", f"{_V4}/routing/skills/{{skill_id}}", "routing.skills.read", _R),
    # Users and teams
    "list_users": Endpoint("GET", f"{_V4}/users", "users.read", _R, "users", 100),
    "get_user": Endpoint("GET", f"{_V4}/users/{{user_id}}", "users.read", _R),
    "list_deleted_users": Endpoint("GET", f"{_V4}/users/deleted", "users.read", _R, "users", 100),
    "get_deleted_user": Endpoint("GET", f"{_V4}/users/deleted/{{user_id}}", "users.read", _R),
    "list_teams": Endpoint("GET", f"{_V4}/users/teams", "users.teams.read", _R, "teams", 100),
    "get_team": Endpoint("GET", f"{_V4}/users/teams/{{team_id}}", "users.teams.read", _R),
    "list_team_users": Endpoint(
        "GET", f"{_V4}/teams/{{team_id}}/users", "users.teams.read", _R, "users", 100
    ),
    "list_team_supervisors": Endpoint(
        "GET", f"{_V4}/teams/{{team_id}}/supervisors", "users.teams.read", _R, "users", 100
    ),
    # Campaigns
    "list_campaigns": Endpoint("GET", f"{_V4}/campaigns", "campaigns.read", _R, "campaigns", 100),
    "create_campaign": Endpoint("POST", f"{_V4}/campaigns", "campaigns.manage", _O),
    "get_campaign": Endpoint("GET", f"{_V4}/campaigns/{{campaign_id}}", "campaigns.read", _R),
    "update_campaign": Endpoint(
        "PATCH", f"{_V4}/campaigns/{{campaign_id}}", "campaigns.manage", _I
    ),
    "add_leads": Endpoint("POST", f"{_V4}/campaigns/{{campaign_id}}/leads", "campaigns.manage", _O),
    "update_leads": Endpoint(
        "PATCH", f"{_V4}/campaigns/{{campaign_id}}/leads", "campaigns.manage", _O
    ),
    "start_campaign": Endpoint(
        "POST", f"{_V4}/campaigns/{{campaign_id}}/start", "campaigns.manage", _O
    ),
    "stop_campaign": Endpoint(
        "POST", f"{_V4}/campaigns/{{campaign_id}}/stop", "campaigns.manage", _O
    ),
    "pause_campaign": Endpoint(
        "POST", f"{_V4}/campaigns/{{campaign_id}}/pause", "campaigns.manage", _O
    ),
    # Reporting
    "list_cdrs": Endpoint("GET", f"{_V4}/reporting/cdrs", "reporting.cdrs.read", _R, "cdrs", 1000),
    "get_cdr": Endpoint("GET", f"{_V4}/reporting/cdrs/{{cdr_id}}", "reporting.cdrs.read", _R),
    # Messaging
    "list_messages": Endpoint(
        "GET",
        f"{_V4}/messaging/conversations/{{conversation_id}}/messages",
        "messaging.conversations.read",
        _R,
        "messages",
        100,
    ),
    "send_sms": Endpoint("POST", f"{_V4}/messaging/sms", "messaging.sms.send", _O),
    "create_conversation": Endpoint(
        "POST", f"{_V4}/messaging/conversations", "messaging.conversations.manage", _O
    ),
    "post_message": Endpoint(
        "POST",
        f"{_V4}/messaging/conversations/{{conversation_id}}/messages",
        "messaging.conversations.manage",
        _O,
    ),
    "list_whatsapp_templates": Endpoint(
        "GET",
        f"{_V4}/messaging/whatsapp_templates",
        "messaging.whatsapp_templates.read",
        _R,
        "whatsapp_templates",
        100,
    ),
    "list_canned_messages": Endpoint(
        "GET",
        f"{_V4}/messaging/canned_messages",
        "messaging.canned_messages.read",
        _R,
        "canned_messages",
        100,
    ),
    # Contact center
    "list_wrapup_codes": Endpoint(
        "GET",
        f"{_V4}/contact_center/wrapup_codes",
        "contact_center.wrapup_codes.read",
        _R,
        "wrapup_codes",
        100,
    ),
    # Numbers
    "list_numbers": Endpoint("GET", f"{_V4}/numbers", "numbers.read", _R, "numbers", 100),
    "list_caller_id_groups": Endpoint(
        "GET", f"{_V4}/numbers/caller-id-groups", "numbers.read", _R, "caller_id_groups", 100
    ),
    # Billing
    "get_balance": Endpoint("GET", f"{_V4}/billing/balance", "billing.balance.read", _R),
    # Tasks
    "schedule_callback": Endpoint(
        "POST", f"{_V4}/tasks/scheduled_callbacks", "tasks.scheduled_callbacks.manage", _O
    ),
    "list_webhook_failures": Endpoint(
        "GET", f"{_V4}/tasks/webhook_failures", "tasks.webhooks.read", _R, "webhook_failures", 100
    ),
    "retrigger_webhook_failure": Endpoint(
        "POST",
        f"{_V4}/tasks/webhook_failures/{{webhook_failure_id}}/retrigger",
        "tasks.webhooks.manage",
        _O,
    ),
}
