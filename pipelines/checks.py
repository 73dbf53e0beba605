"""Asset checks: every reconciliation of the pipeline, visible per partition in the Dagster UI.

The CDR checks are computed in the step that writes the day (`DayChecks` sees every record as
it is received and every row group as it is written), so no step reads a partition back to check
it; they are check specs of that step. Five of them decide whether the day may replace the
published one and are blocking (`BLOCKING_CHECKS`): the row count against the API's
`metadata.total`, ids unique across the day, every `started_at` in the window, raw = cdrs +
quarantine, and a day made again not much smaller than the one the lake holds, in records or in
the rows of a typed table (an API that answers a day with fewer records, consistently, passes
the other four: a retention window passed, a key that lost a scope, an outage of its index; so
does one whose every record is quarantined or whose type is renamed, a change of its format).
When one fails, nothing of the day is published (`pipelines.cdr_day`) and the step fails naming
what was wrong. The snapshot checks are in `pipelines.defs.snapshots.checks`.
"""

import math
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import dagster as dg
import polars as pl

from models.cdr_fields import CDR_FIELDS
from models.tables import TYPE_TABLES
from models.timestamps import iso_ms
from pipelines.partitions import partition_window
from pipelines.settings import DEFAULT_MAX_DAY_SHRINK, MAX_DAY_SHRINK_VAR
from warehouse.decode import narrow, with_timestamps
from warehouse.lake import Lake
from warehouse.normalize import NormalizedTables

RAW_CDRS = "raw_cdrs"
ROW_COUNT_CHECK = "row_count_matches_api_total"
IDS_CHECK = "cdrs_ids_unique"
WINDOW_CHECK = "cdrs_started_at_in_window"
RAW_ADDS_UP_CHECK = "cdrs_raw_rows_add_up"
SHRINK_CHECK = "cdrs_day_not_shrunk"
# The checks that prove a day whole: the day is published only when every one passes.
BLOCKING_CHECKS: tuple[str, ...] = (
    ROW_COUNT_CHECK,
    IDS_CHECK,
    WINDOW_CHECK,
    RAW_ADDS_UP_CHECK,
    SHRINK_CHECK,
)
# A run's own limit of how much smaller its days may be (the UI's launchpad or backfill dialog:
# "1" accepts a day the API really returns smaller); CDRHOUSE_MAX_DAY_SHRINK otherwise.
SHRINK_TAG = "cdrhouse/max_day_shrink"
# Per-type table name -> the CDR `type` value whose rows it holds.
TABLE_TYPES: dict[str, str] = {spec.name: kind for kind, spec in TYPE_TABLES.items()}
# The `cdrs` columns no landed row may lack (normalization quarantines a record without them).
REQUIRED_COLUMNS: tuple[str, ...] = tuple(f.column for f in CDR_FIELDS.top if f.required)
SAMPLE = 5

CDR_CHECK_SPECS: tuple[dg.AssetCheckSpec, ...] = (
    dg.AssetCheckSpec(
        ROW_COUNT_CHECK,
        asset=RAW_CDRS,
        blocking=True,
        description="Rows written equal the API's metadata.total for the window.",
    ),
    dg.AssetCheckSpec(
        IDS_CHECK,
        asset="cdrs",
        blocking=True,
        description="CDR ids are unique across the day's received records (any row group).",
    ),
    dg.AssetCheckSpec(
        WINDOW_CHECK,
        asset="cdrs",
        blocking=True,
        description="Every started_at received lies inside the partition's [day, day+1) window.",
    ),
    dg.AssetCheckSpec(
        RAW_ADDS_UP_CHECK,
        asset="cdrs",
        blocking=True,
        description="raw_cdrs rows = cdrs rows + cdr_quarantine rows: no record dropped.",
    ),
    dg.AssetCheckSpec(
        SHRINK_CHECK,
        asset=RAW_CDRS,
        blocking=True,
        description=(
            "A day made again holds no more than CDRHOUSE_MAX_DAY_SHRINK (default 10 %) fewer "
            "records, nor fewer rows in cdrs or a type table, than the day the lake holds: an "
            "API that no longer returns a day in full (a retention window passed, a key that "
            "lost a scope, an outage), or sends it in a form that no longer reads, does not "
            "replace it."
        ),
    ),
    dg.AssetCheckSpec(
        "cdrs_keys_not_null",
        asset="cdrs",
        description="No nulls in the keys (id, type, started_at) of cdrs and the type tables.",
    ),
    dg.AssetCheckSpec(
        "cdrs_type_tables_add_up",
        asset="cdrs",
        description="Each per-type table holds exactly the cdrs rows of its type.",
    ),
    dg.AssetCheckSpec(
        "cdrs_users_known",
        asset="cdrs",
        description="Every CDR user id is in the users dimension (active or deleted).",
    ),
    dg.AssetCheckSpec(
        "cdr_quarantine_empty",
        asset="cdr_quarantine",
        description="No record was quarantined (an odd record does not block its day).",
    ),
)
_CHECK_ASSETS: dict[str, dg.AssetKey] = {spec.name: spec.asset_key for spec in CDR_CHECK_SPECS}


