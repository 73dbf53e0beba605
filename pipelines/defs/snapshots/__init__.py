"""The snapshots of users, routing, campaigns, numbers and the balance, and their checks."""
