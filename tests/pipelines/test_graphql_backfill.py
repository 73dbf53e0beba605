"""An automation user's backfill: `launchPartitionBackfill` over GraphQL against `dagster dev`.

No browser here: this is how a script or another scheduler drives cdrhouse. The daemon of the
real `dagster dev` picks the backfill up, runs one run per partition, and the test polls
`partitionBackfillOrError` until it is done.
"""

from __future__ import annotations

import pytest

from pipelines.checks import RAW_CDRS, ROW_COUNT_CHECK
from tests.pipelines._dagster_dev import LAUNCH_BACKFILL, DagsterDev, shared_dagster_dev
from tests.support.clock import SessionClock

# Past the default 300 s: the shared `dagster dev` may start in this test's setup, and the
# backfill waits for its runs (deadlines only: the waits end when the state is reached).
pytestmark = pytest.mark.timeout(1500)


@pytest.fixture(scope="module")
def dagster_dev(
    pytestconfig: pytest.Config, tmp_path_factory: pytest.TempPathFactory, clock: SessionClock
) -> DagsterDev:
    return shared_dagster_dev(pytestconfig, tmp_path_factory, clock)


def test_launch_partition_backfill_over_graphql_completes(dagster_dev: DagsterDev) -> None:
    # The newest two days of raw CDRs, as a nightly catch-up script would ask for them.
    partitions = list(dagster_dev.partition_keys(RAW_CDRS)[-2:])
    result = dagster_dev.graphql(
        LAUNCH_BACKFILL,
        {
            "params": {
                "assetSelection": [{"path": [RAW_CDRS]}],
                "partitionNames": partitions,
                "title": "graphql test backfill",
                "tags": [{"key": "cdrhouse/launched_by", "value": "test_graphql_backfill"}],
            }
        },
    )["launchPartitionBackfill"]
    assert result["__typename"] == "LaunchBackfillSuccess", result

    status = dagster_dev.wait_for_backfill(result["backfillId"])

    assert status in {"COMPLETED", "COMPLETED_SUCCESS"}, dagster_dev.log_tail()
    raw = dagster_dev.asset_status(RAW_CDRS)
    assert raw.materialized >= set(partitions)
    # The blocking row-count check ran with the materialization and passed.
    assert raw.checks == {ROW_COUNT_CHECK: "SUCCEEDED"}
