"""The report's charts, in page order: each one's query over a `rpt_*` view, the reshape of its
rows into what it draws, and its drawing (`drawings.py`). `HEADLINE_SQL` gives the numbers above
the charts.

The queries read only the reporting views (the warehouse's public contract, docs/warehouse.md)
for the UTC days `[$start, $end)`.
"""

from __future__ import annotations

from warehouse.report import drawings
from warehouse.report.data import Chart, Row

TOP_AGENTS = 10
SLA_KINDS = ("first_response", "resolution", "avg_reply")
# The charts with a day axis: drawn wide, one column per day.
DAILY = frozenset({"volume", "cost", "sla", "sms", "balance"})


def _sla_rows(rows: list[Row]) -> list[Row]:
    """One row per (day, SLA kind, met|breached) from the per-day sums."""
    return [
        {"date": r["date"], "sla": kind.replace("_", " "), "status": status, "conversations": n}
        for r in rows
        for kind in SLA_KINDS
        for status in ("met", "breached")
        if (n := int(r[f"{kind}_{status}"] or 0))
    ]


def _queue_rows(rows: list[Row]) -> list[Row]:
    return [
        {**r, "outcome": outcome, "calls": r[f"calls_{outcome}"]}
        for r in rows
        for outcome in ("answered", "unanswered")
    ]


def _agent_rows(rows: list[Row]) -> list[Row]:
    """The top and bottom agents by handled CDRs (all of them when there are few)."""
    ranked = sorted(rows, key=lambda r: (-int(r["handled"]), str(r["agent"])))
    if len(ranked) <= 2 * TOP_AGENTS:
        chosen = [
            (r, "top" if i < (len(ranked) + 1) // 2 else "bottom") for i, r in enumerate(ranked)
        ]
    else:
        chosen = [(r, "top") for r in ranked[:TOP_AGENTS]]
        chosen += [(r, "bottom") for r in ranked[-TOP_AGENTS:]]
    return [{**r, "group": f"{group} {TOP_AGENTS}"} for r, group in chosen]


def _campaign_rows(rows: list[Row]) -> list[Row]:
    out: list[Row] = []
    for r in rows:
        unanswered = int(r["attempts"]) - int(r["answered"])
        for outcome, n in (("answered", r["answered"]), ("not answered", unanswered)):
            out.append({**r, "outcome": outcome, "calls": n})
    return out


def _sms_rows(rows: list[Row]) -> list[Row]:
    return [
        {**r, "status": status, "messages": r[status]}
        for r in rows
        for status in ("sent", "failed")
    ]


_IN_RANGE = "date >= $start AND date < $end"

CHARTS: tuple[Chart, ...] = (
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
        "cost",
        "Cost per day by CDR type",
        "rpt_cost_daily",
        f"SELECT date, type, sum(cost) AS cost, sum(cdrs) AS cdrs FROM rpt_cost_daily "
        f"WHERE {_IN_RANGE} GROUP BY date, type ORDER BY date, type",
        "No costed CDRs in this range.",
        drawings.cost,
    ),
    Chart(
        "sla",
        "Conversation SLAs met and breached per day (conversations routed to a queue)",
        "rpt_queue_service",
        "SELECT date, "
        + ", ".join(f"sum({k}_{s}) AS {k}_{s}" for k in SLA_KINDS for s in ("met", "breached"))
        + f" FROM rpt_queue_service WHERE {_IN_RANGE} GROUP BY date ORDER BY date",
        "No conversation with an SLA in this range.",
        drawings.sla,
        _sla_rows,
    ),
    Chart(
        "queues",
        "Queue service: calls answered and unanswered, average queue wait",
        "rpt_queue_service",
        "SELECT queue_id, coalesce(any_value(current_name), any_value(name_snapshot), "
        "'queue ' || queue_id) AS queue, sum(calls_offered) AS calls_offered, "
        "sum(calls_answered) AS calls_answered, sum(calls_unanswered) AS calls_unanswered, "
        "round(100.0 * sum(calls_unanswered) / nullif(sum(calls_offered), 0), 2) "
        "AS unanswered_pct, "
        "round(sum(avg_queue_wait_s * calls_offered) / nullif(sum(calls_offered) "
        "FILTER (WHERE avg_queue_wait_s IS NOT NULL), 0), 1) AS avg_wait_s "
        f"FROM rpt_queue_service WHERE {_IN_RANGE} AND calls_offered > 0 "
        "GROUP BY queue_id ORDER BY calls_offered DESC, queue_id",
        "No calls routed to a queue in this range.",
        drawings.queues,
        _queue_rows,
    ),
    Chart(
        "agents",
        f"Agent performance: top and bottom {TOP_AGENTS} agents by handled CDRs",
        "rpt_agent_performance",
        "SELECT user_id, coalesce(any_value(current_name), arg_max(name_snapshot, date), "
        "user_id) AS agent, sum(calls_handled + conversations_handled) AS handled, "
        "sum(calls_handled) AS calls_handled, "
        "sum(conversations_handled) AS conversations_handled, "
        "round(sum(talk_s) / 3600, 2) AS talk_h, round(sum(hold_s) / 3600, 2) AS hold_h "
        f"FROM rpt_agent_performance WHERE {_IN_RANGE} GROUP BY user_id ORDER BY handled DESC",
        "No agent handled a call or conversation in this range.",
        drawings.agents,
        _agent_rows,
    ),
    Chart(
        "campaigns",
        "Campaign outcomes: answered and unanswered campaign calls",
        "rpt_campaign_outcomes",
        "SELECT campaign_id, coalesce(arg_max(name_snapshot, date), 'campaign ' || campaign_id) "
        "AS campaign, sum(attempts) AS attempts, sum(answered) AS answered, "
        "round(100.0 * sum(answered) / sum(attempts), 2) AS answer_rate_pct, sum(cost) AS cost "
        f"FROM rpt_campaign_outcomes WHERE {_IN_RANGE} GROUP BY campaign_id "
        "ORDER BY attempts DESC, campaign_id",
        "No campaign calls in this range.",
        drawings.campaigns,
        _campaign_rows,
    ),
    Chart(
        "sms",
        "SMS delivery per day: sent and failed",
        "rpt_sms_delivery",
        "SELECT date, sms, sent, failed, segments, canned, free_text, cost "
        f"FROM rpt_sms_delivery WHERE {_IN_RANGE} ORDER BY date",
        "No SMS in this range.",
        drawings.sms,
        _sms_rows,
    ),
    Chart(
        "balance",
        "Account balance over time (snapshots from the first day to the morning after the last)",
        "rpt_balance",
        "SELECT snapshot_date, snapshot_at, amount, change FROM rpt_balance "
        "WHERE snapshot_date >= $start AND snapshot_date <= $end ORDER BY snapshot_date",
        "No balance snapshot in this range (the snapshots job reads it once a day).",
        drawings.balance,
    ),
)

HEADLINE_SQL = (
    f"SELECT (SELECT coalesce(sum(cdrs), 0) FROM rpt_daily_volume WHERE {_IN_RANGE}) AS cdrs, "
    f"(SELECT coalesce(sum(cost), 0) FROM rpt_cost_daily WHERE {_IN_RANGE}) AS cost, "
    "(SELECT coalesce(sum(first_response_met + resolution_met + avg_reply_met), 0) "
    f"FROM rpt_queue_service WHERE {_IN_RANGE}) AS sla_met, "
    "(SELECT coalesce(sum(first_response_breached + resolution_breached + avg_reply_breached), 0)"
    f" FROM rpt_queue_service WHERE {_IN_RANGE}) AS sla_breached"
)
