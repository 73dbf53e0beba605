"""Every reporting view checked against numbers computed here in polars (not the same SQL)."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path

import duckdb
import polars as pl
import pyarrow.parquet as pq
import pytest

from warehouse.duck import connect, create_views, write_aggregates
from warehouse.kpi import KpiSettings
from warehouse.lake import Lake, partition_key

from .conftest import START, SmallWarehouse


@pytest.fixture(scope="module")
def con(small: SmallWarehouse) -> Iterator[duckdb.DuckDBPyConnection]:
    c = connect(small.data_dir)
    yield c
    c.close()


def q(con: duckdb.DuckDBPyConnection, sql: str) -> pl.DataFrame:
    return con.sql(sql).pl()


def rows(df: pl.DataFrame, keys: list[str]) -> list[dict]:
    return df.sort(keys, nulls_last=True).to_dicts()


def test_lake_tables_are_complete(small: SmallWarehouse, con) -> None:
    assert q(con, "SELECT count(DISTINCT id) n FROM cdrs")["n"][0] == small.tables["cdrs"].height
    per_type = q(
        con,
        "SELECT (SELECT count(*) FROM cdr_calls) + (SELECT count(*) FROM cdr_conversations)"
        " + (SELECT count(*) FROM cdr_sms) + (SELECT count(*) FROM cdr_hlr_lookups) n",
    )
    assert per_type["n"][0] == small.tables["cdrs"].height
    assert q(con, "SELECT count(*) n FROM users")["n"][0] == len(small.dataset.users) + len(
        small.dataset.deleted_users
    )


def test_daily_volume(small: SmallWarehouse, con) -> None:
    want = (
        small.tables["cdrs"]
        .group_by("date", "type", "subtype", "disposition")
        .agg(pl.len().cast(pl.Int64).alias("cdrs"), pl.col("cost").sum())
        .with_columns(pl.lit("default").alias("account_id"))  # a lake without accounts
    )
    got = q(con, "SELECT * FROM rpt_daily_volume")
    keys = ["date", "type", "subtype", "disposition"]
    assert rows(got, keys) == rows(want.select(got.columns), keys)


def test_agent_performance(small: SmallWarehouse, con) -> None:
    calls = small.tables["cdr_calls"].filter(
        pl.col("user_id").is_not_null() & (pl.col("disposition") == "answered")
    )
    want: dict[tuple, dict] = {}
    for r in calls.iter_rows(named=True):
        a = want.setdefault(
            (r["date"], r["user_id"]),
            {"calls": 0, "talk": 0.0, "hold": 0.0, "mos": [], "conv": 0},
        )
        a["calls"] += 1
        a["talk"] += r["duration_talk"]
        a["hold"] += r["duration_hold"]
        if r["mos"] is not None:
            a["mos"].append(r["mos"])
    for r in (
        small.tables["cdr_conversations"]
        .filter(pl.col("user_id").is_not_null())
        .iter_rows(named=True)
    ):
        a = want.setdefault(
            (r["date"], r["user_id"]),
            {"calls": 0, "talk": 0.0, "hold": 0.0, "mos": [], "conv": 0},
        )
        a["conv"] += 1
    got = {
        (r["date"], r["user_id"]): r
        for r in q(con, "SELECT * FROM rpt_agent_performance").iter_rows(named=True)
    }
    assert set(got) == set(want)
    names = {u["id"]: u["name"] for u in small.dataset.users + small.dataset.deleted_users}
    for k, a in want.items():
        g = got[k]
        assert (g["calls_handled"], g["conversations_handled"]) == (a["calls"], a["conv"])
        assert g["talk_s"] == a["talk"]
        assert g["hold_s"] == a["hold"]
        assert "wrapup_s" not in g  # the API has no wrap-up duration: none is made up
        if a["mos"]:
            assert g["avg_mos"] == pytest.approx(sum(a["mos"]) / len(a["mos"]))
        assert g["current_name"] == names.get(k[1])
        assert g["name_snapshot"] is not None


def test_queue_service(small: SmallWarehouse, con) -> None:
    calls = small.tables["cdr_calls"].filter(pl.col("queue_id").is_not_null())
    convs = small.tables["cdr_conversations"].filter(pl.col("queue_id").is_not_null())
    got = {
        (r["date"], r["queue_id"]): r
        for r in q(con, "SELECT * FROM rpt_queue_service").iter_rows(named=True)
    }
    keys = {
        (r["date"], r["queue_id"]) for r in calls.select("date", "queue_id").iter_rows(named=True)
    }
    keys |= {
        (r["date"], r["queue_id"]) for r in convs.select("date", "queue_id").iter_rows(named=True)
    }
    assert set(got) == keys
    # The latest name: the snapshot's, else (a deleted queue) the newest CDR's; never NULL.
    live = {q["id"]: q["name"] for q in small.dataset.queues}
    newest = (
        pl.concat([f.select("queue_id", "queue_name", "started_at") for f in (calls, convs)])
        .sort("started_at")
        .group_by("queue_id")
        .agg(pl.col("queue_name").last())
    )
    cdr_names = dict(zip(newest["queue_id"], newest["queue_name"], strict=True))
    assert set(cdr_names) - set(live)  # the data holds deleted queues
    for (_, queue), g in got.items():
        assert g["current_name"] == live.get(queue, cdr_names[queue]), queue
    for (day, queue), g in got.items():
        c = calls.filter((pl.col("date") == day) & (pl.col("queue_id") == queue))
        v = convs.filter((pl.col("date") == day) & (pl.col("queue_id") == queue))
        answered = c.filter(pl.col("disposition") == "answered").height
        assert (g["calls_offered"], g["calls_answered"]) == (c.height, answered)
        assert g["calls_unanswered"] == c.height - answered
        if c.height:
            assert g["unanswered_rate"] == pytest.approx((c.height - answered) / c.height)
            assert g["avg_queue_wait_s"] == pytest.approx(c["duration_queue"].mean())
            assert g["max_queue_wait_s"] == c["duration_queue"].max()
        assert g["conversations_offered"] == v.height
        for kind in ("first_response", "resolution", "avg_reply"):
            statuses = v[f"sla_{kind}_status"].to_list()
            assert g[f"{kind}_met"] == statuses.count("met")
            assert g[f"{kind}_breached"] == statuses.count("breached")


def test_campaign_outcomes(small: SmallWarehouse, con) -> None:
    calls = small.tables["cdr_calls"].filter(pl.col("campaign_id").is_not_null())
    got = {
        (r["date"], r["campaign_id"]): r
        for r in q(con, "SELECT * FROM rpt_campaign_outcomes").iter_rows(named=True)
    }
    assert len(got) == calls.select("date", "campaign_id").unique().height > 0
    for (day, camp), g in got.items():
        c = calls.filter((pl.col("date") == day) & (pl.col("campaign_id") == camp))
        answered = c.filter(pl.col("disposition") == "answered").height
        assert (g["attempts"], g["answered"]) == (c.height, answered)
        assert g["answer_rate"] == pytest.approx(answered / c.height)
        reasons: dict[str, int] = {}
        for r in c["end_reason"].to_list():
            reasons[r] = reasons.get(r, 0) + 1
        assert dict(g["end_reasons"]) == reasons
        assert g["cost"] == sum(c["cost"].to_list(), Decimal(0))


def test_cost_daily_is_exact(small: SmallWarehouse, con) -> None:
    cdrs = small.tables["cdrs"]
    calls = small.tables["cdr_calls"]
    want: dict[tuple, Decimal] = {}
    for r in calls.iter_rows(named=True):
        k = (r["date"], "call", r["destination_country"], r["campaign_id"])
        want[k] = want.get(k, Decimal(0)) + r["cost"]
    for r in cdrs.filter(pl.col("type") != "call").iter_rows(named=True):
        k = (r["date"], r["type"], None, None)
        want[k] = want.get(k, Decimal(0)) + r["cost"]
    got_df = q(con, "SELECT * FROM rpt_cost_daily")
    assert isinstance(got_df.schema["cost"], pl.Decimal)
    got = {
        (r["date"], r["type"], r["destination_country"], r["campaign_id"]): r["cost"]
        for r in got_df.iter_rows(named=True)
    }
    assert got == want
    # Total equals the generator's own integer ten-thousandths: no rounding anywhere.
    truth = sum(sum(small.dataset.day(d).costs) for d in cdrs["date"].unique().to_list())
    assert sum(got.values()) == Decimal(truth) / 10000


def test_sms_delivery(small: SmallWarehouse, con) -> None:
    sms = small.tables["cdr_sms"]
    got = {r["date"]: r for r in q(con, "SELECT * FROM rpt_sms_delivery").iter_rows(named=True)}
    assert set(got) == set(sms["date"].unique().to_list())
    for day, g in got.items():
        s = sms.filter(pl.col("date") == day)
        assert g["sms"] == s.height
        assert g["sent"] == s["sent"].sum()
        assert g["failed"] == s.height - s["sent"].sum()
        assert g["segments"] == s["segments_count"].sum()
        canned = s["canned_message_id"].is_not_null().sum()
        assert (g["canned"], g["free_text"]) == (canned, s.height - canned)
        assert g["cost"] == sum(s["cost"].to_list(), Decimal(0))


def test_balance_over_time(small: SmallWarehouse, con) -> None:
    got = q(con, "SELECT * FROM rpt_balance ORDER BY snapshot_date")
    amounts = [Decimal(b) for b in small.balances]
    assert got["amount"].to_list() == amounts
    assert got["change"].to_list() == [None, amounts[1] - amounts[0], amounts[2] - amounts[1]]
    assert q(con, "SELECT amount FROM balance")["amount"].to_list() == [amounts[-1]]


def test_cdr_joins_a_past_team_membership_through_history(small: SmallWarehouse, con) -> None:
    sql = f"""
        SELECT c.id, c.date, h.team_id, h.valid_from, h.valid_to
        FROM cdrs c
        JOIN user_teams_history h
          ON h.user_id = c.user_id
         AND c.date >= h.valid_from AND (h.valid_to IS NULL OR c.date < h.valid_to)
        WHERE c.user_id = '{small.moved_user}'
    """
    joined = q(con, sql)
    own = small.tables["cdrs"].filter(pl.col("user_id") == small.moved_user)
    assert own.height > 0
    before = joined.filter(pl.col("date") < pl.date(2026, 11, 3))
    after = joined.filter(pl.col("date") >= pl.date(2026, 11, 3))
    # Before the move the CDR joins the old team (which the current view no longer shows).
    assert small.old_team in before["team_id"].to_list()
    assert small.new_team not in before["team_id"].to_list()
    assert after["team_id"].unique().to_list() in ([small.new_team], [])
    current = q(con, f"SELECT team_id FROM user_teams WHERE user_id = '{small.moved_user}'")
    assert current["team_id"].to_list() == [small.new_team]
    assert set(before["id"].to_list()) == set(
        own.filter(pl.col("date") < pl.date(2026, 11, 3))["id"].to_list()
    )


def test_every_snapshot_view_is_queryable(con) -> None:
    for name in (
        "users",
        "queues",
        "skills",
        "teams",
        "campaigns",
        "numbers",
        "caller_id_groups",
        "queue_members",
        "team_members",
        "user_skills",
        "numbers_history",
        "users_snapshots",
    ):
        assert q(con, f"SELECT count(*) n FROM {name}")["n"][0] > 0, name


# --- the UTC-day views under the answered setting ---------------------------------------------

ANSWERED_TOO = ("answered", "no_answer")  # a setting that counts no_answer calls as answered
OLDER_VIEWS = {
    "agg_campaign_outcomes": "dispositions",
    "agg_queue_service": "call_dispositions",
    "agg_agent_performance": "call_dispositions",
}


def _older_views(con: duckdb.DuckDBPyConnection) -> dict[str, dict[tuple, tuple]]:
    return {
        "campaign": {
            (r[0], r[1]): tuple(r[2:])
            for r in con.execute(
                "SELECT date, campaign_id, attempts, answered, round(answer_rate, 9) "
                "FROM rpt_campaign_outcomes"
            ).fetchall()
        },
        "queue": {
            (r[0], r[1]): tuple(r[2:])
            for r in con.execute(
                "SELECT date, queue_id, calls_offered, calls_answered, calls_unanswered, "
                "round(unanswered_rate, 9) FROM rpt_queue_service WHERE calls_offered > 0"
            ).fetchall()
        },
        "agent": {
            (r[0], r[1]): tuple(r[2:])
            for r in con.execute(
                "SELECT date, user_id, calls_handled, talk_s, hold_s, round(avg_mos, 9), "
                "conversations_handled FROM rpt_agent_performance"
            ).fetchall()
        },
    }


def _older_views_want(
    tables: dict[str, pl.DataFrame], answered: tuple[str, ...]
) -> dict[str, dict]:
    """The three UTC-day views' answered columns, computed here from the CDR rows."""
    calls = tables["cdr_calls"].with_columns(
        handled=pl.col("disposition").is_in(answered).fill_null(False)
    )
    campaign = (
        calls.filter(pl.col("campaign_id").is_not_null())
        .group_by("date", "campaign_id")
        .agg(pl.len().alias("attempts"), pl.col("handled").sum().alias("answered"))
    )
    queue = (
        calls.filter(pl.col("queue_id").is_not_null())
        .group_by("date", "queue_id")
        .agg(pl.len().alias("offered"), pl.col("handled").sum().alias("answered"))
    )
    agents = (
        calls.filter(pl.col("user_id").is_not_null() & pl.col("handled"))
        .group_by("date", "user_id")
        .agg(
            pl.len().alias("calls"),
            pl.col("duration_talk").sum(),
            pl.col("duration_hold").sum(),
            pl.col("mos").mean(),
        )
    )
    convs = (
        tables["cdr_conversations"]
        .filter(pl.col("user_id").is_not_null())
        .group_by("date", "user_id")
        .agg(pl.len().alias("conversations"))
    )
    agent = agents.join(convs, on=["date", "user_id"], how="full", coalesce=True)
    return {
        "campaign": {
            (r["date"], r["campaign_id"]): (
                r["attempts"],
                r["answered"],
                round(r["answered"] / r["attempts"], 9),
            )
            for r in campaign.iter_rows(named=True)
        },
        "queue": {
            (r["date"], r["queue_id"]): (
                r["offered"],
                r["answered"],
                r["offered"] - r["answered"],
                round((r["offered"] - r["answered"]) / r["offered"], 9),
            )
            for r in queue.iter_rows(named=True)
        },
        "agent": {
            (r["date"], r["user_id"]): (
                r["calls"] or 0,
                r["duration_talk"] or 0.0,
                r["duration_hold"] or 0.0,
                None if r["mos"] is None else round(r["mos"], 9),
                r["conversations"] or 0,
            )
            for r in agent.iter_rows(named=True)
        },
    }


