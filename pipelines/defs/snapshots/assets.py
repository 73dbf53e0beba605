"""The snapshot assets: one multi-asset per API resource family (users, routing, campaigns,
numbers, the balance); each replaces today's (UTC) `snapshot_date=` partition of its tables."""

import time
from collections.abc import Iterator
from typing import Any

import dagster as dg

from connectors.contact_center.errors import ContactCenterError
from models.tables import TABLES
from models.timestamps import iso_ms
from pipelines.aio import run_interruptible
from pipelines.checks import SHRINK_TAG, lost_past
from pipelines.defs.snapshots.checks import SNAPSHOT_ID_TABLES
from pipelines.names import SNAPSHOT_GROUP
from pipelines.preflight import fatal_setup_errors
from pipelines.resources import (
    ContactCenterResource,
    WarehouseResource,
    utc_now,
)
from pipelines.scope import DEFAULT_SCOPE, AccountScope
from pipelines.settings import MAX_DAY_SHRINK_VAR
from pipelines.snapshot_sources import (
    SNAPSHOT_SOURCES,
    SnapshotSource,
    build_snapshot_frames,
    fetch_snapshot,
)
from pipelines.steps import api_failure, landed, nightly_freshness, run_max_shrink
from warehouse.lake import Lake


def _snapshot_asset(
    source: SnapshotSource, retry_policy: dg.RetryPolicy, scope: AccountScope
) -> dg.AssetsDefinition:
    @dg.multi_asset(
        name=scope.op(f"{source.name}_snapshot"),
        group_name=scope.named(SNAPSHOT_GROUP),
        pool=scope.pool,
        retry_policy=retry_policy,
        required_resource_keys={scope.resource_key, "warehouse"},
        specs=[
            dg.AssetSpec(
                scope.key(table),
                kinds={"parquet", "api"},
                freshness_policy=nightly_freshness(),
                description=TABLES[table].description,
            )
            for table in source.tables
        ],
    )
    @fatal_setup_errors
    def snapshot(context: dg.AssetExecutionContext) -> Iterator[dg.MaterializeResult[Any]]:
        """Read the resource(s) now and replace today's (UTC) snapshot partition."""
        contact_center: ContactCenterResource = getattr(context.resources, scope.resource_key)
        warehouse: WarehouseResource = context.resources.warehouse
        source_id = contact_center.source_id  # fails at once when no source is configured
        lake = warehouse.lake(scope.account_id)
        lake.check_source(source_id)  # before any API call: refuse early (fatal_setup_errors)
        # How much smaller than the last snapshot a list may be (`_refuse_a_shrunk_list`).
        max_shrink = run_max_shrink(context, warehouse)
        taken_at = utc_now()
        begun = time.perf_counter()
        try:
            fetched = run_interruptible(fetch_snapshot(source, contact_center, context.log))
        except ContactCenterError as exc:
            raise api_failure(exc, partition=None, api=contact_center) from exc
        frames = build_snapshot_frames(source.name, fetched, taken_at)
        seconds = time.perf_counter() - begun
        key = f"snapshot_date={taken_at.date().isoformat()}"
        # The family's own list (users, queues, ...): its member links may be empty, and the
        # balance always has its one row.
        listed = source.tables[0]
        if listed in SNAPSHOT_ID_TABLES:
            _refuse_a_shrunk_list(lake, listed, frames[listed].height, max_shrink, context.log)
        lake.write_together(key, {t: frames[t] for t in source.tables}, source=source_id)
        warehouse.views_after_landing(context.log)
        for table in source.tables:
            frame = frames[table]
            yield landed(
                scope.key(table),
                frame.height,
                frame,
                (frame.height, seconds),
                api_records=fetched.records,
                api_requests=fetched.requests,
                snapshot_at=iso_ms(taken_at),
                partition=key,
            )

    return snapshot


def _refuse_a_shrunk_list(
    lake: Lake, table: str, now: int, max_shrink: float, log: dg.DagsterLogManager
) -> None:
    """A list the API answered with nothing where the last snapshot of `table` has rows, or
    `users` (active and deleted: a deleted user stays listed) smaller by more than
    `max_shrink` allows: a server answering before its directory (or its deleted users) is
    loaded far more often than a contact center that lost its agents or every queue. Landed,
    it would replace today's snapshot and empty the view (every CDR's agent or queue unknown)
    until the next night; the step fails instead, and is retried. A run tagged `SHRINK_TAG`=1
    (or `MAX_DAY_SHRINK_VAR`=1) lands it. Other lists may shrink (campaigns end, numbers are
    released): only an empty one is held."""
    users = table == "users"
    keys = lake.partitions(table)
    if not keys or max_shrink >= 1.0 or not (now == 0 or users):
        return  # a new account (no snapshot to compare with), accepted, or nothing to hold
    try:
        footer = lake.partition_footer(table, keys[-1])  # its row count, from the footer
    except (OSError, ValueError) as exc:  # ArrowInvalid is a ValueError
        # A damaged snapshot must not stop the snapshot that replaces it.
        where = lake.partition_url(table, keys[-1])
        log.warning(f"{where} cannot be read ({exc}); the new snapshot is not compared with it")
        return
    before = 0 if footer is None else footer.num_rows
    if not (now == 0 < before or (users and lost_past(before, now, max_shrink))):
        return
    day = keys[-1].removeprefix("snapshot_date=")
    if now == 0:
        listed = "no user, active or deleted," if users else f"no {table}"
    else:
        listed = (
            f"{now} users, active and deleted, ({(before - now) / before:.1%} fewer; "
            f"{MAX_DAY_SHRINK_VAR} allows {max_shrink:.0%})"
        )
    raise dg.Failure(
        description=f"the API listed {listed} where the snapshot of {day} has {before}; that "
        "snapshot is not replaced (a server answering before its directory is loaded: the "
        "step is retried); if that really is the list now, run it again with the run tag "
        f"{SHRINK_TAG}=1 (`cdrhouse ingest`: {MAX_DAY_SHRINK_VAR}=1)",
        metadata={
            "error_class": "EmptyDirectory" if now == 0 else "ShrunkDirectory",
            "table": table,
            "last_snapshot_rows": before,
        },
        allow_retries=True,
    )


def build_snapshot_assets(
    retry_policy: dg.RetryPolicy, scope: AccountScope = DEFAULT_SCOPE
) -> list[dg.AssetsDefinition]:
    """One multi-asset per API resource family of the account (`scope`); each writes
    `snapshot_date=<today UTC>` in the account's lake."""
    return [_snapshot_asset(source, retry_policy, scope) for source in SNAPSHOT_SOURCES]
