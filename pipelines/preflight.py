"""Setup errors: found before any run, and told apart from transient failures during one.

A setup mistake (a typo in a variable, a missing bucket, refused credentials, a stopped
instance database, a full disk) fails the same way on every retry. `cdrhouse ingest` checks what
it can before it starts a run, cheaply and without retries (`source_problem`, `probe_lake`,
`probe_instance_database`, `open_instance`), and exits 2 with one line naming what to fix;
what only shows mid-run is classified here too: a step that meets one fails at once
(`fatal_setup_errors`, error class `SetupError`, not retried by the asset's RetryPolicy), and
a run whose instance database stops answering ends the command (`storage_problem`,
`fail_fast_storage`). A run that could not be recorded as ended is marked
FAILED by the next `cdrhouse ingest` (`close_unrecorded_runs`).

Only the standard library at module level: `cdrhouse --help` imports this module's importers.
"""

from __future__ import annotations

import contextlib
import contextvars
import difflib
import functools
import importlib.util
import json
import logging
import re
import sys
import threading
from collections.abc import Callable, Iterator, Mapping
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO, TypeVar

from models.timestamps import EARLIEST_DAY

if TYPE_CHECKING:
    import dagster as dg

    from pipelines.resources import WarehouseResource

# The CC_API_BASE_URL value that selects the bundled sandbox (case-insensitive).
SANDBOX = "sandbox"
# What the `sandbox` extra of pyproject.toml installs: the emulator's web stack (its ASGI app,
# its HTTP server). A production install (`pip install cdrhouse`) has neither, so asking for
# the sandbox there says which extra to install instead of raising an ImportError.
# tests/pipelines/test_sandbox_extra.py holds this equal to the extra.
SANDBOX_EXTRA = "cdrhouse[sandbox]"
SANDBOX_EXTRA_MODULES = ("starlette", "uvicorn")
# error_class of a step failure no retry can fix (a full disk, a missing bucket, ...).
SETUP_ERROR = "SetupError"
# A step a signal stopped in a run of `cdrhouse ingest` (`stop_on_interrupt`).
INTERRUPTED = "Interrupted"
INTERRUPTED_MESSAGE = "interrupted (Ctrl-C or SIGTERM)"
# Set while `cdrhouse ingest` runs jobs in its own process: the event set when Ctrl-C or
# SIGTERM arrived (`warehouse.interrupt.stop_signals`). A step then fails, not retried, and
# the next step fails at once. Dagster retries an interrupted step under its RetryPolicy
# ("respect retry policy when interrupts occur"), and DuckDB turns one into a RuntimeError
# any policy retries: 30 s later the day was fetched again, then every later day, and the
# command ended with 0. A run launched by the daemon keeps Dagster's behaviour.
stop_on_interrupt: contextvars.ContextVar[threading.Event | None] = contextvars.ContextVar(
    "stop_on_interrupt", default=None
)
# How long a step's error waits for the signal watcher to say it was a signal's doing: the
# watcher reads the signal on its own thread, maybe after the error reached the step.
SIGNAL_GRACE_S = 0.2
# error_class of a run the instance database stopped recording.
STORAGE_ERROR = "InstanceStorageUnavailable"
FAILURES_DIR = "failures"
# failures/unrecorded/<run_id>: runs the instance could not be told had ended.
UNRECORDED_DIR = "unrecorded"
_OPEN_STATUSES = ("NOT_STARTED", "STARTING", "STARTED")
PROBE_TIMEOUT_S = 5.0

F = TypeVar("F", bound=Callable[..., Iterator[Any]])


class SetupError(Exception):
    """A setup mistake: `cdrhouse` prints it as one line and exits 2."""


def start_problem(start: date, today: date) -> str | None:
    """Why `--start` cannot be a first day to ingest, or None."""
    if start < EARLIEST_DAY:
        return (
            f"--start {start} is before {EARLIEST_DAY}, the earliest day cdrhouse ingests (no "
            "contact center holds older CDRs); check the year"
        )
    if start >= today:
        return (
            f"--start {start} is not a complete day yet (today is {today} UTC): the latest day "
            f"that can be ingested is yesterday, {today - timedelta(days=1)}"
        )
    return None


