-- rpt_conversation_sla: how many conversations met or breached each SLA per business day?
-- Grain: one row per (account_id, local_date, queue_id, channel, sla_kind); conversations without a queue
-- are the rows whose queue_id is NULL (they count: the old SLA headline left them out).
-- sla_kind is first_response, resolution or avg_reply; offered is the same on the three rows
-- of an (account_id, local_date, queue_id, channel): filter one sla_kind before summing it. A conversation
-- without that SLA is in offered and in neither met nor breached (`without_sla`).
-- local_date is the day in the account's zone (account_settings, else kpi_settings.timezone).
-- @col account_id: account (contact center) id; `default` for a lake without accounts
-- @col local_date: business day (local date)
-- @col queue_id: queue id (NULL: conversations without a queue)
-- @col queue_name: latest queue name (queues snapshot, else the newest CDR's)
-- @col channel: conversation channel
-- @col sla_kind: first_response, resolution or avg_reply
-- @col offered: conversations (all of them, whatever their SLA)
-- @col met: conversations whose sla_kind SLA was met
-- @col breached: conversations whose sla_kind SLA was breached
-- @col without_sla: offered minus met minus breached (no such SLA on the conversation)
CREATE OR REPLACE VIEW rpt_conversation_sla AS
WITH d AS (
    SELECT
        c.account_id,
        CAST(timezone(coalesce(z.timezone, s.timezone), c.interval_start_utc) AS DATE) AS local_date,
        c.queue_id,
        c.channel,
        CAST(sum(c.conversations) AS BIGINT) AS offered,
        CAST(sum(c.first_response_met) AS BIGINT) AS first_response_met,
        CAST(sum(c.first_response_breached) AS BIGINT) AS first_response_breached,
        CAST(sum(c.resolution_met) AS BIGINT) AS resolution_met,
        CAST(sum(c.resolution_breached) AS BIGINT) AS resolution_breached,
        CAST(sum(c.avg_reply_met) AS BIGINT) AS avg_reply_met,
        CAST(sum(c.avg_reply_breached) AS BIGINT) AS avg_reply_breached
    FROM agg_conversation_intervals c
    CROSS JOIN kpi_settings s
    LEFT JOIN account_settings z ON z.account_id = c.account_id
    GROUP BY ALL
),
k AS (
    SELECT
        d.account_id,
        d.local_date,
        d.queue_id,
        d.channel,
        kind.sla_kind,
        d.offered,
        CASE kind.sla_kind
            WHEN 'first_response' THEN d.first_response_met
            WHEN 'resolution' THEN d.resolution_met
            ELSE d.avg_reply_met END AS met,
        CASE kind.sla_kind
            WHEN 'first_response' THEN d.first_response_breached
            WHEN 'resolution' THEN d.resolution_breached
            ELSE d.avg_reply_breached END AS breached
    FROM d
    CROSS JOIN (VALUES ('first_response'), ('resolution'), ('avg_reply')) kind(sla_kind)
)
SELECT
    k.account_id,
    k.local_date,
    k.queue_id,
    n.queue_name,
    k.channel,
    k.sla_kind,
    k.offered,
    k.met,
    k.breached,
    k.offered - k.met - k.breached AS without_sla
FROM k
LEFT JOIN kpi_queue_names n ON n.account_id = k.account_id AND n.queue_id = k.queue_id;
