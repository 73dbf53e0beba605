"""The files a command writes for a person (`cdrhouse sql --output`, `cdrhouse report --out`):
checked before any work, then written whole or not at all."""

from __future__ import annotations

import stat
import uuid
from collections.abc import Callable
from pathlib import Path


def out_target(flag: str, out: Path, *, stream_ok: bool = False) -> Path:
    """The file written for `out` (`flag`'s value): a symlink's target (the link stays a
    link), or `out` itself. ValueError for a path that names no file or is a directory. An
    existing device or FIFO (`/dev/stdout`, a named pipe) is written in place when
    `stream_ok`, refused otherwise: renaming a finished file onto it would replace it (as
    root, /dev/full became a regular file)."""
    if not out.name or out.name in {".", ".."}:
        raise ValueError(f"{flag} {str(out)!r} names no file; give a file path")
    target = out.resolve() if out.is_symlink() else out
    if target.exists() and not target.is_file() and (target.is_dir() or not stream_ok):
        raise ValueError(f"{flag} {out} exists and is not a regular file; give a file path")
    # The folders are made as needed: one on the way that is a file failed "File exists".
    folder = next((p for p in target.absolute().parents if p.exists()), None)
    if folder is not None and not folder.is_dir():
        raise ValueError(f"{flag} {out}: {folder} is a file, not a folder; give a file path")
    return target


def write_whole(target: Path, write: Callable[[Path], object]) -> None:
    """Run `write` on a temp file beside `target`, then rename it over `target`: a failed or
    interrupted write (a full disk, an encoding error) leaves the previous file as it was and
    no partial one. A device or FIFO `target` (`out_target(stream_ok=True)`) is written in
    place: it is a stream, not a file to replace."""
    if target.exists() and not target.is_file():
        write(target)
        return
    # An existing file's mode stays (an export kept 0600 must not become world-readable).
    mode = stat.S_IMODE(target.stat().st_mode) if target.is_file() else None
    target.parent.mkdir(parents=True, exist_ok=True)
    # A temp name of its own: two commands writing the same file never share (and mix) one.
    tmp = target.with_name(f".{target.name}.{uuid.uuid4().hex}.tmp")
    try:
        write(tmp)
        if mode is not None:
            tmp.chmod(mode)
        tmp.replace(target)
    finally:
        tmp.unlink(missing_ok=True)
