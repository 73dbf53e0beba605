"""How a key variable's name is shown: only the standard library here, as `cdrhouse`'s usage
errors import nothing heavy (`tests/pipelines/test_cli_startup.py`)."""

from __future__ import annotations

import re

# A variable's name as names are usually written (CC_API_KEY_EMEA): shown in messages. Anything
# else where a name is expected (an accounts file's `api_key_env`, `pii_key_env`) may be a key
# pasted by mistake, letters and digits only, which no rule can tell from a name.
_USUAL_NAME = re.compile(r"[A-Z][A-Z0-9]{0,15}(?:_[A-Z0-9]{1,15}){0,7}")


def usual_var(name: str) -> bool:
    return _USUAL_NAME.fullmatch(name) is not None


def shown_var(name: str) -> str:
    """`name` for a message, when it looks like a variable's name; else not shown."""
    if usual_var(name):
        return name
    return "the variable the accounts file names (not shown: it could be a key)"