def _views(lake_dir: Path, kpi: KpiSettings) -> duckdb.DuckDBPyConnection:
    con = duckdb.connect()
    create_views(con, Lake(str(lake_dir)), kpi=kpi)
    return con


def test_the_utc_day_views_count_answered_as_the_setting_says(small: SmallWarehouse) -> None:
    """`rpt_agent_performance`, `rpt_queue_service` and `rpt_campaign_outcomes` count a call
    as answered by CDRHOUSE_ANSWERED_DISPOSITIONS, as the KPI views do (they counted the
    disposition `answered` as written, whatever the setting)."""
    kpi = KpiSettings(
        answered_dispositions=ANSWERED_TOO, unanswered_dispositions=("busy", "failed")
    )
    con = _views(small.data_dir / "lake", kpi)
    got, want = _older_views(con), _older_views_want(small.tables, ANSWERED_TOO)
    literal = _older_views_want(small.tables, ("answered",))
    for view in want:
        assert got[view] == want[view], view
        assert want[view] != literal[view], view  # the setting changes something here
    # The KPI views agree: the same calls are answered in both.
    outbound = con.execute(
        "SELECT sum(connects) FROM rpt_outbound_kpis WHERE campaign_id IS NOT NULL"
    ).fetchall()[0][0]
    campaign_calls = small.tables["cdr_calls"].filter(
        pl.col("campaign_id").is_not_null()
        & pl.col("subtype").is_in(kpi.outbound_subtypes)
        & pl.col("disposition").is_in(ANSWERED_TOO)
    )
    assert outbound == campaign_calls.height


