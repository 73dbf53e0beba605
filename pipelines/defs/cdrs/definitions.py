"""The CDR concern: per account, the daily `raw_cdrs` step and the `cdr_daily` job over the
account's `cdrs` group."""

import dagster as dg

from pipelines.defs.cdrs.assets import build_cdr_assets
from pipelines.location import Location, autoloaded
from pipelines.names import CDR_JOB


def build_cdrs(location: Location) -> dg.Definitions:
    assets: list[dg.AssetsDefinition] = []
    jobs = []
    for scope in location.scopes:
        built = build_cdr_assets(location.partitions_def, location.retry_policy, scope)
        assets += location.catalogued(built, scope)
        account = "" if scope.is_default else f" of account {scope.account_id}"
        jobs.append(
            dg.define_asset_job(
                scope.named(CDR_JOB),
                selection=scope.cdr_run_selection(),
                description=f"One UTC day of CDRs{account}: fetch, normalize, check.",
                tags=scope.tags,
            )
        )
    return dg.Definitions(assets=assets, jobs=jobs)


defs = autoloaded(build_cdrs)
