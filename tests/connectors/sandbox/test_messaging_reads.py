"""Messaging and other reads: conversation messages, templates, canned messages, channel
profiles, wrap-up codes and groups, webhook failures, scheduled callbacks, campaign reads."""

from __future__ import annotations

import uuid

import pytest

from connectors.sandbox import Sandbox
from tests.connectors.sandbox.conftest import Api

MESSAGE_FIELDS = {
    "id", "conversation", "direction", "user", "target_user", "content_type", "content_data",
    "status", "status_reason", "created_at", "updated_at",
}  # fmt: skip


def big_conversation(sandbox: Sandbox) -> str:
    return max(sandbox.dataset.conversations, key=lambda c: len(sandbox.dataset.conversations[c]))


def test_messages_shape_and_paging(api: Api, shared: Sandbox) -> None:
    conv = big_conversation(shared)
    path = f"/api/v4/messaging/conversations/{conv}/messages"
    body = api.json(path)
    assert len(body["messages"]) == 100  # default and max 100
    assert body["metadata"]["total"] == 150
    for m in body["messages"]:
        assert set(m) == MESSAGE_FIELDS
        assert m["conversation"] == {"id": conv}
        assert m["direction"] in ("inbound", "outbound", "whisper")
        assert m["content_type"] in ("text", "audio", "document", "image", "video", "voice")
        if m["content_type"] == "text":
            assert set(m["content_data"]) == {"text"}
        else:
            assert "url" in m["content_data"]
        if m["direction"] == "inbound":
            assert m["user"] is None
        else:
            assert set(m["user"]) == {"id", "name", "email"}
        assert (m["target_user"] is not None) == (m["direction"] == "whisper")
    rest = api.json(path, params={"offset": 100})
    assert len(rest["messages"]) == 50
    assert api.json(path, params={"limit": 0})["messages"] == []
    assert api.get(path, params={"limit": 101}).status_code == 422
    assert api.get(path, params={"offset": -1}).status_code == 422
    msg = body["messages"][3]
    assert api.json(f"/api/v4/messaging/conversations/{conv}/messages/{msg['id']}") == {
        "message": msg
    }
    conv_body = api.json(f"/api/v4/messaging/conversations/{conv}")["conversation"]
    assert conv_body["id"] == conv
    assert conv_body["messages_count"] == 150


def test_unknown_conversation_is_404(api: Api) -> None:
    path = f"/api/v4/messaging/conversations/{uuid.uuid4()}/messages"
    assert api.get(path).json() == {"error": "Not found"}
    assert api.get("/api/v4/messaging/conversations/not-a-uuid/messages").status_code == 404


@pytest.mark.parametrize(
    ("path", "key", "singular"),
    [
        ("/api/v4/messaging/whatsapp_templates", "whatsapp_templates", "whatsapp_template"),
        ("/api/v4/messaging/canned_messages", "canned_messages", "canned_message"),
        ("/api/v4/messaging/channel_profiles", "channel_profiles", "channel_profile"),
        ("/api/v4/contact_center/wrapup_codes", "wrapup_codes", "wrapup_code"),
        ("/api/v4/contact_center/wrapup_code_groups", "wrapup_code_groups", "wrapup_code_group"),
    ],
)
def test_simple_resources(api: Api, path: str, key: str, singular: str) -> None:
    body = api.json(path)
    assert body["metadata"] == {"total": len(body[key])}
    item = body[key][0]
    assert isinstance(item["id"], int)
    assert isinstance(item["name"], str)
    assert api.json(f"{path}/{item['id']}") == {singular: item}
    assert api.get(f"{path}/9999").status_code == 404


@pytest.mark.parametrize(
    "path", ["/api/v4/tasks/webhook_failures", "/api/v4/tasks/webhooks/failures"]
)
def test_webhook_failures_both_spellings(api: Api, path: str) -> None:
    body = api.json(path)
    assert body["webhook_failures"]
    first = body["webhook_failures"][0]
    assert {"id", "webhook", "event", "status_code", "failed_at"} <= set(first)


@pytest.mark.parametrize(
    "path", ["/api/v4/tasks/schedule_callbacks", "/api/v4/tasks/scheduled_callbacks"]
)
def test_scheduled_callbacks_list(fresh_api: Api, fresh: Sandbox, path: str) -> None:
    assert fresh_api.json(path) == {"scheduled_callbacks": [], "metadata": {"total": 0}}
    fresh.state.callbacks["cb-1"] = {"id": "cb-1", "phone_number": "4930123456"}
    assert fresh_api.json(path)["scheduled_callbacks"] == [fresh.state.callbacks["cb-1"]]
    assert fresh_api.json(f"{path}/cb-1") == {
        "scheduled_callback": {"id": "cb-1", "phone_number": "4930123456"}
    }
    assert fresh_api.get(f"{path}/nope").status_code == 404


def test_campaign_reads(api: Api) -> None:
    body = api.json("/api/v4/campaigns")
    campaigns = body["campaigns"]
    assert len({c["status"] for c in campaigns}) >= 4
    for c in campaigns:
        assert {"id", "name", "dial_level", "amd_enabled", "amd_voicemail_message",
                "follow_up_mode", "status"} <= set(c)  # fmt: skip
        vm = c["amd_voicemail_message"]
        if vm is not None:
            assert "voice_message_id" not in vm
            assert set(vm["voice_message"]) == {"type", "name"}
    one = campaigns[0]
    assert api.json(f"/api/v4/campaigns/{one['id']}") == {"campaign": one}
    assert api.get("/api/v4/campaigns/999").status_code == 404
    users = api.json(f"/api/v4/campaigns/{one['id']}/users")
    assert users["metadata"]["total"] == len(users["users"])
    teams = api.json(f"/api/v4/campaigns/{one['id']}/teams")["teams"]
    assert all(set(t) == {"id", "name"} for t in teams)
    assert api.get("/api/v4/campaigns/999/users").status_code == 404
