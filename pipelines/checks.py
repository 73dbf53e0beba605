"""Asset checks: every reconciliation of the pipeline, visible per partition in the Dagster UI.

The CDR checks are computed in the step that writes the day (`DayChecks` sees every row group as
it is written), so no step reads a partition back to check it; they are check specs of that
step, with the names, assets and blocking behaviour they always had. The row count against the
API's `metadata.total` is blocking: when it fails, the day's typed tables are not written. The
snapshot checks read the latest snapshot of each table.
"""

from collections.abc import Callable, Collection, Iterator, Sequence
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from typing import Any

import dagster as dg
import polars as pl

from models.tables import TABLES, TYPE_TABLES
from pipelines.partitions import partition_window
from pipelines.resources import WarehouseResource
from warehouse.lake import Lake
from warehouse.normalize import NormalizedTables

RAW_CDRS = "raw_cdrs"
ROW_COUNT_CHECK = "row_count_matches_api_total"
# Per-type table name -> the CDR `type` value whose rows it holds.
TABLE_TYPES: dict[str, str] = {spec.name: kind for kind, spec in TYPE_TABLES.items()}
# Snapshot tables checked for unique ids (their `id` is the natural key), and the asset each
# table belongs to is simply the table name.
SNAPSHOT_ID_TABLES: tuple[str, ...] = (
    "users",
    "queues",
    "skills",
    "teams",
    "campaigns",
    "numbers",
    "caller_id_groups",
)
SAMPLE = 5

CDR_CHECK_SPECS: tuple[dg.AssetCheckSpec, ...] = (
    dg.AssetCheckSpec(
        ROW_COUNT_CHECK,
        asset=RAW_CDRS,
        blocking=True,
        description="Rows written equal the API's metadata.total for the window.",
    ),
    dg.AssetCheckSpec(
        "cdrs_ids_unique",
        asset="cdrs",
        description="CDR ids are unique within the day (re-runs must not duplicate).",
    ),
    dg.AssetCheckSpec(
        "cdrs_started_at_in_window",
        asset="cdrs",
        description="Every started_at lies inside the partition's [day, day+1) UTC window.",
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
        description="No record was quarantined, and raw = cdrs + quarantine rows (none dropped).",
    ),
)
_CHECK_ASSETS: dict[str, dg.AssetKey] = {spec.name: spec.asset_key for spec in CDR_CHECK_SPECS}


def _sample(values: pl.Series) -> list[str]:
    return [str(v) for v in values.head(SAMPLE).to_list()]


@dataclass
class DayChecks:
    """What the CDR checks need, gathered from each row group as it is written."""

    partition: str
    raw_rows: int = 0
    # 64-bit hashes of the ids, not the ids: 8 bytes a row, so a 1M-CDR day stays small.
    id_hashes: list[pl.Series] = field(default_factory=list)
    outside: int = 0
    outside_sample: list[str] = field(default_factory=list)
    nulls: dict[str, int] = field(default_factory=dict)
    by_type: dict[str, int] = field(default_factory=dict)
    table_rows: dict[str, int] = field(default_factory=dict)
    user_ids: set[str] = field(default_factory=set)
    quarantined: int = 0
    reasons: dict[str, int] = field(default_factory=dict)
    quarantine_sample: list[str] = field(default_factory=list)

    def add(self, raw_rows: int, tables: NormalizedTables) -> None:
        """Fold one normalized row group into the tallies (cheap column reductions only)."""
        start, end = partition_window(self.partition)
        cdrs = tables.cdrs
        self.raw_rows += raw_rows
        self.id_hashes.append(cdrs["id"].hash(seed=0))
        started = pl.col("started_at")
        outside = cdrs.filter(started.is_null() | (started < start) | (started >= end))
        self.outside += outside.height
        self.outside_sample = (self.outside_sample + _sample(outside["id"]))[:SAMPLE]
        for column in ("id", "type", "started_at"):
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
        self.quarantine_sample = (self.quarantine_sample + _sample(quarantine["id"]))[:SAMPLE]

    @staticmethod
    def _count(tally: dict[str, int], key: str, n: int) -> None:
        tally[key] = tally.get(key, 0) + n

    def results(
        self, known_users: pl.Series, written_ids: Callable[[], Iterator[pl.Series]]
    ) -> list[dg.AssetCheckResult]:
        """Every check of the typed tables (the row count is `row_count_result`).

        `written_ids` reads the day's cdrs ids back; only called when duplicates were found,
        to name them in the sample."""
        hashes = pl.concat(self.id_hashes) if self.id_hashes else pl.Series([], dtype=pl.UInt64)
        # Sorted, a duplicate sits next to its twin: +8 MB for a 1M-CDR day, where
        # `is_duplicated`'s hash table took +90 MB, the step's peak (bench/RESULTS.md).
        ordered = hashes.sort()
        dup_hashes = ordered.filter(ordered == ordered.shift(1)).unique()
        del ordered
        dupes = pl.Series("id", [], dtype=pl.String)
        if dup_hashes.len():
            dupes = pl.concat(
                [ids.filter(ids.hash(seed=0).is_in(dup_hashes.implode())) for ids in written_ids()]
            ).unique(maintain_order=True)
        start, end = partition_window(self.partition)
        cdrs_rows = self.table_rows.get("cdrs", 0)
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
            for key in [*(f"cdrs.{c}" for c in ("id", "type", "started_at"))]
            + [f"{t}.id" for t in TABLE_TYPES]
        }
        return [
            _result(
                "cdrs_ids_unique",
                dup_hashes.len() == 0,
                rows=hashes.len(),
                duplicate_ids=dup_hashes.len(),
                sample=_sample(dupes),
            ),
            _result(
                "cdrs_started_at_in_window",
                self.outside == 0,
                window_start=start.isoformat(),
                window_end=end.isoformat(),
                outside=self.outside,
                sample=self.outside_sample,
            ),
            _result("cdrs_keys_not_null", not any(nulls.values()), null_counts=nulls),
            _result(
                "cdrs_type_tables_add_up",
                all(v["rows"] == v["cdrs_of_type"] for v in compare.values())
                and typed + unknown == cdrs_rows,
                cdrs=cdrs_rows,
                typed_rows=typed,
                unknown_type_rows=unknown,
                by_table=compare,
            ),
            _result(
                "cdrs_users_known",
                missing.len() == 0,
                # A warning: the users snapshot may simply be older than the newest agents.
                severity=dg.AssetCheckSeverity.WARN,
                cdr_users=users.len(),
                known_users=known_users.len(),
                unknown_users=missing.len(),
                sample=_sample(missing),
            ),
            _result(
                "cdr_quarantine_empty",
                self.quarantined == 0 and self.raw_rows == cdrs_rows + self.quarantined,
                raw_rows=self.raw_rows,
                cdrs_rows=cdrs_rows,
                quarantined=self.quarantined,
                reasons=dict(list(self.reasons.items())[:SAMPLE]),
                sample=self.quarantine_sample,
            ),
        ]


