-- rpt_balance: how did each account's balance move over time?
-- Grain: one row per (account_id, snapshot_date) (the account's snapshot of the day). change =
-- amount minus the account's previous snapshot's amount (NULL for its first), exact decimals.
-- Accounts may bill in different currencies: sum amounts over accounts only when they do not.
-- @col account_id: account (contact center) id; `default` for a lake without accounts
-- @col snapshot_date: day of the balance snapshot
-- @col snapshot_at: when it was read
-- @col amount: balance, exact decimal
-- @col change: amount minus the previous snapshot's amount
CREATE OR REPLACE VIEW rpt_balance AS
SELECT
    account_id,
    snapshot_date,
    snapshot_at,
    amount,
    amount - lag(amount) OVER (PARTITION BY account_id ORDER BY snapshot_date) AS change
FROM balance_snapshots;
