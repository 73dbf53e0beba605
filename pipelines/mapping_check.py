"""The call values no KPI setting names: a WARN check on the day's `agg_call_intervals`.

The spec shows only some values of `subtype`, `disposition` and `end_reason` (and no
`end_reason` at all), so the values that mark a call inbound, outbound, answered or abandoned
are settings (`pipelines/settings.py`, docs/metrics.md). A value that no setting names is
counted by no KPI rule the way its meaning would want (an unknown hang-up reason is never an
abandon), so the day warns, naming each value and how many calls carry it. It reads the
aggregate the step has just computed (the values are its group keys): no partition is read back.
"""

from __future__ import annotations

from collections import Counter

import dagster as dg
import pyarrow as pa

from warehouse.kpi import KpiSettings

CALL_AGG = "agg_call_intervals"
MAPPING_CHECK = "call_values_mapped"
FIELDS = ("subtype", "disposition", "end_reason")


def mapping_check_spec() -> dg.AssetCheckSpec:
    return dg.AssetCheckSpec(
        MAPPING_CHECK,
        asset=CALL_AGG,
        description=(
            "Every call subtype, disposition and end_reason of the day is named by a KPI "
            "setting (CDRHOUSE_*_SUBTYPES, _DISPOSITIONS, _END_REASONS); warns naming the "
            "values that are not."
        ),
    )


def unmapped_values(table: pa.Table, kpi: KpiSettings) -> dict[str, Counter[str]]:
    """Per field, the calls of each value no setting names (NULL is no value)."""
    known = kpi.known()
    rows = table.select([*FIELDS, "calls"]).to_pylist()
    out: dict[str, Counter[str]] = {}
    for field in FIELDS:
        found: Counter[str] = Counter()
        for row in rows:
            value = row[field]
            if value is not None and value not in known[field]:
                found[value] += int(row["calls"])
        if found:
            out[field] = found
    return out


def mapping_check_result(table: pa.Table, kpi: KpiSettings) -> dg.AssetCheckResult:
    unmapped = unmapped_values(table, kpi)
    named = "; ".join(
        f"{field}: " + ", ".join(f"{value} ({n} calls)" for value, n in sorted(found.items()))
        for field, found in unmapped.items()
    )
    return dg.AssetCheckResult(
        asset_key=CALL_AGG,
        check_name=MAPPING_CHECK,
        passed=not unmapped,
        severity=dg.AssetCheckSeverity.WARN,
        description=f"call values no KPI setting names: {named}" if unmapped else None,
        metadata={
            "unmapped": named or "none",
            **{f"unmapped_{field}": ", ".join(sorted(found)) for field, found in unmapped.items()},
        },
    )
