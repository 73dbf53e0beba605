-- rpt_daily_volume: how many CDRs happened per day, by type, subtype and disposition?
-- Grain: one row per (account_id, date, type, subtype, disposition). Cost is an exact decimal sum.
-- @col account_id: account (contact center) id; `default` for a lake without accounts
-- @col date: UTC day of started_at
-- @col type: CDR type
-- @col subtype: CDR subtype
-- @col disposition: CDR disposition
-- @col cdrs: number of CDRs
-- @col cost: sum of cost, exact decimal
-- Per-day pre-aggregate: its Dagster asset writes it one date partition at a time.
CREATE OR REPLACE VIEW agg_daily_volume AS
SELECT
    account_id,
    date,
    type,
    subtype,
    disposition,
    count(*) AS cdrs,
    sum(cost) AS cost
FROM cdrs
GROUP BY ALL;

CREATE OR REPLACE VIEW rpt_daily_volume AS SELECT * FROM agg_daily_volume;
