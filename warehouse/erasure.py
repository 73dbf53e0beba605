"""Erasure of one person from one account's lake: `cdrhouse privacy forget` (issue 26).

Under `CDRHOUSE_PHONE_NUMBERS=token` a person is a token (`warehouse.privacy`): a number's in
`cdrs`' from/to number and identifier columns, a name's in the account name, username and name
snapshot columns, and either inside the JSON text of `raw_cdrs.record`,
`cdr_quarantine.record` and the `extra`/`data` columns. `forget` removes it:

1. the token goes on the account's forget-list (`Lake.forget`) first, so a day landing
   meanwhile or later (a re-pull of an erased day) writes null in its place
   (`Pseudonymizer`);
2. every partition of every CDR table that holds the token anywhere (any string column, as a
   value or inside JSON text) is replaced, atomically, as the pipeline replaces partitions
   (`Lake.writer`: the old file until the new one is whole): a value equal to the token becomes
   null, the JSON literal `"<token>"` becomes `null`, a token left inside a longer text is cut
   out of it, and `pii_forgotten` is true on each row changed (the column is added, false for
   the other rows, to a partition landed without it). Every other value is as it was, in the
   file's own schema and row groups;
3. a partition that does not hold the token is not written at all (its bytes are the same).

A day step that had read the forget-list before step 1 and publishes its day after step 2
scanned it would bring the token back for that day: so the step reads the list again once the
day is published, and erases what was added meanwhile (`pipelines.cdr_day._forget_late`).
Whichever of the two comes second finds the day published and the token listed.

The rejected copies of failed days (`_rejected/raw_cdrs/…`, kept for diagnosis) are erased the
same way, and stay rejected. Aggregates (`agg_*`) are counts and sums by day, queue, agent
and type: they hold no number, name or token, so nothing there is erased.

Partitions are read a row group at a time, and searched first with the string columns alone
(polars' literal `str.contains`): a day without the token costs one scan of its text.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass, field

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

from models.tables import CDR_TABLES
from warehouse.lake import META_WRITTEN_AT, Lake, footer_key_check, footer_source
from warehouse.privacy import FORGOTTEN, is_token

# Every table a person's token can be in (`raw_cdrs`, `cdrs`, the per-type tables and the
# quarantine). The snapshots are the contact center's own objects (agents, queues, numbers).
PERSON_TABLES: tuple[str, ...] = tuple(spec.name for spec in CDR_TABLES)
# Told after each partition scanned: (table, partitions scanned, partitions of the table).
Progress = Callable[[str, int, int], None]


@dataclass(frozen=True)
class TableErasure:
    """What `forget` changed in one table: rows, and the partitions replaced."""

    rows: int = 0
    partitions: int = 0  # rejected copies included
    rejected: int = 0  # of which rejected copies of failed days


@dataclass
class ForgetResult:
    """What `forget` changed, per table (every CDR table, unchanged ones with zeros)."""

    tables: dict[str, TableErasure] = field(default_factory=dict)
    # Days landed under CDRHOUSE_PHONE_NUMBERS=raw: their numbers are in clear, and a token
    # erasure cannot find them there.
    clear_days: list[str] = field(default_factory=list)

    @property
    def rows(self) -> int:
        return sum(t.rows for t in self.tables.values())

    @property
    def partitions(self) -> int:
        return sum(t.partitions for t in self.tables.values())


def forget(
    lake: Lake,
    token: str,
    key_check: str | None = None,
    footers: dict[str, pq.FileMetaData | None] | None = None,
    progress: Progress | None = None,
) -> ForgetResult:
    """Erase `token` from one account's lake (see the module's docstring); returns what
    changed. The forget-list is written before any partition. `progress` is told after each
    partition scanned (a year of days is thousands of partitions: minutes).

    `key_check`: the check of the key `token` was made with (a number's token). A lake with
    days landed under another key is refused before anything is written (`LakeKeyConflict`):
    the person's token there is another one, and the erasure would miss those days.
    `footers`: the lake's `day_footers`, if the caller has read them already."""
    if not is_token(token):
        raise ValueError("not a token: expected 64 lowercase hex characters")
    footers = lake.day_footers() if footers is None else footers
    lake.check_key(key_check, footers)
    if key_check is not None:
        # The forget-list holds this key's tokens: a lake without token days yet (only
        # `raw` ones) is claimed by it, so no later landing makes the person's token with
        # another key, which the list would not hold.
        lake.claim_key(key_check)
    lake.forget([token])
    result = ForgetResult(clear_days=clear_days(footers))
    for table in PERSON_TABLES:
        rows = partitions = rejected = 0
        keys = lake.partitions(table)
        copies = lake.rejected_partitions(table)
        total = len(keys) + len(copies)
        for done, (key, copy) in enumerate(
            [(k, False) for k in keys] + [(k, True) for k in copies], start=1
        ):
            changed = erase_partition(lake, table, key, token, rejected=copy)
            rows += changed
            partitions += changed > 0
            rejected += copy and changed > 0
            if progress is not None:
                progress(table, done, total)
        result.tables[table] = TableErasure(rows, partitions, rejected)
    return result


def clear_days(footers: dict[str, pq.FileMetaData | None]) -> list[str]:
    """The days (`Lake.day_footers`) whose `raw_cdrs` was landed under `raw` (without the
    privacy stage's flag): numbers there are as the API sent them."""
    return [
        key.partition("=")[2]
        for key, footer in footers.items()
        if footer is not None and FORGOTTEN not in footer.schema.names
    ]


def _textual(dtype: pa.DataType) -> bool:
    return bool(
        pa.types.is_string(dtype)
        or pa.types.is_large_string(dtype)
        or pa.types.is_string_view(dtype)
    )


def _text_columns(schema: pa.Schema) -> tuple[list[str], list[str]]:
    """The string columns, and the list-of-string columns (`cdrs.tags`)."""
    strings = [f.name for f in schema if _textual(f.type)]
    lists = [
        f.name
        for f in schema
        if (pa.types.is_list(f.type) or pa.types.is_large_list(f.type))
        and _textual(f.type.value_type)
    ]
    return strings, lists


def _holds(strings: list[str], lists: list[str], token: str) -> pl.Expr:
    """Per row: does any text column hold `token` (as a value or inside a text)."""
    found = [pl.col(c).str.contains(token, literal=True) for c in strings] + [
        pl.col(c).list.eval(pl.element().str.contains(token, literal=True)).list.any()
        for c in lists
    ]
    return pl.any_horizontal(found).fill_null(False)


def _without(value: pl.Expr, token: str) -> pl.Expr:
    """A text without `token`: null if it is the token; in JSON text its literal becomes
    `null`; anywhere else it is cut out."""
    quoted = f'"{token}"'  # hex needs no JSON escaping
    cleaned = value.str.replace_all(quoted, "null", literal=True).str.replace_all(
        token, "", literal=True
    )
    return pl.when(value == token).then(pl.lit(None, pl.String())).otherwise(cleaned)


class PartitionMoved(Exception):
    """A partition was replaced by another writer (a day landing) each time it was erased."""


# Rewrites of a partition that another writer replaced meanwhile, before giving up.
ATTEMPTS = 3


def _version(footer: pq.FileMetaData | None) -> tuple[object, ...] | None:
    """Which write of a partition a footer is (its write time, rows and footer size)."""
    if footer is None:
        return None
    written = (footer.metadata or {}).get(META_WRITTEN_AT.encode())
    return written, footer.num_rows, footer.serialized_size


def _footer(lake: Lake, table: str, key: str, *, rejected: bool) -> pq.FileMetaData | None:
    if not rejected:
        return lake.partition_footer(table, key)  # the footer alone, also from an object store
    copy = lake.open_parquet(table, key, rejected=True)
    return None if copy is None else copy.metadata


class _Replaced(Exception):
    pass


def erase_partition(lake: Lake, table: str, key: str, token: str, *, rejected: bool = False) -> int:
    """Replace one partition (`rejected`: its rejected copy) without `token`; the rows changed
    (0: nothing written).

    A day landing may replace the partition while it is rewritten: publishing the rewrite
    would then put back the older rows. So the rewrite is published only if the partition is
    still the one read, else done again on the new one; the check and the publish are made
    under the key's publish lock (`Lake.publishing`), so no run of the day publishes between
    them."""
    for _ in range(ATTEMPTS):
        try:
            return _erase(lake, table, key, token, rejected=rejected)
        except _Replaced:
            continue
    where = f"{table}/{key}" + (" (rejected copy)" if rejected else "")
    raise PartitionMoved(
        f"{where} was replaced by another writer {ATTEMPTS} times while it was being erased; "
        "the token is on the forget-list: run the erasure again"
    )


def _erase(lake: Lake, table: str, key: str, token: str, *, rejected: bool) -> int:
    parquet = lake.open_parquet(table, key, rejected=rejected)
    if parquet is None:
        return 0
    schema: pa.Schema = parquet.schema_arrow
    strings, lists = _text_columns(schema)
    if not strings and not lists:
        return 0
    holds = _holds(strings, lists, token)
    groups = range(parquet.metadata.num_row_groups)
    if not any(
        pl.DataFrame(pl.from_arrow(parquet.read_row_group(g, columns=strings + lists)))
        .select(holds.any())
        .item()
        for g in groups
    ):
        return 0
    # The file's own schema (its metadata is the writer's: source and write time, fresh).
    out = schema.remove_metadata()
    if FORGOTTEN not in out.names:
        out = out.append(pa.field(FORGOTTEN, pa.bool_()))
    flag = pl.col(FORGOTTEN) if FORGOTTEN in schema.names else pl.lit(False)
    changed = 0
    publishing = contextlib.ExitStack()  # exited once the rewrite is published (or dropped)
    # The source the file records (the partition's, `Lake.partition_source`), kept.
    with (
        publishing,
        lake.writer(
            table,
            key,
            out,
            source=footer_source(parquet.metadata),
            key_check=footer_key_check(parquet.metadata),
        ) as writer,
    ):
        if rejected:
            writer.reject()
        for g in groups:
            frame = pl.DataFrame(pl.from_arrow(parquet.read_row_group(g)))
            hit = frame.select(holds.alias("hit")).to_series()
            changed += int(hit.sum())
            if not hit.any():
                writer.write(frame.with_columns(flag.alias(FORGOTTEN)))
                continue
            at = pl.lit(hit)
            frame = frame.with_columns(
                *(
                    pl.when(at).then(_without(pl.col(c), token)).otherwise(pl.col(c)).alias(c)
                    for c in strings
                ),
                *(
                    pl.when(at)
                    .then(pl.col(c).list.eval(_without(pl.element(), token)))
                    .otherwise(pl.col(c))
                    .alias(c)
                    for c in lists
                ),
                pl.when(at).then(True).otherwise(flag).alias(FORGOTTEN),
            )
            writer.write(frame)
        publishing.enter_context(lake.publishing(key))
        if _version(_footer(lake, table, key, rejected=rejected)) != _version(parquet.metadata):
            raise _Replaced  # inside the writer: the rewrite is dropped, not published
    return changed


__all__ = [
    "PERSON_TABLES",
    "ForgetResult",
    "PartitionMoved",
    "TableErasure",
    "erase_partition",
    "forget",
]
