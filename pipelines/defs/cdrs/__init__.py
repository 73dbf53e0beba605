"""The CDR days: `raw_cdrs` and the typed CDR tables, and the `cdr_daily` job."""
