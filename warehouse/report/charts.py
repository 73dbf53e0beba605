"""The report's numbers, in page order: the headline tiles (`TILES`), the per-queue table
(`QUEUE_SQL`, `QUEUE_TOTAL_SQL`) and the charts (`CHARTS`): each one's query over a `rpt_*`
view, the reshape of its rows into what it draws, and its drawing (`drawings.py`).

The queries read only the reporting views (the warehouse's public contract, docs/warehouse.md)
for the days `[$start, $end)`: business days (`local_date`, CDRHOUSE_TIMEZONE) in the KPI
views, UTC days (`date`) in the older ones. Every percentage and average is computed from the
summed counts and seconds of the period, never averaged (docs/metrics.md).

Accounts: every query also takes `$account`, an account id or NULL. NULL sums every account
(queues, campaigns and agents of different accounts stay apart: they are grouped with their
account); an id restricts every number to that account.
"""

from __future__ import annotations

from collections import Counter

from warehouse.report import drawings
from warehouse.report.data import Chart, Row, TileDef

TOP_AGENTS = 10
SLA_KINDS = ("first_response", "resolution", "avg_reply")
# The charts with a day axis: drawn wide, one column per day.
DAILY = frozenset({"volume", "cost", "sla", "sms", "balance"})

_ACCOUNT = "($account IS NULL OR account_id = $account)"
_IN_RANGE = f"date >= $start AND date < $end AND {_ACCOUNT}"
_LOCAL = f"local_date >= $start AND local_date < $end AND {_ACCOUNT}"
# The queue measures of docs/metrics.md, from the sums of whatever rows are grouped.
_QUEUE_MEASURES = (
    "sum(offered) AS offered, sum(answered) AS answered, "
    "sum(answered_within_sl) AS answered_within_sl, sum(abandoned) AS abandoned, "
    "sum(short_abandoned) AS short_abandoned, sum(blocked) AS blocked, "
    "100.0 * sum(answered_within_sl) / nullif(sum(answered) + sum(abandoned), 0) "
    "AS service_level_pct, "
    "100.0 * sum(abandoned) / nullif(sum(answered) + sum(abandoned), 0) AS abandon_rate_pct, "
    "sum(answered_queue_s) / nullif(sum(answered), 0) AS asa_s, "
    "sum(handle_s) / nullif(sum(answered), 0) AS aht_s"
)

AHT_NOTE = "talk + hold; the API gives no after-call work, so none is in it"

TILES: tuple[TileDef, ...] = (
    TileDef(
        "offered",
        "Offered calls",
        "rpt_queue_kpis",
        f"SELECT sum(offered) FROM rpt_queue_kpis WHERE {_LOCAL}",
        "count",
        "inbound calls routed to a queue",
    ),
    TileDef(
        "service_level",
        "Service level",
        "rpt_queue_kpis",
        "SELECT 100.0 * sum(answered_within_sl) / nullif(sum(answered) + sum(abandoned), 0) "
        f"FROM rpt_queue_kpis WHERE {_LOCAL}",
        "pct",
        "answered within {sl} s / (answered + abandoned)",
    ),
    TileDef(
        "asa",
        "ASA",
        "rpt_queue_kpis",
        f"SELECT sum(answered_queue_s) / nullif(sum(answered), 0) FROM rpt_queue_kpis "
        f"WHERE {_LOCAL}",
        "seconds",
        "average speed of answer (queue wait of answered calls)",
    ),
    TileDef(
        "abandon",
        "Abandon rate",
        "rpt_queue_kpis",
        "SELECT 100.0 * sum(abandoned) / nullif(sum(answered) + sum(abandoned), 0) "
        f"FROM rpt_queue_kpis WHERE {_LOCAL}",
        "pct",
        "abandoned / (answered + abandoned); short abandons excluded",
    ),
    TileDef(
        "aht",
        "AHT",
        "rpt_queue_kpis",
        f"SELECT sum(handle_s) / nullif(sum(answered), 0) FROM rpt_queue_kpis WHERE {_LOCAL}",
        "seconds",
        AHT_NOTE,
    ),
    TileDef(
        "conversation_sla",
        "Conversation SLA",
        "rpt_conversation_sla",
        "SELECT 100.0 * sum(met) / nullif(sum(met) + sum(breached), 0) "
        f"FROM rpt_conversation_sla WHERE {_LOCAL}",
        "pct",
        "SLAs met / evaluated, every channel, with or without a queue",
    ),
    TileDef(
        "cost",
        "Cost",
        "rpt_cost_daily",
        f"SELECT sum(cost) FROM rpt_cost_daily WHERE {_IN_RANGE}",
        "money",
        "every CDR type, UTC days",
    ),
)


