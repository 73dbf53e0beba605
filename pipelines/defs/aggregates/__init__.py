"""The per-day reporting aggregates (`agg_*`), the last step of a CDR run."""
