"""The KPI settings the reporting views apply (docs/metrics.md), and their `kpi_settings` view.

The `agg_*` pre-aggregates never depend on these settings: they keep `subtype`, `disposition`,
`end_reason` and each queue wait as group keys and additive sums at 15-minute UTC grain. The
views classify the calls and roll the intervals up to the local day at query time, so a change
of setting rebuilds the views (it enters `views_fingerprint`) and never the aggregates.

`pipelines/settings.py` reads and validates the `CDRHOUSE_*` variables that fill this model;
the warehouse reads no environment.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from typing import Any

KPI_SETTINGS_VIEW = "kpi_settings"
ACCOUNT_SETTINGS_VIEW = "account_settings"

# The values the spec shows for calls plus the ones the sandbox documents and generates
# (docs/sandbox.md, connectors/sandbox/generator/calls.py).
DEFAULT_TIMEZONE = "UTC"
DEFAULT_SL_THRESHOLD_S = 20
DEFAULT_SHORT_ABANDON_S = 5
DEFAULT_INBOUND_SUBTYPES = ("inbound",)
DEFAULT_OUTBOUND_SUBTYPES = ("outbound",)
DEFAULT_ANSWERED_DISPOSITIONS = ("answered",)
DEFAULT_UNANSWERED_DISPOSITIONS = ("no_answer", "busy", "failed")
DEFAULT_ABANDON_END_REASONS = ("no_answer", "caller_hangup")
DEFAULT_OTHER_END_REASONS = ("agent_hangup", "busy", "failed")


@dataclass(frozen=True)
class KpiSettings:
    """What marks a call inbound, outbound, answered or abandoned, the two thresholds, and the
    zone of the business day. The value lists name call `subtype`, `disposition` and
    `end_reason` values; the `unanswered` and `other` lists only mark values as known."""

    timezone: str = DEFAULT_TIMEZONE
    sl_threshold_s: int = DEFAULT_SL_THRESHOLD_S
    short_abandon_s: int = DEFAULT_SHORT_ABANDON_S
    inbound_subtypes: tuple[str, ...] = DEFAULT_INBOUND_SUBTYPES
    outbound_subtypes: tuple[str, ...] = DEFAULT_OUTBOUND_SUBTYPES
    answered_dispositions: tuple[str, ...] = DEFAULT_ANSWERED_DISPOSITIONS
    unanswered_dispositions: tuple[str, ...] = DEFAULT_UNANSWERED_DISPOSITIONS
    abandon_end_reasons: tuple[str, ...] = DEFAULT_ABANDON_END_REASONS
    other_end_reasons: tuple[str, ...] = DEFAULT_OTHER_END_REASONS

    def known(self) -> dict[str, frozenset[str]]:
        """Per call field, the values some setting names (the mapping check's reference)."""
        return {
            "subtype": frozenset(self.inbound_subtypes + self.outbound_subtypes),
            "disposition": frozenset(self.answered_dispositions + self.unanswered_dispositions),
            "end_reason": frozenset(self.abandon_end_reasons + self.other_end_reasons),
        }

    def to_json(self) -> str:
        """Stable text of every setting (it enters the views' fingerprint)."""
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> KpiSettings:
        data = json.loads(text)
        names = {f.name for f in fields(cls)}
        values: dict[str, Any] = {
            k: tuple(v) if isinstance(v, list) else v for k, v in data.items() if k in names
        }
        return cls(**values)


def _lit(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _list(values: tuple[str, ...]) -> str:
    return f"CAST([{', '.join(_lit(v) for v in values)}] AS VARCHAR[])"


def settings_view_sql(kpi: KpiSettings) -> str:
    """`kpi_settings`: one row, the settings the KPI views were built with (`settings_json`
    is what `built_kpi_settings` reads back)."""
    return (
        f"CREATE OR REPLACE VIEW {KPI_SETTINGS_VIEW} AS SELECT "
        f"{_lit(kpi.timezone)} AS timezone, "
        f"CAST({int(kpi.sl_threshold_s)} AS INTEGER) AS sl_threshold_s, "
        f"CAST({int(kpi.short_abandon_s)} AS INTEGER) AS short_abandon_s, "
        f"{_list(kpi.inbound_subtypes)} AS inbound_subtypes, "
        f"{_list(kpi.outbound_subtypes)} AS outbound_subtypes, "
        f"{_list(kpi.answered_dispositions)} AS answered_dispositions, "
        f"{_list(kpi.unanswered_dispositions)} AS unanswered_dispositions, "
        f"{_list(kpi.abandon_end_reasons)} AS abandon_end_reasons, "
        f"{_list(kpi.other_end_reasons)} AS other_end_reasons, "
        f"{_lit(kpi.to_json())} AS settings_json"
    )


# The answered calls of a disposition -> calls map (a pre-aggregate's), under the answered
# setting; a day aggregated before the map was kept has none: its literal count, as then.
ANSWERED_CALLS_MACRO = """
CREATE OR REPLACE MACRO answered_calls(by_disposition, literal, answered_dispositions) AS
    CASE WHEN by_disposition IS NULL THEN literal
         ELSE CAST(coalesce(list_sum(list_transform(
             list_filter(map_entries(by_disposition),
                         lambda e: list_contains(answered_dispositions, e.key)),
             lambda e: e.value)), 0) AS BIGINT) END
"""


def account_settings_sql(zones: Mapping[str, str]) -> str:
    """`account_settings`: one row per configured account, its business day's zone (the
    accounts file's `timezone`). The KPI views take an account's zone from here, and
    `kpi_settings.timezone` (CDRHOUSE_TIMEZONE) for an account not in it (`built_account_zones`
    reads it back, so a rebuild without the accounts file keeps it)."""
    rows = " UNION ALL ".join(
        f"SELECT {_lit(a)} AS account_id, {_lit(z)} AS timezone" for a, z in sorted(zones.items())
    )
    empty = (
        "SELECT CAST(NULL AS VARCHAR) AS account_id, CAST(NULL AS VARCHAR) AS timezone WHERE false"
    )
    return f"CREATE OR REPLACE VIEW {ACCOUNT_SETTINGS_VIEW} AS {rows or empty}"


def zones_json(zones: Mapping[str, str]) -> str:
    """Stable text of the account zones (it enters the views' fingerprint)."""
    return json.dumps(dict(sorted(zones.items())))


ACCOUNT_SETTINGS_COLUMNS = {
    "account_id": "account id (the accounts file's `id`)",
    "timezone": "IANA zone of the account's business day (the accounts file's `timezone`; "
    "an account not listed here uses `kpi_settings.timezone`)",
}

# The dictionary's text of the settings view (it is generated, not a file of warehouse/sql).
SETTINGS_COLUMNS = {
    "timezone": "IANA zone of the business day (`CDRHOUSE_TIMEZONE`)",
    "sl_threshold_s": "service-level threshold T, seconds of queue wait "
    "(`CDRHOUSE_SL_THRESHOLD_S`)",
    "short_abandon_s": "short-abandon threshold S, seconds (`CDRHOUSE_SHORT_ABANDON_S`)",
    "inbound_subtypes": "call subtypes that are inbound (`CDRHOUSE_INBOUND_SUBTYPES`)",
    "outbound_subtypes": "call subtypes that are outbound (`CDRHOUSE_OUTBOUND_SUBTYPES`)",
    "answered_dispositions": "dispositions that mean answered (`CDRHOUSE_ANSWERED_DISPOSITIONS`)",
    "unanswered_dispositions": "known dispositions that mean not answered "
    "(`CDRHOUSE_UNANSWERED_DISPOSITIONS`)",
    "abandon_end_reasons": "end reasons of an unanswered call the caller gave up "
    "(`CDRHOUSE_ABANDON_END_REASONS`)",
    "other_end_reasons": "known end reasons that are not an abandon (`CDRHOUSE_OTHER_END_REASONS`)",
    "settings_json": "all of the above as JSON (what the views were built with)",
}