def start_date_problem(value: date) -> str | None:
    """Why `value` cannot be the first daily partition (CDRHOUSE_START_DATE), or None."""
    if value < EARLIEST_DAY:
        return (
            f"must be {EARLIEST_DAY} or later (no contact center holds older CDRs); check the year"
        )
    return None


NOT_CONFIGURED_MESSAGE = (
    "no data source configured: set CC_API_BASE_URL to your cluster URL "
    "(https://<cluster_id>.<service_domain>) and CC_API_KEY to a v4 API key, "
    "or CC_API_BASE_URL=sandbox for the bundled emulator"
)
MISSING_KEY_MESSAGE = (
    "CC_API_BASE_URL is set but CC_API_KEY is not: set CC_API_KEY to a v4 API key with the "
    "reporting/users/routing/campaigns/numbers/billing scopes"
)


def is_sandbox(base_url: str | None) -> bool:
    return (base_url or "").strip().lower() == SANDBOX


def sandbox_extra_problem(what: str) -> str | None:
    """Why `what` (the setting or command that needs the emulator) cannot work in this
    install, or None. Looks the modules up without importing them."""
    missing = [m for m in SANDBOX_EXTRA_MODULES if importlib.util.find_spec(m) is None]
    if not missing:
        return None
    return (
        f"{what} needs the bundled emulator, which this install lacks (no {', '.join(missing)}):"
        f" install it with `pip install '{SANDBOX_EXTRA}'`"
    )


def source_problem(base_url: str | None, api_key: str | None) -> str | None:
    """The one-line reason no API can be called with these settings, or None if one can.

    A base URL that cannot work is named before a missing key: fixing the key first would only
    lead to the next error."""
    if not (base_url or "").strip():
        return NOT_CONFIGURED_MESSAGE
    if is_sandbox(base_url):
        return sandbox_extra_problem(f"CC_API_BASE_URL={SANDBOX}")
    problem = base_url_setting_problem(str(base_url), api_key)
    if problem is not None:
        return problem
    if not api_key:
        return MISSING_KEY_MESSAGE
    return None


def base_url_setting_problem(base_url: str, api_key: str | None) -> str | None:
    """What is wrong with CC_API_BASE_URL (neither `sandbox` nor a usable URL), or None.

    The value is echoed when it is close to `sandbox`, or a URL or host name, so the typo shows;
    never when it holds credentials or the key, or looks like neither (it may be a secret put
    in the wrong variable)."""
    from connectors.contact_center.settings import base_url_problem, is_host_name, looks_like_url

    value = base_url.strip()
    name = "invalid Contact Center API settings: CC_API_BASE_URL"
    secret = bool(api_key) and str(api_key) in value
    if looks_like_url(value):
        problem = base_url_problem(value)
        if problem is None:
            return None
        hidden = secret or "credentials" in problem
        return f"{name}: {problem}" if hidden else f"{name}={value!r}: {problem}"
    if difflib.get_close_matches(value.lower(), [SANDBOX], n=1, cutoff=0.75):
        return f"{name}={value!r} is neither a URL nor `{SANDBOX}`; did you mean `{SANDBOX}`?"
    if is_host_name(value) and not secret:
        return (
            f"{name}={value!r} is neither a URL nor `{SANDBOX}`; did you mean "
            f"https://{value.lower()}?"
        )
    return (
        f"{name} is neither a URL nor `{SANDBOX}` (its value is not shown: it may be a secret "
        "set in the wrong variable); set it to https://<cluster_id>.<service_domain>"
    )


# ---------------------------------------------------------------- the lake and the data dir


def probe_lake(lake_uri: str, data_dir: Path) -> None:
    """Raise `SetupError` unless the lake and the data directory can be written now.

    A local lake: a small temp file, written, fsynced and removed (no directory is created).
    An object store: the bucket is listed and a temp key is written and deleted, one attempt
    each, short timeouts. Nothing of the lake (no marker, no partition) and no
    `warehouse.duckdb` is written. Needs neither Dagster nor the lake module: it runs before
    they are imported, so a mistake answers in a second or two."""
    from warehouse.stores import (
        LocalStore,
        ObjectStore,
        StoreSetupError,
        is_local_uri,
        probe_directory,
        root_from_uri,
    )

    try:
        if is_local_uri(lake_uri):
            root = root_from_uri(lake_uri)
            LocalStore(root).probe()
            if root.is_relative_to(data_dir):
                return  # one disk, probed just now
        else:
            ObjectStore(lake_uri).probe()
        probe_directory(data_dir, "the data directory (CDRHOUSE_DATA_DIR)")
    except (StoreSetupError, ValueError) as exc:
        raise SetupError(str(exc)) from None


