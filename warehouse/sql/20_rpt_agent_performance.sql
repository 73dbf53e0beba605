-- rpt_agent_performance: how did each agent perform per day?
-- Grain: one row per (account_id, date, user_id), UTC days (`rpt_agent_kpis` has the local business day).
-- calls_handled = answered calls with the agent; talk/hold seconds are summed over those calls.
-- Answered here is `disposition = 'answered'` as written, not CDRHOUSE_ANSWERED_DISPOSITIONS:
-- the pre-aggregate keeps no disposition, so no setting can apply (`rpt_agent_kpis` follows it).
-- No wrap-up time: the API gives no after-call work, and overall minus the other durations is
-- 1 s on every call of the sandbox (the derived `wrapup_s` measured nothing; it was removed).
-- name_snapshot is the agent's name at the time (latest that day); current_name is from `users`.
-- @col account_id: account (contact center) id; `default` for a lake without accounts
-- @col date: UTC day
-- @col user_id: agent id
-- @col name_snapshot: agent name at the time (latest that day)
-- @col current_name: agent name in the latest users snapshot
-- @col calls_handled: calls with this agent whose disposition is `answered` as written (not CDRHOUSE_ANSWERED_DISPOSITIONS; `rpt_agent_kpis` follows the setting)
-- @col talk_s: talk seconds over handled calls
-- @col hold_s: hold seconds over handled calls
-- @col avg_conversation_score: average conversation score of handled calls
-- @col avg_mos: average MOS of handled calls
-- @col conversations_handled: conversations with this agent
-- Per-day pre-aggregate: its Dagster asset writes it one date partition at a time.
CREATE OR REPLACE VIEW agg_agent_performance AS
WITH calls AS (
    SELECT
        account_id,
        date,
        user_id,
        arg_max(user_name_snapshot, started_at) AS name_snapshot,
        max(started_at) AS last_at,
        count(*) AS calls_handled,
        sum(duration_talk) AS talk_s,
        sum(duration_hold) AS hold_s,
        avg(conversation_score) AS avg_conversation_score,
        avg(mos) AS avg_mos
    FROM cdr_calls
    WHERE user_id IS NOT NULL AND disposition = 'answered'
    GROUP BY ALL
),
convs AS (
    SELECT
        account_id,
        date,
        user_id,
        arg_max(user_name_snapshot, started_at) AS name_snapshot,
        max(started_at) AS last_at,
        count(*) AS conversations_handled
    FROM cdr_conversations
    WHERE user_id IS NOT NULL
    GROUP BY ALL
)
SELECT
    coalesce(c.account_id, v.account_id) AS account_id,
    coalesce(c.date, v.date) AS date,
    coalesce(c.user_id, v.user_id) AS user_id,
    CASE WHEN v.last_at IS NULL OR c.last_at >= v.last_at THEN c.name_snapshot
         ELSE v.name_snapshot END AS name_snapshot,
    coalesce(c.calls_handled, 0) AS calls_handled,
    coalesce(c.talk_s, 0) AS talk_s,
    coalesce(c.hold_s, 0) AS hold_s,
    c.avg_conversation_score,
    c.avg_mos,
    coalesce(v.conversations_handled, 0) AS conversations_handled
FROM calls c
FULL OUTER JOIN convs v
    ON c.account_id = v.account_id AND c.date = v.date AND c.user_id = v.user_id;

CREATE OR REPLACE VIEW rpt_agent_performance AS
SELECT a.account_id, a.date, a.user_id, a.name_snapshot, u.name AS current_name,
       a.* EXCLUDE (account_id, date, user_id, name_snapshot)
FROM agg_agent_performance a
LEFT JOIN users u ON u.account_id = a.account_id AND u.id = a.user_id;
