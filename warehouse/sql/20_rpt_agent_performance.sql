-- rpt_agent_performance: how did each agent perform per day?
-- Grain: one row per (account_id, date, user_id), UTC days (`rpt_agent_kpis` has the local business day).
-- calls_handled = answered calls with the agent (an answered disposition,
-- kpi_settings.answered_dispositions, as in `rpt_agent_kpis`); talk/hold seconds, the average
-- conversation score and MOS are over those calls. An agent with neither a handled call nor a
-- conversation that day has no row.
-- No wrap-up time: the API gives no after-call work, and overall minus the other durations is
-- 1 s on every call of the sandbox (the derived `wrapup_s` measured nothing; it was removed).
-- name_snapshot is the agent's name at the time (latest that day, on any call or conversation);
-- current_name is from `users`.
-- @col account_id: account (contact center) id; `default` for a lake without accounts
-- @col date: UTC day
-- @col user_id: agent id
-- @col name_snapshot: agent name at the time (latest that day)
-- @col current_name: agent name in the latest users snapshot
-- @col calls_handled: answered calls with this agent (CDRHOUSE_ANSWERED_DISPOSITIONS); in agg_agent_performance, those whose disposition is `answered` as written (a day aggregated before `call_dispositions` existed counts that way in this view too)
-- @col talk_s: talk seconds over handled calls
-- @col hold_s: hold seconds over handled calls
-- @col avg_conversation_score: average conversation score of handled calls
-- @col avg_mos: average MOS of handled calls
-- @col conversations_handled: conversations with this agent
-- @col call_dispositions: in `agg_agent_performance` only: MAP disposition -> the agent's calls of it (calls, talk_s, hold_s, and the sums and counts behind the averages: score_sum, score_n, mos_sum, mos_n); the view applies the answered setting to it
-- Per-day pre-aggregate (no setting applied): its Dagster asset writes it one date partition
-- at a time.
CREATE OR REPLACE VIEW agg_agent_performance AS
WITH per AS (
    SELECT
        account_id,
        date,
        user_id,
        disposition,
        arg_max(user_name_snapshot, started_at) AS name_snapshot,
        max(started_at) AS last_at,
        count(*) AS calls,
        -- Summed in the values' order: the same day gives the same bits, whatever its rows' order.
        sum(duration_talk ORDER BY duration_talk) AS talk_s,
        sum(duration_hold ORDER BY duration_hold) AS hold_s,
        sum(conversation_score ORDER BY conversation_score) AS score_sum,
        count(conversation_score) AS score_n,
        sum(mos ORDER BY mos) AS mos_sum,
        count(mos) AS mos_n
    FROM cdr_calls
    WHERE user_id IS NOT NULL AND disposition IS NOT NULL
    GROUP BY ALL
),
calls AS (
    -- The literal columns count `disposition = 'answered'`, as before `call_dispositions`.
    SELECT
        account_id,
        date,
        user_id,
        arg_max(name_snapshot, last_at) AS name_snapshot,
        max(last_at) AS last_at,
        CAST(coalesce(sum(calls) FILTER (WHERE disposition = 'answered'), 0) AS BIGINT)
            AS calls_handled,
        sum(talk_s) FILTER (WHERE disposition = 'answered') AS talk_s,
        sum(hold_s) FILTER (WHERE disposition = 'answered') AS hold_s,
        sum(score_sum) FILTER (WHERE disposition = 'answered')
            / nullif(sum(score_n) FILTER (WHERE disposition = 'answered'), 0)
            AS avg_conversation_score,
        sum(mos_sum) FILTER (WHERE disposition = 'answered')
            / nullif(sum(mos_n) FILTER (WHERE disposition = 'answered'), 0) AS avg_mos,
        map_from_entries(list({
            'key': disposition,
            'value': {
                'calls': calls, 'talk_s': talk_s, 'hold_s': hold_s, 'score_sum': score_sum,
                'score_n': score_n, 'mos_sum': mos_sum, 'mos_n': mos_n
            }
        } ORDER BY disposition)) AS call_dispositions  -- (ordered: the same day, the same map)
    FROM per
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
    coalesce(v.conversations_handled, 0) AS conversations_handled,
    c.call_dispositions
FROM calls c
FULL OUTER JOIN convs v
    ON c.account_id = v.account_id AND c.date = v.date AND c.user_id = v.user_id;

CREATE OR REPLACE VIEW rpt_agent_performance AS
WITH a AS (
    SELECT
        g.*,
        list_filter(map_entries(g.call_dispositions),
                    lambda e: list_contains(s.answered_dispositions, e.key)) AS handled
    FROM agg_agent_performance g
    CROSS JOIN kpi_settings s
),
b AS (
    -- A day aggregated before `call_dispositions` existed: its literal columns, as then.
    SELECT
        a.* EXCLUDE (call_dispositions, handled) REPLACE (
            CASE WHEN call_dispositions IS NULL THEN calls_handled
                 ELSE CAST(coalesce(list_sum(list_transform(handled, lambda e: e.value.calls)), 0)
                           AS BIGINT) END AS calls_handled,
            CASE WHEN call_dispositions IS NULL THEN talk_s
                 ELSE coalesce(list_sum(list_transform(handled, lambda e: e.value.talk_s)), 0)
                 END AS talk_s,
            CASE WHEN call_dispositions IS NULL THEN hold_s
                 ELSE coalesce(list_sum(list_transform(handled, lambda e: e.value.hold_s)), 0)
                 END AS hold_s,
            CASE WHEN call_dispositions IS NULL THEN avg_conversation_score
                 ELSE list_sum(list_transform(handled, lambda e: e.value.score_sum))
                      / nullif(list_sum(list_transform(handled, lambda e: e.value.score_n)), 0)
                 END AS avg_conversation_score,
            CASE WHEN call_dispositions IS NULL THEN avg_mos
                 ELSE list_sum(list_transform(handled, lambda e: e.value.mos_sum))
                      / nullif(list_sum(list_transform(handled, lambda e: e.value.mos_n)), 0)
                 END AS avg_mos
        )
    FROM a
)
SELECT b.account_id, b.date, b.user_id, b.name_snapshot, u.name AS current_name,
       b.* EXCLUDE (account_id, date, user_id, name_snapshot)
FROM b
LEFT JOIN users u ON u.account_id = b.account_id AND u.id = b.user_id
WHERE b.calls_handled > 0 OR b.conversations_handled > 0;
