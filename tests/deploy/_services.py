"""Real services for the production-configuration tests: PostgreSQL, an S3 server, the API.

- `start_postgres()`: a throwaway PostgreSQL cluster from the distribution's binaries (Debian's
  `postgresql` package, installed by `make services`), on a free loopback port, password auth
  over TCP like a managed database. As root, `initdb`/`pg_ctl` run as the `postgres` system user
  (`initdb` refuses root) on a directory that user owns.
- `start_moto()`: moto's S3 server as a separate process (see `MotoS3` for why).
- `deploy_env()`: the environment a production pod has (instance file, database, object
  store, API), built from scratch rather than inherited.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import pwd
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date
from decimal import Decimal
from pathlib import Path
from typing import Any

import httpx
import psycopg2

from tests.support.paths import REPO_ROOT
from tests.support.ports import free_port
from tests.support.privacy import with_raw_numbers
from tests.support.processes import stop_process
from tests.support.secrets import SecretSearch

DEPLOY_YAML = REPO_ROOT / "pipelines" / "deploy" / "dagster.yaml"
PG_USER = "dagster"
PG_PASSWORD = "deploy-test-password"  # a throwaway local cluster's password
INSTALL_HINT = "run `make services` (or `apt-get install postgresql`) to get PostgreSQL"
AWS_TEST_ENV = {
    "AWS_ACCESS_KEY_ID": "test",
    "AWS_SECRET_ACCESS_KEY": "test",
    "AWS_REGION": "us-east-1",
}
# Inherited variables that would point a process at another cluster, instance, lake or cloud
# account; `deploy_env` drops them and sets its own.
SCRUBBED_PREFIXES = ("CC_API_", "CDRHOUSE_", "DAGSTER_", "AWS_", "PG")
_STARTUP_TIMEOUT_S = 120.0


# ---------------------------------------------------------------- PostgreSQL


def postgres_bin_dir() -> Path | None:
    """Where `initdb` and `pg_ctl` are: Debian's newest version, else whatever is on PATH."""
    debian = sorted(
        (str(p) for p in Path("/usr/lib/postgresql").glob("*/bin/initdb")),
        key=lambda p: int(Path(p).parts[-3]) if Path(p).parts[-3].isdigit() else 0,
    )
    if debian:
        return Path(debian[-1]).parent
    on_path = shutil.which("initdb")
    return Path(on_path).parent if on_path else None


@dataclass
class Postgres:
    """A running throwaway cluster; `create_database` hands each test its own database."""

    bin_dir: Path
    root: Path
    port: int
    run_as: str | None
    host: str = "127.0.0.1"
    user: str = PG_USER
    password: str = PG_PASSWORD
    _numbers: Iterator[int] = field(default_factory=lambda: itertools.count(1))

    @property
    def data_dir(self) -> Path:
        return self.root / "data"

    def connect(self, dbname: str = "postgres") -> psycopg2.extensions.connection:
        return psycopg2.connect(
            host=self.host,
            port=self.port,
            user=self.user,
            password=self.password,
            dbname=dbname,
            connect_timeout=10,
        )

    def create_database(self, prefix: str = "dagster") -> str:
        """A new, empty database (`dagster_1`, `dagster_2`, ...) for one fresh instance."""
        name = f"{prefix}_{next(self._numbers)}"
        con = self.connect()
        try:
            con.autocommit = True  # CREATE DATABASE cannot run inside a transaction
            with con.cursor() as cur:
                cur.execute(f'create database "{name}"')
        finally:
            con.close()
        return name

    def query(self, dbname: str, sql: str) -> list[tuple[object, ...]]:
        con = self.connect(dbname)
        try:
            with con.cursor() as cur:
                cur.execute(sql)
                return list(cur.fetchall())
        finally:
            con.close()

    def env(self, dbname: str) -> dict[str, str]:
        """The DAGSTER_PG_* variables pipelines/deploy/dagster.yaml reads."""
        return {
            "DAGSTER_PG_USERNAME": self.user,
            "DAGSTER_PG_PASSWORD": self.password,
            "DAGSTER_PG_HOST": self.host,
            "DAGSTER_PG_DB": dbname,
            "DAGSTER_PG_PORT": str(self.port),
        }

    def log_tail(self, lines: int = 40) -> str:
        try:
            text = (self.root / "postgres.log").read_text(errors="replace")
        except OSError:
            return "(no postgres log)"
        return "\n".join(text.splitlines()[-lines:])


