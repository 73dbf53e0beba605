"""How callers' numbers land is an explicit choice (issue 26, README "Callers' privacy").

- A bad `CDRHOUSE_PHONE_NUMBERS`/`CDRHOUSE_SMS_BODIES`, neither the choice nor a key, `token`
  without its key or with a short one: `cdrhouse ingest` exits 2 with one line naming the
  variables (never a value), before any run, and writes nothing.
- The code location loads without the choice, but every API step fails at once naming both
  variables, and writes nothing.
- `token` through `cdrhouse ingest` against the sandbox served on a socket: `cdrs` holds no
  number the API sent, only their keyed tokens (HMAC-SHA256 of the digits, computed here), and
  the key is nowhere under DAGSTER_HOME (decompressed) nor in the data dir or the output.
- An account of the accounts file keys its tokens with its own `pii_key_env`, by reference.
"""

from __future__ import annotations

import csv
import hashlib
import hmac
import io
import re
from dataclasses import dataclass
from datetime import date, timedelta
from pathlib import Path

import dagster as dg
import httpx
import pytest

from connectors.sandbox.config import DEFAULT_API_KEY
from models.timestamps import iso_ms
from pipelines.accounts import accounts_from_env
from pipelines.definitions import CDR_JOB, SNAPSHOT_JOB, defs_from_env
from pipelines.kpi_settings import SettingsError
from pipelines.partitions import partition_window
from pipelines.resources import SOURCE_NOT_CONFIGURED, ContactCenterResource
from tests.support.cli import (
    assert_one_line_setup_error,
    clean_env,
    run_cdrhouse,
    tree,
)
from tests.support.paths import LOCAL_INSTANCE_YAML
from tests.support.runs import run_failing_at_once
from tests.support.secrets import SecretSearch
from tests.support.served import ServedSandbox
from warehouse.privacy import PHONE_NUMBERS_VAR, PII_KEY_VAR, SMS_BODIES_VAR

NUMBERS, KEY_VAR, BODIES = PHONE_NUMBERS_VAR, PII_KEY_VAR, SMS_BODIES_VAR
# A key as an operator would mount it: long, random-looking, searchable (SecretSearch).
KEY = "pii-k3y-7f1c9a0e5b2d4c8e9a1b3c5d7e9f0a2b"
# A value a user could paste into the wrong variable: it must never be echoed.
SECRETISH = "s3cr3t-9d8c7b6a5f4e3d2c"
TOKEN = re.compile(r"[0-9a-f]{64}")
INGEST_LIMIT_S = 600.0


def _day(served: ServedSandbox) -> date:
    """A complete day well inside the served sandbox's data."""
    return served.clock.days_ago(4)


def _ingest_argv(day: date, *more: str) -> list[str]:
    return ["ingest", "--start", day.isoformat(), "--end", (day + timedelta(1)).isoformat(), *more]


# --- cdrhouse ingest refuses, in one line, before any run -------------------------------------

REFUSED = {
    # (the privacy variables as set, the words the line must hold, a value it must not echo)
    "neither-set": ({NUMBERS: "", KEY_VAR: ""}, (NUMBERS, KEY_VAR), None),
    "token-without-key": ({NUMBERS: "token", KEY_VAR: ""}, (NUMBERS, KEY_VAR), None),
    "key-without-choice": ({NUMBERS: "", KEY_VAR: KEY}, (NUMBERS, KEY_VAR), KEY),
    "short-key": ({NUMBERS: "token", KEY_VAR: "a-key-of-15-byt"}, (KEY_VAR, "16 bytes"), "15-byt"),
    "bad-choice": ({NUMBERS: SECRETISH, KEY_VAR: KEY}, (NUMBERS, "`token`", "`raw`"), SECRETISH),
    # The API key as the tokens' key: whoever holds the API key could make every token.
    "the-api-key": (
        {NUMBERS: "token", KEY_VAR: f"{DEFAULT_API_KEY}\n"},
        (KEY_VAR, "the same secret as CC_API_KEY"),
        DEFAULT_API_KEY,
    ),
    "bad-sms-bodies": (
        {NUMBERS: "raw", BODIES: SECRETISH},
        (BODIES, "`drop`", "`keep`"),
        SECRETISH,
    ),
}


@pytest.mark.parametrize(
    ("case", "source"),
    [(case, "served") for case in REFUSED]
    # The in-process sandbox needs no key of its own: refused all the same.
    + [("neither-set", "sandbox"), ("token-without-key", "sandbox")],
)
def test_ingest_refuses_in_one_line_naming_the_variables_and_writes_nothing(
    served: ServedSandbox, tmp_path: Path, case: str, source: str
) -> None:
    variables, needles, hidden = REFUSED[case]
    data_dir = tmp_path / "data"
    home = tmp_path / "home"
    home.mkdir()
    (home / "dagster.yaml").write_text(LOCAL_INSTANCE_YAML.read_text())
    pointed = (
        served.env(data_dir)
        if source == "served"
        else {"CC_API_BASE_URL": "sandbox", "CDRHOUSE_DATA_DIR": str(data_dir)}
    )
    env = clean_env(**(pointed | {"DAGSTER_HOME": str(home)} | variables))
    run = run_cdrhouse(_ingest_argv(_day(served)), env)
    line = assert_one_line_setup_error(run, *needles)
    if hidden is not None:
        assert hidden not in line
    assert tree(data_dir) == []
    assert tree(home) == ["dagster.yaml"]  # no run was recorded


