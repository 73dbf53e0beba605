-- rpt_campaign_outcomes: what did each outbound campaign achieve per day?
-- Grain: one row per (account_id, date, campaign_id). attempts = campaign calls, answered = disposition
-- `answered` as written (not CDRHOUSE_ANSWERED_DISPOSITIONS: the pre-aggregate keeps no
-- disposition, so no setting can apply; `rpt_outbound_kpis.connects` follows it), answer_rate = answered / attempts, end_reasons = MAP end_reason -> count,
-- cost = exact decimal sum of the calls' cost.
-- @col account_id: account (contact center) id; `default` for a lake without accounts
-- @col date: UTC day
-- @col campaign_id: campaign id
-- @col name_snapshot: campaign name at the time
-- @col attempts: campaign calls
-- @col answered: campaign calls whose disposition is `answered` as written (not CDRHOUSE_ANSWERED_DISPOSITIONS; `rpt_outbound_kpis.connects` follows the setting)
-- @col answer_rate: answered / attempts
-- @col end_reasons: MAP end_reason -> number of calls
-- @col cost: sum of cost, exact decimal
-- Per-day pre-aggregate: its Dagster asset writes it one date partition at a time.
CREATE OR REPLACE VIEW agg_campaign_outcomes AS
SELECT
    account_id,
    date,
    campaign_id,
    arg_max(campaign_name_snapshot, started_at) AS name_snapshot,
    count(*) AS attempts,
    count(*) FILTER (WHERE disposition = 'answered') AS answered,
    count(*) FILTER (WHERE disposition = 'answered') / count(*) AS answer_rate,
    histogram(end_reason) AS end_reasons,
    sum(cost) AS cost
FROM cdr_calls
WHERE campaign_id IS NOT NULL
GROUP BY account_id, date, campaign_id;

CREATE OR REPLACE VIEW rpt_campaign_outcomes AS SELECT * FROM agg_campaign_outcomes;
