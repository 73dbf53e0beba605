"""The aggregate concern: per account, every `agg_*` of one day, in the account's `cdrs` group
so a day's run ends with them."""

import dagster as dg

from pipelines.defs.aggregates.assets import build_aggregate_assets
from pipelines.location import Location, autoloaded


def build_aggregates(location: Location) -> dg.Definitions:
    assets: list[dg.AssetsDefinition] = []
    for scope in location.scopes:
        built = build_aggregate_assets(location.partitions_def, location.retry_policy, scope)
        assets += location.catalogued(built, scope)
    return dg.Definitions(assets=assets)


defs = autoloaded(build_aggregates)
