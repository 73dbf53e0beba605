"""The freshness concern: the check on the CDR partitions, its job and its hourly schedule."""

import dagster as dg

from pipelines.defs.freshness.checks import build_freshness_check, build_freshness_job_and_schedule
from pipelines.location import Location, autoloaded


def build_freshness(location: Location) -> dg.Definitions:
    check = build_freshness_check(location.partitions_def)
    job, schedule = build_freshness_job_and_schedule(check)
    return dg.Definitions(asset_checks=[check], jobs=[job], schedules=[schedule])


defs = autoloaded(build_freshness)
