"""The aggregate concern: every `agg_*` of one day, in the `cdrs` group so a day's run ends
with them."""

import dagster as dg

from pipelines.defs.aggregates.assets import build_aggregate_assets
from pipelines.location import Location, autoloaded
from pipelines.names import CDR_GROUP


def build_aggregates(location: Location) -> dg.Definitions:
    assets = build_aggregate_assets(location.partitions_def, location.retry_policy, CDR_GROUP)
    return dg.Definitions(assets=location.catalogued(assets))


defs = autoloaded(build_aggregates)