def id_sample(values: pl.Series) -> list[str]:
    return [str(v) for v in values.head(SAMPLE).to_list()]


@dataclass
class DayChecks:
    """What the CDR checks need: every record as received (`receive`), every normalized row
    group as written (`add`)."""

    partition: str
    # From `receive`: the records as the API sent them, before a row group's dedupe, so a
    # duplicate inside one group counts as much as one 5,000 rows away.
    received: int = 0
    # 64-bit hashes of the ids, not the ids: 8 bytes a record, so a 1M-CDR day stays small.
    id_hashes: list[pl.Series] = field(default_factory=list)
    outside: int = 0
    outside_sample: list[str] = field(default_factory=list)
    # From `add`: the normalized row groups.
    raw_rows: int = 0
    nulls: dict[str, int] = field(default_factory=dict)
    by_type: dict[str, int] = field(default_factory=dict)
    table_rows: dict[str, int] = field(default_factory=dict)
    user_ids: set[str] = field(default_factory=set)
    quarantined: int = 0
    reasons: dict[str, int] = field(default_factory=dict)
    quarantine_sample: list[str] = field(default_factory=list)
    # The rows of the day's published `raw_cdrs` (None: not published, or not fetched again)
    # and of its typed tables this step makes again (those published), and how much smaller
    # than those this step's may be (`shrunk`).
    landed_rows: int | None = None
    landed_tables: dict[str, int] = field(default_factory=dict)
    max_shrink: float = DEFAULT_MAX_DAY_SHRINK
    _duplicates: pl.Series | None = field(default=None, repr=False)

    @cached_property
    def _outside(self) -> pl.Expr:
        """`receive`'s filter, built once: a datetime literal costs a Series each time."""
        start, end = partition_window(self.partition)
        started = pl.col("started_at")
        return (started < start) | (started >= end)

    def receive(self, frame: pl.DataFrame) -> None:
        """Fold one page (or raw batch) of decoded records, as received: ids and started_at.

        A `started_at` that does not parse is not outside: its record is quarantined, and one
        odd record does not block its day."""
        self.received += frame.height
        self.id_hashes.append(frame["id"].drop_nulls().hash(seed=0))
        self._duplicates = None
        times = with_timestamps(
            narrow(frame, ("id", "started_at_raw")), {"started_at": pl.col("started_at_raw")}
        )
        outside = times.filter(self._outside)
        self.outside += outside.height
        self.outside_sample = (self.outside_sample + id_sample(outside["id"]))[:SAMPLE]

    def add(self, raw_rows: int, tables: NormalizedTables) -> None:
        """Fold one normalized row group into the tallies (cheap column reductions only)."""
        cdrs = tables.cdrs
        self.raw_rows += raw_rows
        for column in REQUIRED_COLUMNS:
            self._count(self.nulls, f"cdrs.{column}", cdrs[column].null_count())
        for kind, n in cdrs.group_by("type").len().iter_rows():
            self._count(self.by_type, str(kind), int(n))
        for table, frame in tables.tables().items():
            self._count(self.table_rows, table, frame.height)
            if table in TABLE_TYPES:
                self._count(self.nulls, f"{table}.id", frame["id"].null_count())
        self.user_ids.update(cdrs["user_id"].drop_nulls().unique().to_list())
        quarantine = tables.quarantine
        self.quarantined += quarantine.height
        for reason, n in quarantine.group_by("reason").len().iter_rows():
            self._count(self.reasons, str(reason), int(n))
        self.quarantine_sample = (self.quarantine_sample + id_sample(quarantine["id"]))[:SAMPLE]

    @staticmethod
    def _count(tally: dict[str, int], key: str, n: int) -> None:
        tally[key] = tally.get(key, 0) + n

    def duplicate_hashes(self) -> pl.Series:
        """The hashes of the ids received more than once (each once)."""
        if self._duplicates is None:
            hashes = pl.concat(self.id_hashes) if self.id_hashes else pl.Series([], dtype=pl.UInt64)
            # Sorted, a duplicate sits next to its twin: +8 MB for a 1M-CDR day, where
            # `is_duplicated`'s hash table took +90 MB, the step's peak (bench/RESULTS.md).
            ordered = hashes.sort()
            self._duplicates = ordered.filter(ordered == ordered.shift(1)).unique()
        return self._duplicates

    def _lost(self, landed: int | None, now: int) -> bool:
        return landed is not None and lost_past(landed, now, self.max_shrink)

    def _shrunk_tables(self) -> list[str]:
        """The typed tables made again with fewer rows than the lake's, past the limit, `cdrs`
        first (the one every view reads)."""
        return sorted(
            (
                table
                for table, landed in self.landed_tables.items()
                if self._lost(landed, self.table_rows.get(table, 0))
            ),
            key=lambda table: (table != "cdrs", table),
        )

    def shrunk(self, rows: int) -> bool:
        """Whether the day made again (`rows` records) is smaller than the lake's, past the
        limit: fewer records (an API that answers the day smaller), or fewer rows in one of its
        typed tables (records sent in a form that no longer reads, quarantined, or under a
        type name the tables do not know)."""
        return self._lost(self.landed_rows, rows) or bool(self._shrunk_tables())

    def passes(self, rows: int, api_total: int | None) -> dict[str, bool]:
        """Each blocking check's verdict, from the tallies alone (no I/O): what decides whether
        the day is published. `api_total` None: no API was asked (a re-normalization)."""
        return {
            ROW_COUNT_CHECK: api_total is None or rows == api_total,
            IDS_CHECK: self.duplicate_hashes().len() == 0,
            WINDOW_CHECK: self.outside == 0,
            RAW_ADDS_UP_CHECK: self.raw_rows == self.table_rows.get("cdrs", 0) + self.quarantined,
            SHRINK_CHECK: not self.shrunk(rows),
        }

    def smaller(self, rows: int) -> str | None:
        """What the day made again lost within the limit (or by a run that accepts any), for
        the run's log: a smaller day that replaces the lake's leaves a trace; None if nothing."""
        lost = [
            f"{table} {landed} -> {self.table_rows.get(table, 0)}"
            for table, landed in sorted(self.landed_tables.items())
            if self.table_rows.get(table, 0) < landed
        ]
        if self.landed_rows is not None and rows < self.landed_rows:
            lost.insert(0, f"records {self.landed_rows} -> {rows}")
        if not lost:
            return None
        return (
            f"day {self.partition} is smaller than the lake's ({', '.join(lost)}), within "
            f"the limit of {self.max_shrink:.0%} ({MAX_DAY_SHRINK_VAR} or the run tag "
            f"{SHRINK_TAG})"
        )

    def shrink_result(self, rows: int) -> dg.AssetCheckResult:
        """`SHRINK_CHECK` of a day made again: `rows` records, and its typed tables' rows,
        against the lake's."""
        landed, tables = self.landed_rows, self._shrunk_tables()
        accept = (
            f"{MAX_DAY_SHRINK_VAR} allows {self.max_shrink:.0%}): {{why}}; if that is really "
            f"the day now, run it again with the run tag {SHRINK_TAG}=1 (`cdrhouse ingest`: "
            f"{MAX_DAY_SHRINK_VAR}=1)"
        )
        problem = None
        if landed is not None and self._lost(landed, rows):
            problem = (
                f"{rows} records received where the lake holds {landed} for the day "
                f"({(landed - rows) / landed:.1%} fewer; "
                + accept.format(
                    why="a day the API no longer returns in full (a retention window passed, "
                    "a key that lost a scope, an outage) does not replace it"
                )
            )
        elif tables:
            table = tables[0]
            reasons = ", ".join(f"{n} {reason}" for reason, n in list(self.reasons.items())[:3])
            types = ", ".join(f"{n} {kind}" for kind, n in sorted(self.by_type.items()))
            problem = (
                f"{self.table_rows.get(table, 0)} of {rows} records normalized into {table} "
                f"where the lake's {table} holds {self.landed_tables[table]} for the day "
                f"({self.quarantined} quarantined: {reasons or 'none'}; types normalized: "
                f"{types or 'none'}; "
                + accept.format(
                    why="records the API now sends in a form cdrhouse does not read, or under "
                    "another type name (a change of the API's format), do not empty the "
                    "day's typed tables"
                )
            )
        return _result(
            SHRINK_CHECK,
            problem is None,
            problem,
            rows=rows,
            landed_rows=landed,
            table_rows={t: self.table_rows.get(t, 0) for t in self.landed_tables},
            landed_table_rows=dict(self.landed_tables),
            max_shrink=self.max_shrink,
        )

    def whole(self, rows: int, api_total: int | None) -> bool:
        """Whether every blocking check passes: the day may replace the published one."""
        return all(self.passes(rows, api_total).values())

    def results(
        self, known_users: pl.Series, received_ids: Callable[[], Iterator[pl.Series]]
    ) -> list[dg.AssetCheckResult]:
        """Every check of the typed tables (the row count is `row_count_result`).

        `received_ids` reads the day's received ids back (the raw records, published or
        rejected); only called when duplicates were found, to name them in the sample."""
        dup_hashes = self.duplicate_hashes()
        dupes = pl.Series("id", [], dtype=pl.String)
        if dup_hashes.len():
            dupes = pl.concat(
                [ids.filter(ids.hash(seed=0).is_in(dup_hashes.implode())) for ids in received_ids()]
            ).unique(maintain_order=True)
        start, end = partition_window(self.partition)
        window = f"[{iso_ms(start)}, {iso_ms(end)})"
        cdrs_rows = self.table_rows.get("cdrs", 0)
        passes = self.passes(self.received, None)
        compare = {
            table: {
                "rows": self.table_rows.get(table, 0),
                "cdrs_of_type": self.by_type.get(kind, 0),
            }
            for table, kind in TABLE_TYPES.items()
        }
        typed = sum(v["rows"] for v in compare.values())
        unknown = sum(n for kind, n in self.by_type.items() if kind not in TABLE_TYPES.values())
        users = pl.Series("user_id", sorted(self.user_ids), dtype=pl.String)
        missing = users.filter(~users.is_in(known_users.implode()))
        nulls = {
            key: self.nulls.get(key, 0)
            for key in [*(f"cdrs.{c}" for c in REQUIRED_COLUMNS)] + [f"{t}.id" for t in TABLE_TYPES]
        }
        return [
            _result(
                IDS_CHECK,
                passes[IDS_CHECK],
                _plural(dup_hashes.len(), "duplicate id")
                + f" among {self.received} records received{_eg(id_sample(dupes))}",
                rows=self.received,
                duplicate_ids=dup_hashes.len(),
                sample=id_sample(dupes),
            ),
            _result(
                WINDOW_CHECK,
                passes[WINDOW_CHECK],
                f"{self.outside} started_at outside {window}{_eg(self.outside_sample)}",
                window_start=iso_ms(start),
                window_end=iso_ms(end),
                outside=self.outside,
                sample=self.outside_sample,
            ),
            _result(
                RAW_ADDS_UP_CHECK,
                passes[RAW_ADDS_UP_CHECK],
                f"raw {self.raw_rows} != cdrs {cdrs_rows} + quarantine {self.quarantined}",
                raw_rows=self.raw_rows,
                cdrs_rows=cdrs_rows,
                quarantined=self.quarantined,
            ),
            _result("cdrs_keys_not_null", not any(nulls.values()), None, null_counts=nulls),
            _result(
                "cdrs_type_tables_add_up",
                all(v["rows"] == v["cdrs_of_type"] for v in compare.values())
                and typed + unknown == cdrs_rows,
                None,
                cdrs=cdrs_rows,
                typed_rows=typed,
                unknown_type_rows=unknown,
                by_table=compare,
            ),
            _result(
                "cdrs_users_known",
                missing.len() == 0,
                None,
                # A warning: the users snapshot may simply be older than the newest agents.
                severity=dg.AssetCheckSeverity.WARN,
                cdr_users=users.len(),
                known_users=known_users.len(),
                unknown_users=missing.len(),
                sample=id_sample(missing),
            ),
            _result(
                "cdr_quarantine_empty",
                self.quarantined == 0,
                None,
                raw_rows=self.raw_rows,
                cdrs_rows=cdrs_rows,
                quarantined=self.quarantined,
                reasons=dict(list(self.reasons.items())[:SAMPLE]),
                sample=self.quarantine_sample,
            ),
        ]


