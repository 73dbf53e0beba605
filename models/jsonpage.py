"""A tolerant, byte-exact reader of a JSON list page, for the pages strict parsers refuse.

A page whose *structure* is whole but one record holds a value the fast parsers reject (a
number out of float range such as `1e400`, `NaN`, a byte that is not UTF-8 inside a string, an
array nested 3,000 deep) is still a page: its records can be split and its metadata read. This
module does that with a regex tokenizer over the bytes and an iterative (never recursive)
grammar walk, so no value is built, no byte is decoded and no depth is too deep.

What it accepts: JSON's structure exactly (objects, arrays, commas, colons, string keys, a
complete top-level object); any run of other bytes as a scalar; any bytes inside a string. What
it refuses (`PageSyntaxError`): anything incomplete or out of place, e.g. a truncated body, an
HTML page, an empty body: those are not pages, and a retry may fix them.

Records come back minified (whitespace outside strings dropped, every token as written), the
form `raw_cdrs` keeps: a record the server sent minified comes back as its exact bytes.
Used on both sides of the lake: the client (to page on) and the decoder (to land the records).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

# Whitespace | a string (any bytes but an unescaped quote) | punctuation | any other run (a
# scalar as written). A string uses the unrolled form, linear even for a 40 MB value.
_TOKEN = re.compile(rb'\s+|"[^"\\]*(?:\\.[^"\\]*)*"|[{}\[\]:,]|[^\s{}\[\]:,"]+', re.DOTALL)
_SPACE = frozenset(b" \t\n\r\x0b\x0c")
_OPEN = {b"{": b"}", b"[": b"]"}
_PUNCT = frozenset((b"{", b"}", b"[", b"]", b":", b","))
_NUMBER = re.compile(rb"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")
_LITERALS = frozenset((b"true", b"false", b"null"))


class PageSyntaxError(ValueError):
    """The bytes are not a whole JSON page (truncated, HTML, empty, or no list array)."""


def tokens(text: bytes) -> list[bytes]:
    """The JSON tokens of `text` as written, whitespace dropped; a gap is a PageSyntaxError
    (an unterminated string, typically: the body was cut)."""
    found: list[bytes] = _TOKEN.findall(text)
    # findall skips what no alternative matches: the tokens cover every byte, or there was a gap.
    if sum(map(len, found)) != len(text):
        raise PageSyntaxError("not JSON (an unterminated string, a cut body?)")
    out = [tok for tok in found if tok[0] not in _SPACE]
    if not out:
        raise PageSyntaxError("the body is empty")
    return out


def _at(toks: list[bytes], i: int) -> bytes:
    if i >= len(toks):
        raise PageSyntaxError("the body ends inside a value (truncated?)")
    return toks[i]


def _after_key(toks: list[bytes], i: int) -> int:
    """`toks[i]` must be a string key followed by a colon: the index of the value."""
    if not _at(toks, i).startswith(b'"') or _at(toks, i + 1) != b":":
        raise PageSyntaxError(f"an object key and a colon expected at token {i}")
    return i + 2


def skip_value(toks: list[bytes], i: int) -> int:
    """The index just after the value starting at `toks[i]` (its grammar checked, iteratively)."""
    closers: list[bytes] = []
    while True:
        tok = _at(toks, i)
        if tok in _OPEN:
            if _at(toks, i + 1) == _OPEN[tok]:
                i += 2  # an empty container
            else:
                closers.append(_OPEN[tok])
                i = _after_key(toks, i + 1) if tok == b"{" else i + 1
                continue
        elif tok in _PUNCT:
            raise PageSyntaxError(f"a value expected at token {i}, found {tok!r}")
        else:
            i += 1  # a string or a scalar, as written
        # A value ended: close what it ended, or go on to the next member or element.
        while closers:
            tok = _at(toks, i)
            if tok == closers[-1]:
                closers.pop()
                i += 1
            elif tok == b",":
                i = _after_key(toks, i + 1) if closers[-1] == b"}" else i + 1
                break
            else:
                raise PageSyntaxError(f"',' or {closers[-1]!r} expected at token {i}")
        if not closers:
            return i


def members(toks: list[bytes], i: int = 0) -> tuple[dict[bytes, tuple[int, int]], int]:
    """The members of the object starting at `toks[i]`: raw key token -> (start, end) token
    range of its value, and the index after the object. A repeated key keeps the last value."""
    if _at(toks, i) != b"{":
        raise PageSyntaxError("a JSON object expected")
    out: dict[bytes, tuple[int, int]] = {}
    if _at(toks, i + 1) == b"}":
        return out, i + 2
    i += 1
    while True:
        key = _at(toks, i)
        start = _after_key(toks, i)
        end = skip_value(toks, start)
        out[key] = (start, end)
        tok = _at(toks, end)
        if tok == b"}":
            return out, end + 1
        if tok != b",":
            raise PageSyntaxError(f"',' or '}}' expected at token {end}")
        i = end + 1


def elements(toks: list[bytes], i: int) -> list[tuple[int, int]]:
    """The (start, end) token ranges of the elements of the array starting at `toks[i]`."""
    if _at(toks, i) != b"[":
        raise PageSyntaxError("a JSON array expected")
    out: list[tuple[int, int]] = []
    if _at(toks, i + 1) == b"]":
        return out
    i += 1
    while True:
        end = skip_value(toks, i)
        out.append((i, end))
        tok = _at(toks, end)
        if tok == b"]":
            return out
        if tok != b",":
            raise PageSyntaxError(f"',' or ']' expected at token {end}")
        i = end + 1


@dataclass(frozen=True)
class SplitPage:
    """A page's records (minified, tokens as written) and its other top-level members."""

    records: list[bytes]
    others: dict[str, bytes]  # e.g. "metadata" -> its minified JSON text


