"""What every concern of the code location is built from, and how a concern is autoloaded.

Each folder of `pipelines/defs` exposes a builder taking a `Location` (explicit settings).
`build_defs` calls the builders with the settings it is given; Dagster's autoloading of the defs
folder calls each folder's `defs`, which reads the settings from the environment only then, at
load time (`autoloaded`): importing a module reads nothing.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import date

import dagster as dg
from dagster._utils.warnings import BetaWarning, PreviewWarning

from pipelines.accounts import Account, accounts_from_env
from pipelines.catalog import DEFAULT_OWNERS, parse_owners, with_catalog
from pipelines.partitions import DEFAULT_START_DATE, daily_partitions
from pipelines.resources import WarehouseResource
from pipelines.scope import AccountScope, unconfigured_default
from pipelines.settings import DEFAULT_LOOKBACK_DAYS, settings_from_env
from pipelines.steps import api_retry_policy


@dataclass(frozen=True)
class Location:
    """The settings the definitions depend on (the resources are bound by the root)."""

    lake_uri: str
    start_date: date = DEFAULT_START_DATE
    lookback_days: int = DEFAULT_LOOKBACK_DAYS
    retry_policy: dg.RetryPolicy = field(default_factory=api_retry_policy)
    owners: tuple[str, ...] = DEFAULT_OWNERS
    # The contact centers; each concern builds its assets once per account (`scopes`).
    accounts: tuple[Account, ...] = field(default_factory=lambda: (unconfigured_default(),))

    @property
    def scopes(self) -> tuple[AccountScope, ...]:
        return tuple(AccountScope.of(a) for a in self.accounts)

    @property
    def partitions_def(self) -> dg.DailyPartitionsDefinition:
        return daily_partitions(self.start_date)

    def catalogued(
        self, assets: Sequence[dg.AssetsDefinition], scope: AccountScope | None = None
    ) -> list[dg.AssetsDefinition]:
        """`assets` with their catalog metadata (columns, lineage, the account's location)
        and owners."""
        return with_catalog(assets, self.lake_uri, self.owners, scope.prefix if scope else ())


def location_from_env(env: Mapping[str, str]) -> Location:
    """The settings `env` holds; raises `SettingsError` naming the first bad variable."""
    settings = settings_from_env(env)
    warehouse = WarehouseResource(data_dir=settings.data_dir, lake_uri=settings.lake_uri)
    return Location(
        lake_uri=warehouse.resolved_lake_uri,
        start_date=settings.start_date,
        lookback_days=settings.lookback_days,
        owners=parse_owners(settings.owners),
        accounts=location_accounts(env),
    )


def location_accounts(env: Mapping[str, str]) -> tuple[Account, ...]:
    """The accounts of a code location: an account whose key variable is unset still loads
    (only its API steps fail); with no source at all, one unconfigured `default`."""
    return accounts_from_env(env, require_keys=False) or (unconfigured_default(),)


Builder = Callable[[Location], dg.Definitions]


@contextmanager
def dagster_previews_accepted() -> Iterator[None]:
    """Pools, backfill policies, partitioned checks and the defs folder's module loading are
    Dagster beta/preview APIs we chose on purpose (README "Running the pipeline"); do not repeat
    that on every load."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", BetaWarning)
        warnings.simplefilter("ignore", PreviewWarning)
        yield


def build_quietly(build: Builder, location: Location) -> dg.Definitions:
    with dagster_previews_accepted():
        return build(location)


def autoloaded(build: Builder) -> Callable[..., dg.Definitions]:
    """A defs folder's entry point: `build` with the environment's settings, read when Dagster
    loads the folder (`@dg.definitions`), never when the module is imported."""

    def load() -> dg.Definitions:
        return build_quietly(build, location_from_env(os.environ))

    return dg.definitions(load)
