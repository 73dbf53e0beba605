"""The OpenAPI 3 document lists every path of the spec (reads, writes, mapping paths)."""

from __future__ import annotations

from tests.connectors.sandbox.conftest import Api

SPEC_PATHS = {
    ("post", "/api/v4/voice/calls"),
    ("post", "/api/v4/voice/calls/{call_id}/hangup"),
    ("get", "/api/v4/routing/queues"),
    ("get", "/api/v4/routing/queues/{queue_id}"),
    ("get", "/api/v4/routing/queues/{queue_id}/users"),
    ("get", "/api/v4/routing/queues/{queue_id}/supervisors"),
    ("get", "/api/v4/routing/skills"),
    ("get", "/api/v4/routing/skills/{skill_id}"),
    ("get", "/api/v4/users"),
    ("get", "/api/v4/users/{user_id}"),
    ("get", "/api/v4/users/deleted"),
    ("get", "/api/v4/users/deleted/{user_id}"),
    ("get", "/api/v4/users/teams"),
    ("get", "/api/v4/users/teams/{team_id}"),
    ("get", "/api/v4/teams/{team_id}/users"),
    ("get", "/api/v4/users/teams/{team_id}/users"),
    ("get", "/api/v4/users/skills"),
    ("get", "/api/v4/users/skills/{skill_id}"),
    ("get", "/api/v4/campaigns"),
    ("post", "/api/v4/campaigns"),
    ("get", "/api/v4/campaigns/{campaign_id}"),
    ("patch", "/api/v4/campaigns/{campaign_id}"),
    ("get", "/api/v4/campaigns/{campaign_id}/users"),
    ("get", "/api/v4/campaigns/{campaign_id}/teams"),
    ("post", "/api/v4/campaigns/{campaign_id}/start"),
    ("post", "/api/v4/campaigns/{campaign_id}/stop"),
    ("post", "/api/v4/campaigns/{campaign_id}/pause"),
    ("post", "/api/v4/campaigns/{campaign_id}/leads"),
    ("patch", "/api/v4/campaigns/{campaign_id}/leads"),
    ("get", "/api/v4/reporting/cdrs"),
    ("get", "/api/v4/reporting/cdrs/{cdr_id}"),
    ("get", "/api/v4/reporting/cdrs/events"),
    ("get", "/api/v4/messaging/conversations/{conversation_id}/messages"),
    ("get", "/api/v4/messaging/conversations/{conversation_id}"),
    ("get", "/api/v4/messaging/conversations/{conversation_id}/messages/{message_id}"),
    ("post", "/api/v4/messaging/sms"),
    ("post", "/api/v4/messaging/conversations"),
    ("post", "/api/v4/messaging/conversations/{conversation_id}/messages"),
    ("get", "/api/v4/messaging/whatsapp_templates"),
    ("get", "/api/v4/messaging/canned_messages"),
    ("get", "/api/v4/messaging/channel_profiles"),
    ("get", "/api/v4/numbers"),
    ("get", "/api/v4/numbers/{number_id}"),
    ("get", "/api/v4/numbers/caller-id-groups"),
    ("get", "/api/v4/billing/balance"),
    ("get", "/api/v4/contact_center/wrapup_codes"),
    ("get", "/api/v4/contact_center/wrapup_code_groups"),
    ("get", "/api/v4/tasks/webhook_failures"),
    ("get", "/api/v4/tasks/webhooks/failures"),
    ("get", "/api/v4/tasks/schedule_callbacks"),
    ("post", "/api/v4/tasks/scheduled_callbacks"),
}


def test_openapi_lists_every_spec_path(api: Api) -> None:
    doc = api.json("/api/v4/openapi.json")
    assert doc["openapi"].startswith("3.")
    listed = {(m, p) for p, ops in doc["paths"].items() for m in ops}
    missing = SPEC_PATHS - listed
    assert not missing, missing
    for ops in doc["paths"].values():
        for op in ops.values():
            assert op["responses"]
            assert op["security"]
    users = doc["paths"]["/api/v4/users"]["get"]
    assert users["security"] == [{"bearer": ["users.read"]}]
