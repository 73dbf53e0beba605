"""The snapshot concern: the snapshot assets, their checks and the `snapshots` job."""

import dagster as dg

from pipelines.defs.snapshots.assets import build_snapshot_assets
from pipelines.defs.snapshots.checks import build_snapshot_checks
from pipelines.location import Location, autoloaded
from pipelines.names import SNAPSHOT_JOB, snapshot_run_selection


def build_snapshots(location: Location) -> dg.Definitions:
    job = dg.define_asset_job(
        SNAPSHOT_JOB,
        selection=snapshot_run_selection(),
        description="Snapshots of users, routing, campaigns, numbers and the balance.",
    )
    return dg.Definitions(
        assets=location.catalogued(build_snapshot_assets(location.retry_policy)),
        asset_checks=build_snapshot_checks(),
        jobs=[job],
    )


defs = autoloaded(build_snapshots)
