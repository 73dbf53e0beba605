"""A production install: `pip install .` with no extras, into a fresh venv.

The emulator's web stack (starlette, uvicorn: the `sandbox` extra) and Dagster's UI
(dagster-webserver: the `webserver` extra) stay out of it, and `cdrhouse ingest` from it
still lands a day from an API served over HTTP, exact id by id and cost by cost. Asking that
install for the sandbox says which extra to install, in one line, exit 2.

The venv resolves offline: `pip install --no-index --find-links WHEELS .`, where WHEELS holds
the suite venv's own distributions written back as wheels (tests/support/wheelhouse.py):
everything the runtime, `sandbox` and `webserver` dependencies need, so a requirement that
pulled starlette or uvicorn in would find it and install it. Only the build backend
(setuptools >= 77, which the suite venv does not have) is fetched, by pip, as `make install`
fetches it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import venv
from dataclasses import dataclass
from datetime import timedelta
from decimal import Decimal
from pathlib import Path

import pytest

from tests.deploy.conftest import ServedApi
from tests.pipelines.test_sandbox_extra import NO_EXTRA_COMMANDS
from tests.support.cli import CliRun
from tests.support.paths import REPO_ROOT
from tests.support.wheelhouse import build_wheelhouse, closure, normalize, project_requirements

# A cold pip install of ~80 wheels, then one Dagster run, on a busy 2-core machine.
pytestmark = pytest.mark.timeout(600)
PIP_TIMEOUT_S = 420.0
RUN_TIMEOUT_S = 240.0
WEB_STACK = ("starlette", "uvicorn", "dagster-webserver")
# pyproject.toml's build-system requirements, which the suite's venv does not hold (its
# setuptools is older): fetched by pip from the configured index, as `make install` does.
BUILD = ("setuptools>=77", "wheel")


@dataclass(frozen=True)
class FreshVenv:
    root: Path
    installed: frozenset[str]

    @property
    def bin(self) -> Path:
        return self.root / "bin"

    def run(self, argv: list[str], env: dict[str, str], cwd: Path) -> CliRun:
        """`cdrhouse <argv>` of this venv."""
        started = time.monotonic()
        done = subprocess.run(
            [str(self.bin / "cdrhouse"), *argv],
            env=env,
            cwd=cwd,
            capture_output=True,
            text=True,
            timeout=RUN_TIMEOUT_S,
            check=False,
        )
        return CliRun(done.returncode, done.stdout, done.stderr, time.monotonic() - started)


def _pip_env() -> dict[str, str]:
    """No machine pip configuration (indexes, find-links, constraints) and no PYTHONPATH:
    the fresh venv must see only itself and the wheels it is given."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_") and k != "PYTHONPATH"}
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    env["PIP_CONFIG_FILE"] = os.devnull  # pip reads no configuration file then
    return env


def _source_tree(dest: Path) -> Path:
    """The repository's tracked files as they are now (edits included), without build
    leftovers: `pip install .` builds in the tree it is given."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=REPO_ROOT,
        capture_output=True,
        check=True,
    ).stdout.split(b"\0")
    for name in filter(None, listed):
        src = REPO_ROOT / name.decode()
        if src.is_file():
            target = dest / name.decode()
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(src.read_bytes())
    return dest


@pytest.fixture(scope="module")
def fresh_venv(tmp_path_factory: pytest.TempPathFactory) -> FreshVenv:
    work = tmp_path_factory.mktemp("production_install")
    wheels = work / "wheels"
    # Runtime + sandbox + webserver: the web stack is offered, and must not be taken.
    needed = closure(project_requirements(REPO_ROOT / "pyproject.toml", ["sandbox", "webserver"]))
    build_wheelhouse(needed.values(), wheels)
    pip = [sys.executable, "-m", "pip"]
    fetched = subprocess.run(
        [*pip, "download", "-q", "--no-deps", "--only-binary", ":all:", "-d", str(wheels), *BUILD],
        capture_output=True,
        text=True,
        timeout=PIP_TIMEOUT_S,
        check=False,
    )
    assert fetched.returncode == 0, f"could not fetch the build backend:\n{fetched.stderr}"

    # A bare venv; the suite's own pip installs into it (`--python`): same resolver, no copy
    # of pip in the production venv, and ~10x faster than the venv's bundled pip here.
    root = work / "venv"
    venv.create(root, with_pip=False)
    source = _source_tree(work / "src")
    # `pip install .`, offline: every requirement from `wheels`, the build backend too.
    offline = ["--no-index", "--find-links", str(wheels), "."]
    install = subprocess.run(
        [*pip, "--python", str(root / "bin" / "python"), "install", "-q", "--no-compile", *offline],
        cwd=source,
        env=_pip_env(),
        capture_output=True,
        text=True,
        timeout=PIP_TIMEOUT_S,
        check=False,
    )
    assert install.returncode == 0, install.stdout + install.stderr
    listed = subprocess.run(
        [str(root / "bin" / "python"), "-c", _LIST_DISTS],
        env=_pip_env(),
        cwd=work,
        capture_output=True,
        text=True,
        check=True,
    )
    return FreshVenv(root, frozenset(normalize(n) for n in json.loads(listed.stdout)))


_LIST_DISTS = (
    "import importlib.metadata as m, json; "
    "print(json.dumps([d.metadata['Name'] for d in m.distributions()]))"
)


def _env(tmp_path: Path, **values: str) -> dict[str, str]:
    """A production shell: nothing of the suite's cdrhouse, Dagster or Python path."""
    scrub = ("CC_API_", "CDRHOUSE_", "DAGSTER_", "AWS_", "PG")
    env = {k: v for k, v in _pip_env().items() if not k.startswith(scrub)}
    env.update(CDRHOUSE_DATA_DIR=str(tmp_path / "data"), CDRHOUSE_PHONE_NUMBERS="raw", **values)
    return env


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    (tmp_path / "data").mkdir()
    return tmp_path


