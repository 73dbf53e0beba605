-- rpt_daily_volume: how many CDRs happened per day, by type, subtype and disposition?
-- Grain: one row per (date, type, subtype, disposition). Cost is an exact decimal sum.
CREATE OR REPLACE VIEW rpt_daily_volume AS
SELECT
    date,
    type,
    subtype,
    disposition,
    count(*) AS cdrs,
    sum(cost) AS cost
FROM cdrs
GROUP BY ALL;
