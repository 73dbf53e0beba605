"""The accounts configuration (`CDRHOUSE_ACCOUNTS_FILE`, or the one-account variables): what
it yields, and the one line each bad file gives (issue 25)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from pipelines.accounts import (
    ACCOUNTS_FILE_VAR,
    DEFAULT_ACCOUNT,
    Account,
    accounts_from_env,
    select,
)
from pipelines.kpi_settings import SettingsError

THREE = """\
accounts:
  - id: emea                 # a comment, as in the README's example
    base_url: https://emea1.cc.example.com
    api_key_env: CC_API_KEY_EMEA
    timezone: Europe/Berlin
  - id: apac
    base_url: https://apac1.cc.example.com
    api_key_env: CC_API_KEY_APAC
    timezone: Australia/Sydney
  - id: lab_2
    base_url: sandbox
"""
KEYS = {"CC_API_KEY_EMEA": "sk-emea-0123456789", "CC_API_KEY_APAC": "sk-apac-0123456789"}


def _file(tmp_path: Path, text: str) -> dict[str, str]:
    path = tmp_path / "accounts.yaml"
    path.write_text(text)
    return {ACCOUNTS_FILE_VAR: str(path), **KEYS}


def _error(env: dict[str, str], **kw: bool) -> str:
    with pytest.raises(SettingsError) as caught:
        accounts_from_env(env, **kw)
    message = str(caught.value)
    assert "\n" not in message, message
    return message


def test_the_file_lists_the_accounts_in_order(tmp_path: Path) -> None:
    env = {**_file(tmp_path, THREE), "CDRHOUSE_TIMEZONE": "America/New_York"}
    accounts = accounts_from_env(env)
    assert accounts == (
        Account("emea", "https://emea1.cc.example.com", "CC_API_KEY_EMEA", "Europe/Berlin"),
        Account("apac", "https://apac1.cc.example.com", "CC_API_KEY_APAC", "Australia/Sydney"),
        # No zone: CDRHOUSE_TIMEZONE's; a sandbox needs no key.
        Account("lab_2", "sandbox", None, "America/New_York"),
    )
    assert [a.api_key(env) for a in accounts] == [*KEYS.values(), None]
    assert [a.is_sandbox for a in accounts] == [False, False, True]
    # The file names variables; it holds no key, and an Account holds none either.
    assert all(key not in repr(accounts) for key in KEYS.values())


def test_without_the_file_the_two_variables_are_the_default_account() -> None:
    url = "https://acme.cc.example.com"
    (account,) = accounts_from_env({"CC_API_BASE_URL": url, "CC_API_KEY": "sk-x"})
    assert account == Account(DEFAULT_ACCOUNT, url, "CC_API_KEY", "UTC")
    (sandbox,) = accounts_from_env({"CC_API_BASE_URL": "sandbox"})
    assert sandbox == Account(DEFAULT_ACCOUNT, "sandbox", None, "UTC")
    # No source at all: no account, so nothing runs (not the sandbox).
    assert accounts_from_env({}) == ()
    assert accounts_from_env({"CC_API_BASE_URL": " ", ACCOUNTS_FILE_VAR: ""}) == ()


def test_a_duplicate_id_names_both_entries(tmp_path: Path) -> None:
    text = THREE.replace("id: apac", "id: emea")
    message = _error(_file(tmp_path, text))
    assert "accounts[1].id 'emea'" in message
    assert "accounts[0]" in message


def test_a_missing_key_variable_names_the_entry_and_the_variable(tmp_path: Path) -> None:
    env = _file(tmp_path, THREE)
    del env["CC_API_KEY_APAC"]
    message = _error(env)
    assert "accounts[1] (apac).api_key_env" in message
    assert "CC_API_KEY_APAC is not set" in message
    # A code location loads anyway: only that account's runs will fail.
    assert [a.id for a in accounts_from_env(env, require_keys=False)] == ["emea", "apac", "lab_2"]
    env["CC_API_KEY_APAC"] = ""  # empty is unset
    assert "CC_API_KEY_APAC is not set" in _error(env)


def test_an_unknown_time_zone_names_the_entry(tmp_path: Path) -> None:
    message = _error(_file(tmp_path, THREE.replace("Australia/Sydney", "Mars/Olympus")))
    assert "accounts[1] (apac).timezone 'Mars/Olympus'" in message
    # The machine's own zone means different things on different machines.
    assert "localtime" in _error(_file(tmp_path, THREE.replace("Europe/Berlin", "localtime")))


@pytest.mark.parametrize(
    ("old", "new", "needle"),
    [
        ("id: lab_2", "id: Lab-2", "accounts[2].id 'Lab-2'"),
        ("    api_key_env: CC_API_KEY_EMEA\n", "", "accounts[0] (emea).api_key_env: missing"),
        ("api_key_env: CC_API_KEY_EMEA", "api_key_var: X", "unknown field 'api_key_var'"),
        ("https://apac1.cc.example.com", "ftp://apac1", "accounts[1] (apac).base_url"),
        ("https://apac1.cc.example.com", "http://apac1.example.com", "HTTPS is required"),
        ("base_url: sandbox", "base_url: ''", "accounts[2] (lab_2).base_url: missing"),
    ],
)
def test_each_bad_field_is_named(tmp_path: Path, old: str, new: str, needle: str) -> None:
    assert old in THREE
    assert needle in _error(_file(tmp_path, THREE.replace(old, new)))


def test_a_key_pasted_into_the_file_is_never_echoed(tmp_path: Path) -> None:
    key = "sk-live-Zq9ExAmPlE0123456789"
    as_name = _error(_file(tmp_path, THREE.replace("CC_API_KEY_EMEA", f'"{key} "')))
    as_url = _error(_file(tmp_path, THREE.replace("https://apac1.cc.example.com", key)))
    in_url = _error(_file(tmp_path, THREE.replace("https://apac1.", f"https://user:{key}@apac1.")))
    for message in (as_name, as_url, in_url):
        assert key not in message
        assert key[3:12] not in message, message


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("accounts: [", "not valid YAML at line"),
        ("- id: emea\n", "one top-level key, `accounts:`"),
        ("accounts: []\n", "non-empty list"),
        ("accounts:\n  - emea\n", "accounts[0]: expected a mapping"),
        ("accounts: !!python/object/apply:os.system ['true']\n", "not valid YAML"),
        # safe_load keeps the last of two equal keys, silently: the account's key would go to
        # the second URL while a reader of the file sees the first.
        (
            "accounts:\n  - id: emea\n    base_url: sandbox\n"
            "    base_url: https://other.example.com\n",
            "accounts.yaml': line 4: the key 'base_url' is given twice",
        ),
        ("accounts:\n  - id: emea\naccounts:\n  - id: apac\n", "line 3: the key 'accounts'"),
    ],
)
def test_a_malformed_file_is_one_line(tmp_path: Path, text: str, needle: str) -> None:
    assert needle in _error(_file(tmp_path, text))


def test_an_anchor_merged_into_entries_is_not_a_key_given_twice(tmp_path: Path) -> None:
    shared = (
        "accounts:\n"
        "  - &lab {id: lab_1, base_url: sandbox, timezone: Europe/Berlin}\n"
        "  - <<: *lab\n"
        "    id: lab_2\n"
    )
    first, second = accounts_from_env(_file(tmp_path, shared))
    assert (first.id, second.id) == ("lab_1", "lab_2")
    assert second.timezone == "Europe/Berlin"


def test_an_unreadable_file_and_a_second_source_are_refused(tmp_path: Path) -> None:
    missing = {ACCOUNTS_FILE_VAR: str(tmp_path / "nope.yaml")}
    assert "cannot be read (No such file or directory)" in _error(missing)
    both = {**_file(tmp_path, THREE), "CC_API_BASE_URL": "sandbox"}
    assert "both set" in _error(both)


def test_select_keeps_the_configured_order_and_refuses_an_unknown_id(tmp_path: Path) -> None:
    accounts = accounts_from_env(_file(tmp_path, THREE))
    assert [a.id for a in select(accounts, ["lab_2", "emea"])] == ["emea", "lab_2"]
    assert select(accounts, []) == accounts
    with pytest.raises(SettingsError, match="unknown account 'emae'; the configured ones: apac"):
        select(accounts, ["emae"])


def test_the_default_account_and_the_id_rule_are_the_lakes() -> None:
    """`pipelines.accounts` stays free of polars/pyarrow (the CLI reads it before any heavy
    import), so it repeats two names of `warehouse.lake`: they must not drift apart."""
    from pipelines import accounts
    from warehouse import lake

    assert accounts.DEFAULT_ACCOUNT == lake.DEFAULT_ACCOUNT
    assert accounts.ACCOUNT_ID.pattern == lake.ACCOUNT_ID.pattern


def test_a_fifo_or_a_device_is_refused_without_reading_it(tmp_path: Path) -> None:
    # Their size says 0: a FIFO blocked the read forever, /dev/zero filled the memory.
    fifo = tmp_path / "accounts.fifo"
    os.mkfifo(fifo)
    for path in (str(fifo), "/dev/zero"):
        assert "not a regular file" in _error({ACCOUNTS_FILE_VAR: path})


def test_yaml_nested_too_deep_is_one_line(tmp_path: Path) -> None:
    # PyYAML recurses per level: a RecursionError traceback before.
    message = _error(_file(tmp_path, "accounts:\n  - id: " + "[" * 5000 + "]" * 5000 + "\n"))
    assert "nested too deep" in message


def test_an_id_made_of_aliases_is_refused_at_once(tmp_path: Path) -> None:
    # 9 levels of 9 aliases: its repr would be 9**9 strings; the error names the field only.
    levels = ["&l0 [" + ", ".join(['"lol"'] * 9) + "]"]
    levels += [f"&l{i} [" + ", ".join([f"*l{i - 1}"] * 9) + "]" for i in range(1, 9)]
    text = "accounts:\n  - id: [" + ", ".join(levels) + "]\n    base_url: sandbox\n"
    began = time.monotonic()
    message = _error(_file(tmp_path, text))
    assert "accounts[0].id: expected a string" in message
    assert len(message) < 300
    assert time.monotonic() - began < 5


# A key pasted where a variable's name goes: letters and digits, a valid name by the rules of
# the shell, so only its shape tells it from a name.
PASTED = "SKLIVEsecretABCDEFGH1234567890"


def test_a_key_pasted_as_a_variable_name_is_never_echoed(tmp_path: Path) -> None:
    from pipelines.privacy_settings import privacy_problem

    env = _file(tmp_path, THREE.replace("api_key_env: CC_API_KEY_APAC", f"api_key_env: {PASTED}"))
    message = _error(env)
    assert "accounts[1] (apac).api_key_env" in message
    assert "not shown" in message
    assert PASTED not in message
    for key_var in (PASTED, "AKIAIOSFODNN7EXAMPLE", "cc_key_lower"):
        for choice, key in ((None, ""), ("token", ""), ("token", "short"), (None, "x" * 20)):
            problem = privacy_problem(choice, key, key_var, api_key_var=key_var)
            assert problem is not None
            assert key_var not in problem, problem
    # A name written as names are is shown, as before.
    problem = privacy_problem("token", "", "CC_PII_KEY_EMEA")
    assert problem is not None
    assert "CC_PII_KEY_EMEA is not set" in problem