def test_aggregates_written_before_dispositions_were_kept_count_as_then(
    small: SmallWarehouse, tmp_path: Path
) -> None:
    """A lake's `agg_*` days aggregated before the views kept dispositions (no such column
    in any file): the views still build, and those days count `answered` as written."""
    lake_dir = tmp_path / "lake"
    shutil.copytree(small.data_dir / "lake", lake_dir)
    for table, column in OLDER_VIEWS.items():
        files = sorted((lake_dir / table).glob("date=*/part-0.parquet"))
        assert files, table
        for f in files:
            pq.write_table(pq.read_table(f).drop_columns([column]), f)
    kpi = KpiSettings(
        answered_dispositions=ANSWERED_TOO, unanswered_dispositions=("busy", "failed")
    )
    assert _older_views(_views(lake_dir, kpi)) == _older_views_want(small.tables, ("answered",))


def test_odd_dispositions_from_the_api_land_and_count_by_the_setting(
    small: SmallWarehouse, tmp_path: Path
) -> None:
    """A server sending calls without a disposition, with an empty one, or one with a quote
    in it: the day's aggregates are written, the views build, and each call counts by the
    setting (a null disposition is never answered)."""
    lake_dir = tmp_path / "lake"
    shutil.copytree(small.data_dir / "lake", lake_dir)
    lake = Lake(str(lake_dir))
    key = partition_key("date", START)
    calls = lake.read("cdr_calls", key)
    assert calls is not None
    odd = ["it's odd", None, "", "it's odd", None]
    rows = calls.with_row_index("_n").filter(
        pl.col("campaign_id").is_not_null() | pl.col("queue_id").is_not_null()
    )["_n"][: len(odd)]
    dispositions = calls["disposition"].scatter(rows, pl.Series(odd, dtype=pl.String()))
    calls = calls.with_columns(dispositions)
    lake.write("cdr_calls", key, calls)
    write_aggregates(lake, key)
    tables = dict(small.tables)
    tables["cdr_calls"] = pl.concat(
        [calls, small.tables["cdr_calls"].filter(pl.col("date") != START)], how="vertical_relaxed"
    )
    answered = ("answered", "it's odd")
    kpi = KpiSettings(answered_dispositions=answered, unanswered_dispositions=("busy", "failed"))
    assert _older_views(_views(lake_dir, kpi)) == _older_views_want(tables, answered)


