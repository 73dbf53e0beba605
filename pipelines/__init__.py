"""Dagster definitions of cdrhouse: the only package that wires the others together."""

from pipelines.memory import bound_allocators

# Before anything imports polars or pyarrow: their allocators read the settings on first use.
bound_allocators()
