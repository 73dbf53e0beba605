"""`ClientSettings`: the frozen configuration of one `ContactCenterClient`.

Environment variables are never read here; `pipelines/definitions.py` and the CLI build the
settings and pass them in.
"""

from __future__ import annotations

import ipaddress
import re
from datetime import timedelta
from typing import Any
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator, model_validator

# A cluster id becomes the first label of the host name, so it must be one DNS label.
_DNS_LABEL = re.compile(r"^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$")
_LABEL = r"[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?"
_HOSTNAME = re.compile(rf"^(?=.{{1,253}}$){_LABEL}(?:\.{_LABEL})+$")


def is_loopback_host(host: str) -> bool:
    """True for localhost, 127.0.0.0/8 and ::1: the only hosts allowed over plain HTTP."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def looks_like_url(value: str) -> bool:
    """`scheme://something`: a URL, however wrong, rather than a word or a bare host name."""
    scheme, sep, rest = value.partition("://")
    return bool(sep and scheme and rest)


def base_url_problem(value: str) -> str | None:
    """Why `value` cannot be a base URL (one line, never echoing it), or None if it can."""
    try:
        parts = urlsplit(value)
        port_ok = parts.port is None or parts.port > 0
    except ValueError:  # an unclosed IPv6 bracket, a port that is not a number or > 65535
        return "base_url must look like https://<cluster_id>.<service_domain>"
    if parts.scheme not in ("https", "http") or not parts.hostname or not port_ok:
        return "base_url must look like https://<cluster_id>.<service_domain>"
    if parts.username or parts.password or parts.query or parts.fragment:
        return "base_url must not carry credentials, a query or a fragment"
    if parts.path not in ("", "/"):
        return "base_url must not carry a path; /api/v4 is added by the client"
    if parts.scheme == "http" and not is_loopback_host(parts.hostname):
        return "HTTPS is required (plain HTTP is allowed only for loopback hosts)"
    return None


def is_host_name(value: str) -> bool:
    """A DNS name such as acme.cc.example.com (what a URL without its scheme looks like)."""
    return bool(_HOSTNAME.match(value.lower()))


class ClientSettings(BaseModel):
    """How to reach one Contact Center API v4 cluster, and how politely.

    Give either `base_url` or `cluster_id` + `service_domain` (the base URL is then
    `https://<cluster_id>.<service_domain>`), not both. Either way `base_url` is a `str` once
    validated. HTTPS is required unless the host is a loopback address (the sandbox); TLS
    verification is always on and cannot be turned off.
    """

    # hide_input_in_errors: a ValidationError would otherwise print the raw key.
    model_config = ConfigDict(frozen=True, extra="forbid", hide_input_in_errors=True)

    # Optional as input, a str once validated: `_derive_base_url` fills it from the cluster
    # form or refuses, so the None default is never kept (validate_default would reject it,
    # and is what lets a default of another type than the annotation pass mypy).
    base_url: str = Field(
        default=None,
        validate_default=True,
        description="Scheme + host (+ port), no path, no query.",
    )
    cluster_id: str | None = None
    service_domain: str | None = None
    api_key: SecretStr = Field(description="A scoped v4 API key; only sent as a Bearer header.")
    timeout_s: float = Field(default=30.0, gt=0, description="Read/write/pool timeout.")
    connect_timeout_s: float = Field(default=10.0, gt=0)
    request_deadline_s: float = Field(
        default=300.0,
        gt=0,
        description="Longest one attempt may take, from sending to its body's last byte: a "
        "server that sends a few bytes now and then never trips timeout_s (between reads).",
    )
    max_response_bytes: int = Field(
        default=512 * 2**20,
        ge=2**20,
        description="Largest response body read, decoded: past it the request fails "
        "(ResponseTooLargeError, not retried) instead of filling the memory (a body that never "
        "ends, a compression bomb). A page of 1,000 CDRs is ~1 MB.",
    )
    page_size: int = Field(default=1000, ge=1, le=1000, description="CDR page size (max 1000).")
    concurrency: int = Field(default=8, ge=1, le=64, description="Parallel CDR sub-windows.")
    page_bytes_in_flight: int = Field(
        default=64 * 2**20,
        ge=2**20,
        description="Bytes of CDR page bodies held at once (received, not yet released); a "
        "bigger page is received alone.",
    )
    rate_limit_rps: float | None = Field(
        default=None, gt=0, description="Client-side request rate; None = unlimited."
    )
    rate_limit_burst: int | None = Field(default=None, ge=1)
    max_attempts: int = Field(default=8, ge=1, le=100, description="Attempts per request.")
    max_retry_s: float = Field(default=120.0, gt=0, description="Retry budget per request.")
    backoff_base_s: float = Field(default=0.25, gt=0)
    backoff_max_s: float = Field(default=20.0, gt=0)
    sub_window: timedelta = Field(default=timedelta(hours=1), description="CDR fetch split.")
    verify_totals: bool = Field(
        default=True,
        description="Raise PaginationError when a CDR sub-window's record count differs from "
        "its metadata.total.",
    )

    @model_validator(mode="before")
    @classmethod
    def _derive_base_url(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        cluster, domain = data.get("cluster_id"), data.get("service_domain")
        if data.get("base_url") is not None:
            if cluster is not None or domain is not None:
                raise ValueError("give base_url or cluster_id + service_domain, not both")
            return data
        if not cluster or not domain:
            raise ValueError("give base_url, or both cluster_id and service_domain")
        cluster = str(cluster).lower()
        domain = str(domain).lower().strip(".")
        if not _DNS_LABEL.match(cluster):
            raise ValueError(
                f"cluster_id {cluster!r} is not a DNS label (a-z, 0-9, '-', at most 63 chars)"
            )
        if not _HOSTNAME.match(domain):
            raise ValueError(f"service_domain {domain!r} is not a host name such as example.com")
        return {**data, "base_url": f"https://{cluster}.{domain}"}

    @field_validator("base_url")
    @classmethod
    def _check_base_url(cls, value: str) -> str:
        problem = base_url_problem(value)
        if problem is not None:
            raise ValueError(problem)
        return value.rstrip("/")

    @field_validator("sub_window")
    @classmethod
    def _check_sub_window(cls, value: timedelta) -> timedelta:
        if value < timedelta(seconds=1):
            raise ValueError("sub_window must be at least one second")
        if value % timedelta(milliseconds=1):
            raise ValueError("sub_window must be a whole number of milliseconds")
        return value

    @field_validator("api_key")
    @classmethod
    def _check_key(cls, value: SecretStr) -> SecretStr:
        raw = value.get_secret_value()
        if not raw or raw != raw.strip() or any(c < " " or c == "\x7f" for c in raw):
            # Never echo the key: say only what is wrong with it. A control character would
            # be refused by the HTTP layer later, in an error quoting the header.
            raise ValueError(
                "api_key must be non-empty, without spaces at its ends, line breaks or other "
                "control characters"
            )
        return value
