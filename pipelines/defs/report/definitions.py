"""The report concern: one `contact_center_report`, downstream of every account's `agg_*` keys
(and balance snapshot) by name."""

import dagster as dg

from pipelines.defs.report.assets import build_report_asset, build_report_sensor
from pipelines.location import Location, autoloaded
from warehouse.viewsql import aggregate_names


def build_report(location: Location) -> dg.Definitions:
    aggregates = [scope.key(name) for scope in location.scopes for name in aggregate_names()]
    balances = [scope.key("balance_snapshots") for scope in location.scopes]
    return dg.Definitions(
        assets=location.catalogued([build_report_asset(aggregates, balances)]),
        sensors=[build_report_sensor()],
    )


defs = autoloaded(build_report)
