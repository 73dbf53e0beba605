"""Snapshot records -> frames: timestamps in every form the spec shows; money exact or null,
never rounded."""

from __future__ import annotations

import datetime as dt
import json
from decimal import Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from models.tables import NUMBERS
from warehouse import snapshots

AT = dt.datetime(2026, 11, 21, 1, tzinfo=dt.UTC)


def test_snapshot_timestamps_parse_in_every_form_the_spec_shows() -> None:
    forms = ["2026-11-20T10:00:00.123Z", "2026-11-20T10:00:00Z", "2026-11-20T12:00:00.5+02:00"]
    numbers = [{"id": i, "created_at": text} for i, text in enumerate(forms)]
    got = snapshots.numbers_frame(numbers, AT)["created_at"].to_list()
    utc = dt.UTC
    assert got == [
        dt.datetime(2026, 11, 20, 10, 0, 0, 123000, tzinfo=utc),
        dt.datetime(2026, 11, 20, 10, 0, 0, tzinfo=utc),
        dt.datetime(2026, 11, 20, 10, 0, 0, 500000, tzinfo=utc),
    ]


# (the API's text, what the typed column holds): never rounded; null when it does not fit.
MONEY_TEXTS = [
    ("5000.1234", Decimal("5000.1234")),
    ("1E+5", Decimal("100000")),
    ("1.2300000000", Decimal("1.23")),  # trailing zeros: the same value
    ("1.23456789", None),  # a cast gave 1.234568
    ("1.0000001", None),  # ... 1.000000
    ("-0.0000005", None),  # ... 0: the sign and the value gone
    ("1e30", None),  # past Decimal(24,6) / Decimal(18,6)
    ("NaN", None),
    ("soon", None),
]


@pytest.mark.parametrize(("text", "typed"), MONEY_TEXTS, ids=[t for t, _ in MONEY_TEXTS])
def test_a_balance_is_exact_or_null_and_its_text_is_kept(text: str, typed: Decimal | None) -> None:
    row = snapshots.balance_frame(text, AT).row(0, named=True)
    assert row["amount"] == typed
    assert row["amount_raw"] == text


@pytest.mark.parametrize(("text", "typed"), MONEY_TEXTS, ids=[t for t, _ in MONEY_TEXTS])
def test_a_price_is_exact_or_null_and_the_pricing_as_sent_stays(
    text: str, typed: Decimal | None
) -> None:
    pricing = {"activation_fee": "1.5", "price_per_min": text}
    row = snapshots.numbers_frame([{"id": 7, "pricing": pricing}], AT).row(0, named=True)
    assert row["activation_fee"] == Decimal("1.5")
    # 1e30 is also past Decimal(18,6); the others fit a price as they fit a balance.
    assert row["price_per_min"] == typed
    kept = None if typed is not None else {"pricing": pricing}
    assert (row["extra"] and json.loads(row["extra"])) == kept


@given(st.decimals(allow_nan=False, allow_infinity=False, places=None))
def test_a_typed_price_is_never_another_value_than_the_apis(value: Decimal) -> None:
    text = str(value)
    row = snapshots.numbers_frame([{"id": 1, "pricing": {"monthly_fee": text}}], AT).row(0)
    typed = row[NUMBERS.column_names.index("monthly_fee")]
    assert typed is None or typed == value


def test_the_fields_of_an_object_held_as_columns_that_no_column_holds_go_to_extra() -> None:
    # A number's `flow` and `pricing` are columns (flow_id, flow_name, the four prices): a field
    # the spec does not show inside them was dropped, where one at the top level was kept.
    number = {
        "id": 3,
        "flow": {"id": "f-1", "name": "Main", "version": 4},
        "pricing": {"monthly_fee": "1.5", "currency": "EUR"},
        "color": "red",
    }
    row = snapshots.numbers_frame([number], AT).row(0, named=True)
    assert (row["flow_id"], row["flow_name"], row["monthly_fee"]) == ("f-1", "Main", Decimal("1.5"))
    assert json.loads(row["extra"]) == {
        "color": "red",
        "pricing": {"currency": "EUR"},
        "flow": {"version": 4},
    }
    # Only the known sub-fields: nothing more to keep.
    plain = {"id": 4, "flow": {"id": "f-2", "name": "B"}, "pricing": {"monthly_fee": "2"}}
    assert snapshots.numbers_frame([plain], AT).row(0, named=True)["extra"] is None
    user = {
        "id": "u-1",
        "security_access_group": {"id": 2, "name": "Agents", "scope": "all"},
        "webrtc_ringtone": {"type": "default", "name": "Bell"},
    }
    users = snapshots.users_frames([user], [], AT)["users"].row(0, named=True)
    assert users["security_access_group_name"] == "Agents"
    assert json.loads(users["extra"]) == {"security_access_group": {"scope": "all"}}