def fatal_setup_errors(fn: F) -> F:
    """Wrap a step's (generator) body: an error no retry can fix fails the step at once with
    a one-line `dagster.Failure(allow_retries=False)`, error class `SetupError` (a lake's
    refusal, `LakeSourceConflict` and its kinds: their own class).

    A RetryPolicy is for the network: retried 30, 60 and 120 s later, a full disk or a missing
    bucket fails the same way, and the run takes minutes to say so. In `cdrhouse ingest`'s own
    runs, any error after Ctrl-C or SIGTERM fails the step so too, error class `Interrupted`
    (`stop_on_interrupt`)."""

    @functools.wraps(fn)
    def step(*args: Any, **kwargs: Any) -> Iterator[Any]:
        import dagster as dg

        from pipelines.resources import WarehouseResource, config_failure
        from warehouse.stores import setup_problem

        stopped = stop_on_interrupt.get()
        if stopped is not None and stopped.is_set():  # a retry after the signal
            raise config_failure(INTERRUPTED_MESSAGE, INTERRUPTED)
        try:
            yield from fn(*args, **kwargs)
        except GeneratorExit:
            raise
        except BaseException as exc:
            if stopped is not None and (
                isinstance(exc, (dg.DagsterExecutionInterruptedError, KeyboardInterrupt))
                or stopped.wait(SIGNAL_GRACE_S)
            ):
                raise config_failure(INTERRUPTED_MESSAGE, INTERRUPTED) from None
            if isinstance(exc, dg.Failure) or not isinstance(exc, Exception):
                raise
            from warehouse.lake import LakeSourceConflict

            if isinstance(exc, LakeSourceConflict):
                # Another source, another key, a damaged marker: at the step's start or when
                # it publishes, one line (its class: LakeKeyConflict, ...), no retry.
                raise config_failure(str(exc), type(exc).__name__) from None
            values = [*args, *kwargs.values()]
            # A step taking its resources by key (one per account) has them on its context.
            values += [getattr(getattr(v, "resources", None), "warehouse", None) for v in args]
            warehouse = next((v for v in values if isinstance(v, WarehouseResource)), None)
            problem = setup_problem(exc, _where(warehouse))
            if problem is None:
                raise
            raise config_failure(problem, SETUP_ERROR) from exc

    return step  # type: ignore[return-value]


def _where(warehouse: WarehouseResource | None) -> str:
    if warehouse is None:
        return "the lake"
    try:
        lake = warehouse.lake()
    except Exception:
        return warehouse.resolved_lake_uri
    return str(lake.root) if lake.is_local else f"the lake {lake.uri}"


# ---------------------------------------------------------------- the instance database


def storage_problem(exc: BaseException, state: str = "cannot be used") -> str | None:
    """One line if `exc` is the instance database failing (unreachable, refusing the login,
    gone mid-run, out of disk), else None; `state` says when ("stopped answering")."""
    inner = None
    for link in _chain(exc):
        module = type(link).__module__
        if module.startswith(("psycopg2", "sqlite3", "sqlalchemy", "dagster_postgres")):
            inner = link  # keep walking: the driver's own error is the most precise
    if inner is None:
        return None
    module = type(inner).__module__
    text = _first_line(inner)
    if module.startswith("sqlalchemy"):
        text = re.sub(r"^\(\S+\)\s*", "", text)  # "(psycopg2.OperationalError) connection..."
    if "psycopg2" in module or "postgres" in text.lower() or "psycopg2" in str(exc):
        return (
            f"Dagster's instance database (PostgreSQL, from $DAGSTER_HOME/dagster.yaml) "
            f"{state}: {_redact(text)}; check that it is running and that DAGSTER_PG_HOST, "
            "DAGSTER_PG_PORT, DAGSTER_PG_USERNAME, DAGSTER_PG_PASSWORD and DAGSTER_PG_DB "
            "are right"
        )
    return (
        f"Dagster's instance storage (under $DAGSTER_HOME or a temp dir) {state}: {_redact(text)}"
    )


