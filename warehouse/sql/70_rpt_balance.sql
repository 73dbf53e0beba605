-- rpt_balance: how did the account balance move over time?
-- Grain: one row per snapshot_date (the day's snapshot). change = amount minus the previous
-- snapshot's amount (NULL for the first), exact decimals.
-- @col snapshot_date: day of the balance snapshot
-- @col snapshot_at: when it was read
-- @col amount: balance, exact decimal
-- @col change: amount minus the previous snapshot's amount
CREATE OR REPLACE VIEW rpt_balance AS
SELECT
    snapshot_date,
    snapshot_at,
    amount,
    amount - lag(amount) OVER (ORDER BY snapshot_date) AS change
FROM balance_snapshots;