def test_a_production_install_has_no_web_stack(fresh_venv: FreshVenv, workdir: Path) -> None:
    assert "cdrhouse" in fresh_venv.installed
    assert {"dagster", "dagster-postgres", "polars", "duckdb"} <= fresh_venv.installed
    assert fresh_venv.installed.isdisjoint(WEB_STACK), sorted(fresh_venv.installed & set(WEB_STACK))
    # ... and its cdrhouse is the installed copy, not the repository's.
    where = subprocess.run(
        [str(fresh_venv.bin / "python"), "-c", "import pipelines; print(pipelines.__file__)"],
        env=_env(workdir),
        cwd=workdir,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert Path(where).is_relative_to(fresh_venv.root), where


def test_ingest_from_a_production_install_lands_the_day_exactly(
    fresh_venv: FreshVenv, served_sandbox: ServedApi, workdir: Path
) -> None:
    day = served_sandbox.days[-1]
    env = _env(
        workdir,
        CC_API_BASE_URL=served_sandbox.base_url,
        CC_API_KEY=served_sandbox.api_key,
        CDRHOUSE_START_DATE=served_sandbox.start_date.isoformat(),
    )
    argv = ["ingest", "--start", day.isoformat(), "--end", str(day + timedelta(days=1))]
    run = fresh_venv.run(argv, env, workdir)
    assert run.code == 0, str(run)
    assert "Traceback" not in run.stdout + run.stderr, str(run)

    query = "select id, cost::varchar as cost from cdrs"
    answer = fresh_venv.run(["sql", "--format", "json", query], env, workdir)
    assert answer.code == 0, str(answer)
    got = {row["id"]: Decimal(row["cost"]) for row in json.loads(answer.stdout)}
    truth = served_sandbox.truth(day)
    assert len(got) == truth.total
    assert got == truth.costs


@pytest.mark.parametrize(("argv", "extra_env", "needle"), NO_EXTRA_COMMANDS)
def test_the_sandbox_without_its_extra_says_which_extra_to_install(
    fresh_venv: FreshVenv,
    served_sandbox: ServedApi,
    workdir: Path,
    argv: list[str],
    extra_env: dict[str, str],
    needle: str,
) -> None:
    day = served_sandbox.days[-1]
    argv = [a.format(day=day, next=day + timedelta(days=1)) for a in argv]
    run = fresh_venv.run(argv, _env(workdir, **extra_env), workdir)
    # One line on stderr, exit 2, no traceback (not timed: the venv's first imports compile).
    assert run.code == 2, str(run)
    assert run.stdout == "", str(run)
    assert len(run.lines) == 1, str(run)
    line = run.lines[0]
    assert line.startswith(f"cdrhouse: error: {needle} needs the bundled emulator"), line
    assert "(no starlette, uvicorn)" in line, line
    assert line.endswith("`pip install 'cdrhouse[sandbox]'`"), line
    # Nothing was started or written.
    assert list((workdir / "data").iterdir()) == []
