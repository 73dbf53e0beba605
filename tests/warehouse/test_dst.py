"""The KPI views on the nights clocks change (Europe/Berlin): the local day of 23 and of 25
hours is exact, and the hour lived twice is two intervals, not one.

The truth is the generator's own JSON records, classified here in plain Python."""

from __future__ import annotations

import datetime as dt
import json
from collections import Counter
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from connectors.sandbox.generator import Dataset
from tests.support.lake import warehouse
from warehouse.duck import build_warehouse, write_aggregates
from warehouse.kpi import KpiSettings
from warehouse.lake import Lake, partition_key

from .conftest import write_day

BERLIN = "Europe/Berlin"
PER_DAY = 1500


@pytest.mark.parametrize(
    ("first", "hours"),
    [(dt.date(2026, 3, 28), 23), (dt.date(2026, 10, 24), 25)],
    ids=["spring-forward", "fall-back"],
)
def test_a_day_of_23_or_25_hours_is_exact_and_its_intervals_are_utc(
    tmp_path: Path, first: dt.date, hours: int
) -> None:
    changed = first + dt.timedelta(days=1)  # the local day whose clocks change
    zone = ZoneInfo(BERLIN)
    start = dt.datetime.combine(changed, dt.time(), zone).astimezone(dt.UTC)
    end = dt.datetime.combine(changed + dt.timedelta(days=1), dt.time(), zone).astimezone(dt.UTC)
    assert end - start == dt.timedelta(hours=hours)

    ds = Dataset(seed=5, start_date=first, days=3, cdrs_per_day=PER_DAY)
    lake = Lake((tmp_path / "lake").as_uri())
    records = []
    for day in (first + dt.timedelta(days=i) for i in range(3)):
        write_day(lake, ds, day)
        write_aggregates(lake, partition_key("date", day))
        records += [json.loads(r) for r in ds.day(day).records]
    kpi = KpiSettings(timezone=BERLIN)
    build_warehouse(tmp_path, kpi=kpi)

    # Inbound calls with a queue that started in the local day, per 15-minute UTC interval.
    want: Counter[dt.datetime] = Counter()
    for rec in records:
        at = dt.datetime.fromisoformat(rec["started_at"]).astimezone(dt.UTC)
        if (
            rec["type"] == "call"
            and rec["subtype"] in kpi.inbound_subtypes
            and rec["data"].get("queue") is not None
            and start <= at < end
        ):
            want[at.replace(minute=at.minute - at.minute % 15, second=0, microsecond=0)] += 1
    assert {utc.date() for utc in want} == {first, changed}  # the day spans two partitions

    with warehouse(tmp_path) as con:
        rows = con.execute(
            "SELECT interval_start_utc, interval_start_local, sum(offered) "
            f"FROM rpt_interval_kpis WHERE local_date = DATE '{changed}' GROUP BY ALL"
        ).fetchall()
        [(day_offered,)] = con.execute(
            f"SELECT sum(offered) FROM rpt_queue_kpis WHERE local_date = DATE '{changed}'"
        ).fetchall()
    got = {utc.astimezone(dt.UTC): int(n) for utc, _, n in rows}
    assert got == dict(want)
    assert day_offered == sum(want.values())
    for utc, local, _ in rows:
        assert local == utc.astimezone(zone).replace(tzinfo=None), utc
    labels = Counter(local for _, local, _ in rows)
    twice = [local.time() for local, n in labels.items() if n == 2]
    if hours == 25:  # 02:00-02:45 was lived twice: two UTC intervals, two rows, each label
        assert twice, "no label with calls in both of its intervals: another seed"
        assert {t.hour for t in twice} == {2}
    else:  # 02:00-02:45 never happened
        assert twice == []
        assert not [local for local in labels if local.hour == 2]
