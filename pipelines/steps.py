"""What the API-calling steps (the CDR day and the snapshots) share: retries, the failure that
names the fix, the freshness policy, and the materialization with its throughput and preview.

Every API-calling asset is in its account's pool (`contact_center_api` for the default
account, `contact_center_api__<id>` for another: `pipelines.scope`; the limit in dagster.yaml
applies to each pool).
"""

import functools
from datetime import timedelta
from typing import TYPE_CHECKING, Any

import dagster as dg
import polars as pl

from connectors.contact_center.errors import (
    AuthenticationError,
    ContactCenterError,
    FatalAPIError,
    PermissionDeniedError,
    ValidationFailedError,
)
from pipelines.cdr_day import PREVIEW_ROWS
from pipelines.checks import shrink_limit

if TYPE_CHECKING:
    from pipelines.resources import ContactCenterResource, WarehouseResource

CDRS_ENDPOINT = "/api/v4/reporting/cdrs"


def run_max_shrink(context: dg.AssetExecutionContext, warehouse: "WarehouseResource") -> float:
    """How much smaller than the lake's a step may make its data (a day, a users list): the
    run's tag `cdrhouse/max_day_shrink`, else the warehouse's limit. A tag that is not a
    fraction fails the step at once, before the API is asked (`BadRunTag`)."""
    from pipelines.resources import config_failure

    try:
        return shrink_limit(context.run.tags, warehouse.max_day_shrink)
    except ValueError as exc:
        raise config_failure(str(exc), "BadRunTag") from None


def api_retry_policy(max_retries: int = 3, delay_s: float = 30.0) -> dg.RetryPolicy:
    """Step retries for retriable API failures: 30 s, 60 s, 120 s, each +/- random jitter.

    The client already retries single requests within its own budget; this covers an outage
    longer than that budget. Fatal errors raise `dg.Failure(allow_retries=False)` and skip it.
    """
    return dg.RetryPolicy(
        max_retries=max_retries,
        delay=delay_s,
        backoff=dg.Backoff.EXPONENTIAL,
        jitter=dg.Jitter.PLUS_MINUS,
    )


@functools.cache
def nightly_freshness() -> dg.FreshnessPolicy:
    """Fresh if materialized between the 01:00 UTC schedule and 03:00 UTC each day.

    One shared (immutable) policy: building a cron policy validates its schedule, about 40 ms
    each, which summed to a second of every code-location load and `cdrhouse` command."""
    return dg.FreshnessPolicy.cron(
        deadline_cron="0 3 * * *", lower_bound_delta=timedelta(hours=2), timezone="UTC"
    )


def api_failure(
    exc: ContactCenterError, *, partition: str | None, api: "ContactCenterResource | None" = None
) -> dg.Failure:
    """A Dagster failure that says what went wrong, where, and what to fix; for an account
    other than `default` (`api`), it names the account and its key variable.

    Fatal errors (401/403/422 and the rest of `FatalAPIError`) are not retried: the same
    request would fail the same way until someone changes the key or the request.
    """
    fatal = isinstance(exc, FatalAPIError)
    key_var = (api.api_key_env if api is not None else None) or "CC_API_KEY"
    if isinstance(exc, AuthenticationError):
        fix = f"{key_var} is missing, wrong or not a v4 key: generate a v4 API key and set it."
    elif isinstance(exc, PermissionDeniedError):
        scope = exc.scope or "the endpoint's scope"
        fix = f"the API key lacks the scope {scope!r}: add it to the key on the API keys page."
    elif isinstance(exc, ValidationFailedError):
        fix = f"the API rejected the request parameters ({exc.errors}); check the filters."
    elif fatal:
        fix = "the request or configuration must change before a retry can succeed."
    else:
        fix = "transient; the step is retried with exponential backoff."
    endpoint = f"{exc.method} {exc.path}".strip() or CDRS_ENDPOINT
    description = f"{type(exc).__name__} on {endpoint}: {exc} -> {fix}"
    return dg.Failure(
        description=api.for_account(description) if api is not None else description,
        metadata={
            "error_class": type(exc).__name__,
            "endpoint": endpoint,
            "status": exc.status if exc.status is not None else -1,
            "partition": partition or "",
            "fatal": fatal,
        },
        allow_retries=not fatal,
    )


def markdown_preview(df: pl.DataFrame, rows: int = PREVIEW_ROWS, max_cols: int = 8) -> str:
    """A small markdown table of the first rows, values cut short, for the Dagster UI."""
    head = df.head(rows).select(df.columns[:max_cols])
    if head.width == 0:
        return "_(no columns)_"

    def cell(value: Any) -> str:
        text = "" if value is None else str(value)
        return (text[:37] + "...") if len(text) > 40 else text.replace("|", "\\|")

    lines = [
        "| " + " | ".join(head.columns) + " |",
        "|" + "---|" * head.width,
    ]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in head.iter_rows()]
    return "\n".join(lines)


def landed(
    table: str | dg.AssetKey,
    rows: int,
    preview: pl.DataFrame | None,
    timed: tuple[int, float],
    **extra: Any,
) -> dg.MaterializeResult[Any]:
    """A table's materialization: its rows, what else the step knows, the step's throughput
    (`timed`: rows the step handled, seconds) and a preview."""
    handled, seconds = timed
    return dg.MaterializeResult(
        asset_key=table,
        metadata={
            "dagster/row_count": rows,
            **extra,
            "seconds": round(seconds, 3),
            "rows_per_s": round(handled / seconds, 1) if seconds > 0 else 0.0,
            "preview": dg.MetadataValue.md(
                markdown_preview(preview) if preview is not None else "_(empty)_"
            ),
        },
    )
