"""Issue 26 against a server that writes a caller's number every way it can: a sandbox day served
through `RewritingApp`, where every other record carries the canary number in an odd form
(a JSON integer, spaces and dashes, a `\\u` escape, `tel:`, a trailing space, in a field the
spec does not name, nested or in a list, as a WhatsApp identifier, username or display name
with quotes and escapes, inside an SMS body). Landed by the day step under `token`, the
canary's digits are in no Parquet value and no key-value metadata of the lake."""

from __future__ import annotations

import itertools
import logging
import re
from collections.abc import Callable
from pathlib import Path

import polars as pl
import pyarrow.parquet as pq

from connectors.sandbox import Sandbox, SandboxConfig
from connectors.sandbox.config import DEFAULT_API_KEY
from pipelines.cdr_day import land_day
from pipelines.resources import ContactCenterResource
from tests.support.clock import SessionClock
from tests.support.oddserver import RewritingApp, serve_app
from warehouse.lake import Lake
from warehouse.privacy import PrivacyPolicy

DIGITS = "99988877"  # the canary's subscriber digits: +49 151 99988877
POLICY = PrivacyPolicy("token", b"odd-forms-test-key-not-a-secret")

_FROM = re.compile(rb'("from":\{[^{}]*?"phone_number":)"[^"]*"')


def _from(value: bytes) -> Callable[[bytes], bytes | None]:
    return lambda r: _FROM.sub(lambda m: m[1] + value, r, count=1)


def _extra(field: bytes) -> Callable[[bytes], bytes | None]:
    return lambda r: r[:-1] + b"," + field + b"}"


def _of(kind: bytes, pattern: bytes, value: bytes) -> Callable[[bytes], bytes | None]:
    found = re.compile(pattern)
    return lambda r: found.sub(lambda _: value, r, count=1) if kind in r else None


CONVERSATION, SMS = b'"type":"conversation"', b'"type":"sms"'
FORMS: dict[str, Callable[[bytes], bytes | None]] = {
    "integer": _from(b"4915199988877"),
    "spaces": _from(b'"+49 151 99988877"'),
    "dashes": _from(b'"+49-151-99988877"'),
    "escaped plus": _from(b'"\\u002b4915199988877"'),
    "escaped digit": _from(b'"+49151999\\u00388877"'),
    "trailing space": _from(b'"4915199988877 "'),
    "tel uri": _from(b'"tel:+4915199988877"'),
    "unknown field": _extra(b'"x_alt_phone":"+4915199988877"'),
    "unknown integer": _extra(b'"x_alt_phone":4915199988877'),
    "unknown nested": _extra(b'"x_meta":{"callback":{"number":"004915199988877"}}'),
    "unknown list": _extra(b'"x_list":["+4915199988877",4915199988877]'),
    "identifier integer": _of(
        CONVERSATION, rb'"identifier":"[^"]*"', b'"identifier":4915199988877'
    ),
    "identifier spaces": _of(
        CONVERSATION, rb'"identifier":"[^"]*"', b'"identifier":"+49 151 99988877"'
    ),
    "username": _of(CONVERSATION, rb'"username":"[^"]*"', b'"username":"+4915199988877"'),
    "name with quotes": _of(
        CONVERSATION, rb'"data":\{"name":"[^"]*"', b'"data":{"name":"Max \\"99988877\\" Canary"'
    ),
    "name escaped": _of(
        CONVERSATION, rb'"name_snapshot":"[^"]*"', b'"name_snapshot":"J\\u00fcrgen 99988877"'
    ),
    "sms body": _of(SMS, rb'"message":"[^"]*"', b'"message":"call +49 151 99988877\\nthanks"'),
}


# The forms that fit one kind of record only.
_KINDS = {
    name: kind
    for kind, names in (
        (
            CONVERSATION,
            (
                "identifier integer",
                "identifier spaces",
                "username",
                "name with quotes",
                "name escaped",
            ),
        ),
        (SMS, ("sms body",)),
    )
    for name in names
}


def test_the_canary_written_every_odd_way_is_in_no_value_of_the_lake(
    clock: SessionClock, tmp_path: Path
) -> None:
    config = SandboxConfig(seed=3, cdrs_per_day=300, start_date=clock.days_ago(6), days=7)
    sandbox = Sandbox(config)
    clock.freeze(sandbox)
    counters = {kind: itertools.count() for kind in (CONVERSATION, SMS, b"")}
    used: dict[str, int] = dict.fromkeys(FORMS, 0)

    def rewrite(record: bytes) -> bytes:
        kind = next((k for k in (CONVERSATION, SMS) if k in record), b"")
        names = [
            n for n in FORMS if _KINDS.get(n, b"") in (kind, b"") and (kind or n not in _KINDS)
        ]
        i = next(counters[kind])
        if i % 2:
            return record
        name = names[(i // 2) % len(names)]
        out = FORMS[name](record)
        if out is None or out == record:
            return record
        used[name] += 1
        return out

    lake = Lake(str(tmp_path / "lake"))
    with serve_app(RewritingApp(sandbox.app, rewrite)) as url:
        api = ContactCenterResource(base_url=url, api_key=DEFAULT_API_KEY)
        day = clock.days_ago(3).isoformat()
        stats, checks = land_day(api, lake, logging.getLogger("test"), day, privacy=POLICY)

    assert checks.whole(stats.rows, stats.api_total)
    assert all(used.values()), used  # every form reached the lake
    files = list((tmp_path / "lake").rglob("*.parquet"))
    assert len(files) >= 6
    found: list[str] = []
    for path in files:
        parquet = pq.ParquetFile(path)
        if DIGITS in str(parquet.metadata.metadata):
            found.append(f"{path.name}: key-value metadata")
        frame = pl.DataFrame(pl.from_arrow(parquet.read()))
        for column in frame.columns:
            values = [None if v is None else str(v) for v in frame[column].to_list()]
            text = pl.Series(values, dtype=pl.String())
            hits = text.str.contains(DIGITS, literal=True).fill_null(False)
            found += [f"{path.parent.parent.name}.{column}: {v}" for v in text.filter(hits)]
    assert found == []
    assert sum(1 for p in (tmp_path / "lake").rglob("*") if DIGITS.encode() in _bytes(p)) == 0


def _bytes(path: Path) -> bytes:
    return path.read_bytes() if path.is_file() and path.suffix != ".parquet" else b""
