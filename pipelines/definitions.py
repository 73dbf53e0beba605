"""The Dagster code location of cdrhouse: combines assets, checks, schedules and resources."""

from __future__ import annotations

import dagster as dg

defs = dg.Definitions()
