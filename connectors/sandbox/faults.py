"""Fault injection: `FaultConfig` (all off by default) and the ASGI middleware that applies it.

Transport-level faults (latency, rate limit, random 429/5xx, resets, truncated, HTML and empty
bodies, a missing list key) live in `FaultMiddleware`, apart from the routes. Data-level faults
(late, revised, drifting and corrupt CDRs, `total_mismatch`, `cursor_invalid_rate`) change what
the CDR endpoints serve and are applied by `datafaults.py`.
"""

from __future__ import annotations

import asyncio
import hashlib
import random
import threading
import time
from collections.abc import Awaitable, Callable, Iterator, MutableMapping
from decimal import Decimal
from typing import Annotated, Any

import orjson
from pydantic import BaseModel, ConfigDict, Field

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


MAX_DELAY_MS = 3_600_000  # an hour
# A probability: per request for transport faults, per CDR for data faults.
Rate = Annotated[float, Field(ge=0.0, le=1.0)]


class FaultConfig(BaseModel):
    """Fault knobs, all off by default. A bad value fails validation naming its field.

    The CLI derives one flag per field (``--error-429-rate``) from these fields, with the
    description as the flag's help.
    """

    # Infinity or NaN is no delay nor rate: refused, as is a delay past an hour (a typo that
    # would hold every request for ever) and an offset past what a total can hold.
    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    latency_ms: float = Field(
        0.0, ge=0, le=MAX_DELAY_MS, description="fixed delay before each answer (ms)"
    )
    jitter_ms: float = Field(
        0.0, ge=0, le=MAX_DELAY_MS, description="extra random delay, U(0, jitter) (ms)"
    )
    rate_limit_rps: float | None = Field(None, gt=0, description="token bucket rate per key")
    rate_limit_burst: int | None = Field(None, ge=1, description="token bucket size per key")
    retry_after_s: float | None = Field(None, ge=0, description="Retry-After on every 429 (s)")
    error_429_rate: Rate = Field(0.0, description="random 429 Too Many Requests")
    error_5xx_rate: Rate = Field(0.0, description="random 500 (JSON) or 502/503 (HTML)")
    reset_rate: Rate = Field(0.0, description="headers and part of a body, then a reset")
    truncate_rate: Rate = Field(0.0, description="200 whose body is cut in half")
    html_rate: Rate = Field(0.0, description="200 with an HTML page")
    empty_body_rate: Rate = Field(0.0, description="200 with an empty body")
    missing_key_rate: Rate = Field(0.0, description="200 list body without its array key")
    trickle_rate: Rate = Field(0.0, description="200 whose body comes a few bytes at a time")
    trickle_gap_ms: float = Field(
        50.0,
        ge=0,
        le=MAX_DELAY_MS,
        description="the pause between two pieces of a trickled body (ms)",
    )
    # An offset, so a negative value (a source that under-counts) is a fault too.
    total_mismatch: int = Field(
        0, ge=-(10**9), le=10**9, description="added to every list's metadata.total"
    )
    cursor_invalid_rate: Rate = Field(0.0, description="a valid cursor answered as invalid")
    late_rate: Rate = Field(0.0, description="CDRs visible only minutes after ended_at")
    late_max_minutes: int = Field(60, ge=1, description="the longest delay of a late CDR")
    revise_rate: Rate = Field(0.0, description="CDRs whose cost rises after they appear")
    revise_after_minutes: int = Field(30, ge=0, description="when a revised cost shows")
    drift_extra_field: bool = Field(False, description="an unknown field on every CDR")
    drift_unknown_type_rate: Rate = Field(0.0, description="CDRs of an unknown type")
    corrupt_rate: Rate = Field(0.0, description="CDRs with a string cost or a bad timestamp")
    after_requests: int = Field(0, ge=0, description="transport faults start after N requests")
    paths: tuple[str, ...] = Field((), description="path prefixes of transport faults")

    def __repr_args__(self) -> Iterator[tuple[str | None, Any]]:
        # Only the knobs that differ from the defaults: the repr stays one short line in
        # logs and test ids (`FaultConfig(error_5xx_rate=0.35)`).
        for name, info in type(self).model_fields.items():
            value = getattr(self, name)
            if value != info.default:
                yield name, value

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict (the admin route's body)."""
        return self.model_dump(mode="json")


class InjectedReset(Exception):
    """Raised inside the app to drop the connection (the in-process transport maps it)."""


def unit_hash(seed: int, salt: str, key: str) -> float:
    """A deterministic number in [0, 1) for a (seed, salt, key); drives per-record faults."""
    digest = hashlib.blake2b(f"{seed}:{salt}:{key}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") / 2.0**64


class _TokenBucket:
    def __init__(self, rps: float, burst: int) -> None:
        self.rps = rps
        self.capacity = float(burst)
        self.tokens = float(burst)
        self.stamp = time.monotonic()

    def take(self) -> bool:
        now = time.monotonic()
        self.tokens = min(self.capacity, self.tokens + (now - self.stamp) * self.rps)
        self.stamp = now
        if self.tokens >= 1.0:
            self.tokens -= 1.0
            return True
        return False


class FaultState:
    """Mutable fault runtime: the active config, the seeded RNG, buckets, request count."""

    def __init__(self, seed: int, config: FaultConfig) -> None:
        self._seed = seed
        self._lock = threading.Lock()
        self.config = config
        self.rng = random.Random(seed)
        self.requests = 0
        self.buckets: dict[str, _TokenBucket] = {}

    def replace(self, config: FaultConfig) -> None:
        """Swap the config; reseed so a run with the same faults repeats exactly."""
        with self._lock:
            self.config = config
            self.rng = random.Random(self._seed)
            self.requests = 0
            self.buckets = {}

    def draw(self) -> float:
        with self._lock:
            return self.rng.random()

    def admit(self, cfg: FaultConfig, scope: Scope) -> bool:
        """Token bucket per API key; True when the request may proceed. The key is hashed only
        when `cfg` limits the rate: not on every faulted request."""
        if cfg.rate_limit_rps is None:
            return True
        key = _bearer_key(scope)
        with self._lock:
            bucket = self.buckets.get(key)
            if bucket is None:
                burst = cfg.rate_limit_burst or max(1, int(cfg.rate_limit_rps))
                bucket = self.buckets[key] = _TokenBucket(cfg.rate_limit_rps, burst)
            return bucket.take()

    def count(self) -> int:
        with self._lock:
            self.requests += 1
            return self.requests


def _applies(cfg: FaultConfig, path: str) -> bool:
    if not path.startswith("/api/v4"):
        return False
    return not cfg.paths or any(path.startswith(p) for p in cfg.paths)


def _bearer_key(scope: Scope) -> str:
    for name, value in scope.get("headers", []):
        if name == b"authorization":
            # Hash: the bucket table must not hold the key itself.
            return hashlib.sha256(value).hexdigest()
    return ""


async def _simple(send: Send, status: int, body: bytes, ctype: bytes, extra: list[Any]) -> None:
    headers = [(b"content-type", ctype), (b"content-length", str(len(body)).encode()), *extra]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def _seconds(value: float) -> str:
    """Plain decimal seconds (`7`, `0.02`, never `1e-05`): the document's Retry-After pattern."""
    return format(Decimal(repr(value)).normalize(), "f")


_HTML = b"<html><head><title>Gateway</title></head><body><h1>Please wait</h1></body></html>"


class FaultMiddleware:
    """ASGI middleware applying the transport-level knobs of the live `FaultState`."""

    def __init__(self, app: ASGIApp, state: FaultState) -> None:
        self.app = app
        self.state = state

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        cfg = self.state.config
        if scope["type"] != "http" or not _applies(cfg, scope["path"]):
            await self.app(scope, receive, send)
            return
        active = self.state.count() > cfg.after_requests
        scope.setdefault("state", {})["faults_active"] = active
        if not active:
            await self.app(scope, receive, send)
            return
        if cfg.latency_ms or cfg.jitter_ms:
            await asyncio.sleep((cfg.latency_ms + cfg.jitter_ms * self.state.draw()) / 1000.0)
        if not self.state.admit(cfg, scope) or self._hit(cfg.error_429_rate):
            extra = []
            if cfg.retry_after_s is not None:
                extra.append((b"retry-after", _seconds(cfg.retry_after_s).encode()))
            await _simple(send, 429, b'{"error":"Too many requests"}', b"application/json", extra)
            return
        if self._hit(cfg.error_5xx_rate):
            status = (500, 502, 503)[int(self.state.draw() * 3)]
            # 5xx bodies are "not shown": JSON for 500, a proxy's HTML page for 502/503.
            if status == 500:
                await _simple(
                    send, 500, b'{"error":"Internal server error"}', b"application/json", []
                )
            else:
                await _simple(send, status, _HTML, b"text/html", [])
            return
        if self._hit(cfg.reset_rate):
            await self._reset(send)
        if self._hit(cfg.html_rate):
            await _simple(send, 200, _HTML, b"text/html; charset=utf-8", [])
            return
        if self._hit(cfg.empty_body_rate):
            await _simple(send, 200, b"", b"application/json", [])
            return
        truncate = self._hit(cfg.truncate_rate)
        missing = self._hit(cfg.missing_key_rate)
        gap = cfg.trickle_gap_ms / 1000.0 if self._hit(cfg.trickle_rate) else None
        if not (truncate or missing or gap is not None):
            await self.app(scope, receive, send)
            return
        await self._rewrite(scope, receive, send, truncate=truncate, missing=missing, gap=gap)

    def _hit(self, rate: float) -> bool:
        return rate > 0 and self.state.draw() < rate

    async def _reset(self, send: Send) -> None:
        # Start a response, send part of it, then raise: uvicorn drops the connection and the
        # client sees an incomplete message; the in-process transport maps it to ReadError.
        headers = [(b"content-type", b"application/json"), (b"content-length", b"4096")]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": b'{"cdrs":[', "more_body": True})
        raise InjectedReset("sandbox fault: connection reset")

    async def _rewrite(
        self,
        scope: Scope,
        receive: Receive,
        send: Send,
        *,
        truncate: bool,
        missing: bool,
        gap: float | None = None,
    ) -> None:
        start: Message = {}
        chunks: list[bytes] = []

        async def capture(message: Message) -> None:
            if message["type"] == "http.response.start":
                start.update(message)
            elif message["type"] == "http.response.body":
                chunks.append(message.get("body", b""))

        await self.app(scope, receive, capture)
        body = b"".join(chunks)
        status = int(start.get("status", 200))
        if status == 200 and missing:
            body = _drop_list_key(body)
        if status == 200 and truncate and len(body) > 2:
            body = body[: len(body) // 2]
        headers = [(k, v) for k, v in start.get("headers", []) if k != b"content-length"]
        headers.append((b"content-length", str(len(body)).encode()))
        await send({"type": "http.response.start", "status": status, "headers": headers})
        if gap is None:
            await send({"type": "http.response.body", "body": body})
            return
        # Trickled: each piece well within any read timeout, so only a deadline on the
        # whole response stops a client from waiting for the rest; the trickle stops when
        # the client hangs up (else the server's shutdown waits for every body's end).
        gone = asyncio.Event()

        async def watch() -> None:
            while (await receive())["type"] != "http.disconnect":
                pass
            gone.set()

        watcher = asyncio.create_task(watch())
        pieces = [body[i : i + TRICKLE_BYTES] for i in range(0, len(body), TRICKLE_BYTES)]
        try:
            for n, piece in enumerate(pieces or [b""], 1):
                more = n < len(pieces)
                await send({"type": "http.response.body", "body": piece, "more_body": more})
                if more:
                    await asyncio.sleep(gap)
                if gone.is_set():
                    return
        finally:
            watcher.cancel()


TRICKLE_BYTES = 256  # a trickled body's piece


def _drop_list_key(body: bytes) -> bytes:
    """Remove the plural array (e.g. `cdrs`) from a list body, keeping `metadata`."""
    try:
        obj = orjson.loads(body)
    except orjson.JSONDecodeError:
        return body
    if isinstance(obj, dict):
        for key in [k for k, v in obj.items() if isinstance(v, list)]:
            del obj[key]
    return orjson.dumps(obj)
