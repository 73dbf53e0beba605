"""The fault matrix: one knob on, the real CDR job, then the warehouse equals the truth.

Transport faults are retried by the client (GETs are safe to repeat); data faults are handled
by the schedule's lookback (late, revised) and by normalization (drift). Every case ends with
`assert_exact`: same ids as the sandbox, no duplicate, each cost at its latest revision.
"""

from __future__ import annotations

from datetime import UTC, date, datetime, time, timedelta
from typing import Any

import dagster as dg
import pytest

from connectors.sandbox import FaultConfig
from pipelines.defs.automation.schedules import nightly_partition_keys
from pipelines.partitions import partition_window
from tests.reliability.conftest import CDRS_PATH, assert_exact, run_ok
from tests.support.lake import one_row, warehouse, warehouse_rows
from tests.support.served import ServedSandbox

# The day of the cases that need only one: complete, inside the sandbox's data.
DAYS_AGO = 3

TRANSPORT_FAULTS: dict[str, tuple[FaultConfig, dict[str, Any]]] = {
    # The server's Retry-After is honoured (and pauses the whole client); without it the
    # exponential backoff's tail at 50% would make this case slow, not different.
    "429-storm-50pct": (FaultConfig(error_429_rate=0.5, retry_after_s=0.02), {}),
    "5xx-bursts": (FaultConfig(error_5xx_rate=0.35), {}),
    "connection-resets": (FaultConfig(reset_rate=0.3), {}),
    # Half the responses take longer than the client's read timeout.
    "slow-past-timeout": (FaultConfig(jitter_ms=600), {"timeout_s": 0.3}),
    "truncated-json": (FaultConfig(truncate_rate=0.3), {}),
    "invalid-cursor-mid-walk": (FaultConfig(cursor_invalid_rate=0.5), {}),
    # HTML pages, empty bodies and a missing `cdrs` key take the truncated-JSON path
    # (InvalidBodyError, retried); test_bad_inputs shows each one's message at rate 1.0.
}


@pytest.mark.parametrize("case", list(TRANSPORT_FAULTS), ids=list(TRANSPORT_FAULTS))
def test_transport_fault_loses_and_duplicates_nothing(
    served: ServedSandbox, tmp_path, case: str
) -> None:
    faults, resource = TRANSPORT_FAULTS[case]
    served.sandbox.faults = FaultConfig(**{**faults.to_json(), "paths": (CDRS_PATH,)})
    before = served.sandbox.counters.get(CDRS_PATH, 0)
    day = served.clock.days_ago(DAYS_AGO)
    result = run_ok(served.defs(tmp_path, **resource), day)
    requests = served.sandbox.counters.get(CDRS_PATH, 0) - before
    pages = _raw_metadata(result)["pages"]
    assert pages > 24, "small pages: every sub-window is walked"
    # The fault really fired: more requests reached the server than pages were kept (an
    # invalid cursor costs no extra request: the client's offset continues the walk).
    if case != "invalid-cursor-mid-walk":
        assert requests > pages, (requests, pages)
    served.sandbox.faults = FaultConfig()
    assert_exact(tmp_path, served.sandbox, day, case=case)


def _raw_metadata(result: dg.ExecuteInProcessResult) -> dict[str, Any]:
    for event in result.get_asset_materialization_events():
        mat = event.step_materialization_data.materialization
        if mat.asset_key == dg.AssetKey("raw_cdrs"):
            return {k: v.value for k, v in mat.metadata.items()}
    raise AssertionError("raw_cdrs was not materialized")


def _nightly(served: ServedSandbox, day: date) -> list[str]:
    """The partitions the 01:00 UTC schedule asks for on `day`, with the sandbox clock there."""
    tick = datetime.combine(day, time(1, 0), tzinfo=UTC)
    served.sandbox.clock.set(tick)
    from pipelines.partitions import daily_partitions

    return nightly_partition_keys(tick, 3, daily_partitions(served.first_day))


