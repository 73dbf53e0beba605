"""Settings validation: URL rules, bounds, secrecy."""

from __future__ import annotations

from datetime import timedelta

import pytest
from pydantic import SecretStr, ValidationError

from connectors.contact_center import ClientSettings

KEY = "sk-live-RECOGNIZABLE-0123456789"


def test_base_url_from_cluster_and_domain() -> None:
    # The constructor's static signature takes the cluster form (base_url is optional input).
    s = ClientSettings(cluster_id="eu-west-7", service_domain="cc.example.com", api_key=KEY)
    assert s.base_url == "https://eu-west-7.cc.example.com"


@pytest.mark.parametrize(
    "where",
    [
        {},
        {"cluster_id": "eu-west-7"},
        {"service_domain": "cc.example.com"},
        {"base_url": None},
    ],
    ids=["neither", "cluster-only", "domain-only", "base-url-none"],
)
def test_base_url_or_cluster_form_is_required(where: dict[str, str | None]) -> None:
    with pytest.raises(ValidationError, match="give base_url, or both cluster_id"):
        ClientSettings.model_validate({**where, "api_key": KEY})


@pytest.mark.parametrize(
    "cluster",
    [
        {"cluster_id": "eu-west-7", "service_domain": "cc.example.com"},
        {"cluster_id": "eu-west-7"},
        {"service_domain": "cc.example.com"},
    ],
    ids=["both", "plus-cluster", "plus-domain"],
)
def test_base_url_and_cluster_form_are_exclusive(cluster: dict[str, str]) -> None:
    with pytest.raises(ValidationError, match="not both"):
        ClientSettings(base_url="https://eu-west-7.cc.example.com", api_key=KEY, **cluster)


@pytest.mark.parametrize(
    "cluster",
    ["", "-abc", "abc-", "a.b", "a_b", "a" * 64, "ab/c", "ab c"],
    ids=["empty", "lead-dash", "trail-dash", "dot", "underscore", "too-long", "slash", "space"],
)
def test_cluster_id_must_be_a_dns_label(cluster: str) -> None:
    with pytest.raises(ValidationError):
        ClientSettings.model_validate(
            {"cluster_id": cluster, "service_domain": "example.com", "api_key": SecretStr(KEY)}
        )


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1",
        "http://127.5.6.7:8080",
        "http://localhost:9000",
        "http://[::1]:81",
        "https://x.example.com",
        "https://x.example.com/",
    ],
)
def test_accepted_base_urls(url: str) -> None:
    assert ClientSettings(base_url=url, api_key=SecretStr(KEY)).base_url == url.rstrip("/")


@pytest.mark.parametrize(
    "url",
    [
        "http://x.example.com",
        "http://10.0.0.1",
        "ftp://x.example.com",
        "https://u:p@x.example.com",
        "https://x.example.com/api/v4",
        "https://x.example.com?key=1",
        "x.example.com",
    ],
    ids=["http-remote", "http-private-ip", "ftp", "userinfo", "path", "query", "no-scheme"],
)
def test_refused_base_urls(url: str) -> None:
    with pytest.raises(ValidationError):
        ClientSettings(base_url=url, api_key=SecretStr(KEY))


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("page_size", 0),
        ("page_size", 1001),
        ("concurrency", 0),
        ("rate_limit_rps", 0),
        ("max_attempts", 0),
        ("max_retry_s", 0),
        ("timeout_s", -1),
        ("sub_window", timedelta(microseconds=1500)),
    ],
)
def test_bounds(field: str, value: object) -> None:
    with pytest.raises(ValidationError):
        ClientSettings(base_url="http://127.0.0.1", api_key=SecretStr(KEY), **{field: value})


def test_frozen_and_secret() -> None:
    s = ClientSettings(base_url="http://127.0.0.1", api_key=SecretStr(KEY))
    with pytest.raises(ValidationError):
        s.page_size = 5  # type: ignore[misc]
    assert KEY not in repr(s)
    assert KEY not in str(s)
    assert KEY not in s.model_dump_json()


def test_validation_errors_do_not_echo_the_key() -> None:
    with pytest.raises(ValidationError) as info:
        ClientSettings(base_url="http://example.com", api_key=f"{KEY} ")
    assert KEY not in str(info.value)
