"""The automation concern: the nightly schedule over every account's CDR and snapshot groups,
and the run-failure sensor over every run."""

import dagster as dg

from pipelines.defs.automation.schedules import build_nightly_schedule
from pipelines.defs.automation.sensors import failure_summary_sensor
from pipelines.location import Location, autoloaded


def build_automation(location: Location) -> dg.Definitions:
    nightly = build_nightly_schedule(
        location.partitions_def, location.lookback_days, location.scopes
    )
    return dg.Definitions(schedules=[nightly], sensors=[failure_summary_sensor()])


defs = autoloaded(build_automation)
