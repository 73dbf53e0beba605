-- rpt_interval_kpis: how did each queue serve its inbound calls in each 15-minute interval?
-- Grain: one row per (account_id, interval_start_utc, queue_id) with at least one offered
-- call; inbound calls routed to a queue only (docs/metrics.md defines every column). On the
-- night clocks go back, two intervals share an interval_start_local (an hour is lived twice):
-- key an interval by interval_start_utc. The local time is
-- the account's zone (`account_settings.timezone`, else `kpi_settings.timezone`,
-- CDRHOUSE_TIMEZONE); intervals fall on 15-minute boundaries in
-- every current zone, so each one belongs to exactly one local day and summing the counts and
-- seconds of a day's intervals gives `rpt_queue_kpis` exactly. Counts and seconds are additive
-- sums; the pct and average columns are computed from them (never average them: recompute
-- from the sums). AHT has no after-call work: the API gives none.
-- Reads `agg_call_intervals` (per account, 15-minute UTC interval, queue, campaign, subtype,
-- disposition and end_reason) and classifies its rows with the `kpi_settings` view. Every row
-- is one account's (account_id first): sum over accounts by leaving it out of the GROUP BY.
-- @col account_id: account (contact center) id; `default` for a lake without accounts
-- @col interval_start_local: interval start, wall-clock time in the business time zone
-- @col interval_start_utc: the same instant in UTC
-- @col local_date: business day (local date) of the interval
-- @col queue_id: queue id
-- @col queue_name: latest queue name (queues snapshot, else the newest CDR's; deleted queues too)
-- @col offered: inbound calls with a queue
-- @col answered: offered with an answered disposition
-- @col answered_within_sl: answered with queue wait <= sl_threshold_s
-- @col abandoned: offered, not answered, abandon end_reason, queue wait >= short_abandon_s
-- @col short_abandoned: offered, not answered, abandon end_reason, queue wait < short_abandon_s
-- @col blocked: offered, not answered, not abandoned, not short-abandoned (busy, failed, ...)
-- @col answered_queue_s: sum of queue wait over answered calls, seconds (ASA numerator)
-- @col handle_s: sum of talk + hold over answered calls, seconds (AHT numerator; no after-call work in the API)
-- @col service_level_pct: 100 * answered_within_sl / (answered + abandoned); NULL when 0
-- @col abandon_rate_pct: 100 * abandoned / (answered + abandoned); NULL when 0
-- @col asa_s: answered_queue_s / answered (average speed of answer), seconds
-- @col aht_s: handle_s / answered (average handle time without after-call work), seconds
-- @col date: UTC day of the interval (the lake partition)
-- @col subtype: call subtype
-- @col disposition: call disposition
-- @col end_reason: call end_reason
-- @col campaign_id: campaign id
-- @col campaign_name: campaign name of the group's newest call (name now, else at the time)
-- @col last_started_at: start of the group's newest call (orders the names)
-- @col calls: calls in the group
-- @col queue_s: sum of queue wait, seconds
-- @col talk_s: sum of talk time, seconds
-- @col hold_s: sum of hold time, seconds
-- @col queue_waits: MAP queue wait (seconds) -> calls; the thresholds apply to it in the views
-- @col channel: conversation channel
-- @col conversations: conversations in the group
-- @col first_response_met: conversations whose first_response SLA was met
-- @col first_response_breached: ... breached
-- @col resolution_met: conversations whose resolution SLA was met
-- @col resolution_breached: ... breached
-- @col avg_reply_met: conversations whose avg_reply SLA was met
-- @col avg_reply_breached: ... breached
-- Per-day pre-aggregates (15-minute UTC grain, no setting applied): their Dagster asset writes
-- them one date partition at a time.
CREATE OR REPLACE VIEW agg_call_intervals AS
SELECT
    account_id,
    date,
    to_timestamp((epoch_ms(started_at) // 900000) * 900) AS interval_start_utc,
    queue_id,
    campaign_id,
    subtype,
    disposition,
    end_reason,
    arg_max(coalesce(queue_name, queue_name_snapshot), started_at) AS queue_name,
    arg_max(coalesce(campaign_name, campaign_name_snapshot), started_at) AS campaign_name,
    max(started_at) AS last_started_at,
    count(*) AS calls,
    coalesce(sum(duration_queue), 0) AS queue_s,
    coalesce(sum(duration_talk), 0) AS talk_s,
    coalesce(sum(duration_hold), 0) AS hold_s,
    CAST(histogram(duration_queue) AS MAP(DOUBLE, BIGINT)) AS queue_waits
FROM cdr_calls
GROUP BY ALL;

CREATE OR REPLACE VIEW agg_conversation_intervals AS
SELECT
    account_id,
    date,
    to_timestamp((epoch_ms(started_at) // 900000) * 900) AS interval_start_utc,
    queue_id,
    channel,
    arg_max(coalesce(queue_name, queue_name_snapshot), started_at) AS queue_name,
    max(started_at) AS last_started_at,
    count(*) AS conversations,
    count(*) FILTER (WHERE sla_first_response_status = 'met') AS first_response_met,
    count(*) FILTER (WHERE sla_first_response_status = 'breached') AS first_response_breached,
    count(*) FILTER (WHERE sla_resolution_status = 'met') AS resolution_met,
    count(*) FILTER (WHERE sla_resolution_status = 'breached') AS resolution_breached,
    count(*) FILTER (WHERE sla_avg_reply_status = 'met') AS avg_reply_met,
    count(*) FILTER (WHERE sla_avg_reply_status = 'breached') AS avg_reply_breached
FROM cdr_conversations
GROUP BY ALL;

-- The latest name of every queue of every account: the account's current snapshot's, else
-- the newest CDR's (queue ids are an account's own: two accounts may both have a queue 1).
CREATE OR REPLACE VIEW kpi_queue_names AS
WITH seen AS (
    SELECT account_id, queue_id, arg_max(queue_name, last_started_at) AS cdr_name
    FROM (
        SELECT account_id, queue_id, queue_name, last_started_at FROM agg_call_intervals
        UNION ALL
        SELECT account_id, queue_id, queue_name, last_started_at FROM agg_conversation_intervals
    )
    WHERE queue_id IS NOT NULL
    GROUP BY account_id, queue_id
)
SELECT
    coalesce(q.account_id, s.account_id) AS account_id,
    coalesce(q.id, s.queue_id) AS queue_id,
    coalesce(q.name, s.cdr_name) AS queue_name
FROM seen s
-- One row per id even when the snapshot lists a queue twice (its check warns): no KPI row doubles.
FULL OUTER JOIN (
    SELECT account_id, id, any_value(name) AS name FROM queues GROUP BY account_id, id
) q
    ON q.account_id = s.account_id AND q.id = s.queue_id;

-- Every call group of `agg_call_intervals`, in its account's local time, classified by the
-- settings.
CREATE OR REPLACE VIEW kpi_call_intervals AS
SELECT
    a.account_id,
    a.interval_start_utc,
    timezone(coalesce(z.timezone, s.timezone), a.interval_start_utc) AS interval_start_local,
    CAST(timezone(coalesce(z.timezone, s.timezone), a.interval_start_utc) AS DATE) AS local_date,
    a.queue_id,
    a.campaign_id,
    a.campaign_name,
    a.last_started_at,
    coalesce(list_contains(s.inbound_subtypes, a.subtype), false) AS inbound,
    coalesce(list_contains(s.outbound_subtypes, a.subtype), false) AS outbound,
    coalesce(list_contains(s.answered_dispositions, a.disposition), false) AS answered,
    coalesce(list_contains(s.abandon_end_reasons, a.end_reason), false) AS abandon_reason,
    a.calls,
    a.queue_s,
    a.talk_s,
    a.hold_s,
    coalesce(list_sum([e.value FOR e IN map_entries(a.queue_waits)
                       IF e.key <= s.sl_threshold_s]), 0) AS calls_within_sl,
    coalesce(list_sum([e.value FOR e IN map_entries(a.queue_waits)
                       IF e.key >= s.short_abandon_s]), 0) AS calls_long_wait,
    coalesce(list_sum([e.value FOR e IN map_entries(a.queue_waits)
                       IF e.key < s.short_abandon_s]), 0) AS calls_short_wait
FROM agg_call_intervals a
CROSS JOIN kpi_settings s
LEFT JOIN account_settings z ON z.account_id = a.account_id;

-- The additive sums of docs/metrics.md per interval and queue (inbound calls with a queue).
CREATE OR REPLACE VIEW kpi_queue_intervals AS
SELECT
    account_id,
    interval_start_local,
    interval_start_utc,
    local_date,
    queue_id,
    CAST(sum(calls) AS BIGINT) AS offered,
    CAST(coalesce(sum(calls) FILTER (WHERE answered), 0) AS BIGINT) AS answered,
    CAST(coalesce(sum(calls_within_sl) FILTER (WHERE answered), 0) AS BIGINT)
        AS answered_within_sl,
    CAST(coalesce(sum(calls_long_wait) FILTER (WHERE NOT answered AND abandon_reason), 0)
         AS BIGINT) AS abandoned,
    CAST(coalesce(sum(calls_short_wait) FILTER (WHERE NOT answered AND abandon_reason), 0)
         AS BIGINT) AS short_abandoned,
    CAST(coalesce(sum(queue_s) FILTER (WHERE answered), 0) AS DOUBLE) AS answered_queue_s,
    CAST(coalesce(sum(talk_s + hold_s) FILTER (WHERE answered), 0) AS DOUBLE) AS handle_s
FROM kpi_call_intervals
WHERE inbound AND queue_id IS NOT NULL
GROUP BY ALL;

CREATE OR REPLACE VIEW rpt_interval_kpis AS
SELECT
    k.account_id,
    k.interval_start_local,
    k.interval_start_utc,
    k.local_date,
    k.queue_id,
    n.queue_name,
    k.offered,
    k.answered,
    k.answered_within_sl,
    k.abandoned,
    k.short_abandoned,
    k.offered - k.answered - k.abandoned - k.short_abandoned AS blocked,
    k.answered_queue_s,
    k.handle_s,
    100.0 * k.answered_within_sl / nullif(k.answered + k.abandoned, 0) AS service_level_pct,
    100.0 * k.abandoned / nullif(k.answered + k.abandoned, 0) AS abandon_rate_pct,
    k.answered_queue_s / nullif(k.answered, 0) AS asa_s,
    k.handle_s / nullif(k.answered, 0) AS aht_s
FROM kpi_queue_intervals k
LEFT JOIN kpi_queue_names n ON n.account_id = k.account_id AND n.queue_id = k.queue_id;
