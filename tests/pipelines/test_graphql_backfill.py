"""An automation user's backfill: `launchPartitionBackfill` over GraphQL against `dagster dev`.

No browser here: this is how a script or another scheduler drives cdrhouse. The daemon of the
real `dagster dev` picks the backfill up, runs one run per partition, and the test polls
`partitionBackfillOrError` until it is done.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from tests.pipelines._dagster_dev import DagsterDev, run_dagster_dev

# Few, small partitions: the code location's knobs (read in pipelines/definitions.py).
START = (datetime.now(UTC).date() - timedelta(days=6)).isoformat()
SMALL_ENV = {"CDRHOUSE_START_DATE": START, "CDRHOUSE_SANDBOX_CDRS_PER_DAY": "300"}

LAUNCH = """
mutation Launch($params: LaunchBackfillParams!) {
  launchPartitionBackfill(backfillParams: $params) {
    __typename
    ... on LaunchBackfillSuccess { backfillId }
    ... on PythonError { message stack }
    ... on PartitionKeysNotFoundError { message }
    ... on InvalidSubsetError { message }
    ... on UnauthorizedError { message }
  }
}
"""

MATERIALIZED_PARTITIONS = """
query Partitions($key: AssetKeyInput!) {
  assetNodeOrError(assetKey: $key) {
    ... on AssetNode {
      assetPartitionStatuses {
        ... on TimePartitionStatuses { ranges { status startKey endKey } }
      }
      assetChecksOrError {
        ... on AssetChecks {
          checks { name executionForLatestMaterialization { status } }
        }
      }
    }
  }
}
"""


@pytest.fixture(scope="module")
def dagster_dev(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DagsterDev]:
    with run_dagster_dev(tmp_path_factory.mktemp("graphql"), extra_env=SMALL_ENV) as dev:
        yield dev


def _partition_keys(first: str, count: int) -> list[str]:
    day = datetime.fromisoformat(first).date()
    return [(day + timedelta(days=i)).isoformat() for i in range(count)]


def _asset_node(dev: DagsterDev, key: list[str]) -> dict[str, Any]:
    node: dict[str, Any] = dev.graphql(MATERIALIZED_PARTITIONS, {"key": {"path": key}})[
        "assetNodeOrError"
    ]
    return node


def _materialized_days(node: dict[str, Any]) -> set[str]:
    days: set[str] = set()
    for rng in node["assetPartitionStatuses"]["ranges"]:
        if rng["status"] == "MATERIALIZED":
            start = datetime.fromisoformat(rng["startKey"]).date()
            end = datetime.fromisoformat(rng["endKey"]).date()
            span = (end - start).days + 1
            days.update((start + timedelta(days=i)).isoformat() for i in range(span))
    return days


def test_launch_partition_backfill_over_graphql_completes(dagster_dev: DagsterDev) -> None:
    # Two days of raw CDRs, as a script would ask for them.
    partitions = _partition_keys(START, 2)
    result = dagster_dev.graphql(
        LAUNCH,
        {
            "params": {
                "assetSelection": [{"path": ["raw_cdrs"]}],
                "partitionNames": partitions,
                "title": "graphql test backfill",
                "tags": [{"key": "cdrhouse/launched_by", "value": "test_graphql_backfill"}],
            }
        },
    )["launchPartitionBackfill"]
    assert result["__typename"] == "LaunchBackfillSuccess", result

    status = dagster_dev.wait_for_backfill(result["backfillId"], timeout_s=240.0)

    assert status in {"COMPLETED", "COMPLETED_SUCCESS"}, dagster_dev.log_tail()
    raw = _asset_node(dagster_dev, ["raw_cdrs"])
    assert _materialized_days(raw) >= set(partitions)
    # The blocking row-count check ran with the materialization and passed.
    checks = {
        c["name"]: (c["executionForLatestMaterialization"] or {}).get("status")
        for c in raw["assetChecksOrError"]["checks"]
    }
    assert checks
    assert set(checks.values()) == {"SUCCEEDED"}, checks
