"""The CDR concern: the daily `raw_cdrs` step and the `cdr_daily` job over the `cdrs` group."""

import dagster as dg

from pipelines.defs.cdrs.assets import build_cdr_assets
from pipelines.location import Location, autoloaded
from pipelines.names import CDR_JOB, cdr_run_selection


def build_cdrs(location: Location) -> dg.Definitions:
    assets = build_cdr_assets(location.partitions_def, location.retry_policy)
    job = dg.define_asset_job(
        CDR_JOB,
        selection=cdr_run_selection(),
        description="One UTC day of CDRs: fetch, normalize, check.",
    )
    return dg.Definitions(assets=location.catalogued(assets), jobs=[job])


defs = autoloaded(build_cdrs)
