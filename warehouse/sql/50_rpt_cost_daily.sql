-- rpt_cost_daily: what did we spend per day, by CDR type, destination country and campaign?
-- Grain: one row per (account_id, date, type, destination_country, campaign_id); country and campaign are
-- only known for calls (NULL otherwise). cost is an exact DECIMAL sum, never a float.
-- @col account_id: account (contact center) id; `default` for a lake without accounts
-- @col date: UTC day
-- @col type: CDR type
-- @col destination_country: destination country (calls only)
-- @col campaign_id: campaign id (calls only)
-- @col cdrs: number of CDRs
-- @col cost: sum of cost, exact decimal
-- Per-day pre-aggregate: its Dagster asset writes it one date partition at a time.
CREATE OR REPLACE VIEW agg_cost_daily AS
SELECT account_id, date, 'call' AS type, destination_country, campaign_id, count(*) AS cdrs, sum(cost) AS cost
FROM cdr_calls
GROUP BY ALL
UNION ALL
SELECT account_id, date, type, NULL AS destination_country, NULL AS campaign_id, count(*), sum(cost)
FROM cdrs
WHERE type <> 'call'
GROUP BY ALL;

CREATE OR REPLACE VIEW rpt_cost_daily AS SELECT * FROM agg_cost_daily;
