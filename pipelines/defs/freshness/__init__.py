"""Partition-aware freshness of the CDR days: the check, its job and its hourly schedule."""
