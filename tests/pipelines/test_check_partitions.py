"""Check results carry their day: the UI lists a partitioned asset's check results by partition.

Dagster 1.13 records a check's result with the step's partition only when the check spec is
partitioned like its asset; otherwise each run left a result with no partition ("Partition —")
and a planned result with the day that never resolved.
"""

import dagster as dg

from pipelines.cli import run_ingest
from tests.support.clock import SessionClock
from tests.support.served import ServedSandbox


def test_every_day_check_result_is_recorded_with_its_partition(
    clean_faults: ServedSandbox, clock: SessionClock, tmp_path
) -> None:
    days = [clock.days_ago(6).isoformat(), clock.days_ago(5).isoformat()]
    defs = clean_faults.defs(tmp_path, step_retries=0)
    with dg.DagsterInstance.ephemeral() as instance:
        report = run_ingest(defs, days, instance=instance, data_dir=tmp_path, snapshots=False)
        assert report.success
        job = defs.resolve_job_def("cdr_daily")
        keys = job.asset_layer.asset_graph.asset_check_keys
        names = {k.name for k in keys}
        # The day's checks, the blocking ones, the aggregates' and the KPI mapping's.
        assert {"row_count_matches_api_total", "cdrs_ids_unique", "call_values_mapped"} <= names
        for key in keys:
            history = instance.event_log_storage.get_asset_check_execution_history(key, limit=10)
            recorded = sorted((r.partition or "", r.status.value) for r in history)
            # One evaluated result per day (no snapshot was taken, so cdrs_users_known warns).
            assert [p for p, _ in recorded] == days, (key, recorded)
            assert {s for _, s in recorded} <= {"SUCCEEDED", "FAILED"}, (key, recorded)