def test_late_cdrs_up_to_two_days_are_caught_by_the_lookback(
    served: ServedSandbox, tmp_path
) -> None:
    day = served.clock.days_ago(9)
    served.sandbox.faults = FaultConfig(late_rate=0.3, late_max_minutes=2 * 24 * 60)
    defs = served.defs(tmp_path)

    assert day.isoformat() in _nightly(served, day + timedelta(days=1))
    run_ok(defs, day)
    first = assert_exact(tmp_path, served.sandbox, day, case="late-cdrs:first-night")

    # Three nights later the lookback still re-runs the day; by then every late CDR is there.
    assert day.isoformat() in _nightly(served, day + timedelta(days=4))
    run_ok(defs, day)
    final = assert_exact(tmp_path, served.sandbox, day, case="late-cdrs")
    assert len(final) > len(first), "some CDRs of the day had not arrived on the first night"
    # Nothing of the day arrives after the lookback ends (2 days late + 6 h calls < 3 nights).
    served.sandbox.clock.set(datetime.combine(day + timedelta(days=30), time(0), tzinfo=UTC))
    assert served.sandbox.truth_cdrs(*partition_window(day.isoformat())).keys() == final.keys()


def test_revised_costs_land_at_their_latest_revision(served: ServedSandbox, tmp_path) -> None:
    day = served.clock.days_ago(8)
    served.sandbox.faults = FaultConfig(revise_rate=0.3, revise_after_minutes=24 * 60)
    defs = served.defs(tmp_path)
    _nightly(served, day + timedelta(days=1))
    run_ok(defs, day)
    first = dict(warehouse_rows(tmp_path, day))
    assert_exact(tmp_path, served.sandbox, day, case="revised-costs:first-night")

    _nightly(served, day + timedelta(days=3))
    run_ok(defs, day)
    second = dict(warehouse_rows(tmp_path, day))
    assert_exact(tmp_path, served.sandbox, day, case="revised-costs")
    changed = [i for i in first if first[i] != second[i]]
    # Nothing of the first night is lost; a call still running at the first night (the API
    # shows a CDR once it has ended) lands on the second, as a late record does.
    assert first.keys() <= second.keys()
    assert len(changed) > 10, "the re-run replaced the revised costs"


def test_schema_drift_keeps_extra_fields_and_unknown_types(served: ServedSandbox, tmp_path) -> None:
    served.sandbox.faults = FaultConfig(
        drift_extra_field=True, drift_unknown_type_rate=0.1, paths=(CDRS_PATH,)
    )
    day = served.clock.days_ago(DAYS_AGO)
    run_ok(served.defs(tmp_path), day)
    assert_exact(tmp_path, served.sandbox, day, case="schema-drift")
    with warehouse(tmp_path) as con:
        (unknown,) = one_row(con, "select count(*) from cdrs where type = 'video_call'")
        (with_extra,) = one_row(con, "select count(*) from cdrs where extra like '%sentiment_v2%'")
        (total,) = one_row(con, "select count(*) from cdrs where date = ?", [day])
        (quarantined,) = one_row(con, "select count(*) from cdr_quarantine")
        (raw_extra,) = one_row(
            con, "select count(*) from raw_cdrs where record like '%\"sentiment_v2\"%'"
        )
    assert unknown > 0, "the unknown CDR type is kept in cdrs"
    assert with_extra == total, "the extra field is kept in the extra JSON column"
    assert raw_extra == total, "and the raw record keeps it byte for byte"
    assert quarantined == 0


def test_clock_edge_lands_in_the_right_day_exactly_once(served: ServedSandbox, tmp_path) -> None:
    first, second = served.clock.days_ago(6), served.clock.days_ago(5)
    defs = served.defs(tmp_path)
    run_ok(defs, first)
    run_ok(defs, second)
    assert_exact(tmp_path, served.sandbox, first, case="clock-edge")
    assert_exact(tmp_path, served.sandbox, second, case="clock-edge")
    last_ms = datetime.combine(second, time(0), tzinfo=UTC) - timedelta(milliseconds=1)
    midnight = datetime.combine(second, time(0), tzinfo=UTC)
    with warehouse(tmp_path) as con:
        rows = con.execute(
            "select strftime(started_at, '%Y-%m-%dT%H:%M:%S.%g'), date::varchar, count(*) "
            "over (partition by id) from cdrs where started_at in (?, ?) order by 1",
            [last_ms.replace(tzinfo=None), midnight.replace(tzinfo=None)],
        ).fetchall()
    assert rows == [
        (f"{first.isoformat()}T23:59:59.999", first.isoformat(), 1),
        (f"{second.isoformat()}T00:00:00.000", second.isoformat(), 1),
    ]
