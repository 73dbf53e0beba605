"""Dagster resources: the Contact Center API client and the lake/warehouse location.

`ContactCenterResource` talks to a real cluster when `base_url` is its URL, and to the bundled
sandbox in-process only when `base_url` is the word `sandbox` (same seed, same data in every
process). With no `base_url` nothing falls back to fake data: `source_id`, `settings()` and
`client()` raise a one-line `dg.Failure` (no retries, metadata `error_class` =
"SourceNotConfigured"), and so does a URL without `api_key`. `client()` fails the same way when
the callers' numbers were not chosen (`phone_numbers` None, or `token` without its key: README
"Callers' privacy"); `privacy()` is the run's `PrivacyPolicy`. Built directly, the resource
lands numbers `raw`, as before the choice existed. The sandbox package is imported only when it
is selected. Neither resource reads the environment: `definitions.py` and the CLI
pass values in, so a test can build them directly.
"""

from __future__ import annotations

import hmac
import logging
import threading
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import dagster as dg
from pydantic import Field, ValidationError

from connectors.contact_center.settings import ClientSettings
from pipelines.partitions import DEFAULT_START_DATE

# The source checks live in `pipelines.preflight` (the CLI runs them before importing Dagster);
# re-exported here, where the resource uses them.
from pipelines.preflight import MISSING_KEY_MESSAGE as MISSING_KEY_MESSAGE
from pipelines.preflight import NOT_CONFIGURED_MESSAGE as NOT_CONFIGURED_MESSAGE
from pipelines.preflight import SANDBOX as SANDBOX
from pipelines.preflight import is_sandbox as is_sandbox
from pipelines.preflight import source_problem
from pipelines.privacy_settings import (
    PII_KEY_VAR,
    PrivacySettingsError,
    privacy_policy,
    privacy_problem,
)
from pipelines.settings import DEFAULT_MAX_DAY_SHRINK
from pipelines.varnames import shown_var
from warehouse import kpi as k
from warehouse.kpi import KpiSettings
from warehouse.lake import DEFAULT_ACCOUNT, Lake
from warehouse.privacy import PrivacyPolicy

if TYPE_CHECKING:
    from connectors.contact_center import ContactCenterClient
    from connectors.sandbox import Sandbox

SANDBOX_BASE_URL = "http://127.0.0.1"
# metadata["error_class"] of the failure below: the failure sensor writes no file for it.
SOURCE_NOT_CONFIGURED = "SourceNotConfigured"


def config_failure(message: str, error_class: str = SOURCE_NOT_CONFIGURED) -> dg.Failure:
    """Fails the step at once: no retry can fix the configuration (a missing setting, a lake
    of another source)."""
    return dg.Failure(
        description=message,
        metadata={"error_class": error_class, "fatal": True},
        allow_retries=False,
    )


# One sandbox per dataset shape per process: building its dimensions is not free, and every
# asset of a run (and the checks) must see the very same data.
_SANDBOXES: dict[tuple[int, int, date, int], Sandbox] = {}
_SANDBOX_LOCK = threading.Lock()


def shared_sandbox(seed: int, cdrs_per_day: int, start: date, days: int) -> Sandbox:
    """The process-wide sandbox for this dataset shape (built on first use)."""
    from connectors.sandbox import Sandbox, SandboxConfig

    key = (seed, cdrs_per_day, start, days)
    with _SANDBOX_LOCK:
        if key not in _SANDBOXES:
            config = SandboxConfig(
                seed=seed, cdrs_per_day=cdrs_per_day, start_date=start, days=days
            )
            _SANDBOXES[key] = Sandbox(config)
        return _SANDBOXES[key]


