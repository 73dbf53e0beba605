-- rpt_agent_kpis: how much did each agent handle per business day, on calls and conversations?
-- Grain: one row per (account_id, local_date, user_id) with at least one handled call or conversation.
-- A handled call is an answered call (kpi_settings.answered_dispositions) with the agent, any
-- subtype; a handled conversation is any conversation with the agent. AHT = (call talk + call
-- hold) / calls handled: the API gives no after-call work, so none is in it. local_date is the
-- day in the account's zone (account_settings, else kpi_settings.timezone). Sum the counts and seconds to roll up, then recompute AHT.
-- @col account_id: account (contact center) id; `default` for a lake without accounts
-- @col local_date: business day (local date)
-- @col user_id: agent id
-- @col user_name: latest agent name (users snapshot incl. deleted users, else the newest CDR's)
-- @col calls_handled: answered calls with this agent
-- @col call_talk_s: talk time of those calls, seconds
-- @col call_hold_s: hold time of those calls, seconds
-- @col conversations_handled: conversations with this agent
-- @col conversation_talk_s: talk time of those conversations, seconds
-- @col aht_s: (call_talk_s + call_hold_s) / calls_handled, seconds (no after-call work in the API)
-- @col date: UTC day of the interval (the lake partition)
-- @col interval_start_utc: start of the 15-minute UTC interval
-- @col type: CDR type: call or conversation
-- @col disposition: CDR disposition
-- @col name_snapshot: agent name at the time, of the group's newest CDR
-- @col last_started_at: start of the group's newest CDR (orders the names)
-- @col handled: CDRs in the group
-- @col talk_s: sum of talk time, seconds
-- @col hold_s: sum of hold time, seconds (0 for conversations: they have none)
-- Per-day pre-aggregate (15-minute UTC grain, no setting applied): its Dagster asset writes it
-- one date partition at a time.
CREATE OR REPLACE VIEW agg_agent_intervals AS
SELECT
    account_id,
    date,
    to_timestamp((epoch_ms(started_at) // 900000) * 900) AS interval_start_utc,
    user_id,
    type,
    disposition,
    arg_max(user_name_snapshot, started_at) AS name_snapshot,
    max(started_at) AS last_started_at,
    count(*) AS handled,
    coalesce(sum(duration_talk), 0) AS talk_s,
    coalesce(sum(duration_hold), 0) AS hold_s
FROM (
    SELECT account_id, date, started_at, user_id, 'call' AS type, disposition, user_name_snapshot,
           duration_talk, duration_hold
    FROM cdr_calls
    WHERE user_id IS NOT NULL
    UNION ALL
    SELECT account_id, date, started_at, user_id, 'conversation', disposition, user_name_snapshot,
           duration_talk, 0.0
    FROM cdr_conversations
    WHERE user_id IS NOT NULL
)
GROUP BY ALL;

CREATE OR REPLACE VIEW rpt_agent_kpis AS
WITH a AS (
    SELECT
        CAST(timezone(coalesce(z.timezone, s.timezone), g.interval_start_utc) AS DATE) AS local_date,
        g.*,
        coalesce(list_contains(s.answered_dispositions, g.disposition), false) AS answered
    FROM agg_agent_intervals g
    CROSS JOIN kpi_settings s
    LEFT JOIN account_settings z ON z.account_id = g.account_id
),
d AS (
    SELECT
        account_id,
        local_date,
        user_id,
        CAST(coalesce(sum(handled) FILTER (WHERE type = 'call' AND answered), 0) AS BIGINT)
            AS calls_handled,
        CAST(coalesce(sum(talk_s) FILTER (WHERE type = 'call' AND answered), 0) AS DOUBLE)
            AS call_talk_s,
        CAST(coalesce(sum(hold_s) FILTER (WHERE type = 'call' AND answered), 0) AS DOUBLE)
            AS call_hold_s,
        CAST(coalesce(sum(handled) FILTER (WHERE type = 'conversation'), 0) AS BIGINT)
            AS conversations_handled,
        CAST(coalesce(sum(talk_s) FILTER (WHERE type = 'conversation'), 0) AS DOUBLE)
            AS conversation_talk_s
    FROM a
    WHERE type = 'conversation' OR answered
    GROUP BY account_id, local_date, user_id
),
names AS (
    SELECT account_id, user_id, arg_max(name_snapshot, last_started_at) AS cdr_name
    FROM agg_agent_intervals
    GROUP BY account_id, user_id
)
SELECT
    d.account_id,
    d.local_date,
    d.user_id,
    coalesce(u.name, n.cdr_name) AS user_name,
    d.calls_handled,
    d.call_talk_s,
    d.call_hold_s,
    d.conversations_handled,
    d.conversation_talk_s,
    (d.call_talk_s + d.call_hold_s) / nullif(d.calls_handled, 0) AS aht_s
FROM d
LEFT JOIN names n ON n.account_id = d.account_id AND n.user_id = d.user_id
LEFT JOIN users u ON u.account_id = d.account_id AND u.id = d.user_id;
