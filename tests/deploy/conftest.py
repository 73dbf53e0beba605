"""Fixtures of the production-configuration tests: PostgreSQL, S3 (moto), the API over HTTP.

- `postgres` (session): a running throwaway cluster (`Postgres`); `postgres.create_database()`
  gives each test an empty database, `postgres.env(db)` the DAGSTER_PG_* variables for it.
- `s3` (session): moto's S3 server (`MotoS3`); `s3.env()` the standard AWS_* variables,
  `s3.create_bucket(name)` / `new_bucket()` a fresh bucket.
- `served_sandbox` (session): a small seeded sandbox on a loopback port (`ServedApi`): six
  days ending yesterday UTC, its clock frozen at the session clock so the truth cannot move while a
  test runs; `served_sandbox.truth(day)` is the API's `metadata.total` and exact costs.
- `deploy_env(...)` (tests/deploy/_services.py): the whole environment of a production pod.
"""

from __future__ import annotations

import itertools
import os
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import date, datetime
from pathlib import Path

import pytest

from connectors.sandbox import SandboxConfig
from connectors.sandbox.config import DEFAULT_API_KEY
from tests.deploy._services import (
    INSTALL_HINT,
    DayTruth,
    MotoS3,
    Postgres,
    api_day_truth,
    deploy_env,
    postgres_bin_dir,
    start_moto,
    start_postgres,
)
from tests.support.clock import SessionClock
from tests.support.served import serve_sandbox

SEED = 23
CDRS_PER_DAY = 350
DAYS = 6


@dataclass
class ServedApi:
    """The sandbox as a production pod sees it: a base URL and a key, nothing in-process."""

    base_url: str
    api_key: str
    days: tuple[date, ...]
    # The instant the sandbox's clock is frozen at (the session's clock).
    now: datetime
    _truth: dict[date, DayTruth] = field(default_factory=dict)

    @property
    def start_date(self) -> date:
        return self.days[0]

    def truth(self, day: date) -> DayTruth:
        """`metadata.total` and id -> exact cost for the day, asked over HTTP (cached)."""
        if day not in self._truth:
            self._truth[day] = api_day_truth(self.base_url, self.api_key, day)
        return self._truth[day]

    def env(
        self,
        workdir: Path,
        postgres_env: dict[str, str],
        *,
        aws_env: dict[str, str] | None = None,
        lake_uri: str | None = None,
        extra: dict[str, str] | None = None,
    ) -> dict[str, str]:
        """`deploy_env` pointed at this API, partitions starting at its first day."""
        return deploy_env(
            workdir,
            api_base_url=self.base_url,
            api_key=self.api_key,
            start_date=self.start_date,
            postgres_env=postgres_env,
            aws_env=aws_env,
            lake_uri=lake_uri,
            extra=extra,
        )


@pytest.fixture(scope="session")
def postgres() -> Iterator[Postgres]:
    bin_dir = postgres_bin_dir()
    if bin_dir is None:
        message = f"no PostgreSQL binaries (initdb) found: {INSTALL_HINT}"
        if os.environ.get("CDRHOUSE_REQUIRE_SERVICES"):  # set by .ci/run: never skip in CI
            pytest.fail(message)
        pytest.skip(message)
    with start_postgres(bin_dir) as pg:
        yield pg


@pytest.fixture(scope="session")
def s3(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MotoS3]:
    with start_moto(tmp_path_factory.mktemp("moto")) as server:
        yield server


_bucket_numbers = itertools.count(1)


@pytest.fixture
def new_bucket(s3: MotoS3) -> str:
    """A fresh, empty bucket for one test."""
    return s3.create_bucket(f"cdrhouse-{next(_bucket_numbers)}-{uuid.uuid4().hex[:8]}")


@pytest.fixture(scope="session")
def served_sandbox(clock: SessionClock) -> Iterator[ServedApi]:
    days = tuple(clock.days_ago(DAYS - i) for i in range(DAYS))
    config = SandboxConfig(seed=SEED, cdrs_per_day=CDRS_PER_DAY, start_date=days[0], days=DAYS)
    # Frozen (serve_sandbox): a CDR is visible once it has ended, so with a live clock
    # yesterday's late calls could appear between a run and the truth it is compared with.
    with serve_sandbox(config, clock) as served:
        yield ServedApi(base_url=served.base_url, api_key=DEFAULT_API_KEY, days=days, now=clock.now)