def test_a_day_landed_again_with_new_columns_rebuilds_the_views(tmp_path: Path) -> None:
    """A `raw` day landed again under `token` gains the privacy stage's columns: the views,
    whose fingerprint counted which accounts hold which tables but not their columns, were
    not rebuilt, and `SELECT pii_forgotten FROM cdrs` failed until `cdrhouse lake views`."""
    from connectors.sandbox.generator import Dataset
    from warehouse.duck import refresh_views

    from .conftest import write_day

    lake = Lake((tmp_path / "lake").as_uri())
    norm = write_day(lake, Dataset(seed=5, start_date=START, days=1, cdrs_per_day=30), START)
    assert refresh_views(tmp_path)
    with pytest.raises(duckdb.BinderException), connect(tmp_path) as analyst:
        analyst.execute("SELECT pii_forgotten FROM cdrs").fetchall()
    flagged = norm.cdrs.with_columns(pl.lit(False).alias("pii_forgotten"))
    lake.write("cdrs", partition_key("date", START), flagged)
    assert refresh_views(tmp_path)
    with connect(tmp_path) as analyst:
        assert analyst.execute("SELECT bool_or(pii_forgotten) FROM cdrs").fetchone() == (False,)
    assert not refresh_views(tmp_path)  # nothing changed since: no rebuild
