-- rpt_sms_delivery: how many SMS went out per day, how many failed, how many segments, and how
-- many used a canned template versus free text?
-- Grain: one row per (account_id, date). cost is an exact decimal sum.
-- @col account_id: account (contact center) id; `default` for a lake without accounts
-- @col date: UTC day
-- @col sms: SMS CDRs
-- @col sent: sent
-- @col failed: not sent
-- @col segments: sum of segments_count
-- @col canned: SMS from a canned message
-- @col free_text: SMS with free text
-- @col cost: sum of cost, exact decimal
-- Per-day pre-aggregate: its Dagster asset writes it one date partition at a time.
CREATE OR REPLACE VIEW agg_sms_delivery AS
SELECT
    account_id,
    date,
    count(*) AS sms,
    count(*) FILTER (WHERE sent) AS sent,
    count(*) FILTER (WHERE NOT sent) AS failed,
    CAST(sum(segments_count) AS BIGINT) AS segments,
    count(*) FILTER (WHERE canned_message_id IS NOT NULL) AS canned,
    count(*) FILTER (WHERE canned_message_id IS NULL) AS free_text,
    sum(cost) AS cost
FROM cdr_sms
GROUP BY account_id, date;

CREATE OR REPLACE VIEW rpt_sms_delivery AS SELECT * FROM agg_sms_delivery;