def test_a_list_whose_items_carry_fields_no_column_holds_is_kept_whole_in_extra() -> None:
    # A user's teams, queues and skills become bridge rows (ids and names): a field the spec
    # does not show on one of their items, or one `ApiModel` could not read (`_unreadable`),
    # was dropped with the item's other fields.
    teams = [{"id": 1, "name": "Sales"}, {"id": 2, "name": "Care", "role": "lead"}]
    skills = [{"skill": {"id": 5, "name": "German", "certified": True}, "value": 3}]
    queues = [{"id": 7, "_unreadable": {"name": 42}}]
    user = {"id": "u-1", "teams": teams, "skills": skills, "queues": queues}
    frames = snapshots.users_frames([user], [], AT)
    row = frames["users"].row(0, named=True)
    assert json.loads(row["extra"]) == {"teams": teams, "skills": skills, "queues": queues}
    # The bridge rows are made as before.
    assert frames["user_teams"].select("team_id", "team_name").rows() == [(1, "Sales"), (2, "Care")]
    assert frames["user_skills"].select("skill_id", "value").rows() == [(5, 3)]
    assert frames["user_queues"].select("queue_id", "queue_name").rows() == [(7, None)]
    # Items with the spec's fields only: nothing more to keep.
    plain = {
        "id": "u-2",
        "teams": [{"id": 1, "name": "Sales"}],
        "supervised_queues": [{"id": 7}],
        "skills": [{"skill": {"id": 5, "name": "German"}, "value": 3}, {"skill": None}],
    }
    assert snapshots.users_frames([plain], [], AT)["users"].row(0, named=True)["extra"] is None
    # A number's caller ID groups (their ids are a column, their names the groups' table's).
    groups = [{"id": 4, "name": "DE"}, {"id": 6, "name": "AT", "default": True}]
    number = snapshots.numbers_frame([{"id": 3, "caller_id_groups": groups}], AT).row(0, named=True)
    assert number["caller_id_group_ids"] == [4, 6]
    assert json.loads(number["extra"]) == {"caller_id_groups": groups}
    plain_number = {"id": 3, "caller_id_groups": groups[:1]}
    assert snapshots.numbers_frame([plain_number], AT).row(0, named=True)["extra"] is None


def test_a_list_field_that_is_not_a_list_makes_no_bridge_rows_and_is_kept() -> None:
    # Read without the model (or past it): `"teams": "sales"` made a bridge row per letter.
    user = {"id": "u-1", "teams": "sales", "queues": [3]}
    frames = snapshots.users_frames([user], [], AT)
    assert frames["user_teams"].height == 0
    assert frames["user_queues"].height == 0
    assert json.loads(frames["users"].row(0, named=True)["extra"]) == {
        "teams": "sales",
        "queues": [3],
    }


def test_the_balance_objects_other_fields_are_kept_in_extra() -> None:
    # `{balance: {amount, currency}}`: the spec shows the amount only; a currency was dropped.
    balance = {"amount": "1234.500000", "currency": "EUR", "_unreadable": {"limit": "none"}}
    row = snapshots.balance_frame("1234.500000", AT, balance).row(0, named=True)
    assert row["amount"] == Decimal("1234.5")
    assert json.loads(row["extra"]) == {"currency": "EUR", "_unreadable": {"limit": "none"}}
    assert snapshots.balance_frame("1", AT, {"amount": "1"}).row(0, named=True)["extra"] is None


def test_a_members_fields_the_spec_does_not_show_stay_on_its_row() -> None:
    # A queue's members list gives whole user records; the member rows kept the id and the
    # name only, so a membership's own field (a priority) was lost: the users table, read
    # from /users, never sees it.
    member = {"id": "u-1", "name": "Ada", "email": "ada@example.com", "priority": 2}
    plain = {"id": "u-2", "name": "Bob", "email": "bob@example.com", "teams": []}
    frames = snapshots.queues_frames(
        [{"id": 7, "name": "Sales"}], {7: [member, plain]}, {7: [plain]}, AT
    )
    rows = frames["queue_members"].select("user_id", "user_name", "extra").rows()
    assert [(i, n) for i, n, _ in rows] == [("u-1", "Ada"), ("u-2", "Bob")]
    assert json.loads(rows[0][2]) == {"priority": 2}
    assert rows[1][2] is None  # known fields only: the users table has them
    assert frames["queue_supervisors"].get_column("extra").to_list() == [None]
    teams = snapshots.teams_frames([{"id": 1}], {1: [member]}, {1: [member]}, AT)
    for table in ("team_members", "team_supervisors"):
        assert json.loads(teams[table].row(0, named=True)["extra"]) == {"priority": 2}


