"""`make dev`'s local Dagster instance, made ready before `dg dev` starts it.

`python -m pipelines.dev_home DAGSTER_HOME` (the directory holds the local dagster.yaml): records
where the daemon's run-retry consumer starts reading the event log. The daemon otherwise records
it on its first tick against a new instance, with two WARNING lines ("No cursor for event type
…, ignoring older events") in every fresh `make dev`. The value is the one the daemon would pick
(the newest record of the log), so no run is retried or skipped differently; an instance that
has its cursors already is left alone.
"""

from __future__ import annotations

import sys
from pathlib import Path

import dagster as dg

# The daemon's own names for the cursors it keeps (its Dagster 1.13 module), not a copy of them.
from dagster._daemon.auto_run_reexecution.event_log_consumer import (
    DAGSTER_EVENT_TYPES,
    _create_cursor_key,
)


def seed_event_log_cursors(instance: dg.DagsterInstance) -> dict[str, str]:
    """Set the missing cursors of the event-log consumer daemon; returns those it set."""
    keys = {_create_cursor_key(event_type) for event_type in DAGSTER_EVENT_TYPES}
    stored = instance.daemon_cursor_storage.get_cursor_values(keys)
    missing = keys - set(stored)
    if not missing:
        return {}
    newest = instance.event_log_storage.get_maximum_record_id() or 0
    values = {key: str(newest) for key in sorted(missing)}
    instance.daemon_cursor_storage.set_cursor_values(values)
    return values


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1 or not (Path(argv[0]) / "dagster.yaml").is_file():
        print("usage: python -m pipelines.dev_home DAGSTER_HOME (holding dagster.yaml)")
        return 2
    with dg.DagsterInstance.from_config(argv[0]) as instance:
        seed_event_log_cursors(instance)
    return 0


if __name__ == "__main__":
    sys.exit(main())
