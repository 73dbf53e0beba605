-- rpt_queue_service: how well did each queue serve its contacts per day?
-- Grain: one row per (account_id, date, queue_id), UTC days. Calls: offered (every call routed to the queue,
-- inbound and outbound), answered, unanswered (offered - answered: busy, failed and outbound
-- calls included, so it is NOT the abandonment of docs/metrics.md; `rpt_queue_kpis` has that, per
-- local day), unanswered_rate, avg/max queue wait in seconds.
-- Conversations: offered, and for each SLA kind (first_response, resolution, avg_reply) how
-- many were met or breached (conversations without that SLA are not counted).
-- @col account_id: account (contact center) id; `default` for a lake without accounts
-- @col date: UTC day
-- @col queue_id: queue id
-- @col name_snapshot: queue name at the time
-- @col current_name: latest queue name: the latest queues snapshot, else (a deleted queue) the name the newest CDR of the queue carries
-- @col calls_offered: calls routed to the queue
-- @col calls_answered: of those, answered (an answered disposition, CDRHOUSE_ANSWERED_DISPOSITIONS); in agg_queue_service, the disposition `answered` as written (a day aggregated before `call_dispositions` existed counts that way in this view too)
-- @col calls_unanswered: offered minus answered (not the abandonment of docs/metrics.md)
-- @col unanswered_rate: unanswered / offered
-- @col avg_queue_wait_s: average queue wait of calls, seconds
-- @col max_queue_wait_s: longest queue wait of calls, seconds
-- @col conversations_offered: conversations routed to the queue
-- @col first_response_met: conversations with first_response SLA met
-- @col first_response_breached: ... breached
-- @col resolution_met: conversations with resolution SLA met
-- @col resolution_breached: ... breached
-- @col avg_reply_met: conversations with avg_reply SLA met
-- @col avg_reply_breached: ... breached
-- @col call_dispositions: in `agg_queue_service` only: MAP disposition -> number of the queue's calls; the view applies the answered setting to it
-- Per-day pre-aggregate (no setting applied): its Dagster asset writes it one date partition
-- at a time.
CREATE OR REPLACE VIEW agg_queue_service AS
WITH calls AS (
    SELECT
        account_id,
        date,
        queue_id,
        arg_max(queue_name_snapshot, started_at) AS name_snapshot,
        count(*) AS calls_offered,
        count(*) FILTER (WHERE disposition = 'answered') AS calls_answered,
        avg(duration_queue) AS avg_queue_wait_s,
        max(duration_queue) AS max_queue_wait_s,
        CAST(histogram(disposition) AS MAP(VARCHAR, BIGINT)) AS call_dispositions
    FROM cdr_calls
    WHERE queue_id IS NOT NULL
    GROUP BY ALL
),
convs AS (
    SELECT
        account_id,
        date,
        queue_id,
        arg_max(queue_name_snapshot, started_at) AS name_snapshot,
        count(*) AS conversations_offered,
        count(*) FILTER (WHERE sla_first_response_status = 'met') AS first_response_met,
        count(*) FILTER (WHERE sla_first_response_status = 'breached') AS first_response_breached,
        count(*) FILTER (WHERE sla_resolution_status = 'met') AS resolution_met,
        count(*) FILTER (WHERE sla_resolution_status = 'breached') AS resolution_breached,
        count(*) FILTER (WHERE sla_avg_reply_status = 'met') AS avg_reply_met,
        count(*) FILTER (WHERE sla_avg_reply_status = 'breached') AS avg_reply_breached
    FROM cdr_conversations
    WHERE queue_id IS NOT NULL
    GROUP BY ALL
)
SELECT
    coalesce(c.account_id, v.account_id) AS account_id,
    coalesce(c.date, v.date) AS date,
    coalesce(c.queue_id, v.queue_id) AS queue_id,
    coalesce(c.name_snapshot, v.name_snapshot) AS name_snapshot,
    coalesce(c.calls_offered, 0) AS calls_offered,
    coalesce(c.calls_answered, 0) AS calls_answered,
    coalesce(c.calls_offered - c.calls_answered, 0) AS calls_unanswered,
    (c.calls_offered - c.calls_answered) / nullif(c.calls_offered, 0) AS unanswered_rate,
    c.avg_queue_wait_s,
    c.max_queue_wait_s,
    coalesce(v.conversations_offered, 0) AS conversations_offered,
    coalesce(v.first_response_met, 0) AS first_response_met,
    coalesce(v.first_response_breached, 0) AS first_response_breached,
    coalesce(v.resolution_met, 0) AS resolution_met,
    coalesce(v.resolution_breached, 0) AS resolution_breached,
    coalesce(v.avg_reply_met, 0) AS avg_reply_met,
    coalesce(v.avg_reply_breached, 0) AS avg_reply_breached,
    c.call_dispositions
FROM calls c
FULL OUTER JOIN convs v
    ON c.account_id = v.account_id AND c.date = v.date AND c.queue_id = v.queue_id;

CREATE OR REPLACE VIEW rpt_queue_service AS
WITH a AS (
    SELECT
        g.* EXCLUDE (call_dispositions) REPLACE (
            answered_calls(g.call_dispositions, g.calls_answered, s.answered_dispositions)
                AS calls_answered
        )
    FROM agg_queue_service g
    CROSS JOIN kpi_settings s
)
SELECT a.account_id, a.date, a.queue_id, a.name_snapshot, n.queue_name AS current_name,
       a.* EXCLUDE (account_id, date, queue_id, name_snapshot) REPLACE (
           a.calls_offered - a.calls_answered AS calls_unanswered,
           (a.calls_offered - a.calls_answered) / nullif(a.calls_offered, 0) AS unanswered_rate
       )
FROM a
LEFT JOIN kpi_queue_names n ON n.account_id = a.account_id AND n.queue_id = a.queue_id;
