"""A lake landed under `CDRHOUSE_PHONE_NUMBERS=token` by the real day step (the in-process
sandbox), and what the erasure tests read back from it: every value as text, the rows holding
a token, the rows flagged `pii_forgotten`, each partition file's sha256."""

from __future__ import annotations

import datetime as dt
import hashlib
import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from pipelines.cdr_day import land_day
from pipelines.resources import ContactCenterResource
from warehouse.erasure import PERSON_TABLES
from warehouse.lake import Lake
from warehouse.privacy import FORGOTTEN, PrivacyPolicy

KEY = b"erasure-test-key-not-a-secret"
POLICY = PrivacyPolicy("token", KEY)
# Fixed days: the sandbox's records of a day depend on its seed and date only.
START = dt.date(2026, 11, 1)
DAY1, DAY2 = "2026-11-02", "2026-11-03"
CDRS_PER_DAY = 300


def sandbox() -> ContactCenterResource:
    return ContactCenterResource(
        base_url="sandbox",
        sandbox_seed=5,
        sandbox_cdrs_per_day=CDRS_PER_DAY,
        sandbox_start_date=START.isoformat(),
    )


def land(lake: Lake, day: str, policy: PrivacyPolicy = POLICY) -> None:
    stats, checks = land_day(sandbox(), lake, logging.getLogger("test"), day, privacy=policy)
    assert checks.whole(stats.rows, stats.api_total), day


@dataclass(frozen=True)
class Person:
    """A caller of day 1 only: the number as the API sends it, and its token in the lake."""

    number: str
    token: str


def day1_caller(token_lake: Lake, raw_lake: Lake) -> Person:
    """The German number (49…) of day 1 in the most CDRs (as from, to or a WhatsApp identifier)
    whose token is in no partition of day 2: `raw_lake` holds day 1 landed under `raw`, matched
    by CDR id and column."""
    tokens = token_lake.read("cdrs", f"date={DAY1}")
    numbers = raw_lake.read("cdrs", f"date={DAY1}")
    day2 = token_lake.read("cdrs", f"date={DAY2}")
    assert tokens is not None
    assert numbers is not None
    assert day2 is not None
    columns = ("from_phone_number", "to_phone_number", "from_identifier", "to_identifier")
    elsewhere = {v for c in columns for v in day2[c].drop_nulls()}
    pairs = (
        pl.concat(
            tokens.select("id", token=c).join(numbers.select("id", number=c), on="id")
            for c in columns
        )
        .drop_nulls()
        .filter(pl.col("number").str.strip_chars_start("+").str.starts_with("49"))
        .filter(~pl.col("token").is_in(elsewhere))
        .group_by("number", "token")
        .agg(pl.col("id").n_unique().alias("cdrs"))
        .sort("cdrs", "number", descending=[True, False])
    )
    assert pairs.height, "no German number of day 1 only in the sandbox's days"
    number, token, _ = pairs.row(0)
    return Person(number, token)


def as_text(frame: pl.DataFrame) -> pl.DataFrame:
    """Every column as text (lists joined), to look for a value anywhere in a row."""
    return frame.select(
        pl.col(c).list.join(",") if isinstance(t, pl.List) else pl.col(c).cast(pl.String)
        for c, t in frame.schema.items()
    )


def _rows(
    lake: Lake, where: Callable[[pl.DataFrame], pl.Series | None]
) -> dict[str, set[tuple[str, str]]]:
    """Per table: the (partition, id) of every row `where` picks in its partition."""
    out: dict[str, set[tuple[str, str]]] = {}
    for table in PERSON_TABLES:
        out[table] = set()
        for key in lake.partitions(table):
            frame = lake.read(table, key)
            assert frame is not None
            picked = where(frame)
            if picked is not None:
                out[table] |= {(key, i) for i in frame.filter(picked)["id"]}
    return out


def holding(lake: Lake, token: str) -> dict[str, set[tuple[str, str]]]:
    """Per table: the (partition, id) of every row with `token` in any column."""
    return _rows(
        lake,
        lambda frame: (
            as_text(frame)
            .select(pl.any_horizontal(pl.all().str.contains(token, literal=True)).fill_null(False))
            .to_series()
        ),
    )


def flagged(lake: Lake) -> dict[str, set[tuple[str, str]]]:
    """Per table: the (partition, id) of every row whose `pii_forgotten` is true."""
    return _rows(lake, lambda frame: frame[FORGOTTEN] if FORGOTTEN in frame.columns else None)


def digests(root: Path) -> dict[str, str]:
    """sha256 of every file under `root` (the lake's partitions, marker, forget-list)."""
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file() and "_tmp" not in p.parts
    }
