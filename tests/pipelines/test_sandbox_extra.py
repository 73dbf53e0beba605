"""The emulator is the optional extra `cdrhouse[sandbox]`; Dagster's UI the extra `webserver`.

- pyproject.toml: no runtime dependency pulls the web stack (starlette, uvicorn,
  dagster-webserver), checked through the installed distributions' own requirements; the
  `sandbox` extra is what `pipelines.preflight` looks for.
- Without the extra's modules (a fresh interpreter in which importing them fails, as in an
  install without the extra), `CC_API_BASE_URL=sandbox` and `cdrhouse sandbox` say which extra
  to install in one line (exit 2), a Dagster step fails at once without retries saying the same,
  and the code location still loads: the emulator is imported only when a sandbox is built.

The real install without extras is tests/deploy/test_production_install.py.
"""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from pipelines.preflight import SANDBOX_EXTRA, SANDBOX_EXTRA_MODULES
from tests.support.fresh import python
from tests.support.paths import REPO_ROOT
from tests.support.wheelhouse import closure, normalize, project_requirements

WEB_STACK = frozenset({"starlette", "uvicorn", "dagster-webserver"})
PYPROJECT = REPO_ROOT / "pyproject.toml"

# Importing a module set to None in sys.modules fails like an absent package, and
# importlib.util.find_spec answers None for it: an install without the extra, in this venv.
_WITHOUT_EXTRA = f"import sys\nfor name in {SANDBOX_EXTRA_MODULES!r}: sys.modules[name] = None\n"

_RUN_MAIN = (
    _WITHOUT_EXTRA
    + """
import contextlib, io, json
from pipelines.cli import main

out, err = io.StringIO(), io.StringIO()
with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
    code = main(json.loads(sys.argv[1]), env=json.loads(sys.argv[2]))
print(json.dumps({"code": code, "out": out.getvalue(), "err": err.getvalue(),
                  "sandbox_imported": "connectors.sandbox" in sys.modules}))
"""
)

_STEP = (
    _WITHOUT_EXTRA
    + """
import json
import dagster as dg
from pipelines.definitions import defs  # the code location loads without the emulator
from pipelines.resources import ContactCenterResource

try:
    ContactCenterResource(base_url="sandbox").source_id
except dg.Failure as exc:
    print(json.dumps({"description": exc.description, "allow_retries": exc.allow_retries,
                      "assets": len(list(defs().resolve_all_asset_keys())),
                      "sandbox_imported": "connectors.sandbox" in sys.modules}))
"""
)


def test_no_runtime_dependency_pulls_the_web_stack() -> None:
    project = tomllib.loads(PYPROJECT.read_text())["project"]
    direct = {normalize(Requirement(r).name) for r in project["dependencies"]}
    assert direct.isdisjoint(WEB_STACK), sorted(direct & WEB_STACK)
    # Transitively, through the requirements each installed distribution declares.
    runtime = set(closure(project_requirements(PYPROJECT)))
    assert runtime.isdisjoint(WEB_STACK), sorted(runtime & WEB_STACK)
    # The extras bring it back, for the sandbox and for `make dev`.
    extras = project["optional-dependencies"]
    assert {normalize(Requirement(r).name) for r in extras["sandbox"]} == set(SANDBOX_EXTRA_MODULES)
    assert "dagster-webserver" in set(closure(project_requirements(PYPROJECT, ["webserver"])))
    assert f"{project['name']}[sandbox]" == SANDBOX_EXTRA


# The commands that need the emulator, and what their one line names ({day}/{next}: a day).
NO_EXTRA_COMMANDS = [
    pytest.param(
        ["ingest", "--start", "{day}", "--end", "{next}"],
        {"CC_API_BASE_URL": "sandbox"},
        "CC_API_BASE_URL=sandbox",
        id="ingest",
    ),
    pytest.param(["demo", "--days", "1"], {}, "CC_API_BASE_URL=sandbox", id="demo"),
    pytest.param(["sandbox", "--port", "0"], {}, "`cdrhouse sandbox`", id="sandbox"),
]


@pytest.mark.parametrize(("argv", "env", "needle"), NO_EXTRA_COMMANDS)
def test_without_the_extra_the_cli_says_which_extra_to_install(
    tmp_path: Path, argv: list[str], env: dict[str, str], needle: str
) -> None:
    argv = [a.format(day="2026-11-01", next="2026-11-02") for a in argv]
    env = {"CDRHOUSE_DATA_DIR": str(tmp_path / "data"), **env}
    proc = python(tmp_path, "-c", _RUN_MAIN, json.dumps(argv), json.dumps(env))
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["code"] == 2, result
    assert result["out"] == "", result
    lines = result["err"].splitlines()
    assert len(lines) == 1, result
    assert lines[0].startswith(f"cdrhouse: error: {needle} needs the bundled emulator"), lines[0]
    assert "(no starlette, uvicorn)" in lines[0], lines[0]
    assert lines[0].endswith("`pip install 'cdrhouse[sandbox]'`"), lines[0]
    assert not result["sandbox_imported"]
    assert not (tmp_path / "data").exists()


def test_without_the_extra_a_sandbox_step_fails_at_once_and_the_location_loads(
    tmp_path: Path,
) -> None:
    proc = python(tmp_path, "-c", _STEP, env={"CC_API_BASE_URL": "sandbox"})
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert "pip install 'cdrhouse[sandbox]'" in result["description"], result
    assert result["allow_retries"] is False
    assert result["assets"] > 0
    assert not result["sandbox_imported"]