# --- the code location loads, its API steps fail naming both ----------------------------------


@pytest.mark.parametrize(
    ("job_name", "partition"), [(CDR_JOB, "day"), (SNAPSHOT_JOB, None)], ids=["cdrs", "snapshots"]
)
def test_the_location_loads_without_the_choice_and_its_api_steps_fail_naming_both(
    served: ServedSandbox,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    job_name: str,
    partition: str | None,
) -> None:
    data_dir = tmp_path / "data"
    env = {k: v for k, v in served.env(data_dir).items() if k != NUMBERS}
    for name in (NUMBERS, KEY_VAR):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():  # the API's EnvVars resolve in the run, from os.environ
        monkeypatch.setenv(name, value)
    defs = defs_from_env(env)  # what `dg dev` loads: no error
    assert defs.get_repository_def().get_job(job_name)
    key = _day(served).isoformat() if partition else None
    with dg.DagsterInstance.ephemeral() as instance:
        result, failures = run_failing_at_once(defs, job_name, key, instance)
    for user in failures:
        message = user.description or ""
        assert "\n" not in message
        assert NUMBERS in message
        assert KEY_VAR in message
        assert user.metadata["error_class"].value == SOURCE_NOT_CONFIGURED
    assert not result.get_asset_materialization_events()
    assert tree(data_dir) == []


# --- token: no number of the API in cdrs, the key in no store -------------------------------


@dataclass(frozen=True)
class TokenIngest:
    day: date
    data_dir: Path
    home: Path
    output: str
    code: int


@pytest.fixture(scope="module")
def token_ingest(served: ServedSandbox, tmp_path_factory: pytest.TempPathFactory) -> TokenIngest:
    root = tmp_path_factory.mktemp("token")
    data_dir, home = root / "data", root / "home"
    home.mkdir()
    (home / "dagster.yaml").write_text(LOCAL_INSTANCE_YAML.read_text())
    env = clean_env(
        **(served.env(data_dir) | {"DAGSTER_HOME": str(home), NUMBERS: "token", KEY_VAR: KEY})
    )
    day = _day(served)
    run = run_cdrhouse(_ingest_argv(day), env, limit_s=INGEST_LIMIT_S)
    return TokenIngest(day, data_dir, home, run.stdout + run.stderr, run.code)


def _api_numbers(served: ServedSandbox, day: date) -> set[str]:
    """Every `from`/`to` phone number of the day, as the API sends them (over HTTP)."""
    start, end = partition_window(day.isoformat())
    numbers: set[str] = set()
    cursor: str | None = None
    with httpx.Client(base_url=served.base_url, timeout=30) as client:
        while True:
            params = {"started_at[gte]": iso_ms(start), "started_at[lt]": iso_ms(end)}
            params |= {"limit": "1000"} | ({"cursor": cursor} if cursor else {})
            page = client.get(
                "/api/v4/reporting/cdrs",
                params=params,
                headers={"Authorization": f"Bearer {DEFAULT_API_KEY}"},
            )
            page.raise_for_status()
            body = page.json()
            for cdr in body["cdrs"]:
                for side in ("from", "to"):
                    number = (cdr.get(side) or {}).get("phone_number")
                    if number:
                        numbers.add(number)
            cursor = body["metadata"].get("next_cursor")
            if not body["cdrs"] or not cursor:
                return numbers


def _sql(data_dir: Path, query: str) -> list[dict[str, str]]:
    run = run_cdrhouse(
        ["sql", "--format", "csv", query],
        clean_env(CDRHOUSE_DATA_DIR=str(data_dir)),
        limit_s=120,
    )
    assert run.code == 0, str(run)
    return list(csv.DictReader(io.StringIO(run.stdout)))


def _token(number: str) -> str:
    """The issue's token: HMAC-SHA256 under the key of the E.164 digits without `+`."""
    return hmac.new(KEY.encode(), number.lstrip("+").encode(), hashlib.sha256).hexdigest()


def test_token_ingest_lands_no_number_of_the_api_in_cdrs_only_their_tokens(
    token_ingest: TokenIngest, served: ServedSandbox
) -> None:
    assert token_ingest.code == 0, token_ingest.output
    numbers = _api_numbers(served, token_ingest.day)
    assert len(numbers) > 10
    rows = _sql(
        token_ingest.data_dir,
        "select from_phone_number, to_phone_number from cdrs "
        f"where started_at::date = '{token_ingest.day}'",
    )
    assert len(rows) == served.api_total(token_ingest.day)
    landed = {r[c] for r in rows for c in ("from_phone_number", "to_phone_number") if r[c]}
    assert landed
    assert not landed & numbers
    assert all(TOKEN.fullmatch(v) for v in landed), sorted(landed)[:5]
    # Every number the API sent is in cdrs, as its keyed token.
    assert {_token(n) for n in numbers} <= landed