class ContactCenterResource(dg.ConfigurableResource):  # type: ignore[type-arg]
    """The Contact Center API v4, or the bundled sandbox when `base_url` is `sandbox`.

    Unset `base_url` (or a URL without `api_key`) loads fine but fails every API call.
    """

    base_url: str | None = Field(
        default=None,
        description="https://<cluster_id>.<service_domain>, or 'sandbox' for the bundled "
        "emulator; unset = not configured (API steps fail).",
    )
    api_key: str | None = Field(
        default=None,
        description="Scoped v4 API key, as dg.EnvVar('CC_API_KEY'): a plain value would be "
        "saved in every run's job snapshot. Not used by the sandbox.",
    )
    page_size: int = Field(default=1000, description="CDR page size (max 1000).")
    concurrency: int = Field(default=8, description="Parallel CDR sub-windows per partition.")
    rate_limit_rps: float | None = Field(default=None, description="Client-side request rate.")
    max_attempts: int = Field(default=6, description="Attempts per request inside the client.")
    max_retry_s: float = Field(default=60.0, description="Retry budget per request.")
    timeout_s: float = Field(default=30.0, description="Read timeout per request (seconds).")
    request_deadline_s: float = Field(
        default=300.0,
        description="Longest one request may take, body included (seconds): a server that "
        "trickles its answer never trips the read timeout.",
    )
    max_response_bytes: int = Field(
        default=512 * 2**20,
        description="Largest response body read (decoded); past it the request fails, not "
        "retried, instead of filling the memory (a body that never ends, a compression bomb).",
    )
    progress_every_s: float = Field(
        default=15.0,
        ge=0,
        description="Seconds between the progress lines of a day's fetch (in the run's log and "
        "in cdrhouse ingest's output); 0: none.",
    )
    sandbox_seed: int = Field(default=7, description="Sandbox dataset seed.")
    sandbox_cdrs_per_day: int = Field(default=2000, description="Sandbox CDRs per day.")
    sandbox_start_date: str | None = Field(
        default=None, description="First sandbox day (YYYY-MM-DD); default: partitions start."
    )
    account_id: str = Field(
        default=DEFAULT_ACCOUNT, description="The account (contact center) this API is; in errors."
    )
    api_key_env: str | None = Field(
        default="CC_API_KEY",
        description="The variable holding the key (its name only; None for a sandbox account).",
    )
    # How the callers' numbers land (pipelines.privacy_settings). Per account, as the API key:
    # each account's tokens have their own key.
    phone_numbers: str | None = Field(
        default="raw",
        description="CDRHOUSE_PHONE_NUMBERS: 'token' (keyed tokens) or 'raw'; None = not "
        "chosen: every API step fails saying what to set.",
    )
    pii_key: str | None = Field(
        default=None,
        description="The tokens' key, as dg.EnvVar('CDRHOUSE_PII_KEY') (or the account's "
        "pii_key_env): a plain value would be saved in every run's job snapshot.",
    )
    pii_key_env: str = Field(
        default=PII_KEY_VAR, description="The variable holding the tokens' key (its name only)."
    )
    sms_bodies: str = Field(
        default="drop", description="CDRHOUSE_SMS_BODIES under token: 'drop' or 'keep'."
    )

    def __repr__(self) -> str:
        # The default pydantic repr would print the key.
        return (
            f"ContactCenterResource(base_url={self.base_url!r}, api_key=<redacted>, "
            f"phone_numbers={self.phone_numbers!r}, pii_key=<redacted>)"
        )

    def read_env(self) -> ContactCenterResource:
        """This resource with its `EnvVar`s read, as a run's initialization reads them: for the
        checks before any run. Not `process_config_and_initialize`, which builds an ephemeral
        Dagster instance (in-memory SQLite and its migrations): ~0.4 s CPU of every ingest."""
        values = {name: getattr(self, name) for name in type(self).model_fields}
        for name, value in values.items():
            if isinstance(value, dg.EnvVar):
                values[name] = value.get_value()
                if values[name] is None:
                    raise config_failure(f"the variable {shown_var(value.env_var_name)} is not set")
        return type(self)(**values)

    @property
    def key_by_value(self) -> bool:
        """The key was given as a value, not as an `EnvVar`: Dagster saves a resource's config
        as defaults in the job snapshot of every run (run storage, served by the UI)."""
        return self.api_key is not None and not isinstance(self.api_key, dg.EnvVar)

    @property
    def uses_sandbox(self) -> bool:
        return is_sandbox(self.base_url)

    @property
    def source_id(self) -> str:
        """`sandbox:<seed>`, or the lowercased host[:port] of the cluster; fails if unset."""
        settings = self.settings()
        if self.uses_sandbox:
            return f"{SANDBOX}:{self.sandbox_seed}"
        return urlsplit(settings.base_url).netloc.rpartition("@")[2].lower()

    def sandbox(self) -> Sandbox:
        """The in-process sandbox, covering from its start date up to today (UTC)."""
        start = date.fromisoformat(self.sandbox_start_date or DEFAULT_START_DATE.isoformat())
        days = max(1, (datetime.now(UTC).date() - start).days + 1)
        return shared_sandbox(self.sandbox_seed, self.sandbox_cdrs_per_day, start, days)

    @property
    def is_default_account(self) -> bool:
        return self.account_id == DEFAULT_ACCOUNT and self.api_key_env == "CC_API_KEY"

    def for_account(self, message: str) -> str:
        """`message` naming the account and its key variable (the default account's messages
        already name CC_API_KEY)."""
        if self.is_default_account:
            return message
        return f"account {self.account_id} (api_key_env {self.api_key_env}): {message}"

    def privacy(self) -> PrivacyPolicy:
        """How this run lands the callers' numbers; a one-line `config_failure` naming the
        variables (never the key) when nothing may be ingested."""
        try:
            return privacy_policy(
                self.phone_numbers,
                self.pii_key,
                self.pii_key_env,
                self.sms_bodies,
                sandbox=self.uses_sandbox,
                api_key_var=self._api_key_var_if_same(),
            )
        except PrivacySettingsError as exc:
            raise config_failure(self._for_account_privacy(str(exc))) from None

    def check_privacy(self) -> None:
        """`privacy()`'s failure, if any, without building the policy."""
        problem = privacy_problem(
            self.phone_numbers,
            self.pii_key,
            self.pii_key_env,
            sandbox=self.uses_sandbox,
            api_key_var=self._api_key_var_if_same(),
        )
        if problem is not None:
            raise config_failure(self._for_account_privacy(problem))

    def _api_key_var_if_same(self) -> str | None:
        """The API key's variable when the tokens' key is the same secret (as a run reads
        them: the same variable, or two holding one value), else None."""
        api, pii = self.api_key, self.pii_key
        if not api or not pii:
            return None
        same = hmac.compare_digest(api.strip().encode(), pii.strip().encode())
        return (self.api_key_env or "CC_API_KEY") if same else None

    def _for_account_privacy(self, message: str) -> str:
        if self.account_id == DEFAULT_ACCOUNT:
            return message
        return f"account {self.account_id} (pii_key_env {shown_var(self.pii_key_env)}): {message}"

    def settings(self) -> ClientSettings:
        problem = source_problem(self.base_url, self.api_key)
        if problem is not None:
            if not self.is_default_account and problem == MISSING_KEY_MESSAGE:
                problem = f"{shown_var(self.api_key_env or '')} is not set; set it to a v4 API key"
            raise config_failure(self.for_account(problem))
        if self.uses_sandbox:
            from connectors.sandbox.config import DEFAULT_API_KEY

            # The in-process sandbox knows only its own key; a real CC_API_KEY left in the
            # environment must neither break it nor be handed to it.
            base_url, key = SANDBOX_BASE_URL, DEFAULT_API_KEY
        else:
            base_url, key = str(self.base_url), str(self.api_key)
        values: dict[str, Any] = {
            "base_url": base_url,
            "api_key": key,
            "page_size": self.page_size,
            "concurrency": self.concurrency,
            "rate_limit_rps": self.rate_limit_rps,
            "max_attempts": self.max_attempts,
            "max_retry_s": self.max_retry_s,
            "timeout_s": self.timeout_s,
            "request_deadline_s": self.request_deadline_s,
            "max_response_bytes": self.max_response_bytes,
            # Reconciliation of counts against metadata.total is the blocking asset check's
            # job, where it is visible in the UI, not an exception deep in the client.
            "verify_totals": False,
        }
        try:
            return ClientSettings(**values)
        except ValidationError as exc:
            # A configuration error: retrying the step cannot fix it, so fail at once and say
            # what is wrong (the settings hide input values, so the key is never echoed).
            problems = "; ".join(
                f"{'.'.join(map(str, e['loc'])) or 'settings'}: {e['msg']}" for e in exc.errors()
            )
            fix = (
                "fix CC_API_BASE_URL / CC_API_KEY and re-run."
                if self.is_default_account
                else "fix its base_url / the key and re-run."
            )
            raise dg.Failure(
                description=self.for_account(
                    f"invalid Contact Center API settings ({problems}); {fix}"
                ),
                allow_retries=False,
            ) from None

    @asynccontextmanager
    async def client(
        self, log: logging.Logger | dg.DagsterLogManager
    ) -> AsyncIterator[ContactCenterClient]:
        """An open client; against the in-process sandbox when `base_url` is `sandbox`."""
        # Checked before any import or connection: an unconfigured source fails at once, and so
        # does one whose callers' numbers have no rule yet (what it returns would land with
        # them); the source is named first, the first thing to set.
        settings = self.settings()
        self.check_privacy()
        # Imported here so that loading the definitions never needs the HTTP stack.
        from connectors.contact_center import ContactCenterClient

        if self.uses_sandbox:
            sandbox = self.sandbox()
            log.info(
                "CC_API_BASE_URL=sandbox: using the bundled sandbox in-process "
                f"(seed={self.sandbox_seed}, cdrs_per_day={self.sandbox_cdrs_per_day})"
            )
            async with ContactCenterClient(settings, transport=sandbox.transport()) as client:
                yield client
        else:
            log.info(f"Using the Contact Center API at {settings.base_url}")
            async with ContactCenterClient(settings) as client:
                yield client


