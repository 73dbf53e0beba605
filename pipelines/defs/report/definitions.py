"""The report concern: `contact_center_report`, downstream of the `agg_*` keys by name."""

import dagster as dg

from pipelines.defs.report.assets import build_report_asset, build_report_sensor
from pipelines.location import Location, autoloaded
from warehouse.viewsql import aggregate_names


def build_report(location: Location) -> dg.Definitions:
    return dg.Definitions(
        assets=location.catalogued([build_report_asset(aggregate_names())]),
        sensors=[build_report_sensor()],
    )


defs = autoloaded(build_report)
