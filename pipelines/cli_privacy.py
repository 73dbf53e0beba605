"""`cdrhouse privacy forget`: erase one person from the lake (issue 26, `warehouse.erasure`).

`cdrhouse privacy forget NUMBER` computes the number's token under the key (as a day landing
does: `warehouse.privacy.phone_token`, whatever the number's written form); `--token HEX` names
the token itself (a customer's name or identifier token, or a number's when the number is no
longer known). In each account of the lake (every one by default, `--account ID` for some),
the token goes on the forget-list and every partition holding it is rewritten without it.

The number is never printed, logged or stored: only the token's first characters are shown.
The key is the one the account's days landed under, as the ingest reads it: the variable its
`pii_key_env` names in the accounts file, `CDRHOUSE_PII_KEY` otherwise.

Like the module it is called from, only the standard library at module level: the parser is
built for every `cdrhouse` command.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from pipelines.cli_ingest import CliError

if TYPE_CHECKING:
    from pipelines.accounts import Account
    from warehouse.erasure import ForgetResult
    from warehouse.lake import Lake

PII_KEY_VAR = "CDRHOUSE_PII_KEY"  # as warehouse.privacy.PII_KEY_VAR (not imported: polars)
SHOWN_HEX = 12  # the token's characters printed: enough to tell tokens apart, not to use one
# E.164: at most 15 digits; fewer than 7 is no subscriber number anywhere.
MIN_DIGITS, MAX_DIGITS = 7, 15
_SEPARATORS = " -().\u00a0/"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="privacy_command", required=True)
    forget = sub.add_parser(
        "forget",
        help="erase a person: their token becomes null in every partition that holds it, and "
        "a later re-pull of the day honours it (the forget-list)",
    )
    forget.add_argument(
        "number",
        nargs="*",  # `+49 151 …` unquoted is one number (and argparse never echoes a part)
        help="the phone number, in any international form (+49 151 …, 0049151…, 49151…); "
        f"its token is computed with {PII_KEY_VAR}",
    )
    forget.add_argument("--token", help="the token itself (64 hex characters), instead of a number")
    forget.add_argument(
        "--account",
        action="append",
        default=[],
        metavar="ID",
        help="only this account's lake (repeatable; default: every account of the lake)",
    )


def number_problem(number: str) -> str | None:
    """What makes `number` unusable (the number itself is never part of the answer)."""
    text = number.strip()
    digits = text.translate(str.maketrans("", "", _SEPARATORS))
    international = digits.startswith(("+", "00"))
    digits = digits.removeprefix("+")
    if not digits.isdigit() or not digits.isascii():
        return "NUMBER is not a phone number (digits, optionally +, spaces, dashes)"
    if not international and digits.startswith("0"):
        return (
            "NUMBER is in national form (leading 0); write it with its country code "
            "(+49 151 …, or 0049 151 …)"
        )
    size = len(digits.removeprefix("00")) if international else len(digits)
    if not MIN_DIGITS <= size <= MAX_DIGITS:
        return f"NUMBER has {size} digits; an international number has {MIN_DIGITS} to {MAX_DIGITS}"
    return None


def _token_arg(token: str) -> str:
    value = token.strip().lower()
    if len(value) != 64 or any(c not in "0123456789abcdef" for c in value):
        raise CliError("--token must be 64 hex characters (a token, as the lake holds it)")
    return value


def _account_ids(root: Lake, env: Mapping[str, str], ids: Sequence[str]) -> list[str]:
    """The accounts to erase from: those named (each must hold data in the lake or be
    configured), or every account of the lake and `default`."""
    from warehouse.lake import ACCOUNT_ID, DEFAULT_ACCOUNT

    in_lake = [DEFAULT_ACCOUNT, *(a for a in root.accounts() if a != DEFAULT_ACCOUNT)]
    if not ids:
        return in_lake
    known = set(in_lake) | {a.id for a in _configured(env)}
    chosen: list[str] = []
    for account in ids:
        if not ACCOUNT_ID.fullmatch(account):
            raise CliError(f"--account {account!r}: expected 1-63 of a-z, 0-9 and _")
        if account not in known:
            listed = ", ".join(sorted(known))
            raise CliError(
                f"--account {account}: no such account in the lake at {root.uri} nor in the "
                f"accounts file (known: {listed})"
            )
        if account not in chosen:
            chosen.append(account)
    return chosen


def _configured(env: Mapping[str, str]) -> tuple[Account, ...]:
    """The accounts file's accounts ((): none configured)."""
    from pipelines.accounts import ACCOUNTS_FILE_VAR, accounts_from_env
    from pipelines.kpi_settings import SettingsError

    if not env.get(ACCOUNTS_FILE_VAR, "").strip():
        return ()
    try:
        return accounts_from_env(env, require_keys=False)
    except SettingsError as exc:
        raise CliError(str(exc)) from None


def _key_var(env: Mapping[str, str], account: str) -> str:
    """The variable holding the account's key: its own if the accounts file names one."""
    for configured in _configured(env):
        if configured.id == account and configured.pii_key_env:
            return configured.pii_key_env
    return PII_KEY_VAR


