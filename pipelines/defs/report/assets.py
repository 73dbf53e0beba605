"""`contact_center_report`: the HTML report of `cdrhouse report` as a Dagster asset.

It is materialized once a night after the CDR days: its automation condition
(`on_cron` of the nightly 01:00 UTC schedule) requests it once yesterday's partition of every
`agg_*` pre-aggregate (the last step of a CDR run; `LastPartitionMapping`) and the balance
snapshot have been updated since the tick (or their run failed: one failing account does not
hold back the others'), and none of them is still in progress. The
lookback days the same night revise older days; the next night's report shows them.

It writes `<data dir>/reports/contact_center_report.html` (and a copy named by its range), and
on an object-store lake also `<lake>/_reports/contact_center_report.html`, where the run
pod's disk is not the one people open. Its metadata links the file and carries the range's
headline numbers as floats (`cdrs`, `cost`, `sla_met_pct`: conversation SLAs met, with or
without a queue), which Dagster charts over the materializations on the asset's Plots tab.
Its days are business days in CDRHOUSE_TIMEZONE (the KPI views' `local_date`).
"""

from collections.abc import Sequence
from datetime import timedelta
from typing import Any

import dagster as dg
from pydantic import Field

from pipelines.names import NIGHTLY_CRON, REPORT_ASSET, REPORT_GROUP
from pipelines.resources import WarehouseResource, utc_now
from warehouse.analyst import REPORT_FILE as REPORT_FILE
from warehouse.analyst import REPORTS_DIR as REPORTS_DIR
from warehouse.analyst import report_path
from warehouse.cli import report_end

# No `from __future__ import annotations` here: Dagster reads the asset's config class from
# its annotation at definition time.

# The one report file, `<data dir>/reports/contact_center_report.html`, is named in
# `warehouse.analyst` (REPORTS_DIR, REPORT_FILE): `cdrhouse report` writes it by default too.
REMOTE_DIR = "_reports"
REPORT_SENSOR = "contact_center_report_after_nightly"


class ReportConfig(dg.Config):
    days: int = Field(
        default=7, ge=1, description="The last N complete business days (CDRHOUSE_TIMEZONE)."
    )


def report_condition(
    balance_keys: Sequence[str | dg.AssetKey] = (),
) -> dg.AutomationCondition[Any]:
    """After the nightly tick, once each dependency's newest partition (yesterday, for the
    daily aggregates) was updated, or its run failed, since that tick, and none of them is in
    progress; and at least one aggregate of yesterday landed. An older day landing (a
    lookback, a backfill) does not count. A failed run counts as the night's end: one
    account whose API is down or whose key is wrong does not hold back the report of the
    others (its days are missing from it, and its runs failed); when every account failed,
    there is nothing new to report."""
    tick: dg.AutomationCondition[Any] = dg.AutomationCondition.cron_tick_passed(NIGHTLY_CRON, "UTC")
    newest = dg.AutomationCondition.in_latest_time_window()
    updated = dg.AutomationCondition.newly_updated().since(tick)
    ended = (
        newest
        & (
            dg.AutomationCondition.newly_updated() | dg.AutomationCondition.execution_failed()
        ).since(tick)
    ).with_label("newest partition updated, or its run failed, since the nightly tick")
    some_landed = dg.AutomationCondition.any_deps_match(
        (newest & updated).with_label("newest partition updated since the nightly tick")
    ).ignore(dg.AssetSelection.assets(*balance_keys))
    return (
        tick.since_last_handled()
        & dg.AutomationCondition.all_deps_match(ended)
        & some_landed
        & ~dg.AutomationCondition.any_deps_in_progress()
    ).with_label("after the nightly CDR days")


def build_report_asset(
    aggregate_keys: Sequence[str | dg.AssetKey],
    balance_keys: Sequence[str | dg.AssetKey] = ("balance_snapshots",),
) -> dg.AssetsDefinition:
    """One report over every account: it waits for each account's `agg_*` and balance."""
    deps = [dg.AssetDep(k, partition_mapping=dg.LastPartitionMapping()) for k in aggregate_keys]

    @dg.asset(
        name=REPORT_ASSET,
        group_name=REPORT_GROUP,
        deps=[*deps, *(dg.AssetDep(k) for k in balance_keys)],
        kinds={"html", "duckdb"},
        automation_condition=report_condition(balance_keys),
        description=(
            "The contact-center report of the last 7 business days: one self-contained HTML "
            "file of headline tiles (with the previous 7 days), a per-queue table and 8 charts "
            "over the rpt_* views (the same as `cdrhouse report`)."
        ),
    )
    def contact_center_report(
        context: dg.AssetExecutionContext, config: ReportConfig, warehouse: WarehouseResource
    ) -> dg.MaterializeResult[Any]:
        from warehouse.report import missing_lines, write_report

        # Business days: the KPI views' `local_date` is in each account's zone; the report
        # ends with the last day every one of them has ended.
        end = report_end(utc_now(), [warehouse.timezone, *warehouse.account_zones.values()])
        start = end - timedelta(days=config.days)
        lake = warehouse.lake()
        if lake.is_local:
            warehouse.refresh_views(context.log)
        else:
            warehouse.build_views()  # a pod's data dir starts empty
        out = report_path(warehouse.data_path)
        report = write_report(warehouse.data_path, start, end, out, currency=warehouse.currency)
        last = end - timedelta(days=1)
        dated = out.with_name(f"contact_center_report_{start}_{last}.html")
        html = out.read_bytes()  # once, for the dated copy and the lake's copy
        dated.write_bytes(html)
        uri = out.as_uri()
        if not lake.is_local:
            uri = f"{lake.uri.rstrip('/')}/{REMOTE_DIR}/{REPORT_FILE}"
            lake.fs.pipe_file(uri, html)
        context.log.info(f"report {start}..{last}: {report.headline.cdrs} CDRs -> {uri}")
        missing = [] if report.empty else missing_lines(report)
        for line in missing:
            context.log.warning(f"report {start}..{last}: {line}")
        headline = report.headline
        metadata: dict[str, Any] = {
            "report": dg.MetadataValue.url(uri),
            "path": dg.MetadataValue.path(str(out)),
            "range": f"{start} .. {last} ({warehouse.timezone})",
            "cdrs": float(headline.cdrs),
            "cost": float(headline.cost),
            "cost_exact": format(headline.cost, "f"),
            "bytes": len(html),
            "missing_days": "; ".join(missing) or "none",
        }
        if headline.sla_met_pct is not None:
            metadata["sla_met_pct"] = float(headline.sla_met_pct)
        return dg.MaterializeResult(metadata=metadata)

    return contact_center_report


def build_report_sensor() -> dg.AutomationConditionSensorDefinition:
    """Evaluates the report's automation condition (the only asset that has one)."""
    return dg.AutomationConditionSensorDefinition(
        REPORT_SENSOR,
        target=dg.AssetSelection.assets(REPORT_ASSET),
        default_status=dg.DefaultSensorStatus.RUNNING,
        minimum_interval_seconds=60,
        description="Materializes contact_center_report after the nightly CDR days.",
    )
