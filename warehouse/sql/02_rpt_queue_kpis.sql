-- rpt_queue_kpis: how well did each queue serve its inbound calls per business day?
-- Grain: one row per (account_id, local_date, queue_id) with at least one offered call;
-- inbound calls routed to a queue only. local_date is the day in the account's zone
-- (`account_settings.timezone`, else `kpi_settings.timezone`, CDRHOUSE_TIMEZONE):
-- the sum of that day's 15-minute intervals of `rpt_interval_kpis`, exact even when the local
-- day spans two UTC days. docs/metrics.md defines every column. Roll several days or queues up
-- by summing the counts and seconds and recomputing the pct and averages from the sums; never
-- average the pct or average columns. AHT has no after-call work: the API gives none.
-- @col account_id: account (contact center) id; `default` for a lake without accounts
-- @col local_date: business day (local date)
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
CREATE OR REPLACE VIEW rpt_queue_kpis AS
WITH d AS (
    SELECT
        account_id,
        local_date,
        queue_id,
        CAST(sum(offered) AS BIGINT) AS offered,
        CAST(sum(answered) AS BIGINT) AS answered,
        CAST(sum(answered_within_sl) AS BIGINT) AS answered_within_sl,
        CAST(sum(abandoned) AS BIGINT) AS abandoned,
        CAST(sum(short_abandoned) AS BIGINT) AS short_abandoned,
        sum(answered_queue_s) AS answered_queue_s,
        sum(handle_s) AS handle_s
    FROM kpi_queue_intervals
    GROUP BY account_id, local_date, queue_id
)
SELECT
    d.account_id,
    d.local_date,
    d.queue_id,
    n.queue_name,
    d.offered,
    d.answered,
    d.answered_within_sl,
    d.abandoned,
    d.short_abandoned,
    d.offered - d.answered - d.abandoned - d.short_abandoned AS blocked,
    d.answered_queue_s,
    d.handle_s,
    100.0 * d.answered_within_sl / nullif(d.answered + d.abandoned, 0) AS service_level_pct,
    100.0 * d.abandoned / nullif(d.answered + d.abandoned, 0) AS abandon_rate_pct,
    d.answered_queue_s / nullif(d.answered, 0) AS asa_s,
    d.handle_s / nullif(d.answered, 0) AS aht_s
FROM d
LEFT JOIN kpi_queue_names n ON n.account_id = d.account_id AND n.queue_id = d.queue_id;
