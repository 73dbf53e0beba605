"""How callers' numbers land (README "Callers' privacy"): the choice and its key, checked.

`CDRHOUSE_PHONE_NUMBERS` is `token` (keyed tokens, `warehouse.privacy`) or `raw` (as the API
sends them); `CDRHOUSE_SMS_BODIES` is `drop` (default) or `keep`. Neither value is ever echoed:
a key pasted into the wrong variable must not reach a log. The key (`CDRHOUSE_PII_KEY`, or an
account's `pii_key_env`) is a secret: like the API key it reaches a run only as a Dagster
`EnvVar` (`pipelines.definitions`), and is read here only to be checked, never kept.

The demo key (`DEMO_PII_KEY`, printed in the Makefile and the README) keys only the bundled
sandbox: under it a real caller's token could be reversed by keying every number.

With neither the choice nor a key set, nothing is ingested: the code location loads, but every
API step fails with `NOT_CHOSEN_MESSAGE` (as without a data source), and `cdrhouse ingest` exits
2 with it before any run. Only the standard library here: the CLI checks before importing more.
"""

from __future__ import annotations

from collections.abc import Mapping

from pipelines.varnames import shown_var
from warehouse.privacy import (
    PHONE_NUMBERS_VAR,
    PII_KEY_VAR,
    SMS_BODIES_VAR,
    PhoneNumbers,
    PrivacyPolicy,
    SmsBodies,
)

__all__ = [
    "DEMO_PII_KEY",
    "PHONE_NUMBERS_VAR",
    "PII_KEY_VAR",
    "SMS_BODIES_VAR",
    "PhoneNumbers",
    "PrivacySettingsError",
    "SmsBodies",
    "phone_numbers_from_env",
    "privacy_policy",
    "privacy_problem",
    "sms_bodies_from_env",
]
PHONE_NUMBERS: tuple[PhoneNumbers, ...] = ("token", "raw")
SMS_BODIES: tuple[SmsBodies, ...] = ("drop", "keep")
# HMAC-SHA256 takes any key, but a short one can be guessed: 16 bytes is 128 bits at best.
MIN_KEY_BYTES = 16
# What `make demo`, `make dev` and `cdrhouse demo` key the sandbox's tokens with: not a secret.
DEMO_PII_KEY = "cdrhouse-demo-key-not-a-secret"


class PrivacySettingsError(ValueError):
    """A privacy variable holds a value cdrhouse cannot use (message: one line, no value)."""


def key_problem(key: str, key_var: str) -> str | None:
    """What is wrong with the key's own text (never shown), or None: bytes the environment
    could not decode as UTF-8, or fewer than `MIN_KEY_BYTES`."""
    key_var = shown_var(key_var)
    try:
        size = len(key.encode("utf-8"))
    except UnicodeEncodeError:
        return f"{key_var} is not UTF-8 text; set it to a secret written in UTF-8"
    if size < MIN_KEY_BYTES:
        return (
            f"{key_var} is shorter than {MIN_KEY_BYTES} bytes: a short key can be guessed; set "
            f"{key_var} to a longer secret"
        )
    return None


def not_chosen_message(key_var: str = PII_KEY_VAR) -> str:
    key_var = shown_var(key_var)
    return (
        f"callers' phone numbers: neither {PHONE_NUMBERS_VAR} nor {key_var} is set: set "
        f"{PHONE_NUMBERS_VAR}=token and {key_var} to a secret of at least {MIN_KEY_BYTES} bytes "
        f"(numbers land as keyed tokens), or {PHONE_NUMBERS_VAR}=raw to land them as the API "
        "sends them"
    )


NOT_CHOSEN_MESSAGE = not_chosen_message()


def _choice(env: Mapping[str, str], name: str, allowed: tuple[str, ...]) -> str | None:
    value = env.get(name, "").strip()
    if not value:
        return None
    if value.lower() not in allowed:
        # Not echoed: it may be the key, set in the wrong variable.
        listed = " or ".join(f"`{a}`" for a in allowed)
        raise PrivacySettingsError(f"{name}: expected {listed} (the value is not shown)")
    return value.lower()


def phone_numbers_from_env(env: Mapping[str, str]) -> PhoneNumbers | None:
    """`token`, `raw`, or None when unset (nothing may be ingested then)."""
    value = _choice(env, PHONE_NUMBERS_VAR, PHONE_NUMBERS)
    return "token" if value == "token" else "raw" if value == "raw" else None


def sms_bodies_from_env(env: Mapping[str, str]) -> SmsBodies:
    return "keep" if _choice(env, SMS_BODIES_VAR, SMS_BODIES) == "keep" else "drop"


def privacy_problem(
    phone_numbers: str | None,
    key: str | None,
    key_var: str,
    *,
    sandbox: bool = False,
    api_key_var: str | None = None,
) -> str | None:
    """Why nothing may be ingested with this choice and key (one line naming the variables,
    never the key), or None. `sandbox`: the source is the bundled sandbox, the only one the
    demo key may key (it is public: a real caller's token under it is reversed by keying
    every number). `api_key_var`: the variable of the API key, when the key is that secret."""
    same_var = api_key_var == key_var
    key_var = shown_var(key_var)
    api_key_var = None if api_key_var is None else shown_var(api_key_var)
    if phone_numbers is None:
        if key:
            return (
                f"callers' phone numbers: {key_var} is set but {PHONE_NUMBERS_VAR} is not: set "
                f"{PHONE_NUMBERS_VAR}=token to land them as keyed tokens (or =raw to land them "
                "as the API sends them)"
            )
        return not_chosen_message(key_var)
    if phone_numbers == "raw":
        return None
    if not key:
        return (
            f"{PHONE_NUMBERS_VAR}=token but {key_var} is not set: set {key_var} to a secret of at "
            f"least {MIN_KEY_BYTES} bytes (or {PHONE_NUMBERS_VAR}=raw)"
        )
    if (problem := key_problem(key, key_var)) is not None:
        return f"{problem} ({PHONE_NUMBERS_VAR}=token)"
    # Stripped: a secret file's trailing newline does not make the public key another one.
    if key.strip() == DEMO_PII_KEY and not sandbox:
        return (
            f"{key_var} is the demo key of `make demo` and `make dev`, which is public: tokens "
            f"of real callers under it can be reversed; set {key_var} to a secret of your own "
            "(the demo key keys only the bundled sandbox, CC_API_BASE_URL=sandbox)"
        )
    if api_key_var is not None and not sandbox:
        same = "is also" if same_var else f"holds the same secret as {api_key_var},"
        return (
            f"{key_var} {same} the API key's variable: whoever holds the API key could make "
            f"every token and reverse it; the tokens' key must be a secret of its own"
        )
    return None


def privacy_policy(
    phone_numbers: str | None,
    key: str | None,
    key_var: str,
    sms_bodies: str,
    *,
    sandbox: bool = False,
    api_key_var: str | None = None,
) -> PrivacyPolicy:
    """The policy of a run; `PrivacySettingsError` (`privacy_problem`) when nothing may land."""
    problem = privacy_problem(phone_numbers, key, key_var, sandbox=sandbox, api_key_var=api_key_var)
    if problem is not None:
        raise PrivacySettingsError(problem)
    bodies: SmsBodies = "keep" if sms_bodies == "keep" else "drop"
    if phone_numbers == "token":
        return PrivacyPolicy("token", key=str(key).encode("utf-8"), sms_bodies=bodies)
    return PrivacyPolicy("raw", sms_bodies=bodies)