def _tokens(
    args: argparse.Namespace, env: Mapping[str, str], accounts: list[str]
) -> list[tuple[str, str | None]]:
    """The token to erase in each account, with the check of the key that made it (None for
    `--token`); every check before anything is written."""
    number = " ".join(args.number)
    if bool(number) == (args.token is not None):
        raise CliError("give exactly one of NUMBER and --token")
    if args.token is not None:
        return [(_token_arg(args.token), None)] * len(accounts)
    if (problem := number_problem(number)) is not None:
        raise CliError(problem)
    keys = []
    for account in accounts:
        var = _key_var(env, account)
        key = env.get(var, "")
        if not key:
            from pipelines.varnames import shown_var

            who = "" if account == "default" else f" (account {account})"
            raise CliError(
                f"{shown_var(var)} is not set{who}: the token of a number is keyed by it; set "
                "it to the key the lake was landed with, or give --token"
            )
        from pipelines.privacy_settings import key_problem

        if (problem := key_problem(key, var)) is not None:
            raise CliError(problem)
        keys.append(key.encode())
    from warehouse.privacy import PrivacyPolicy, phone_token

    return [(phone_token(key, number), PrivacyPolicy("token", key).key_check) for key in keys]


# How often a long erasure says where it is (a year of days is thousands of partitions).
PROGRESS_EVERY_S = 10.0


@dataclass
class ScanProgress:
    """`forget`'s progress on stderr, at most once every `every` seconds: which account and
    table it is scanning, and how far into that table."""

    account: str
    every: float = PROGRESS_EVERY_S
    out: TextIO = field(default_factory=lambda: sys.stderr)
    clock: Callable[[], float] = time.monotonic
    _last: float | None = None

    def __call__(self, table: str, done: int, total: int) -> None:
        now = self.clock()
        if self._last is None:
            self._last = now  # the first line after `every` seconds: short erasures say nothing
        if now - self._last < self.every:
            return
        self._last = now
        print(
            f"cdrhouse privacy forget: account {self.account}: {table}, {done} of {total} "
            "partitions scanned",
            file=self.out,
            flush=True,
        )


def _print(account: str, token: str, result: ForgetResult) -> None:
    print(f"account {account}: token {token[:SHOWN_HEX]}…")
    for table, done in result.tables.items():
        rejected = f" ({done.rejected} of them rejected copies)" if done.rejected else ""
        print(f"  {table:<20} {done.rows} rows in {done.partitions} partitions changed{rejected}")


def run(
    args: argparse.Namespace, env: Mapping[str, str], data_dir: Path, lake_uri: str | None
) -> int:
    """Entry point of `cdrhouse privacy`; CliError (exit 2) before anything is written."""
    from warehouse.duck import build_warehouse, default_lake_uri
    from warehouse.erasure import PartitionMoved, forget
    from warehouse.lake import Lake, LakeKeyConflict

    root = Lake(lake_uri or default_lake_uri(data_dir))
    if not root.accounts():
        # A mistyped data dir or lake: "0 rows changed" would read as an erasure done.
        raise CliError(
            f"no data in the lake at {root.uri}: nothing to erase; check CDRHOUSE_DATA_DIR "
            "and CDRHOUSE_LAKE_URI name the lake the person's days landed in"
        )
    accounts = _account_ids(root, env, args.account)
    tokens = _tokens(args, env, accounts)
    footers = {}  # each account's days, read once: checked here, then by the erasure
    for account, (_, key_check) in zip(accounts, tokens, strict=True):
        lake = root.account(account)
        footers[account] = lake.day_footers()
        lake.forgotten()  # a damaged forget-list (ForgetListDamaged) refuses here, too
        try:  # every account's key first: a refusal writes nothing, in any account
            lake.check_key(key_check, footers[account])
        except LakeKeyConflict as exc:
            raise CliError(str(exc)) from None
    rows = partitions = 0
    clear: list[str] = []  # accounts with days whose numbers are in clear
    for account, (token, key_check) in zip(accounts, tokens, strict=True):
        try:
            result = forget(
                root.account(account),
                token,
                key_check,
                footers[account],
                progress=ScanProgress(account),
            )
        except (OSError, PartitionMoved) as exc:
            why = (
                f"{type(exc).__name__}: {exc.strerror or exc}"
                if isinstance(exc, OSError)
                else str(exc)
            )
            print(
                f"cdrhouse privacy forget: error: account {account}: {why}; the partitions "
                "rewritten so far stay so, and the token is on the forget-list: run the command "
                "again to rewrite the others",
                file=sys.stderr,
            )
            return 1
        except KeyboardInterrupt:
            print(
                f"cdrhouse privacy forget: interrupted in account {account}: the token is on "
                "the forget-list and the partitions rewritten so far stay so; others may still "
                "hold it: run the command again to rewrite them",
                file=sys.stderr,
            )
            raise
        _print(account, token, result)
        rows += result.rows
        partitions += result.partitions
        if result.clear_days:
            days = result.clear_days
            shown = days[0] if len(days) == 1 else f"{days[0]} to {days[-1]}"
            clear.append(f"account {account}: {len(days)} day(s) ({shown})")
    print(f"total: {rows} rows in {partitions} partitions changed")
    if partitions:
        # The views read the files again anyway; a partition that gained `pii_forgotten`
        # changes which columns they take from the files (`Lake.file_columns`).
        build_warehouse(data_dir, root.uri)
    if clear:
        # Erased where tokens are; not where the number itself is: not done, so not 0.
        print(
            "cdrhouse privacy forget: incomplete: "
            + "; ".join(clear)
            + " were landed with CDRHOUSE_PHONE_NUMBERS=raw and hold numbers in clear, which "
            "a token erasure cannot find; ingest those days again under token: they land "
            "with this person erased (the forget-list)",
            file=sys.stderr,
        )
        return 1
    return 0
