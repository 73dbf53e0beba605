-- rpt_outbound_kpis: how many outbound calls were made and connected per business day?
-- Grain: one row per (account_id, local_date, campaign_id); outbound calls without a campaign are the row
-- whose campaign_id is NULL. Outbound = a `subtype` of kpi_settings.outbound_subtypes, a
-- connect = an answered `disposition` (kpi_settings.answered_dispositions). local_date is the
-- day in the account's zone (account_settings, else kpi_settings.timezone). Sum attempts and connects to roll up, then recompute the rate.
-- @col account_id: account (contact center) id; `default` for a lake without accounts
-- @col local_date: business day (local date)
-- @col campaign_id: campaign id (NULL: outbound calls without a campaign)
-- @col campaign_name: latest campaign name (campaigns snapshot, else the newest CDR's)
-- @col attempts: outbound calls
-- @col connects: outbound calls with an answered disposition
-- @col connect_rate_pct: 100 * connects / attempts
-- @col talk_s: sum of talk time of the outbound calls, seconds
CREATE OR REPLACE VIEW rpt_outbound_kpis AS
WITH names AS (
    SELECT
        coalesce(c.account_id, s.account_id) AS account_id,
        coalesce(c.id, s.campaign_id) AS campaign_id,
        coalesce(c.name, s.cdr_name) AS campaign_name
    FROM (
        SELECT account_id, campaign_id, arg_max(campaign_name, last_started_at) AS cdr_name
        FROM agg_call_intervals
        WHERE campaign_id IS NOT NULL
        GROUP BY account_id, campaign_id
    ) s
    -- One row per id even when the snapshot lists a campaign twice: no KPI row doubles.
    FULL OUTER JOIN (
        SELECT account_id, id, any_value(name) AS name FROM campaigns GROUP BY account_id, id
    ) c
        ON c.account_id = s.account_id AND c.id = s.campaign_id
),
d AS (
    SELECT
        account_id,
        local_date,
        campaign_id,
        CAST(sum(calls) AS BIGINT) AS attempts,
        CAST(coalesce(sum(calls) FILTER (WHERE answered), 0) AS BIGINT) AS connects,
        CAST(sum(talk_s) AS DOUBLE) AS talk_s
    FROM kpi_call_intervals
    WHERE outbound
    GROUP BY account_id, local_date, campaign_id
)
SELECT
    d.account_id,
    d.local_date,
    d.campaign_id,
    n.campaign_name,
    d.attempts,
    d.connects,
    100.0 * d.connects / nullif(d.attempts, 0) AS connect_rate_pct,
    d.talk_s
FROM d
LEFT JOIN names n ON n.account_id = d.account_id AND n.campaign_id = d.campaign_id;
