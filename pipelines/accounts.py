"""Accounts: the contact centers cdrhouse reads, as configuration (README "Several contact
centers").

`CDRHOUSE_ACCOUNTS_FILE` names a YAML file listing them, each with a stable id, its cluster
URL (or `sandbox`), the name of the variable holding its key (never the key), its business
day's time zone and, optionally, the name of the variable holding the key of its callers' tokens
(`pii_key_env`, default `CDRHOUSE_PII_KEY`; README "Callers' privacy"). Without the file,
`CC_API_BASE_URL` and `CC_API_KEY` define one account, `default`, exactly as before accounts
existed; with neither, there are no accounts and nothing runs.

Every problem is one line that names the file, the entry and the field (`SettingsError`): the
CLI exits 2 with it, the code location shows it instead of loading.
"""

from __future__ import annotations

import re
import stat
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pipelines.kpi_settings import SettingsError, known_timezone
from pipelines.preflight import SANDBOX, is_sandbox
from pipelines.varnames import shown_var, usual_var

ACCOUNTS_FILE_VAR = "CDRHOUSE_ACCOUNTS_FILE"
BASE_URL_VAR = "CC_API_BASE_URL"
API_KEY_VAR = "CC_API_KEY"
TIMEZONE_VAR = "CDRHOUSE_TIMEZONE"
DEFAULT_ACCOUNT = "default"
# Part of every row and lake path: lower-case, so a path never differs from the id by case.
ACCOUNT_ID = re.compile(r"[a-z0-9_]{1,63}")
# Why a key variable's name is refused (the value is never shown).
NOT_A_NAME = (
    "not shown, and not taken: give the NAME of the variable, in capitals, digits and "
    "underscores, each part at most 16 characters (e.g. CC_API_KEY_EMEA): a value of another "
    "shape could be a key pasted by mistake"
)
FIELDS = ("id", "base_url", "api_key_env", "timezone", "pii_key_env")
# The variable holding the key of the callers' tokens (pipelines.privacy_settings.PII_KEY_VAR).
PII_KEY_VAR = "CDRHOUSE_PII_KEY"
# A file past this is not an accounts list (a wrong path pointing at a dump, say).
MAX_FILE_BYTES = 1 << 20


@dataclass(frozen=True)
class Account:
    """One contact center. `api_key_env` is None only for `sandbox` (the emulator needs no key);
    `pii_key_env` names the variable keying its callers' tokens."""

    id: str
    base_url: str
    api_key_env: str | None
    timezone: str
    pii_key_env: str = PII_KEY_VAR

    @property
    def is_sandbox(self) -> bool:
        return is_sandbox(self.base_url)

    def api_key(self, env: Mapping[str, str]) -> str | None:
        """The key, read where it is used (a run process), never kept."""
        return env.get(self.api_key_env) or None if self.api_key_env else None


def accounts_from_env(env: Mapping[str, str], *, require_keys: bool = True) -> tuple[Account, ...]:
    """The configured accounts, in file order; () when no source is configured at all.

    `require_keys`: a key variable named by the file but unset is an error (the CLI, before it
    runs anything); a code location passes False, so one account's missing secret fails only
    that account's runs, not the whole location."""
    path = env.get(ACCOUNTS_FILE_VAR, "").strip()
    default_zone = env.get(TIMEZONE_VAR, "").strip() or "UTC"
    if not path:
        base_url = env.get(BASE_URL_VAR, "").strip()
        if not base_url:
            return ()
        key_env = None if is_sandbox(base_url) else API_KEY_VAR
        return (Account(DEFAULT_ACCOUNT, base_url, key_env, default_zone),)
    if env.get(BASE_URL_VAR, "").strip():
        raise SettingsError(
            f"{ACCOUNTS_FILE_VAR} and {BASE_URL_VAR} are both set: the accounts file lists every "
            f"source; unset {BASE_URL_VAR} (or give it as an account's base_url)"
        )
    entries = _read(Path(path))
    accounts = tuple(
        _account(path, i, entry, env, default_zone, require_keys) for i, entry in enumerate(entries)
    )
    seen: dict[str, int] = {}
    for i, account in enumerate(accounts):
        if account.id in seen:
            raise SettingsError(
                f"{path}: accounts[{i}].id {account.id!r} is already the id of "
                f"accounts[{seen[account.id]}]; ids must be unique"
            )
        seen[account.id] = i
    return accounts


def select(accounts: Sequence[Account], ids: Sequence[str]) -> tuple[Account, ...]:
    """The accounts named by `ids` (all when empty), in configuration order."""
    if not ids:
        return tuple(accounts)
    known = {a.id for a in accounts}
    unknown = [i for i in ids if i not in known]
    if unknown:
        listed = ", ".join(sorted(known)) or "none"
        raise SettingsError(f"unknown account {unknown[0]!r}; the configured ones: {listed}")
    return tuple(a for a in accounts if a.id in set(ids))