def _result(
    check: str,
    passed: bool,
    severity: dg.AssetCheckSeverity = dg.AssetCheckSeverity.ERROR,
    **metadata: Any,
) -> dg.AssetCheckResult:
    """One CDR check's result, on the asset its spec names."""
    return dg.AssetCheckResult(
        asset_key=_CHECK_ASSETS[check],
        check_name=check,
        passed=passed,
        severity=severity,
        metadata=metadata,
    )


def row_count_result(rows: int, api_total: int) -> dg.AssetCheckResult:
    """The blocking check: rows written equal the API's metadata.total of the day's windows."""
    return _result(
        ROW_COUNT_CHECK,
        rows == api_total,
        rows=rows,
        api_total=api_total,
        difference=rows - api_total,
    )


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


def latest_snapshot(
    warehouse: WarehouseResource, table: str, columns: Sequence[str]
) -> pl.DataFrame:
    """The newest snapshot of a table (empty frame when none was taken yet)."""
    lake = warehouse.lake()
    keys = lake.partitions(table)
    frames = list(lake.iter_batches(table, keys[-1], columns=columns)) if keys else []
    if frames:
        return pl.concat(frames)
    spec = TABLES[table].file_schema()
    return pl.DataFrame(schema={c: spec[c] for c in columns})


def _ids_check(table: str) -> dg.AssetChecksDefinition:
    @dg.asset_check(
        asset=table,
        name=f"{table}_snapshot_valid",
        description=f"The latest {table} snapshot is non-empty and its ids are unique.",
    )
    def check(warehouse: WarehouseResource) -> dg.AssetCheckResult:
        ids = latest_snapshot(warehouse, table, ["id"])["id"]
        dupes = ids.filter(ids.is_duplicated()).unique()
        return dg.AssetCheckResult(
            passed=ids.len() > 0 and dupes.len() == 0,
            metadata={"rows": ids.len(), "duplicate_ids": dupes.len(), "sample": _sample(dupes)},
        )

    return check


@dg.asset_check(
    asset="balance_snapshots",
    description="The latest balance snapshot has one row whose amount is a valid decimal.",
)
def balance_is_decimal(warehouse: WarehouseResource) -> dg.AssetCheckResult:
    df = latest_snapshot(warehouse, "balance_snapshots", ["amount", "amount_raw"])
    raw = df["amount_raw"].to_list()
    valid = True
    for value in raw:
        try:
            valid = valid and value is not None and Decimal(value).is_finite()
        except InvalidOperation:
            valid = False
    return dg.AssetCheckResult(
        passed=df.height == 1 and valid and df["amount"].null_count() == 0,
        metadata={"rows": df.height, "amount_raw": [str(v) for v in raw]},
    )


def build_snapshot_checks() -> list[dg.AssetChecksDefinition]:
    """Non-empty + unique ids for every dimension snapshot, and a valid decimal balance."""
    return [*(_ids_check(table) for table in SNAPSHOT_ID_TABLES), balance_is_decimal]