def test_a_balance_snapshot_landed_before_extra_existed_reads_it_as_null(tmp_path) -> None:
    # Lakes hold days landed before `balance_snapshots` had `extra`: the view still reads them.
    import pyarrow.parquet as pq

    from warehouse.duck import build_warehouse, connect
    from warehouse.lake import Lake

    lake = Lake(str(tmp_path / "lake"))
    new_day, old_day = "snapshot_date=2026-11-02", "snapshot_date=2026-11-01"
    kept = {"amount": "5", "currency": "EUR"}
    frames = {"balance_snapshots": snapshots.balance_frame("5", AT, kept)}
    lake.write_together(new_day, frames, source="test")
    written = pq.read_table(tmp_path / "lake" / "balance_snapshots" / new_day / "part-0.parquet")
    (tmp_path / "lake" / "balance_snapshots" / old_day).mkdir()
    pq.write_table(
        written.drop_columns(["extra"]),
        tmp_path / "lake" / "balance_snapshots" / old_day / "part-0.parquet",
    )
    build_warehouse(tmp_path, lake.uri)
    with connect(tmp_path) as con:
        rows = con.sql(
            "SELECT CAST(snapshot_date AS VARCHAR), extra FROM balance_snapshots ORDER BY 1"
        )
        assert rows.fetchall() == [("2026-11-01", None), ("2026-11-02", '{"currency":"EUR"}')]


def test_a_lake_whose_every_partition_predates_a_column_builds_its_views(tmp_path) -> None:
    # A lake upgraded from before `extra` (balance_snapshots, queue_members, ...), until its
    # next snapshot: no file has the column. The views failed to build (DuckDB refuses the
    # name), so every run refreshing them failed, and `cdrhouse sql` had no views.
    import pyarrow.parquet as pq

    from warehouse.duck import build_warehouse, connect
    from warehouse.lake import Lake

    lake = Lake(str(tmp_path / "lake"))
    day = "snapshot_date=2026-11-01"
    frames = {
        "balance_snapshots": snapshots.balance_frame("5", AT, {"amount": "5"}),
        **snapshots.queues_frames(
            [{"id": 1, "name": "Sales"}], {1: [{"id": "u1", "name": "Ann"}]}, {}, AT
        ),
    }
    lake.write_together(day, frames, source="test")
    for table in ("balance_snapshots", "queue_members"):
        f = tmp_path / "lake" / table / day / "part-0.parquet"
        pq.write_table(pq.read_table(f).drop_columns(["extra"]), f)
    build_warehouse(tmp_path, lake.uri)
    with connect(tmp_path) as con:
        balance = con.sql("SELECT CAST(amount AS VARCHAR), extra FROM balance_snapshots")
        assert balance.fetchall() == [("5.000000", None)]
        members = con.sql("SELECT queue_id, user_id, extra FROM queue_members")
        assert members.fetchall() == [(1, "u1", None)]


def test_an_older_day_written_last_shows_a_column_the_newest_day_lacks(tmp_path) -> None:
    # After an upgrade, an older day is landed again (a backfill) before the newest one: its
    # file has the new column, the newest day's has not yet. The view read the newest file's
    # columns only, and showed the re-landed day's values as null.
    import os

    import pyarrow.parquet as pq

    from warehouse.duck import build_warehouse, connect
    from warehouse.lake import Lake

    lake = Lake(str(tmp_path / "lake"))
    old_day, new_day = "snapshot_date=2026-11-01", "snapshot_date=2026-11-02"
    for day in (new_day, old_day):  # the newest date first, the older one written last
        frames = {"balance_snapshots": snapshots.balance_frame("5", AT, {"amount": "5", "c": 1})}
        lake.write_together(day, frames, source="test")
    newest = tmp_path / "lake" / "balance_snapshots" / new_day / "part-0.parquet"
    pq.write_table(pq.read_table(newest).drop_columns(["extra"]), newest)
    os.utime(newest, (1, 1))  # written before the older day (in the lake's listing too)
    build_warehouse(tmp_path, lake.uri)
    with connect(tmp_path) as con:
        rows = con.sql(
            "SELECT CAST(snapshot_date AS VARCHAR), extra FROM balance_snapshots ORDER BY 1"
        )
        assert rows.fetchall() == [("2026-11-01", '{"c":1}'), ("2026-11-02", None)]


def test_a_damaged_file_written_last_is_named_when_the_views_are_built(tmp_path) -> None:
    # The views read the footer of the partition written last too (not only the newest's):
    # a damaged one is named, as the views' other reads name it, not a bare Arrow error.
    import pytest

    from warehouse.duck import build_warehouse
    from warehouse.lake import Lake
    from warehouse.stores import UnreadablePartitions

    lake = Lake(str(tmp_path / "lake"))
    for day in ("snapshot_date=2026-11-02", "snapshot_date=2026-11-01"):
        frames = {"balance_snapshots": snapshots.balance_frame("5", AT, {"amount": "5"})}
        lake.write_together(day, frames, source="test")
    damaged = tmp_path / "lake/balance_snapshots/snapshot_date=2026-11-01/part-0.parquet"
    damaged.write_bytes(damaged.read_bytes()[:50])
    with pytest.raises(UnreadablePartitions, match="snapshot_date=2026-11-01"):
        build_warehouse(tmp_path, lake.uri)
