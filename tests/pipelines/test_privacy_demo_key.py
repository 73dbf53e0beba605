"""The demo key keys only the bundled sandbox (issue 26, README "Callers' privacy").

`make demo`, `make dev` and `cdrhouse demo` key the sandbox's made-up callers with a key
printed in the Makefile and the README. Under it a real caller's token is reversed by keying
every number of a country, so the key must never key a real source: `make dev` pointed at a
cluster (CC_API_BASE_URL set, CDRHOUSE_PII_KEY not: the Makefile fills in the demo key), or the
demo's variables copied into a deployment. Against any source but `sandbox`, `cdrhouse ingest`
exits 2 in one line naming the variable, and a Dagster run's API steps fail at once; neither
writes anything. With `CC_API_BASE_URL=sandbox` the key is taken.
"""

from __future__ import annotations

from datetime import date, timedelta
from pathlib import Path

import dagster as dg
import pytest

from pipelines.definitions import CDR_JOB, SNAPSHOT_JOB, defs_from_env
from pipelines.privacy_settings import DEMO_PII_KEY
from pipelines.resources import ContactCenterResource
from tests.support.cli import assert_one_line_setup_error, clean_env, run_cdrhouse, tree
from tests.support.paths import LOCAL_INSTANCE_YAML
from tests.support.runs import run_failing_at_once
from tests.support.served import ServedSandbox
from warehouse.privacy import PHONE_NUMBERS_VAR, PII_KEY_VAR

DEMO = {PHONE_NUMBERS_VAR: "token", PII_KEY_VAR: DEMO_PII_KEY}


def _day(served: ServedSandbox) -> date:
    return served.clock.days_ago(4)


def test_ingest_from_a_real_source_under_the_demo_key_exits_2_and_writes_nothing(
    served: ServedSandbox, tmp_path: Path
) -> None:
    data_dir, home = tmp_path / "data", tmp_path / "home"
    home.mkdir()
    (home / "dagster.yaml").write_text(LOCAL_INSTANCE_YAML.read_text())
    env = clean_env(**(served.env(data_dir) | {"DAGSTER_HOME": str(home)} | DEMO))
    day = _day(served)
    argv = ["ingest", "--start", day.isoformat(), "--end", (day + timedelta(1)).isoformat()]
    run = run_cdrhouse(argv, env)
    line = assert_one_line_setup_error(run, PII_KEY_VAR, "demo key", "public")
    assert DEMO_PII_KEY not in line
    assert tree(data_dir) == []
    assert tree(home) == ["dagster.yaml"]  # no run was recorded


@pytest.mark.parametrize(
    ("job_name", "partition"), [(CDR_JOB, "day"), (SNAPSHOT_JOB, None)], ids=["cdrs", "snapshots"]
)
def test_a_run_from_a_real_source_under_the_demo_key_fails_at_once(
    served: ServedSandbox,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    job_name: str,
    partition: str | None,
) -> None:
    """What `make dev` pointed at a cluster would run: the location loads, its API steps fail
    at once, naming the variable, with no materialization and nothing written."""
    data_dir = tmp_path / "data"
    env = served.env(data_dir) | DEMO
    for name, value in env.items():  # the EnvVars resolve in the run, from os.environ
        monkeypatch.setenv(name, value)
    defs = defs_from_env(env)
    key = _day(served).isoformat() if partition else None
    with dg.DagsterInstance.ephemeral() as instance:
        result, failures = run_failing_at_once(defs, job_name, key, instance)
    assert failures
    for failure in failures:
        message = failure.description or ""
        assert "\n" not in message
        assert PII_KEY_VAR in message
        assert "demo key" in message
        assert DEMO_PII_KEY not in message
    assert not result.get_asset_materialization_events()
    assert tree(data_dir) == []


def test_the_demo_key_keys_the_bundled_sandbox() -> None:
    """`make demo`'s own settings: a policy, under the demo key; a cluster's: refused."""
    sandbox = ContactCenterResource(base_url="sandbox", phone_numbers="token", pii_key=DEMO_PII_KEY)
    assert sandbox.privacy().tokens
    cluster = ContactCenterResource(
        base_url="https://emea1.cc.example.com",
        api_key="a-key",
        phone_numbers="token",
        pii_key=DEMO_PII_KEY,
    )
    with pytest.raises(dg.Failure, match="demo key"):
        cluster.privacy()
    # As a mounted secret file often holds it: with a trailing newline, still the public key.
    mounted = cluster.model_copy(update={"pii_key": f" {DEMO_PII_KEY}\n"})
    with pytest.raises(dg.Failure, match="demo key"):
        mounted.privacy()
    own = ContactCenterResource(
        base_url="https://emea1.cc.example.com",
        api_key="a-key",
        phone_numbers="token",
        pii_key=DEMO_PII_KEY + "-and-then-our-own",
    )
    assert own.privacy().tokens
