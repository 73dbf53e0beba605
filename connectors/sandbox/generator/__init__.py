"""The deterministic dataset of the sandbox (no HTTP here).

`dataset.Dataset` (dimensions from `dimensions.py`, CDRs per day on first use, one generator per
CDR type: `calls`, `conversations`, `sms`, `hlr`), the per-day store (`daystore.DayCdrs`),
time helpers (`times`) and encoding helpers (`encoding`).
"""

from connectors.sandbox.generator.dataset import Dataset
from connectors.sandbox.generator.daystore import DayCdrs, Json
from connectors.sandbox.generator.encoding import cost_json, cost_str, encode_page
from connectors.sandbox.generator.times import (
    HOUR_MS,
    MAX_DURATION_MS,
    date_of_ms,
    day_start_ms,
    ms_of,
)
from models.timestamps import DAY_MS

CDR_TYPES = ("call", "conversation", "hlr_lookup", "sms")

__all__ = [
    "CDR_TYPES",
    "DAY_MS",
    "HOUR_MS",
    "MAX_DURATION_MS",
    "Dataset",
    "DayCdrs",
    "Json",
    "cost_json",
    "cost_str",
    "date_of_ms",
    "day_start_ms",
    "encode_page",
    "ms_of",
]