def _plural(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def _eg(sample: Sequence[str]) -> str:
    return f" (e.g. {', '.join(sample)})" if sample else ""


def _result(
    check: str,
    passed: bool,
    problem: str | None,
    severity: dg.AssetCheckSeverity = dg.AssetCheckSeverity.ERROR,
    **metadata: Any,
) -> dg.AssetCheckResult:
    """One CDR check's result, on the asset its spec names; a failed one with `problem` says
    what was wrong in its description (and in the step's failure, for a blocking check)."""
    return dg.AssetCheckResult(
        asset_key=_CHECK_ASSETS[check],
        check_name=check,
        passed=passed,
        severity=severity,
        description=None if passed else problem,
        metadata=metadata,
    )


def row_count_result(rows: int, api_total: int) -> dg.AssetCheckResult:
    """Rows received equal the API's metadata.total of the day's windows."""
    return _result(
        ROW_COUNT_CHECK,
        rows == api_total,
        f"{rows} rows received != API total {api_total}",
        rows=rows,
        api_total=api_total,
        difference=rows - api_total,
    )


def lost_past(landed: int, now: int, max_shrink: float) -> bool:
    """Whether `now` rows lose more of `landed` than `max_shrink` allows (rounded up: a small
    day may lose one record, as the source deletes one)."""
    return landed - now > math.ceil(round(landed * max_shrink, 6))


def shrink_limit(tags: Mapping[str, str], default: float) -> float:
    """A run's limit of how much smaller a day may be: its `SHRINK_TAG`, else `default`.
    Raises ValueError (saying what is expected) for a tag that is not a fraction from 0 to 1."""
    value = tags.get(SHRINK_TAG)
    if value is None:
        return default
    try:
        limit = float(value)
    except ValueError:
        limit = math.nan
    if not 0.0 <= limit <= 1.0:  # NaN too
        raise ValueError(
            f"run tag {SHRINK_TAG}={value!r}: expected a fraction from 0 to 1 (1 accepts a day "
            "of any size)"
        )
    return limit


def blocking_problems(results: Sequence[dg.AssetCheckResult]) -> list[str]:
    """`check: what was wrong` for each failed blocking check among `results`."""
    return [
        f"{r.check_name}: {r.description or 'failed'}"
        for r in results
        if r.check_name in BLOCKING_CHECKS and not r.passed
    ]


def selected(
    results: Sequence[dg.AssetCheckResult], keys: Collection[dg.AssetCheckKey]
) -> list[dg.AssetCheckResult]:
    """The results whose check is in the run's selection."""
    return [
        r
        for r in results
        if r.asset_key is not None and dg.AssetCheckKey(r.asset_key, r.check_name or "") in keys
    ]


def known_user_ids(lake: Lake, wanted: Collection[str]) -> pl.Series:
    """The user ids `cdrs_users_known` compares `wanted` (the day's CDR users) with: every id of
    the newest users snapshot (it carries active and deleted users), plus the wanted ids found
    only in older snapshots. Older snapshots are read, newest first, only while a wanted id is
    still unseen: one partition on a normal day instead of the whole history, and the same
    verdict as reading every snapshot (a user the API has since forgotten stays known)."""
    known: list[pl.Series] = []
    unseen = set(wanted)
    for age, key in enumerate(reversed(lake.partitions("users"))):
        if age and not unseen:
            break
        for frame in lake.iter_batches("users", key, columns=["id"]):
            ids = frame["id"]
            if age:
                ids = ids.filter(ids.is_in(list(unseen)))
            known.append(ids)
            unseen.difference_update(ids.to_list())
    return pl.concat(known).unique() if known else pl.Series("id", [], dtype=pl.String)