def split_page(body: bytes, list_key: str) -> SplitPage:
    """Split a list page into its records, whatever their values hold; `PageSyntaxError` when
    the body is not a whole JSON object with a `list_key` array."""
    toks = tokens(body)
    found, end = members(toks)
    if end != len(toks):
        raise PageSyntaxError(f"bytes after the page's object, at token {end}")
    wanted = b'"' + list_key.encode() + b'"'
    if wanted not in found:
        raise PageSyntaxError(f"the page has no {list_key!r} array")
    start, _ = found.pop(wanted)
    records = [b"".join(toks[a:b]) for a, b in elements(toks, start)]
    others = {
        key[1:-1].decode("utf-8", "replace"): b"".join(toks[a:b]) for key, (a, b) in found.items()
    }
    return SplitPage(records, others)


def record_members(record: bytes) -> dict[str, bytes]:
    """A record's top-level members as raw value texts ({} when it is not a whole object)."""
    try:
        toks = tokens(record)
        found, end = members(toks)
    except PageSyntaxError:
        return {}
    if end != len(toks):
        return {}
    return {
        key[1:-1].decode("utf-8", "replace"): b"".join(toks[a:b]) for key, (a, b) in found.items()
    }


def depth(toks: list[bytes]) -> int:
    """How deep the containers of a value's tokens nest (brackets in strings do not count)."""
    deepest = level = 0
    for tok in toks:
        if tok in _OPEN:
            level += 1
            deepest = max(deepest, level)
        elif tok in (b"}", b"]"):
            level -= 1
    return deepest


def scalars(toks: list[bytes]) -> Iterator[tuple[str, int]]:
    """(path, token index) of every non-string scalar, e.g. ("data.durations.talk", 57)."""
    path: list[str | int] = []
    in_object: list[bool] = []
    expect_key = False
    for index, tok in enumerate(toks):
        if tok in _OPEN:
            in_object.append(tok == b"{")
            path.append("" if tok == b"{" else 0)
            expect_key = tok == b"{"
        elif tok in (b"}", b"]"):
            if in_object:
                in_object.pop()
                path.pop()
        elif tok == b",":
            if in_object and not in_object[-1]:
                step = path[-1]
                path[-1] = step + 1 if isinstance(step, int) else step
            expect_key = bool(in_object and in_object[-1])
        elif tok == b":":
            continue
        elif expect_key:
            path[-1] = tok[1:-1].decode("utf-8", "replace")
            expect_key = False
        elif not tok.startswith(b'"'):
            yield _path_text(path), index


def _path_text(path: list[str | int]) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else part)
    return out or "$"


def is_json_scalar(tok: bytes) -> bool:
    """Whether a non-string scalar token is a JSON number or literal as the grammar has them."""
    return tok in _LITERALS or _NUMBER.fullmatch(tok) is not None