def _with_account(view: str) -> str:
    """SQL naming a row's account after its label when every account is summed and the view
    holds more than one: ids and names are an account's own, and a chart keyed by label
    merged two accounts' campaigns (or agents) of one name into one bar."""
    return (
        f"|| CASE WHEN $account IS NULL AND (SELECT count(DISTINCT account_id) FROM {view}) "
        "> 1 THEN ' (' || account_id || ')' ELSE '' END"
    )


QUEUE_SQL = (
    "SELECT queue_id, coalesce(any_value(queue_name), 'queue ' || queue_id) "
    # Queue ids are an account's own: across accounts, a queue is named with its account.
    f"{_with_account('rpt_queue_kpis')} AS queue, "
    f"{_QUEUE_MEASURES} FROM rpt_queue_kpis WHERE {_LOCAL} "
    "GROUP BY account_id, queue_id ORDER BY offered DESC, account_id, queue_id"
)
QUEUE_TOTAL_SQL = f"SELECT {_QUEUE_MEASURES} FROM rpt_queue_kpis WHERE {_LOCAL}"


def _sla_rows(rows: list[Row]) -> list[Row]:
    """One row per (day, SLA kind, met|breached) with conversations."""
    return [
        {
            "date": r["date"],
            "sla": (kind := str(r["sla_kind"]).replace("_", " ")),
            "status": status,
            "series": f"{kind}: {status}",
            "conversations": n,
            "evaluated": int(r["met"]) + int(r["breached"]),
        }
        for r in rows
        for status in ("met", "breached")
        if (n := int(r[status] or 0))
    ]


def _agent_rows(rows: list[Row]) -> list[Row]:
    """The top and bottom agents by handled contacts (all of them when there are few), one
    row per agent and contact kind (calls, conversations)."""
    ranked = sorted(rows, key=lambda r: (-int(r["handled"]), str(r["agent"])))
    # Two agents of one name (a "Lara (old)" and a new Lara): each keeps a bar of its own.
    names = Counter(str(r["agent"]) for r in ranked)
    ranked = [
        {**r, "agent": f"{r['agent']} [{str(r['user_id'])[:8]}]"} if names[str(r["agent"])] > 1
        else r
        for r in ranked
    ]  # fmt: skip
    if len(ranked) > 2 * TOP_AGENTS:
        ranked = ranked[:TOP_AGENTS] + ranked[-TOP_AGENTS:]
    out: list[Row] = []
    for rank, r in enumerate(ranked, 1):
        for kind, n, talk in (
            ("calls", r["calls_handled"], r["call_talk_h"]),
            ("conversations", r["conversations_handled"], r["conversation_talk_h"]),
        ):
            out.append({**r, "rank": rank, "kind": kind, "contacts": n, "kind_talk_h": talk})
    return out


def _outbound_rows(rows: list[Row]) -> list[Row]:
    out: list[Row] = []
    names = Counter(str(r["campaign"]) for r in rows)
    for r in rows:
        if names[str(r["campaign"])] > 1:  # two campaigns of one name: a bar each
            r = {**r, "campaign": f"{r['campaign']} [{r['campaign_id']}]"}
        missed = int(r["attempts"]) - int(r["connects"])
        for outcome, n in (("connected", r["connects"]), ("not connected", missed)):
            out.append({**r, "outcome": outcome, "calls": n})
    return out


def _sms_rows(rows: list[Row]) -> list[Row]:
    return [
        {**r, "status": status, "messages": r[status]}
        for r in rows
        for status in ("sent", "failed")
    ]


