"""cdrhouse: Contact Center API v4 -> Parquet lake + DuckDB warehouse."""