class WarehouseResource(dg.ConfigurableResource):  # type: ignore[type-arg]
    """Where the Parquet lake and `warehouse.duckdb` live (CDRHOUSE_DATA_DIR, default ./data)."""

    data_dir: str = Field(default="data", description="Holds lake/ and warehouse.duckdb.")
    lake_uri: str | None = Field(
        default=None, description="Lake root URI; default file://<data_dir>/lake."
    )
    # The KPI settings (docs/metrics.md), validated from the CDRHOUSE_* variables by
    # `pipelines.settings`; the views apply them and the mapping check compares the data to them.
    timezone: str = Field(default=k.DEFAULT_TIMEZONE, description="Business day's IANA zone.")
    sl_threshold_s: int = Field(default=k.DEFAULT_SL_THRESHOLD_S, description="SL threshold.")
    short_abandon_s: int = Field(
        default=k.DEFAULT_SHORT_ABANDON_S, description="Short-abandon threshold."
    )
    inbound_subtypes: list[str] = Field(default=list(k.DEFAULT_INBOUND_SUBTYPES))
    outbound_subtypes: list[str] = Field(default=list(k.DEFAULT_OUTBOUND_SUBTYPES))
    answered_dispositions: list[str] = Field(default=list(k.DEFAULT_ANSWERED_DISPOSITIONS))
    unanswered_dispositions: list[str] = Field(default=list(k.DEFAULT_UNANSWERED_DISPOSITIONS))
    abandon_end_reasons: list[str] = Field(default=list(k.DEFAULT_ABANDON_END_REASONS))
    other_end_reasons: list[str] = Field(default=list(k.DEFAULT_OTHER_END_REASONS))
    max_day_shrink: float = Field(
        default=DEFAULT_MAX_DAY_SHRINK,
        description=(
            "CDRHOUSE_MAX_DAY_SHRINK: how much smaller (a fraction) a day made again may be "
            "than the day the lake holds before it is held (check cdrs_day_not_shrunk)."
        ),
    )
    currency: str | None = Field(
        default=None, description="CDRHOUSE_CURRENCY: the report's money sign (ISO 4217)."
    )
    # Each account's business-day zone (the accounts file); empty: every account's day is
    # `timezone`'s, and a rebuild keeps the zones the warehouse file was built with.
    account_zones: dict[str, str] = Field(
        default_factory=dict, description="Account id -> IANA zone of its business day."
    )
    # `cdrhouse ingest` turns this off and refreshes once after its runs: on a new lake each
    # step adds a table, so each step rebuilt the views (~9 builds for a 2-day range).
    views_in_runs: bool = Field(
        default=True,
        description="Refresh warehouse.duckdb's views in each step that lands data.",
    )

    @classmethod
    def with_kpi(
        cls,
        data_dir: str,
        lake_uri: str | None,
        kpi: KpiSettings,
        currency: str | None = None,
        account_zones: Mapping[str, str] | None = None,
        *,
        views_in_runs: bool = True,
        max_day_shrink: float = DEFAULT_MAX_DAY_SHRINK,
    ) -> WarehouseResource:
        return cls(
            views_in_runs=views_in_runs,
            max_day_shrink=max_day_shrink,
            data_dir=data_dir,
            lake_uri=lake_uri,
            currency=currency,
            account_zones=dict(account_zones or {}),
            timezone=kpi.timezone,
            sl_threshold_s=kpi.sl_threshold_s,
            short_abandon_s=kpi.short_abandon_s,
            inbound_subtypes=list(kpi.inbound_subtypes),
            outbound_subtypes=list(kpi.outbound_subtypes),
            answered_dispositions=list(kpi.answered_dispositions),
            unanswered_dispositions=list(kpi.unanswered_dispositions),
            abandon_end_reasons=list(kpi.abandon_end_reasons),
            other_end_reasons=list(kpi.other_end_reasons),
        )

    def kpi(self) -> KpiSettings:
        return KpiSettings(
            timezone=self.timezone,
            sl_threshold_s=self.sl_threshold_s,
            short_abandon_s=self.short_abandon_s,
            inbound_subtypes=tuple(self.inbound_subtypes),
            outbound_subtypes=tuple(self.outbound_subtypes),
            answered_dispositions=tuple(self.answered_dispositions),
            unanswered_dispositions=tuple(self.unanswered_dispositions),
            abandon_end_reasons=tuple(self.abandon_end_reasons),
            other_end_reasons=tuple(self.other_end_reasons),
        )

    @property
    def data_path(self) -> Path:
        return Path(self.data_dir).resolve()

    @property
    def resolved_lake_uri(self) -> str:
        return self.lake_uri or (self.data_path / "lake").as_uri()

    def lake(self, account_id: str = DEFAULT_ACCOUNT) -> Lake:
        """The account's lake: the root for `default`, its sub-lake (with its own provenance
        marker) otherwise."""
        return Lake(self.resolved_lake_uri).account(account_id)

    def record_zone(self, lake: Lake, account_id: str) -> None:
        """Record the account's business-day zone in its lake (`Lake.record_zone`), when the
        accounts file gives one: the views built anywhere else read it there."""
        zone = self.account_zones.get(account_id)
        if zone is not None:
            lake.record_zone(zone)

    def refresh_views(self, log: logging.Logger | dg.DagsterLogManager | None = None) -> bool:
        """Rebuild `warehouse.duckdb`'s views (atomic rename, never blocks an analyst) when they
        would change; True if rebuilt. Called once at the end of a run.

        On an object-store lake a run's disk is usually thrown away with its pod: whoever
        queries builds the views (`cdrhouse sql` does so when it has none, `cdrhouse lake
        views` on demand), and their `s3://` globs see new partitions without a rebuild.

        With `log` (a step's), damaged partition files of the lake (`UnreadablePartitions`)
        are a warning naming them, and the views stay as they were: the step's own data has
        landed, and the run of a damaged day, which replaces its files, must not fail on
        them (`cdrhouse ingest` says so at its end, with the command that replaces them)."""
        from warehouse.duck import refresh_views
        from warehouse.stores import UnreadablePartitions

        if not self.lake().is_local:
            return False
        self.data_path.mkdir(parents=True, exist_ok=True)
        try:
            return refresh_views(
                self.data_path, self.resolved_lake_uri, self.kpi(), self.account_zones or None
            )
        except UnreadablePartitions as exc:
            if log is None:
                raise
            log.warning(f"views not rebuilt: {exc}")
            return False

    def views_after_landing(self, log: logging.Logger | dg.DagsterLogManager) -> bool:
        """A landing step's refresh (`refresh_views`), unless the runs' caller refreshes
        once after them (`views_in_runs` off)."""
        return self.views_in_runs and self.refresh_views(log)

    def build_views(self) -> Path:
        """Build `warehouse.duckdb`'s views over the lake now, writing nothing to the lake."""
        from warehouse.duck import build_warehouse

        return build_warehouse(
            self.data_path,
            self.resolved_lake_uri,
            kpi=self.kpi(),
            account_zones=self.account_zones or None,
        )


def utc_now() -> datetime:
    """Now in UTC, truncated to milliseconds (the warehouse's timestamp precision)."""
    now = datetime.now(UTC)
    return now - timedelta(microseconds=now.microsecond % 1000)