def test_the_key_is_nowhere_under_dagster_home_nor_in_the_data_dir(
    token_ingest: TokenIngest,
) -> None:
    assert token_ingest.code == 0, token_ingest.output
    search = SecretSearch(KEY)
    search.path(token_ingest.home, "DAGSTER_HOME")
    search.path(token_ingest.data_dir, "data")
    search.text("stdout and stderr", token_ingest.output)
    print(search.summary())
    # It did read the run storage and the job snapshots inside it (zlib), and the lake.
    assert any(p.name == "runs.db" for p in token_ingest.home.rglob("*"))
    assert search.places["SQLite cells"] > 100
    assert search.blobs > 0
    assert search.places["Parquet columns"] > 0
    search.assert_clean()


# --- accounts: each account's own key variable ------------------------------------------------

ACCOUNTS = """
accounts:
  - id: emea
    base_url: https://emea1.cc.example.com
    api_key_env: CC_KEY_EMEA
    pii_key_env: PII_KEY_EMEA
  - id: lab
    base_url: sandbox
"""


def test_each_account_keys_its_tokens_with_its_own_variable_by_reference(tmp_path: Path) -> None:
    path = tmp_path / "accounts.yaml"
    path.write_text(ACCOUNTS)
    env = {
        "CDRHOUSE_ACCOUNTS_FILE": str(path),
        "CDRHOUSE_DATA_DIR": str(tmp_path / "data"),
        "CC_KEY_EMEA": "k-emea",
        "PII_KEY_EMEA": KEY,
        KEY_VAR: "the-default-accounts-key",
        NUMBERS: "token",
    }
    emea, lab = accounts_from_env(env)
    assert (emea.pii_key_env, lab.pii_key_env) == ("PII_KEY_EMEA", KEY_VAR)
    resources = defs_from_env(env).resources or {}
    for resource_key, variable in (
        ("contact_center__emea", "PII_KEY_EMEA"),
        ("contact_center__lab", KEY_VAR),
    ):
        pii_key = resources[resource_key].pii_key
        # By reference: a value would be saved in every run's job snapshot.
        assert isinstance(pii_key, dg.EnvVar), resource_key
        assert pii_key.env_var_name == variable
        assert resources[resource_key].phone_numbers == "token"


def test_an_accounts_tokens_key_variable_that_is_its_api_keys_is_refused() -> None:
    # As a run reads them: `pii_key_env` naming the variable of the account's API key.
    same = ContactCenterResource(
        base_url="https://emea.cc.example.com",
        api_key=KEY,
        api_key_env="CC_KEY_EMEA",
        account_id="emea",
        phone_numbers="token",
        pii_key=KEY,
        pii_key_env="CC_KEY_EMEA",
    )
    with pytest.raises(dg.Failure) as refused:
        same.check_privacy()
    message = str(refused.value.description)
    assert message.startswith("account emea (pii_key_env CC_KEY_EMEA): CC_KEY_EMEA is also the")
    assert KEY not in message
    # Read, two variables holding one value are the same secret; two values are two secrets.
    read = ContactCenterResource(
        base_url="https://emea.cc.example.com", api_key=KEY, phone_numbers="token", pii_key=KEY
    )
    with pytest.raises(dg.Failure, match="the same secret as CC_API_KEY"):
        read.privacy()
    other = ContactCenterResource(
        base_url="https://emea.cc.example.com", api_key="k-emea", phone_numbers="token", pii_key=KEY
    )
    assert other.privacy().key == KEY.encode()


@pytest.mark.parametrize("value", ["not a name", SECRETISH, "['a']"])
def test_a_bad_pii_key_env_is_one_line_that_never_echoes_it(tmp_path: Path, value: str) -> None:
    path = tmp_path / "accounts.yaml"
    path.write_text(ACCOUNTS.replace("PII_KEY_EMEA", f'"{value}"' if "[" not in value else value))
    with pytest.raises(SettingsError) as refused:
        accounts_from_env({"CDRHOUSE_ACCOUNTS_FILE": str(path), "CC_KEY_EMEA": "k"})
    message = str(refused.value)
    assert "accounts[0] (emea).pii_key_env" in message
    assert "\n" not in message
    assert value not in message


def test_an_accounts_own_key_variable_unset_under_token_is_named_by_ingest(
    served: ServedSandbox, tmp_path: Path
) -> None:
    path = tmp_path / "accounts.yaml"
    path.write_text("accounts:\n  - id: lab\n    base_url: sandbox\n    pii_key_env: PII_KEY_LAB\n")
    data_dir = tmp_path / "data"
    env = clean_env(
        CDRHOUSE_ACCOUNTS_FILE=str(path),
        CDRHOUSE_DATA_DIR=str(data_dir),
        **{NUMBERS: "token", KEY_VAR: KEY},  # the default variable does not key account lab
    )
    run = run_cdrhouse(_ingest_argv(_day(served)), env)
    assert_one_line_setup_error(run, "account lab", "PII_KEY_LAB", NUMBERS)
    assert KEY not in run.stdout + run.stderr
    assert tree(data_dir) == []
