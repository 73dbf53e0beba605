"""A sandbox served on a loopback port, and what a test points at it: env, resource, defs.

The pipeline suite and the reliability suite each serve one; they differ only in the
connector settings (`resource_defaults`), the first day of their partitions and the keys.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path
from typing import Any

import dagster as dg
import httpx

from connectors.sandbox import FaultConfig, Sandbox, SandboxConfig
from connectors.sandbox.config import DEFAULT_API_KEY
from models.timestamps import iso_ms
from pipelines.definitions import build_defs
from pipelines.partitions import partition_window
from pipelines.resources import ContactCenterResource, WarehouseResource
from pipelines.steps import api_retry_policy
from tests.support.clock import SessionClock
from tests.support.privacy import with_raw_numbers


@dataclass
class ServedSandbox:
    """A running sandbox: its base URL, the suite's first partition day and clock."""

    sandbox: Sandbox
    base_url: str
    first_day: date
    clock: SessionClock
    # Connector settings of every resource built here (a test may still override one).
    resource_defaults: Mapping[str, Any] = field(default_factory=dict)

    def reset(self) -> None:
        """No fault, and the session's clock (a test may have moved it)."""
        self.sandbox.faults = FaultConfig()
        self.clock.freeze(self.sandbox)

    def env(self, data_dir: Path, key: str = DEFAULT_API_KEY) -> dict[str, str]:
        """What a user exports to point `cdrhouse` at this API (callers' numbers `raw`)."""
        return with_raw_numbers(
            {
                "CC_API_BASE_URL": self.base_url,
                "CC_API_KEY": key,
                "CDRHOUSE_DATA_DIR": str(data_dir),
                "CDRHOUSE_START_DATE": self.first_day.isoformat(),
            }
        )

    def api_total(self, day: date) -> int:
        """`metadata.total` of the CDR list for the day, asked over HTTP like any client."""
        start, end = partition_window(day.isoformat())
        response = httpx.get(
            f"{self.base_url}/api/v4/reporting/cdrs",
            params={
                "started_at[gte]": iso_ms(start),
                "started_at[lt]": iso_ms(end),
                "limit": 1,
            },
            headers={"Authorization": f"Bearer {DEFAULT_API_KEY}"},
            timeout=30,
        )
        response.raise_for_status()
        total: int = response.json()["metadata"]["total"]
        return total

    def resource(self, key: str = DEFAULT_API_KEY, **overrides: Any) -> ContactCenterResource:
        values = {"base_url": self.base_url, "api_key": key, **self.resource_defaults, **overrides}
        return ContactCenterResource(**values)

    def defs(
        self, data_dir: Path, *, step_retries: int = 0, key: str = DEFAULT_API_KEY, **overrides: Any
    ) -> dg.Definitions:
        """The code location against this sandbox (short waits: tests must not sleep long)."""
        return suite_defs(self.resource(key, **overrides), data_dir, self.first_day, step_retries)


def suite_defs(
    contact_center: ContactCenterResource, data_dir: Path, first_day: date, step_retries: int = 0
) -> dg.Definitions:
    """The tests' code location: `contact_center`, a warehouse in `data_dir`, partitions from
    `first_day`, and step retries after 0.1 s (tests must not sleep long)."""
    return build_defs(
        contact_center=contact_center,
        warehouse=WarehouseResource(data_dir=str(data_dir)),
        start_date=first_day,
        retry_policy=api_retry_policy(max_retries=step_retries, delay_s=0.1),
    )


@contextmanager
def serve_sandbox(
    config: SandboxConfig, clock: SessionClock, **resource_defaults: Any
) -> Iterator[ServedSandbox]:
    """Serve a sandbox of `config` on a free loopback port, its clock frozen at `clock.now`."""
    sandbox = Sandbox(config)
    clock.freeze(sandbox)
    with sandbox.serve() as handle:
        yield ServedSandbox(
            sandbox, handle.base_url, config.start_date, clock, dict(resource_defaults)
        )


def sandbox_defs(
    data_dir: Path,
    first_day: date,
    cdrs_per_day: int,
    *,
    lake_uri: str | None = None,
    base_url: str | None = "sandbox",
    views_in_runs: bool = True,
) -> dg.Definitions:
    """The code location over the bundled in-process sandbox (`base_url=None`: no source at
    all), its days from `first_day`, without step retries."""
    return build_defs(
        contact_center=ContactCenterResource(
            base_url=base_url,
            sandbox_cdrs_per_day=cdrs_per_day,
            sandbox_start_date=first_day.isoformat(),
        ),
        warehouse=WarehouseResource(
            data_dir=str(data_dir), lake_uri=lake_uri, views_in_runs=views_in_runs
        ),
        start_date=first_day,
        retry_policy=dg.RetryPolicy(max_retries=0),
    )