def _read(path: Path) -> list[Any]:
    import yaml  # PyYAML (a Dagster dependency): safe_load builds plain data, never objects

    where = f"{ACCOUNTS_FILE_VAR}={str(path)!r}"
    try:
        # A FIFO would block the read and /dev/zero never end it (their size says 0).
        if path.exists() and not stat.S_ISREG(path.stat().st_mode):
            raise SettingsError(f"{where}: not a regular file")
        with path.open("rb") as file:
            raw = file.read(MAX_FILE_BYTES + 1)
        size = len(raw)
        text = raw.decode("utf-8") if size <= MAX_FILE_BYTES else ""
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else "not UTF-8 text"
        raise SettingsError(f"{where}: cannot be read ({reason})") from None
    if size > MAX_FILE_BYTES:
        raise SettingsError(f"{where}: over {MAX_FILE_BYTES} bytes, not an accounts file")
    try:
        # A SafeLoader subclass: plain data only, as safe_load builds.
        data = yaml.load(text, Loader=_unique_keys_loader())  # noqa: S506
    except _DuplicateKey as exc:
        raise SettingsError(f"{where}: {exc}") from None
    except RecursionError:
        raise SettingsError(f"{where}: not valid YAML (nested too deep)") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f" at line {mark.line + 1}" if mark is not None else ""
        raise SettingsError(f"{where}: not valid YAML{at}") from None
    if not isinstance(data, dict) or set(data) != {"accounts"}:
        raise SettingsError(f"{where}: expected one top-level key, `accounts:`, with a list")
    entries = data["accounts"]
    if not isinstance(entries, list) or not entries:
        raise SettingsError(f"{path}: `accounts:` must be a non-empty list")
    return entries


class _DuplicateKey(Exception):
    pass


def _unique_keys_loader() -> type[Any]:
    """PyYAML's safe loader, refusing a key given twice in one mapping: `safe_load` keeps the
    last silently, so a second `base_url:` pasted below the first would send the account's
    key to another cluster than the one the reader of the file sees first."""
    import yaml

    class UniqueKeysLoader(yaml.SafeLoader):  # type: ignore[misc]  # PyYAML has no stubs here
        def construct_mapping(self, node: Any, deep: bool = False) -> Any:
            seen: set[Any] = set()
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":
                    continue  # `<<:` merges; a key set next to it overrides, as YAML says
                key = self.construct_object(key_node, deep=True)
                if isinstance(key, Hashable) and key in seen:
                    line = key_node.start_mark.line + 1
                    raise _DuplicateKey(f"line {line}: the key {key!r} is given twice")
                if isinstance(key, Hashable):
                    seen.add(key)
            return super().construct_mapping(node, deep)

    return UniqueKeysLoader


def _account(
    path: str,
    index: int,
    entry: Any,
    env: Mapping[str, str],
    default_zone: str,
    require_keys: bool,
) -> Account:
    at = f"{path}: accounts[{index}]"
    if not isinstance(entry, dict):
        raise SettingsError(f"{at}: expected a mapping with {', '.join(FIELDS)}")
    unknown = sorted(str(k) for k in entry if k not in FIELDS)
    if unknown:
        raise SettingsError(f"{at}: unknown field {unknown[0]!r} (fields: {', '.join(FIELDS)})")
    account_id = entry.get("id")
    if not isinstance(account_id, str):
        # Not echoed: the repr of a tree of YAML aliases grows without bound.
        raise SettingsError(f"{at}.id: expected a string of 1-63 of a-z, 0-9 and _")
    if not ACCOUNT_ID.fullmatch(account_id):
        raise SettingsError(
            f"{at}.id {account_id!r}: expected 1-63 of a-z, 0-9 and _ (it is part of every row "
            "and lake path)"
        )
    at = f"{path}: accounts[{index}] ({account_id})"
    base_url = entry.get("base_url")
    if not isinstance(base_url, str) or not base_url.strip():
        raise SettingsError(f"{at}.base_url: missing; a cluster URL or `{SANDBOX}`")
    key_env = entry.get("api_key_env")
    sandbox = is_sandbox(base_url)
    if key_env is None and not sandbox:
        raise SettingsError(f"{at}.api_key_env: missing; the variable that holds its API key")
    if key_env is not None and (not isinstance(key_env, str) or not usual_var(key_env)):
        # Not echoed, nor kept (Dagster stores a resource's variable names): a key pasted here
        # by mistake must reach no log and no store.
        raise SettingsError(f"{at}.api_key_env: {NOT_A_NAME}, never the key")
    if not sandbox:
        problem = _url_problem(base_url.strip())
        if problem is not None:
            raise SettingsError(f"{at}.base_url: {problem}")
    if require_keys and key_env is not None and not env.get(key_env):
        raise SettingsError(f"{at}.api_key_env: {shown_var(key_env)} is not set")
    pii_key_env = entry.get("pii_key_env", PII_KEY_VAR)
    if not isinstance(pii_key_env, str) or not usual_var(pii_key_env):
        # Not echoed, nor kept, as api_key_env.
        raise SettingsError(f"{at}.pii_key_env: {NOT_A_NAME}, never the tokens' key")
    zone = entry.get("timezone", default_zone)
    if not isinstance(zone, str):
        raise SettingsError(f"{at}.timezone: expected a string, an IANA time zone name")
    if not known_timezone(zone):
        raise SettingsError(
            f"{at}.timezone {zone!r}: not an IANA time zone; use a name like UTC, "
            "Europe/Berlin or Australia/Sydney"
        )
    return Account(account_id, base_url.strip(), key_env, zone, pii_key_env)


def _url_problem(value: str) -> str | None:
    """What makes `value` unusable as a cluster URL; the value itself is never echoed (a key
    pasted into the wrong field must not reach a log)."""
    from connectors.contact_center.settings import base_url_problem, looks_like_url

    if not looks_like_url(value):
        return f"neither a URL nor `{SANDBOX}`; set https://<cluster_id>.<service_domain>"
    return base_url_problem(value)
