"""One account's names in the code location: its asset keys, ops, jobs, groups, pool and API
resource (docs/architecture.md "Accounts in Dagster").

Every concern builds its assets once per account. The account `default` keeps exactly the
names the code location had before accounts existed (keys without a prefix, the `cdr_daily`
job, the `contact_center_api` pool, the `contact_center` resource), so a deployment without an
accounts file sees no change; any other account `<id>` prefixes its asset keys with `<id>` and
suffixes its jobs, groups, pool and resource key with `__<id>`.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass

import dagster as dg

from pipelines.accounts import API_KEY_VAR, DEFAULT_ACCOUNT, Account
from pipelines.names import API_POOL, CDR_GROUP, FRESHNESS_ASSET, FRESHNESS_CHECK, SNAPSHOT_GROUP

ACCOUNT_TAG = "cdrhouse/account"
API_RESOURCE = "contact_center"
# The sandbox seed of the default account (ContactCenterResource's default): today's data.
DEFAULT_SANDBOX_SEED = 7


@dataclass(frozen=True)
class AccountScope:
    """The names one account's Dagster objects take."""

    account_id: str

    @classmethod
    def of(cls, account: Account) -> AccountScope:
        return cls(account.id)

    @property
    def is_default(self) -> bool:
        return self.account_id == DEFAULT_ACCOUNT

    @property
    def prefix(self) -> tuple[str, ...]:
        return () if self.is_default else (self.account_id,)

    def key(self, name: str | dg.AssetKey) -> dg.AssetKey:
        """The account's key of a table (`cdrs`, or `emea/cdrs`)."""
        base = name.path[-1] if isinstance(name, dg.AssetKey) else name
        return dg.AssetKey([*self.prefix, base])

    def check_key(self, asset: str, check: str) -> dg.AssetCheckKey:
        return dg.AssetCheckKey(self.key(asset), check)

    def op(self, name: str) -> str:
        """An op (step) name: `raw_cdrs`, or `emea__raw_cdrs`."""
        return name if self.is_default else f"{self.account_id}__{name}"

    def named(self, name: str) -> str:
        """A job, group, schedule, pool or resource key: `cdr_daily`, or `cdr_daily__emea`."""
        return name if self.is_default else f"{name}__{self.account_id}"

    @property
    def pool(self) -> str:
        return self.named(API_POOL)

    @property
    def resource_key(self) -> str:
        return self.named(API_RESOURCE)

    @property
    def tags(self) -> dict[str, str]:
        return {ACCOUNT_TAG: self.account_id}

    @property
    def freshness_check_key(self) -> dg.AssetCheckKey:
        return self.check_key(FRESHNESS_ASSET, FRESHNESS_CHECK)

    def cdr_run_selection(self) -> dg.AssetSelection:
        """What one day's CDR run of the account materializes: its `cdrs` group (the day's
        tables and aggregates) with their checks, except the freshness check, which judges the
        newest due day, not the day a run writes: it has its own hourly job."""
        return dg.AssetSelection.groups(self.named(CDR_GROUP)) - dg.AssetSelection.checks(
            self.freshness_check_key
        )

    def snapshot_run_selection(self) -> dg.AssetSelection:
        return dg.AssetSelection.groups(self.named(SNAPSHOT_GROUP))

    def rekeyed(self, result: dg.AssetCheckResult) -> dg.AssetCheckResult:
        """A check result computed against the bare table name, on this account's key."""
        assert result.asset_key is not None
        return result._replace(asset_key=self.key(result.asset_key))

    def sandbox_seed(self) -> int:
        """The in-process sandbox's seed: today's for `default`, one derived from the id
        otherwise (stable across processes), so two sandbox accounts hold different data."""
        if self.is_default:
            return DEFAULT_SANDBOX_SEED
        return zlib.crc32(self.account_id.encode()) % 1_000_000


def unconfigured_default() -> Account:
    """The one account of a location with no source configured at all: it loads, and its API
    steps fail saying what to set (`pipelines.resources`)."""
    return Account(DEFAULT_ACCOUNT, "", API_KEY_VAR, "UTC")


# The one scope of a location without an accounts file: today's names.
DEFAULT_SCOPE = AccountScope(DEFAULT_ACCOUNT)
