"""Campaign writes over HTTP: create/PATCH validation (one case per constraint), PATCH rules,
the start/pause/stop state machine, feature flags and leads."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

import pytest

from connectors.sandbox import Sandbox
from tests.connectors.sandbox.conftest import V4, Api, make_write_sandbox, v4_api

READ_ONLY_KEY = "campaign-reader"
CONFLICT = {"errors": {"state": ["conflict"]}}
# Generated campaigns (see generator._build_campaigns): ids by status.
STOPPED_ID, COMPLETED_ID = 4, 5
PHONE_A, PHONE_B = "4930123456", "4989765432"


def make_sandbox(**flags: bool) -> Sandbox:
    return make_write_sandbox({READ_ONLY_KEY: frozenset({"campaigns.read"})}, now=None, **flags)


@pytest.fixture
def sandbox() -> Sandbox:
    return make_sandbox()


@pytest.fixture
def api(sandbox: Sandbox) -> Iterator[Api]:
    yield from v4_api(sandbox)


def minimal(name: str = "Spring Outreach", **extra: Any) -> dict[str, Any]:
    return {"name": name, "caller_id_sets": [{"phone_numbers": [PHONE_A]}], **extra}


def rule(**extra: Any) -> dict[str, Any]:
    return {"wait_time": 10, "wait_time_unit": "minutes", **extra}


def create(api: Api, **extra: Any) -> dict[str, Any]:
    response = api.post("/campaigns", minimal(**extra))
    assert response.status_code == 201, response.text
    campaign: dict[str, Any] = response.json()["campaign"]
    return campaign


# --- create: success shape --------------------------------------------------------------------

DEFAULTS = {
    "strategy": "simple",
    "dial_level": 1.0,
    "dial_level_override": {"enabled": True, "value": 1.5, "active_agents_threshold": 3},
    "max_dial_time": 60,
    "max_wait_time": 5,
    "max_dial_attempts": 3,
    "voice_message_id": None,
    "amd_enabled": True,
    "amd_voicemail_message": None,
    "live": {"enabled": False, "dialing_order": None},
    "use_local_caller_id": False,
    "asr_optimization_enabled": True,
    "post_call_rating": {
        "enabled": False,
        "notification_voice_message_id": None,
        "instructions_voice_message_id": None,
        "complete_voice_message_id": None,
    },
    "contact_local_time": None,
    "follow_up_rules": None,
    "follow_up_mode": "timer",
    "amd_comfort_noise_enabled": False,
    "allow_duplicate_phone_numbers": False,
}


def test_create_applies_every_default(api: Api) -> None:
    campaign = create(api)
    assert isinstance(campaign["id"], int)
    assert campaign["name"] == "Spring Outreach"
    assert campaign["status"] == "draft"
    assert campaign["caller_id_sets"] == [{"phone_numbers": [PHONE_A]}]
    for field, default in DEFAULTS.items():
        assert campaign[field] == default, field
    assert campaign["created_at"].endswith("Z")
    assert len(campaign["created_at"]) == len("2026-11-01T00:00:00.000Z")


def test_create_resolves_the_voicemail_message(api: Api) -> None:
    campaign = create(api, amd_voicemail_message={"enabled": True, "voice_message_id": 1})
    assert campaign["amd_voicemail_message"] == {
        "enabled": True,
        "voice_message": {"type": "tts", "name": "Voicemail greeting"},
    }
    fetched = api.request("GET", f"/campaigns/{campaign['id']}").json()["campaign"]
    assert fetched["amd_voicemail_message"] == campaign["amd_voicemail_message"]


def test_create_keeps_every_given_value(api: Api) -> None:
    body = minimal(
        "Full config",
        strategy="predictive_ai",
        dial_level=2.5,
        dial_level_override={"enabled": False, "value": 4, "active_agents_threshold": 2},
        max_dial_time=600,
        max_wait_time=0,
        max_dial_attempts=99,
        voice_message_id=6,
        amd_enabled=False,
        live={"enabled": True, "dialing_order": "lifo"},
        caller_id_sets=[{"phone_numbers": [PHONE_A]}, {"phone_numbers": [PHONE_B, PHONE_A]}],
        use_local_caller_id=True,
        asr_optimization_enabled=False,
        post_call_rating={"enabled": True, "complete_voice_message_id": 5},
        contact_local_time={"start_time": "08:00", "end_time": "22:00", "days_of_week": [1, 7]},
        follow_up_rules={"busy": [rule(switch_caller_id_set=True)]},
        follow_up_mode="lowest_attempts",
    )
    response = api.post("/campaigns", body)
    assert response.status_code == 201, response.text
    campaign = response.json()["campaign"]
    for field in ("strategy", "max_dial_time", "max_wait_time", "max_dial_attempts", "live"):
        assert campaign[field] == body[field]
    assert campaign["dial_level_override"]["value"] == 4.0
    assert campaign["post_call_rating"]["complete_voice_message_id"] == 5
    assert campaign["post_call_rating"]["notification_voice_message_id"] is None
    assert campaign["follow_up_rules"]["busy"] == [rule(switch_caller_id_set=True)]
    assert campaign["follow_up_rules"]["no_answer"] == []
    assert campaign["contact_local_time"] == body["contact_local_time"]


# --- create: one case per constraint ----------------------------------------------------------

TWO_SETS = [{"phone_numbers": [PHONE_A]}, {"phone_numbers": [PHONE_B]}]
CASES: list[tuple[str, dict[str, Any], str, str]] = [
    ("name-missing", {"name": None}, "name", "is required"),
    ("name-type", {"name": 5}, "name", "must be a string"),
    ("name-blank", {"name": "  "}, "name", "can't be blank"),
    ("name-101-chars", {"name": "x" * 101}, "name", "at most 100"),
    ("name-taken", {"name": "Winter Renewal"}, "name", "already been taken"),
    ("caller-sets-missing", {"caller_id_sets": None}, "caller_id_sets", "is required"),
    ("caller-sets-type", {"caller_id_sets": {}}, "caller_id_sets", "must be an array"),
    ("caller-sets-empty", {"caller_id_sets": []}, "caller_id_sets", "between 1 and 20"),
    (
        "caller-sets-21",
        {"caller_id_sets": [{"phone_numbers": [PHONE_A]}] * 21},
        "caller_id_sets",
        "between 1 and 20",
    ),
    (
        "caller-set-numbers-missing",
        {"caller_id_sets": [{}]},
        "caller_id_sets.0.phone_numbers",
        "is required",
    ),
    (
        "caller-set-number-plus",
        {"caller_id_sets": [{"phone_numbers": ["+4930123456"]}]},
        "caller_id_sets.0.phone_numbers.0",
        "E.164",
    ),
    ("strategy-case", {"strategy": "Simple"}, "strategy", "must be one of"),
    ("strategy-type", {"strategy": 1}, "strategy", "must be a string"),
    ("dial-level-below-1", {"dial_level": 0.5}, "dial_level", "greater than or equal to 1"),
    ("dial-level-above-6", {"dial_level": 6.5}, "dial_level", "less than or equal to 6"),
    ("dial-level-type", {"dial_level": "2"}, "dial_level", "must be a number"),
    ("dial-level-bool", {"dial_level": True}, "dial_level", "must be a number"),
    (
        "override-enabled-missing",
        {"dial_level_override": {"value": 2}},
        "dial_level_override.enabled",
        "is required",
    ),
    (
        "override-value-zero",
        {"dial_level_override": {"enabled": True, "value": 0}},
        "dial_level_override.value",
        "greater than 0",
    ),
    (
        "override-value-above-4",
        {"dial_level_override": {"enabled": True, "value": 4.01}},
        "dial_level_override.value",
        "less than or equal to 4",
    ),
    (
        "override-threshold-1",
        {"dial_level_override": {"enabled": True, "active_agents_threshold": 1}},
        "dial_level_override.active_agents_threshold",
        "greater than 1",
    ),
    (
        "override-threshold-5",
        {"dial_level_override": {"enabled": True, "active_agents_threshold": 5}},
        "dial_level_override.active_agents_threshold",
        "less than or equal to 4",
    ),
    (
        "override-threshold-float",
        {"dial_level_override": {"enabled": True, "active_agents_threshold": 2.5}},
        "dial_level_override.active_agents_threshold",
        "must be an integer",
    ),
    ("max-dial-time-0", {"max_dial_time": 0}, "max_dial_time", "greater than or equal to 1"),
    ("max-dial-time-601", {"max_dial_time": 601}, "max_dial_time", "less than or equal to 600"),
    ("max-dial-time-float", {"max_dial_time": 60.5}, "max_dial_time", "must be an integer"),
    ("max-wait-time-neg", {"max_wait_time": -1}, "max_wait_time", "greater than or equal to 0"),
    ("max-wait-time-3601", {"max_wait_time": 3601}, "max_wait_time", "less than or equal to 3600"),
    ("attempts-0", {"max_dial_attempts": 0}, "max_dial_attempts", "greater than or equal to 1"),
    ("attempts-100", {"max_dial_attempts": 100}, "max_dial_attempts", "less than or equal to 99"),
    ("voice-message-unknown", {"voice_message_id": 999}, "voice_message_id", "does not exist"),
    ("voice-message-type", {"voice_message_id": "1"}, "voice_message_id", "must be an integer"),
    ("amd-enabled-type", {"amd_enabled": "yes"}, "amd_enabled", "must be a boolean"),
    (
        "voicemail-enabled-missing",
        {"amd_voicemail_message": {"voice_message_id": 1}},
        "amd_voicemail_message.enabled",
        "is required",
    ),
    (
        "voicemail-message-unknown",
        {"amd_voicemail_message": {"enabled": True, "voice_message_id": 42}},
        "amd_voicemail_message.voice_message_id",
        "does not exist",
    ),
    ("live-enabled-missing", {"live": {}}, "live.enabled", "is required"),
    (
        "live-order-case",
        {"live": {"enabled": True, "dialing_order": "FIFO"}},
        "live.dialing_order",
        "must be one of",
    ),
    (
        "live-order-needs-live",
        {"live": {"enabled": False, "dialing_order": "fifo"}},
        "live.dialing_order",
        "only allowed when live is enabled",
    ),
    (
        "rating-enabled-missing",
        {"post_call_rating": {"complete_voice_message_id": 1}},
        "post_call_rating.enabled",
        "is required",
    ),
    (
        "rating-message-unknown",
        {"post_call_rating": {"enabled": True, "notification_voice_message_id": 77}},
        "post_call_rating.notification_voice_message_id",
        "does not exist",
    ),
    (
        "local-time-before-8",
        {"contact_local_time": {"start_time": "07:00", "end_time": "12:00", "days_of_week": [1]}},
        "contact_local_time.start_time",
        "between 08:00 and 22:00",
    ),
    (
        "local-time-after-22",
        {"contact_local_time": {"start_time": "09:00", "end_time": "23:00", "days_of_week": [1]}},
        "contact_local_time.end_time",
        "between 08:00 and 22:00",
    ),
    (
        "local-time-not-whole-hour",
        {"contact_local_time": {"start_time": "09:30", "end_time": "12:00", "days_of_week": [1]}},
        "contact_local_time.start_time",
        "HH:00",
    ),
    (
        "local-time-end-not-later",
        {"contact_local_time": {"start_time": "12:00", "end_time": "12:00", "days_of_week": [1]}},
        "contact_local_time.end_time",
        "later than start_time",
    ),
    (
        "local-time-day-0",
        {"contact_local_time": {"start_time": "09:00", "end_time": "12:00", "days_of_week": [0]}},
        "contact_local_time.days_of_week.0",
        "greater than or equal to 1",
    ),
    (
        "local-time-day-8",
        {"contact_local_time": {"start_time": "09:00", "end_time": "12:00", "days_of_week": [8]}},
        "contact_local_time.days_of_week.0",
        "less than or equal to 7",
    ),
    (
        "local-time-days-missing",
        {"contact_local_time": {"start_time": "09:00", "end_time": "12:00"}},
        "contact_local_time.days_of_week",
        "is required",
    ),
    (
        "follow-up-unknown-group",
        {"follow_up_rules": {"voicemail": []}},
        "follow_up_rules.voicemail",
        "not a known field",
    ),
    (
        "follow-up-21-rules",
        {"follow_up_rules": {"no_answer": [rule()] * 21}},
        "follow_up_rules.no_answer",
        "at most 20",
    ),
    (
        "rule-wait-time-missing",
        {"follow_up_rules": {"busy": [{"wait_time_unit": "hours"}]}},
        "follow_up_rules.busy.0.wait_time",
        "is required",
    ),
    (
        "rule-wait-time-0",
        {"follow_up_rules": {"failed": [rule(wait_time=0)]}},
        "follow_up_rules.failed.0.wait_time",
        "greater than or equal to 1",
    ),
    (
        "rule-wait-time-float",
        {"follow_up_rules": {"failed": [rule(wait_time=1.5)]}},
        "follow_up_rules.failed.0.wait_time",
        "must be an integer",
    ),
    (
        "rule-unit-missing",
        {"follow_up_rules": {"rejected": [{"wait_time": 5}]}},
        "follow_up_rules.rejected.0.wait_time_unit",
        "is required",
    ),
    (
        "rule-unit-case",
        {"follow_up_rules": {"abandoned": [rule(wait_time_unit="Minutes")]}},
        "follow_up_rules.abandoned.0.wait_time_unit",
        "must be one of",
    ),
    (
        "rule-switch-type",
        {"follow_up_rules": {"busy": [rule(switch_caller_id_set="no")]}},
        "follow_up_rules.busy.0.switch_caller_id_set",
        "must be a boolean",
    ),
    (
        "rule-switch-single-set",
        {"follow_up_rules": {"machine_answered": [rule(switch_caller_id_set=True)]}},
        "follow_up_rules.machine_answered.0.switch_caller_id_set",
        "only one caller ID set",
    ),
    (
        "wrapup-rule-needs-code",
        {"follow_up_rules": {"wrapup_code": [rule()]}},
        "follow_up_rules.wrapup_code.0.wrapup_code_id",
        "is required",
    ),
    ("follow-up-mode-enum", {"follow_up_mode": "fastest"}, "follow_up_mode", "must be one of"),
    ("use-local-type", {"use_local_caller_id": 1}, "use_local_caller_id", "must be a boolean"),
    ("asr-type", {"asr_optimization_enabled": None}, "asr_optimization_enabled", "boolean"),
    ("unknown-field", {"colour": "red"}, "colour", "not a known field"),
    ("status-not-writable", {"status": "running"}, "status", "not a known field"),
    (
        "patch-only-on-create",
        {"allow_duplicate_phone_numbers": True},
        "allow_duplicate_phone_numbers",
        "only accepted on update",
    ),
]


@pytest.mark.parametrize(
    ("change", "field", "message"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_create_rejects(api: Api, change: dict[str, Any], field: str, message: str) -> None:
    body = minimal()
    for key, value in change.items():
        if value is None and key in ("name", "caller_id_sets"):
            del body[key]
        else:
            body[key] = value
    response = api.post("/campaigns", body)
    assert response.status_code == 422, response.text
    errors = response.json()["errors"]
    assert field in errors, errors
    assert any(message in text for text in errors[field]), errors[field]
    listed = api.request("GET", "/campaigns", params={"limit": 100}).json()["campaigns"]
    assert "Spring Outreach" not in {c["name"] for c in listed}  # nothing was stored


def test_the_same_rules_accept_their_boundaries(api: Api) -> None:
    body = minimal(
        dial_level=6,
        max_dial_time=1,
        max_wait_time=3600,
        max_dial_attempts=1,
        caller_id_sets=TWO_SETS * 10,
        follow_up_rules={
            "no_answer": [rule(switch_caller_id_set=True)] * 20,
            "wrapup_code": [rule(wrapup_code_id=1)],
        },
    )
    response = api.post("/campaigns", body)
    assert response.status_code == 201, response.text
    assert response.json()["campaign"]["dial_level"] == 6.0


def test_errors_for_several_fields_come_together(api: Api) -> None:
    response = api.post("/campaigns", {"dial_level": 9, "max_dial_time": "x"})
    assert response.status_code == 422
    assert set(response.json()["errors"]) == {
        "name",
        "caller_id_sets",
        "dial_level",
        "max_dial_time",
    }


def test_malformed_json_and_non_object_bodies(api: Api) -> None:
    headers = {"Content-Type": "application/json"}
    broken = api.request("POST", "/campaigns", content=b'{"name": ', headers=headers)
    assert (broken.status_code, broken.json()) == (400, {"error": "Bad Request"})
    listed = api.post("/campaigns", [minimal()])
    assert listed.status_code == 422
    assert "body" in listed.json()["errors"]


def test_auth_is_checked_before_the_body(sandbox: Sandbox) -> None:
    with (
        Api(sandbox, key=None, prefix=V4) as anonymous,
        Api(sandbox, key=READ_ONLY_KEY, prefix=V4) as reader,
    ):
        assert anonymous.post("/campaigns", minimal()).json() == {"error": "Unauthorized"}
        assert anonymous.post("/campaigns", minimal()).status_code == 401
        for response in (
            reader.post("/campaigns", minimal()),
            reader.patch("/campaigns/1", {"dial_level": 2}),
            reader.post("/campaigns/1/start"),
            reader.post("/campaigns/1/leads", {"leads": [{"phone_number": PHONE_A}]}),
        ):
            assert (response.status_code, response.json()) == (403, {"error": "Forbidden"})


# --- feature flags ----------------------------------------------------------------------------

FEATURE_CASES = [
    ("dialer_ai", {"strategy": "predictive_ai"}, "strategy"),
    ("dialing_order", {"live": {"enabled": True, "dialing_order": "fifo"}}, "live.dialing_order"),
    (
        "contact_local_time",
        {"contact_local_time": {"start_time": "09:00", "end_time": "17:00", "days_of_week": [1]}},
        "contact_local_time",
    ),
]


@pytest.mark.parametrize(
    ("flag", "change", "field"), FEATURE_CASES, ids=[c[0] for c in FEATURE_CASES]
)
def test_feature_flag_off_rejects_and_on_accepts(
    flag: str, change: dict[str, Any], field: str
) -> None:
    with (
        Api(make_sandbox(**{flag: False}), prefix=V4) as off,
        Api(make_sandbox(), prefix=V4) as on,
    ):
        refused = off.post("/campaigns", minimal(**change))
        assert refused.status_code == 422
        assert "not enabled for this contact center" in refused.json()["errors"][field][0]
        patched = off.patch("/campaigns/1", change)  # generated campaign 1 is running
        assert patched.status_code == 422
        assert on.post("/campaigns", minimal(**change)).status_code == 201


def test_null_contact_local_time_needs_no_feature() -> None:
    with Api(make_sandbox(contact_local_time=False), prefix=V4) as off:
        assert off.patch("/campaigns/1", {"contact_local_time": None}).status_code == 200


# --- PATCH rules ------------------------------------------------------------------------------


def test_patch_changes_only_the_fields_present(api: Api) -> None:
    before = create(api, max_dial_attempts=7, follow_up_mode="lowest_attempts")
    response = api.patch(f"/campaigns/{before['id']}", {"dial_level": 2.5})
    assert response.status_code == 200, response.text
    after = response.json()["campaign"]
    assert after["dial_level"] == 2.5
    changed = {k for k in before if before[k] != after[k]}
    assert changed <= {"dial_level", "updated_at"}
    assert after["max_dial_attempts"] == 7  # no default re-applied on PATCH


def test_patch_on_a_generated_campaign_keeps_its_resolved_voicemail(api: Api) -> None:
    before = api.request("GET", "/campaigns/1").json()["campaign"]
    after = api.patch("/campaigns/1", {"max_wait_time": 30}).json()["campaign"]
    assert after["amd_voicemail_message"] == before["amd_voicemail_message"]
    assert after["max_wait_time"] == 30


def test_patch_replaces_follow_up_rules_whole(api: Api) -> None:
    campaign = create(api, follow_up_rules={"no_answer": [rule()], "busy": [rule(wait_time=3)]})
    new_busy = [rule(wait_time=1, wait_time_unit="hours")]
    response = api.patch(f"/campaigns/{campaign['id']}", {"follow_up_rules": {"busy": new_busy}})
    rules = response.json()["campaign"]["follow_up_rules"]
    assert rules["busy"] == [{**new_busy[0], "switch_caller_id_set": False}]
    assert rules["no_answer"] == []  # omitted group cleared


def test_patch_null_clears_contact_local_time(api: Api) -> None:
    window = {"start_time": "10:00", "end_time": "16:00", "days_of_week": [2, 4]}
    campaign = create(api, contact_local_time=window)
    assert campaign["contact_local_time"] == window
    response = api.patch(f"/campaigns/{campaign['id']}", {"contact_local_time": None})
    assert response.json()["campaign"]["contact_local_time"] is None


def test_patch_requires_enabled_in_amd_voicemail_message(api: Api) -> None:
    campaign = create(api)
    path = f"/campaigns/{campaign['id']}"
    response = api.patch(path, {"amd_voicemail_message": {"voice_message_id": 2}})
    assert response.json()["errors"] == {"amd_voicemail_message.enabled": ["is required"]}
    ok = api.patch(path, {"amd_voicemail_message": {"enabled": False, "voice_message_id": 2}})
    assert ok.json()["campaign"]["amd_voicemail_message"] == {
        "enabled": False,
        "voice_message": {"type": "audio", "name": "Hold music"},
    }


def test_patch_checks_switch_caller_id_set_against_the_resulting_sets(api: Api) -> None:
    campaign = create(
        api, caller_id_sets=TWO_SETS, follow_up_rules={"busy": [rule(switch_caller_id_set=True)]}
    )
    path = f"/campaigns/{campaign['id']}"
    shrink = api.patch(path, {"caller_id_sets": TWO_SETS[:1]})
    assert shrink.status_code == 422
    assert "only one caller ID set" in shrink.json()["errors"]["caller_id_sets"][0]
    both = api.patch(path, {"caller_id_sets": TWO_SETS[:1], "follow_up_rules": None})
    assert both.status_code == 200, both.text


def test_patch_only_booleans(api: Api) -> None:
    campaign = create(api, amd_enabled=False)
    path = f"/campaigns/{campaign['id']}"
    refused = api.patch(path, {"amd_comfort_noise_enabled": True})
    assert refused.json()["errors"] == {"amd_comfort_noise_enabled": ["requires amd_enabled"]}
    ok = api.patch(path, {"amd_enabled": True, "amd_comfort_noise_enabled": True})
    assert ok.json()["campaign"]["amd_comfort_noise_enabled"] is True
    off = api.patch(path, {"amd_enabled": False}).json()["campaign"]
    assert off["amd_comfort_noise_enabled"] is False  # no AMD, no comfort noise
    dup = api.patch(path, {"allow_duplicate_phone_numbers": True})
    assert dup.json()["campaign"]["allow_duplicate_phone_numbers"] is True


def test_patch_name_uniqueness_excludes_itself(api: Api) -> None:
    campaign = create(api)
    path = f"/campaigns/{campaign['id']}"
    assert api.patch(path, {"name": "Spring Outreach"}).status_code == 200
    taken = api.patch(path, {"name": "Survey Q4"})
    assert taken.json()["errors"] == {"name": ["has already been taken"]}


def test_patch_validates_like_create(api: Api) -> None:
    response = api.patch("/campaigns/1", {"max_dial_time": 601, "strategy": "SIMPLE"})
    assert response.status_code == 422
    assert set(response.json()["errors"]) == {"max_dial_time", "strategy"}


@pytest.mark.parametrize("campaign_id", [STOPPED_ID, COMPLETED_ID], ids=["stopped", "completed"])
def test_patch_refused_on_stopped_and_completed(api: Api, campaign_id: int) -> None:
    status = api.request("GET", f"/campaigns/{campaign_id}").json()["campaign"]["status"]
    assert status in ("stopped", "completed")
    response = api.patch(f"/campaigns/{campaign_id}", {"dial_level": 2})
    assert (response.status_code, response.json()) == (409, CONFLICT)


def test_patch_unknown_campaign_is_404(api: Api) -> None:
    for path in ("/campaigns/9999", "/campaigns/not-a-number"):
        response = api.patch(path, {"dial_level": 2})
        assert (response.status_code, response.json()) == (404, {"error": "Not found"})


# --- state machine ----------------------------------------------------------------------------

# (operations applied to a fresh draft campaign, final operation, expected status or None=409)
TRANSITION_CASES = [
    ((), "start", "running"),
    (("start",), "pause", "paused"),
    (("start", "pause"), "start", "running"),
    (("start",), "stop", "stopped"),
    (("start", "pause"), "stop", "stopped"),
    (("start", "stop"), "start", "running"),
    ((), "pause", None),
    ((), "stop", None),
    (("start",), "start", None),
    (("start", "pause"), "pause", None),
    (("start", "stop"), "stop", None),
    (("start", "stop"), "pause", None),
]


@pytest.mark.parametrize(
    ("history", "operation", "expected"),
    TRANSITION_CASES,
    ids=["-".join(("draft", *c[0], c[1])) for c in TRANSITION_CASES],
)
def test_transition(
    api: Api, history: tuple[str, ...], operation: str, expected: str | None
) -> None:
    campaign_id = create(api)["id"]
    for step in history:
        assert api.post(f"/campaigns/{campaign_id}/{step}").status_code == 200
    before = api.request("GET", f"/campaigns/{campaign_id}").json()["campaign"]
    response = api.post(f"/campaigns/{campaign_id}/{operation}")
    if expected is None:
        assert (response.status_code, response.json()) == (409, CONFLICT)
        after = api.request("GET", f"/campaigns/{campaign_id}").json()["campaign"]
        assert after["status"] == before["status"]
    else:
        assert response.status_code == 200
        assert response.json()["campaign"]["status"] == expected
        assert response.json()["campaign"]["id"] == campaign_id


@pytest.mark.parametrize("operation", ["start", "pause", "stop"])
def test_completed_is_terminal(api: Api, operation: str) -> None:
    response = api.post(f"/campaigns/{COMPLETED_ID}/{operation}")
    assert (response.status_code, response.json()) == (409, CONFLICT)


def test_stopped_campaign_refuses_patch_until_restarted(api: Api) -> None:
    campaign_id = create(api)["id"]
    api.post(f"/campaigns/{campaign_id}/start")
    api.post(f"/campaigns/{campaign_id}/stop")
    assert api.patch(f"/campaigns/{campaign_id}", {"dial_level": 2}).status_code == 409
    api.post(f"/campaigns/{campaign_id}/start")
    assert api.patch(f"/campaigns/{campaign_id}", {"dial_level": 2}).status_code == 200


def test_operation_on_unknown_campaign_is_404(api: Api) -> None:
    assert api.post("/campaigns/9999/start").status_code == 404


def test_writes_read_a_campaign_id_as_reads_do(api: Api) -> None:
    campaign_id = create(api)["id"]
    # Digits only, as GET /campaigns/{id}: int() would also take "+1", " 1" or "1_0".
    for spelling in (f"+{campaign_id}", f"0_{campaign_id}"):
        assert api.get(f"/campaigns/{spelling}").status_code == 404
        assert api.patch(f"/campaigns/{spelling}", {"dial_level": 2}).status_code == 404
        assert api.post(f"/campaigns/{spelling}/start").status_code == 404


# --- leads ------------------------------------------------------------------------------------


def test_add_and_update_leads(api: Api) -> None:
    campaign_id = create(api)["id"]
    body = {"leads": [{"phone_number": PHONE_A, "name": "Ada", "data": {"plan": "gold"}}]}
    response = api.post(f"/campaigns/{campaign_id}/leads", body)
    assert response.status_code == 201, response.text
    (lead,) = response.json()["leads"]
    assert isinstance(lead["id"], int)
    assert lead["campaign"] == {"id": campaign_id}
    assert (lead["phone_number"], lead["name"], lead["data"]) == (PHONE_A, "Ada", {"plan": "gold"})
    assert lead["status"] == "pending"
    update = {"leads": [{"id": lead["id"], "name": "Ada L."}]}
    patched = api.patch(f"/campaigns/{campaign_id}/leads", update)
    assert patched.status_code == 200
    assert patched.json()["leads"][0]["name"] == "Ada L."
    assert patched.json()["leads"][0]["phone_number"] == PHONE_A


def test_duplicate_lead_numbers_need_the_patch_only_flag(api: Api) -> None:
    campaign_id = create(api)["id"]
    path = f"/campaigns/{campaign_id}/leads"
    assert api.post(path, {"leads": [{"phone_number": PHONE_A}]}).status_code == 201
    again = api.post(path, {"leads": [{"phone_number": PHONE_A}]})
    assert again.json()["errors"] == {
        "leads.0.phone_number": ["has already been added to this campaign"]
    }
    api.patch(f"/campaigns/{campaign_id}", {"allow_duplicate_phone_numbers": True})
    assert api.post(path, {"leads": [{"phone_number": PHONE_A}]}).status_code == 201


@pytest.mark.parametrize(
    ("method", "body", "field"),
    [
        ("POST", {"leads": []}, "leads"),
        ("POST", {"leads": [{"name": "x"}]}, "leads.0.phone_number"),
        ("POST", {"leads": [{"phone_number": "12"}]}, "leads.0.phone_number"),
        ("POST", {"contacts": []}, "contacts"),
        ("PATCH", {"leads": [{"name": "x"}]}, "leads.0.id"),
        ("PATCH", {"leads": [{"id": 123456, "name": "x"}]}, "leads.0.id"),
    ],
    ids=["empty", "phone-missing", "phone-invalid", "unknown-key", "id-missing", "id-unknown"],
)
def test_lead_validation(api: Api, method: str, body: dict[str, Any], field: str) -> None:
    campaign_id = create(api)["id"]
    response = api.request(method, f"/campaigns/{campaign_id}/leads", json=body)
    assert response.status_code == 422
    assert field in response.json()["errors"]


def test_leads_refused_on_completed_and_unknown_campaigns(api: Api) -> None:
    body = {"leads": [{"phone_number": PHONE_A}]}
    assert api.post(f"/campaigns/{COMPLETED_ID}/leads", body).json() == CONFLICT
    assert api.post("/campaigns/9999/leads", body).status_code == 404


def test_created_campaign_is_listed_and_fetchable(api: Api) -> None:
    campaign = create(api)
    fetched = api.request("GET", f"/campaigns/{campaign['id']}").json()["campaign"]
    assert fetched == campaign
    listed = api.request("GET", "/campaigns", params={"limit": 100}).json()["campaigns"]
    assert copy.deepcopy(campaign) in listed


def test_auth_comes_before_the_404(sandbox: Sandbox) -> None:
    with Api(sandbox, key=None, prefix=V4) as anonymous:
        for method in ("PATCH", "POST"):
            path = "/campaigns/nope" + ("/leads" if method == "POST" else "")
            assert anonymous.request(method, path, json={}).status_code == 401
        assert anonymous.post("/campaigns/nope/start").status_code == 401
