"""The freshness concern: per account, the check on its CDR partitions, its job and its hourly
schedule."""

import dagster as dg

from pipelines.defs.freshness.checks import build_freshness_check, build_freshness_job_and_schedule
from pipelines.location import Location, autoloaded


def build_freshness(location: Location) -> dg.Definitions:
    checks, jobs, schedules = [], [], []
    for scope in location.scopes:
        check = build_freshness_check(location.partitions_def, scope)
        job, schedule = build_freshness_job_and_schedule(check, scope)
        checks.append(check)
        jobs.append(job)
        schedules.append(schedule)
    return dg.Definitions(asset_checks=checks, jobs=jobs, schedules=schedules)


defs = autoloaded(build_freshness)
