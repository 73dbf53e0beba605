"""The snapshot concern: per account, the snapshot assets, their checks and the `snapshots`
job."""

import dagster as dg

from pipelines.defs.snapshots.assets import build_snapshot_assets
from pipelines.defs.snapshots.checks import build_snapshot_checks
from pipelines.location import Location, autoloaded
from pipelines.names import SNAPSHOT_JOB


def build_snapshots(location: Location) -> dg.Definitions:
    assets: list[dg.AssetsDefinition] = []
    checks: list[dg.AssetChecksDefinition] = []
    jobs = []
    for scope in location.scopes:
        assets += location.catalogued(build_snapshot_assets(location.retry_policy, scope), scope)
        checks += build_snapshot_checks(scope)
        account = "" if scope.is_default else f" (account {scope.account_id})"
        jobs.append(
            dg.define_asset_job(
                scope.named(SNAPSHOT_JOB),
                selection=scope.snapshot_run_selection(),
                description="Snapshots of users, routing, campaigns, numbers and the balance"
                f"{account}.",
                tags=scope.tags,
            )
        )
    return dg.Definitions(assets=assets, asset_checks=checks, jobs=jobs)


defs = autoloaded(build_snapshots)
