-- rpt_campaign_outcomes: what did each outbound campaign achieve per day?
-- Grain: one row per (account_id, date, campaign_id). attempts = campaign calls, answered = calls
-- with an answered disposition (kpi_settings.answered_dispositions, as in `rpt_outbound_kpis`),
-- answer_rate = answered / attempts, end_reasons = MAP end_reason -> count,
-- cost = exact decimal sum of the calls' cost.
-- @col account_id: account (contact center) id; `default` for a lake without accounts
-- @col date: UTC day
-- @col campaign_id: campaign id
-- @col name_snapshot: campaign name at the time
-- @col attempts: campaign calls
-- @col answered: campaign calls with an answered disposition (CDRHOUSE_ANSWERED_DISPOSITIONS); in agg_campaign_outcomes, the disposition `answered` as written (a day aggregated before `dispositions` existed counts that way in this view too)
-- @col answer_rate: answered / attempts
-- @col end_reasons: MAP end_reason -> number of calls
-- @col cost: sum of cost, exact decimal
-- @col dispositions: in `agg_campaign_outcomes` only: MAP disposition -> number of calls; the view applies the answered setting to it
-- Per-day pre-aggregate (no setting applied): its Dagster asset writes it one date partition
-- at a time.
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
    sum(cost) AS cost,
    CAST(histogram(disposition) AS MAP(VARCHAR, BIGINT)) AS dispositions
FROM cdr_calls
WHERE campaign_id IS NOT NULL
GROUP BY account_id, date, campaign_id;

CREATE OR REPLACE VIEW rpt_campaign_outcomes AS
WITH a AS (
    SELECT
        g.* EXCLUDE (answered, answer_rate, dispositions),
        answered_calls(g.dispositions, g.answered, s.answered_dispositions) AS answered
    FROM agg_campaign_outcomes g
    CROSS JOIN kpi_settings s
)
SELECT account_id, date, campaign_id, name_snapshot, attempts, answered,
       answered / attempts AS answer_rate, end_reasons, cost
FROM a;