CHARTS: tuple[Chart, ...] = (
    Chart(
        "heatmap",
        "When calls come in and how they are served: weekday x hour (local time)",
        "rpt_interval_kpis",
        "SELECT isodow(interval_start_local) AS weekday_no, "
        "dayname(interval_start_local) AS weekday, hour(interval_start_local) AS hour, "
        "sum(offered) AS offered, sum(answered) AS answered, "
        "sum(answered_within_sl) AS answered_within_sl, sum(abandoned) AS abandoned, "
        "100.0 * sum(answered_within_sl) / nullif(sum(answered) + sum(abandoned), 0) "
        f"AS service_level_pct FROM rpt_interval_kpis WHERE {_LOCAL} "
        "GROUP BY ALL ORDER BY weekday_no, hour",
        "No inbound queue calls in this range.",
        drawings.heatmap,
        note="Every local day of the period, summed per weekday and hour; the service level "
        "of an hour with few calls swings widely: hover a cell for its counts.",
    ),
    Chart(
        "sla",
        "Conversation SLAs met and breached per day, by SLA kind (with or without a queue)",
        "rpt_conversation_sla",
        "SELECT local_date AS date, sla_kind, sum(met) AS met, sum(breached) AS breached "
        f"FROM rpt_conversation_sla WHERE {_LOCAL} GROUP BY ALL ORDER BY date, sla_kind",
        "No conversation with an SLA in this range.",
        drawings.sla,
        _sla_rows,
        note="One bar per SLA kind and day: met (dark) under breached (light). Conversations "
        "without that SLA are in neither.",
    ),
    Chart(
        "volume",
        "Daily CDR volume by type",
        "rpt_daily_volume",
        f"SELECT date, type, sum(cdrs) AS cdrs FROM rpt_daily_volume WHERE {_IN_RANGE} "
        "GROUP BY date, type ORDER BY date, type",
        "No CDRs in this range.",
        drawings.volume,
    ),
    Chart(
        "outbound",
        "Outbound calls by campaign: connects and connect rate",
        "rpt_outbound_kpis",
        "SELECT campaign_id, coalesce(any_value(campaign_name), CASE WHEN campaign_id IS NULL "
        "THEN '(no campaign)' ELSE 'campaign ' || campaign_id END) "
        f"{_with_account('rpt_outbound_kpis')} AS campaign, "
        "sum(attempts) AS attempts, sum(connects) AS connects, "
        "100.0 * sum(connects) / nullif(sum(attempts), 0) AS connect_rate_pct, "
        "sum(talk_s) / 3600 AS talk_h "
        f"FROM rpt_outbound_kpis WHERE {_LOCAL} GROUP BY account_id, campaign_id "
        "ORDER BY attempts DESC, campaign_id NULLS LAST, account_id",
        "No outbound calls in this range.",
        drawings.outbound,
        _outbound_rows,
    ),
    Chart(
        "agents",
        f"Agents: top and bottom {TOP_AGENTS} by handled contacts (calls + conversations)",
        "rpt_agent_kpis",
        "SELECT user_id, coalesce(any_value(user_name), user_id) "
        f"{_with_account('rpt_agent_kpis')} AS agent, "
        "sum(calls_handled + conversations_handled) AS handled, "
        "sum(calls_handled) AS calls_handled, "
        "sum(conversations_handled) AS conversations_handled, "
        "sum(call_talk_s + conversation_talk_s) / 3600 AS talk_h, "
        "sum(call_talk_s) / 3600 AS call_talk_h, "
        "sum(conversation_talk_s) / 3600 AS conversation_talk_h, "
        "sum(call_talk_s + call_hold_s) / nullif(sum(calls_handled), 0) AS aht_s "
        f"FROM rpt_agent_kpis WHERE {_LOCAL} GROUP BY account_id, user_id "
        "ORDER BY handled DESC, agent, account_id",
        "No agent handled a call or conversation in this range.",
        drawings.agents,
        _agent_rows,
        note="Handled calls are answered calls with the agent; every conversation with the "
        "agent counts. Call AHT per agent is in the tooltip (no after-call work in the API).",
    ),
    Chart(
        "cost",
        "Cost per day by CDR type",
        "rpt_cost_daily",
        f"SELECT date, type, sum(cost) AS cost, sum(cdrs) AS cdrs FROM rpt_cost_daily "
        f"WHERE {_IN_RANGE} GROUP BY date, type ORDER BY date, type",
        "No costed CDRs in this range.",
        drawings.cost,
    ),
    Chart(
        "sms",
        "SMS delivery per day: sent and failed",
        "rpt_sms_delivery",
        # Summed per day: one row per account and day drew several unnamed bars a day.
        "SELECT date, sum(sms) AS sms, sum(sent) AS sent, sum(failed) AS failed, "
        "sum(segments) AS segments, sum(canned) AS canned, sum(free_text) AS free_text, "
        f"sum(cost) AS cost FROM rpt_sms_delivery WHERE {_IN_RANGE} GROUP BY date ORDER BY date",
        "No SMS in this range.",
        drawings.sms,
        _sms_rows,
    ),
    Chart(
        "balance",
        "Account balance (snapshots from the first day to the morning after the last)",
        "rpt_balance",
        # Across accounts: the sum of their balances (one account: its own, as before).
        "SELECT snapshot_date, max(snapshot_at) AS snapshot_at, sum(amount) AS amount, "
        "sum(change) AS change FROM rpt_balance "
        f"WHERE snapshot_date >= $start AND snapshot_date <= $end AND {_ACCOUNT} "
        "GROUP BY snapshot_date ORDER BY snapshot_date",
        "No balance snapshot in this range (the snapshots job reads it once a day).",
        drawings.balance,
    ),
)

# The numbers the CLI prints and the Dagster asset records (floats, plotted over runs).
HEADLINE_SQL = (
    f"SELECT (SELECT coalesce(sum(cdrs), 0) FROM rpt_daily_volume WHERE {_IN_RANGE}) AS cdrs, "
    f"(SELECT coalesce(sum(cost), 0) FROM rpt_cost_daily WHERE {_IN_RANGE}) AS cost, "
    f"(SELECT coalesce(sum(met), 0) FROM rpt_conversation_sla WHERE {_LOCAL}) AS sla_met, "
    f"(SELECT coalesce(sum(breached), 0) FROM rpt_conversation_sla WHERE {_LOCAL}) "
    "AS sla_breached"
)