def _chain(exc: BaseException) -> Iterator[BaseException]:
    seen: set[int] = set()
    link: BaseException | None = exc
    while link is not None and id(link) not in seen:
        seen.add(id(link))
        yield link
        link = link.__cause__ or link.__context__


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0].strip() if text else type(exc).__name__


_SECRETS = (
    (re.compile(r"://([^:/@\s]+):[^@\s]+@"), r"://\1:<redacted>@"),
    (re.compile(r"(password\s*=\s*)\S+", re.IGNORECASE), r"\1<redacted>"),
)


def _redact(text: str) -> str:
    for pattern, replacement in _SECRETS:
        text = pattern.sub(replacement, text)
    return text


class _DropRetryWarnings(logging.Filter):
    """Drops dagster-postgres' "Retrying failed database connection" warnings (logged on the
    root logger, with the whole error, before each attempt): the command says it once."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith("Retrying failed database connection")


class _WithoutLostLogWrites:
    """stderr without Dagster's "Exception while writing logger call to event log" lines, one
    per log call it could not store once the database is gone (the command says it once)."""

    _PREFIX = "Exception while writing logger call to event log"

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        return len(text) if text.startswith(self._PREFIX) else self._stream.write(text)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def probe_instance_database(
    env: Mapping[str, str], data_dir: Path, timeout_s: float = PROBE_TIMEOUT_S
) -> None:
    """If `$DAGSTER_HOME/dagster.yaml` keeps the instance in PostgreSQL, connect to it once,
    with a connect timeout, and disconnect: raises `SetupError` (after writing the failure
    file) when it is stopped, unreachable or refuses the login. Runs before Dagster is
    imported, so it answers in about a second; and Dagster's own connection has no timeout, so
    a database host that drops packets would hang it for minutes. A storage this does not
    recognize is left to `open_instance`."""
    settings = _postgres_settings(env)
    if settings is None:
        return
    try:
        import psycopg2
    except ImportError:
        return
    secret = ""
    if isinstance(settings, str):
        problem = settings
    else:
        args, kwargs = settings
        secret = str(kwargs.get("password") or "")
        try:
            psycopg2.connect(*args, connect_timeout=max(1, round(timeout_s)), **kwargs).close()
        except psycopg2.Error as exc:
            problem = str(storage_problem(exc))
        else:
            return
    if secret:
        problem = problem.replace(secret, "<redacted>")
    path = write_failure(data_dir, None, None, None, problem, "preflight")
    raise SetupError(problem + (f"; details: {path}" if path else ""))


_PG_KEYS = {"username": "user", "password": "password", "hostname": "host", "db_name": "dbname"}


def _postgres_settings(
    env: Mapping[str, str],
) -> tuple[tuple[str, ...], dict[str, Any]] | str | None:
    """psycopg2.connect's arguments for the instance's PostgreSQL storage, a one-line problem
    (a variable the file reads is not set), or None (not PostgreSQL, or not understood)."""
    home = env.get("DAGSTER_HOME")
    if not home:
        return None
    try:
        import yaml

        document = yaml.safe_load((Path(home) / "dagster.yaml").read_text())
    except (ImportError, OSError):
        return None
    except Exception:
        return None
    config = _find_postgres(document)
    if config is None:
        return None
    try:
        if "postgres_url" in config:
            url = re.sub(
                r"^postgres(?:ql)?\+\w+://",
                "postgresql://",
                _env_value(config["postgres_url"], env),
            )
            return (url,), {}
        db = config["postgres_db"]
        kwargs: dict[str, Any] = {
            name: _env_value(db[key], env) for key, name in _PG_KEYS.items() if key in db
        }
        kwargs["port"] = int(_env_value(db.get("port", 5432), env))
        params = db.get("params") or {}
        kwargs.update({str(k): _env_value(v, env) for k, v in params.items()})
    except _Unset as unset:
        return (
            f"{unset} is not set, and $DAGSTER_HOME/dagster.yaml reads it for the instance's "
            "PostgreSQL database: set it (with DAGSTER_PG_HOST, DAGSTER_PG_PORT, "
            "DAGSTER_PG_USERNAME, DAGSTER_PG_PASSWORD, DAGSTER_PG_DB)"
        )
    except (KeyError, TypeError, ValueError, AttributeError):
        return None
    return (), kwargs


class _Unset(Exception):
    """An `{env: NAME}` value whose variable is not set (message: NAME)."""


def _env_value(value: Any, env: Mapping[str, str]) -> str:
    if isinstance(value, dict) and set(value) == {"env"}:
        name = str(value["env"])
        if not env.get(name):
            raise _Unset(name)
        return env[name]
    return str(value)


def _find_postgres(node: Any) -> dict[str, Any] | None:
    """The first mapping holding `postgres_url` or `postgres_db` (`storage: postgres:`, or the
    older `run_storage: config:` form)."""
    if isinstance(node, dict):
        if "postgres_url" in node or "postgres_db" in node:
            return node
        for child in node.values():
            found = _find_postgres(child)
            if found is not None:
                return found
    return None


def uses_postgres(env: Mapping[str, str]) -> bool:
    """Whether `$DAGSTER_HOME/dagster.yaml` configures a PostgreSQL storage (read as text:
    Dagster is not needed to tell)."""
    home = env.get("DAGSTER_HOME")
    if not home:
        return False
    try:
        return "postgres" in (Path(home) / "dagster.yaml").read_text().lower()
    except OSError:
        return False


@contextlib.contextmanager
def fail_fast_storage(postgres: bool = True) -> Iterator[None]:
    """Within: each instance-database call is tried once, not retried.

    dagster-postgres retries every failed connection 5 times with backoff (about 6 s), and a
    run that lost its database makes dozens of calls before it gives up: measured, 37 s from
    a stopped PostgreSQL to the end of `cdrhouse ingest`, and 91-172 lines of tracebacks. The
    command is interactive and says what to fix; the daemon and the webserver keep Dagster's
    retries (this changes only the process it runs in)."""
    quiet = _DropRetryWarnings()
    retry = None
    with contextlib.suppress(ImportError):
        if postgres:  # importing dagster-postgres (SQLAlchemy, alembic) costs a second
            from dagster_postgres import utils

            retry = utils.retry_pg_connection_fn
    saved = retry.__defaults__ if retry is not None else None
    root = logging.getLogger()
    root.addFilter(quiet)
    stderr = sys.stderr
    sys.stderr = _WithoutLostLogWrites(stderr)
    try:
        if retry is not None and saved is not None:
            retry.__defaults__ = (0, *saved[1:])
        yield
    finally:
        if retry is not None:
            retry.__defaults__ = saved
        sys.stderr = stderr
        root.removeFilter(quiet)


# The command's pool: one connection kept per storage, a few more while threads overlap; no
# statement timeout (0), as without a pool; a connection older than an hour is replaced.
POOL_MAX_OVERFLOW = 4
POOL_RECYCLE_S = 3600


def hold_connections(instance: dg.DagsterInstance) -> None:
    """Keep the instance database's connections open for the command's runs.

    Outside the webserver, dagster-postgres opens a new connection for each storage call: a
    `cdrhouse ingest` of two small days opened 837 of them, ~6 ms each (a server backend forked
    and a SCRAM exchange), 5.3 s of its 18.5. The command runs its jobs in this one process,
    so it pools them as the webserver does (Dagster's own `optimize_for_webserver`). A no-op
    on SQLite storage. A connection the server dropped fails its call, as a refused connect
    fails it without the pool (`fail_fast_storage`), and the pool replaces it."""
    instance.optimize_for_webserver(
        statement_timeout=0, pool_recycle=POOL_RECYCLE_S, max_overflow=POOL_MAX_OVERFLOW
    )


@contextlib.contextmanager
def _instance_init_lock(home: str) -> Iterator[None]:
    """Held while this command opens the instance at `home`: Dagster creates a new home's
    SQLite tables as it opens it, and two commands started at once on a new home failed with
    "table run_tags already exists". The lock file is in the temp dir (named after the home),
    so that it writes nothing in DAGSTER_HOME; where it cannot be taken, nothing waits."""
    import hashlib
    import os
    import tempfile

    try:
        import fcntl
    except ImportError:  # not POSIX: no lock
        yield
        return
    name = hashlib.sha256(os.path.realpath(home).encode()).hexdigest()[:16]
    path = Path(tempfile.gettempdir()) / f"cdrhouse-instance-{name}.lock"
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    except OSError:  # another user's lock file, a read-only temp dir
        yield
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


@contextlib.contextmanager
def open_instance(
    env: Mapping[str, str],
    data_dir: Path,
    prepare: Callable[[dg.DagsterInstance], None] | None = None,
) -> Iterator[dg.DagsterInstance]:
    """The instance runs are recorded in (`DagsterInstance.get()` with DAGSTER_HOME, else an
    ephemeral one), checked before any run: an unreachable or refusing database raises
    `SetupError` (one line) after writing `data/failures/instance-storage-<time>.json`. Runs
    an earlier command could not record as ended are marked FAILED here, then `prepare` runs
    (under the same checks)."""
    import dagster as dg

    if not env.get("DAGSTER_HOME"):
        with dg.DagsterInstance.ephemeral() as ephemeral:
            if prepare is not None:
                prepare(ephemeral)
            yield ephemeral
        return
    instance: dg.DagsterInstance | None = None
    try:
        with _instance_init_lock(env["DAGSTER_HOME"]):
            instance = dg.DagsterInstance.get()
        hold_connections(instance)
        close_unrecorded_runs(instance, data_dir)
        if prepare is not None:
            prepare(instance)
    except Exception as exc:
        if instance is not None:
            with contextlib.suppress(Exception):
                instance.dispose()
        problem = storage_problem(exc)
        if problem is not None:
            path = write_failure(data_dir, None, None, None, problem, "preflight")
            raise SetupError(problem + (f"; details: {path}" if path else "")) from None
        if isinstance(exc, dg.DagsterError):  # e.g. a dagster.yaml that does not validate
            raise SetupError(f"DAGSTER_HOME={env['DAGSTER_HOME']}: {_first_line(exc)}") from None
        raise
    with instance:
        yield instance


def write_failure(
    data_dir: Path,
    run_id: str | None,
    job: str | None,
    partition: str | None,
    message: str,
    step: str | None,
    *,
    recorded: bool = True,
) -> Path | None:
    """`data/failures/<run_id or instance-storage-<time>>.json`, shaped like the failure
    sensor's; with `recorded=False` also `failures/unrecorded/<run_id>`, so the next command
    closes the run. None when it cannot be written (the disk may be the problem)."""
    now = datetime.now(UTC)
    stamp = now.strftime("%Y%m%dT%H%M%S.%f")[:-3] + "Z"
    name = run_id or f"instance-storage-{stamp}"
    summary = {
        "run_id": run_id,
        "job": job,
        "partition": partition,
        "backfill": None,
        "written_at": now.isoformat(timespec="milliseconds").replace("+00:00", "Z"),
        "run_recorded": recorded,
        "failed_steps": [
            {
                "step": step,
                "error_class": STORAGE_ERROR,
                "endpoint": "",
                "fatal": True,
                "message": message[:1000],
            }
        ],
    }
    folder = data_dir / FAILURES_DIR
    path = folder / f"{name}.json"
    try:
        folder.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(summary, indent=2))
        tmp.replace(path)
        if not recorded and run_id is not None:
            (folder / UNRECORDED_DIR).mkdir(exist_ok=True)
            (folder / UNRECORDED_DIR / run_id).touch()
    except OSError:
        return None
    return path


def close_unrecorded_runs(instance: dg.DagsterInstance, data_dir: Path) -> list[str]:
    """Mark FAILED the runs an earlier `cdrhouse ingest` lost its database during (listed in
    `failures/unrecorded/`), if the instance still has them open; returns their ids."""
    folder = data_dir / FAILURES_DIR / UNRECORDED_DIR
    if not folder.is_dir():
        return []
    closed = []
    for marker in sorted(folder.iterdir()):
        run = instance.get_run_by_id(marker.name)
        if run is not None and run.status.value in _OPEN_STATUSES:
            instance.report_run_failed(
                run,
                message=(
                    "cdrhouse ingest lost the instance database during this run and could not "
                    f"record its end; see {data_dir / FAILURES_DIR / marker.name}.json"
                ),
            )
            closed.append(marker.name)
        marker.unlink(missing_ok=True)
    return closed
