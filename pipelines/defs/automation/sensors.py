"""The run-failure sensor: writes each failed run's summary (`pipelines.failures`)."""

import logging

import dagster as dg

from pipelines.failures import (
    failure_summary,
    source_not_configured,
    summary_line,
    write_failure_summary,
)
from pipelines.resources import SOURCE_NOT_CONFIGURED, WarehouseResource


def failure_summary_sensor() -> dg.SensorDefinition:
    """Every failed run of the code location, summarized (a function: see `pipelines/defs`)."""

    @dg.run_failure_sensor(
        name="failure_summary_sensor",
        description="Writes data/failures/<run_id>.json with partition, endpoint and error class.",
        default_status=dg.DefaultSensorStatus.RUNNING,
        minimum_interval_seconds=30,
    )
    def summarize_failed_run(
        context: dg.RunFailureSensorContext, warehouse: WarehouseResource
    ) -> None:
        summary = failure_summary(context.dagster_run, context.get_step_failure_events())
        if source_not_configured(summary):
            # Log only: with no source configured the pipeline writes nothing, not even this file.
            steps = summary["failed_steps"]
            message = next(s for s in steps if s["error_class"] == SOURCE_NOT_CONFIGURED)["message"]
            context.log.error(f"{summary_line(summary)}: {message}")
            logging.getLogger("cdrhouse").error(f"{summary_line(summary)}: {message}")
            return
        path = write_failure_summary(warehouse.data_path, summary)
        context.log.error(f"{summary_line(summary)} (summary: {path})")
        logging.getLogger("cdrhouse").error(summary_line(summary))

    return summarize_failed_run
