"""The code location's asset keys, pinned by hand so that a rename never passes silently.

Written out, not imported from `pipelines` or `models`: these names are a contract with users
(their SQL, their Dagster selections), and a test that read them from the code would follow a
rename instead of catching it.
"""

from __future__ import annotations

# The CDR group: the raw partition, the normalized tables and the quarantine.
CDR_ASSETS = frozenset(
    {
        "raw_cdrs",
        "cdrs",
        "cdr_calls",
        "cdr_conversations",
        "cdr_sms",
        "cdr_hlr_lookups",
        "cdr_quarantine",
    }
)
# The per-day reporting aggregates, downstream of the typed CDR tables (same partitions).
AGG_ASSETS = frozenset(
    {
        "agg_daily_volume",
        "agg_agent_performance",
        "agg_queue_service",
        "agg_campaign_outcomes",
        "agg_cost_daily",
        "agg_sms_delivery",
        "agg_call_intervals",
        "agg_conversation_intervals",
        "agg_agent_intervals",
    }
)
SNAPSHOT_ASSETS = frozenset(
    {
        "users",
        "user_teams",
        "user_supervised_teams",
        "user_queues",
        "user_supervised_queues",
        "user_skills",
        "queues",
        "queue_members",
        "queue_supervisors",
        "skills",
        "teams",
        "team_members",
        "team_supervisors",
        "campaigns",
        "numbers",
        "caller_id_groups",
        "balance_snapshots",
    }
)
REPORT_ASSETS = frozenset({"contact_center_report"})