def _reaper(cleanup: str) -> subprocess.Popen[bytes]:
    """A watchdog shell that runs `cleanup` once this process is gone without cleaning up
    (SIGKILL, a timeout's `os._exit`): servers must not outlive the tests that started them.
    Terminate it first on a normal teardown."""
    script = f"while kill -0 {os.getpid()} 2>/dev/null; do sleep 1; done; {cleanup}"
    return subprocess.Popen(
        ["/bin/sh", "-c", script],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )


def _stop_reaper(reaper: subprocess.Popen[bytes] | None) -> None:
    if reaper is not None:
        stop_process(reaper)


def _pg_argv(bin_dir: Path, run_as: str | None, args: Sequence[str]) -> list[str]:
    argv = [str(bin_dir / args[0]), *args[1:]]
    return ["su", run_as, "-s", "/bin/bash", "-c", shlex.join(argv)] if run_as else argv


def _pg_run(bin_dir: Path, run_as: str | None, args: Sequence[str]) -> None:
    """Run a PostgreSQL program, as `run_as` via `su` when we are root."""
    cmd = _pg_argv(bin_dir, run_as, args)
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)
    if result.returncode != 0:
        raise RuntimeError(
            f"{args[0]} failed ({result.returncode}):\n{result.stdout}\n{result.stderr}"
        )


@contextlib.contextmanager
def start_postgres(bin_dir: Path) -> Iterator[Postgres]:
    """initdb + pg_ctl start on a free loopback port; pg_ctl stop and remove it at exit."""
    run_as = "postgres" if os.geteuid() == 0 else None
    # Not under pytest's tmp dir: that is 0700 root, which the `postgres` user cannot enter.
    root = Path(tempfile.mkdtemp(prefix="cdrhouse-pg-"))
    pg: Postgres | None = None
    reaper: subprocess.Popen[bytes] | None = None
    try:
        if run_as is not None:
            entry = pwd.getpwnam(run_as)
            os.chown(root, entry.pw_uid, entry.pw_gid)
        pwfile = root / "pwfile"
        pwfile.write_text(PG_PASSWORD + "\n")
        if run_as is not None:
            os.chown(pwfile, entry.pw_uid, entry.pw_gid)
        pwfile.chmod(0o600)
        _pg_run(
            bin_dir,
            run_as,
            [
                "initdb",
                "-D",
                str(root / "data"),
                "-U",
                PG_USER,
                f"--pwfile={pwfile}",
                # TCP needs the password, as a managed database would; the socket (only in
                # our own temp dir) is trusted.
                "--auth-host=scram-sha-256",
                "--auth-local=trust",
                "-E",
                "UTF8",
                "--no-sync",
            ],
        )
        # A throwaway cluster: no fsync (durability is not under test, wall time is).
        server_opts = "-c fsync=off -c synchronous_commit=off -c full_page_writes=off"
        for attempt in range(3):  # the free port can be taken between probe and bind
            candidate = Postgres(bin_dir=bin_dir, root=root, port=free_port(), run_as=run_as)
            opts = f"-k {root} -h 127.0.0.1 -p {candidate.port} {server_opts}"
            log = str(root / "postgres.log")
            try:
                _pg_run(
                    bin_dir,
                    run_as,
                    [
                        "pg_ctl",
                        "-D",
                        str(candidate.data_dir),
                        "-o",
                        opts,
                        "-l",
                        log,
                        "-w",
                        "-t",
                        "60",
                        "start",
                    ],
                )
            except RuntimeError:
                if attempt == 2 or "could not bind" not in candidate.log_tail():
                    raise
                continue
            pg = candidate
            break
        assert pg is not None
        stop = ["pg_ctl", "-D", str(pg.data_dir), "-m", "fast", "stop"]
        stop_cmd = shlex.join(_pg_argv(bin_dir, run_as, stop))
        reaper = _reaper(f"{stop_cmd}; rm -rf {shlex.quote(str(root))}")
        yield pg
    finally:
        _stop_reaper(reaper)
        if pg is not None:
            with contextlib.suppress(RuntimeError, subprocess.TimeoutExpired):
                _pg_run(bin_dir, run_as, ["pg_ctl", "-D", str(pg.data_dir), "-m", "fast", "stop"])
        shutil.rmtree(root, ignore_errors=True)


# S3 (moto) ---------------------------------------------------------------------


@dataclass(frozen=True)
class MotoS3:
    """moto's S3 server, `moto_server -H 127.0.0.1 -p PORT`, in its own process.

    Not `ThreadedMotoServer`: in a thread it would share the GIL with pytest and the served
    sandbox, and die with the test process; as its own process it is an endpoint like a real
    one, reached only over HTTP by every client (run workers, DuckDB, polars, boto3).
    """

    endpoint_url: str
    log_path: Path

    def env(self) -> dict[str, str]:
        """The standard AWS variables; nothing cdrhouse-specific."""
        return {**AWS_TEST_ENV, "AWS_ENDPOINT_URL": self.endpoint_url}

    def client(self) -> Any:  # boto3's client type is generated (no stubs installed)
        import boto3

        env = self.env()
        return boto3.client(
            "s3",
            endpoint_url=env["AWS_ENDPOINT_URL"],
            region_name=env["AWS_REGION"],
            aws_access_key_id=env["AWS_ACCESS_KEY_ID"],
            aws_secret_access_key=env["AWS_SECRET_ACCESS_KEY"],
        )

    def create_bucket(self, name: str) -> str:
        self.client().create_bucket(Bucket=name)
        return name

    def requests(self) -> list[str]:
        """Every request the server logged so far, as `VERB /path?query` (werkzeug: a line
        each); slice it from an earlier length to see what one step asked for."""
        made = []
        for line in self.log_path.read_text(errors="replace").splitlines():
            for verb in ("GET", "HEAD", "PUT", "POST", "DELETE"):
                start = f'"{verb} '
                if start in line:
                    path = line.split(start, 1)[1].split(" ", 1)[0]
                    made.append(f"{verb} {path}")
        return made

    def keys(self, bucket: str, prefix: str = "") -> list[str]:
        """Every object key under `prefix`, sorted."""
        paginator = self.client().get_paginator("list_objects_v2")
        return sorted(
            obj["Key"]
            for page in paginator.paginate(Bucket=bucket, Prefix=prefix)
            for obj in page.get("Contents", [])
        )


def _forget_s3_clients() -> None:
    import s3fs

    s3fs.S3FileSystem.clear_instance_cache()


@contextlib.contextmanager
def start_moto(workdir: Path) -> Iterator[MotoS3]:
    moto_server = Path(sys.executable).parent / "moto_server"
    if not moto_server.exists():
        raise RuntimeError(f"{moto_server} is missing: moto[server] is in the dev extra")
    port = free_port()
    s3 = MotoS3(endpoint_url=f"http://127.0.0.1:{port}", log_path=workdir / "moto.log")
    with s3.log_path.open("wb") as log:
        proc = subprocess.Popen(
            [str(moto_server), "-H", "127.0.0.1", "-p", str(port)],
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    reaper = _reaper(f"kill -TERM -{proc.pid}")  # dash: a negative pid is the group
    # fsspec caches S3 filesystems per process by their options, not by AWS_ENDPOINT_URL: a
    # client cached against an earlier module's (stopped) server would be reused.
    _forget_s3_clients()
    try:
        deadline = time.monotonic() + _STARTUP_TIMEOUT_S
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"moto_server exited: {s3.log_path.read_text()[-2000:]}")
            with contextlib.suppress(httpx.HTTPError):
                httpx.get(f"{s3.endpoint_url}/", timeout=2.0)
                break
            if time.monotonic() > deadline:
                raise RuntimeError(f"moto_server did not answer on {s3.endpoint_url}")
            time.sleep(0.2)
        yield s3
    finally:
        _forget_s3_clients()
        _stop_reaper(reaper)
        stop_process(proc, group=True, grace_s=10)


# ---------------------------------------------------------------- the API and the pod


@dataclass(frozen=True)
class DayTruth:
    """What the API says of one UTC day: `metadata.total`, and every CDR's exact cost."""

    total: int
    costs: dict[str, Decimal]


def api_day_truth(base_url: str, api_key: str, day: date) -> DayTruth:
    """Over HTTP: the CDR list's `metadata.total` for the day's `started_at` window, and the
    sandbox's ground truth (`/_sandbox/truth/cdrs`: id -> decimal cost string) for the same
    window. The two must agree, or the truth would not be the API's."""
    start = f"{day.isoformat()}T00:00:00Z"
    end = f"{date.fromordinal(day.toordinal() + 1).isoformat()}T00:00:00Z"
    with httpx.Client(base_url=base_url, timeout=30.0) as client:
        listed = client.get(
            "/api/v4/reporting/cdrs",
            params={"started_at[gte]": start, "started_at[lt]": end, "limit": 1},
            headers={"Authorization": f"Bearer {api_key}"},
        )
        listed.raise_for_status()
        total = int(listed.json()["metadata"]["total"])
        truth = client.get("/_sandbox/truth/cdrs", params={"start": start, "end": end})
        truth.raise_for_status()
    costs = {cdr_id: Decimal(cost) for cdr_id, cost in truth.json()["cdrs"].items()}
    if len(costs) != total:
        raise AssertionError(f"{day}: truth has {len(costs)} CDRs, metadata.total {total}")
    return DayTruth(total=total, costs=costs)


def deploy_env(
    workdir: Path,
    *,
    api_base_url: str,
    api_key: str,
    start_date: date,
    postgres_env: Mapping[str, str],
    aws_env: Mapping[str, str] | None = None,
    lake_uri: str | None = None,
    extra: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """The full environment of a production pod, under `workdir`.

    Creates `workdir/dagster_home/dagster.yaml` (a copy of pipelines/deploy/dagster.yaml) and
    `workdir/data`; the lake defaults to `file://workdir/data/lake`. Everything cdrhouse,
    Dagster, PostgreSQL or AWS related is dropped from the inherited environment first.
    """
    home = workdir / "dagster_home"
    data_dir = workdir / "data"
    home.mkdir(parents=True, exist_ok=True)
    data_dir.mkdir(parents=True, exist_ok=True)
    shutil.copy(DEPLOY_YAML, home / "dagster.yaml")
    env = {k: v for k, v in os.environ.items() if not k.startswith(SCRUBBED_PREFIXES)}
    env.update(
        CC_API_BASE_URL=api_base_url,
        CC_API_KEY=api_key,
        CDRHOUSE_DATA_DIR=str(data_dir),
        CDRHOUSE_LAKE_URI=lake_uri or (data_dir / "lake").as_uri(),
        CDRHOUSE_START_DATE=start_date.isoformat(),
        DAGSTER_HOME=str(home),
        # Subprocesses import the code location from the repo, whatever their cwd.
        PYTHONPATH=os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH")])),
    )
    env.update(postgres_env)
    env.update(aws_env or {})
    env.update(extra or {})
    return with_raw_numbers(env)


def search_pod(
    secret: str,
    postgres: Postgres,
    database: str,
    s3: MotoS3,
    bucket: str,
    env: Mapping[str, str],
) -> SecretSearch:
    """`secret` searched in a pod's stores: every cell of its PostgreSQL database, every object
    of its bucket, its DAGSTER_HOME and its data dir (`env`'s); the caller adds its outputs."""
    search = SecretSearch(secret)
    connection = postgres.connect(database)
    try:
        search.postgres(connection, f"postgresql:{database}")
    finally:
        connection.close()
    search.s3(s3.client(), bucket)
    search.path(Path(env["DAGSTER_HOME"]), "DAGSTER_HOME")
    search.path(Path(env["CDRHOUSE_DATA_DIR"]), "data")
    return search
