"""A real small filesystem, for what a full disk does to a command (mounting needs root, which
CI has; elsewhere the test is skipped, or fails under CDRHOUSE_REQUIRE_SERVICES)."""

from __future__ import annotations

import contextlib
import errno
import os
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

SIZE = "1m"
FILLER = "filler"


@contextlib.contextmanager
def small_filesystem(free_bytes: int) -> Iterator[Path]:
    """A 1 MiB tmpfs with `free_bytes` left free (a filler file takes the rest)."""
    mount_point = Path(tempfile.mkdtemp(prefix="cdrhouse-small-fs-"))
    result = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={SIZE},mode=0755", "tmpfs", str(mount_point)],
        capture_output=True,
        text=True,
        check=False,
    )
    if result.returncode != 0:
        mount_point.rmdir()
        message = f"cannot mount a small tmpfs ({result.stderr.strip() or 'not root'})"
        if os.environ.get("CDRHOUSE_REQUIRE_SERVICES"):  # set by .ci/run, which runs as root
            pytest.fail(message)
        pytest.skip(f"{message}: run as root (CI does) to test a full disk")
    try:
        _fill(mount_point / FILLER, free_bytes)
        yield mount_point
    finally:
        subprocess.run(["umount", "-l", str(mount_point)], check=False)
        mount_point.rmdir()


def _fill(path: Path, leave: int) -> None:
    """Write until the filesystem is full, then free `leave` bytes again."""
    block = b"\0" * 4096
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        size = 0
        with pytest.raises(OSError) as full:  # noqa: PT012 - the loop ends only this way
            while True:
                size += os.write(fd, block)
        assert full.value.errno == errno.ENOSPC, full.value
        os.ftruncate(fd, max(0, size - leave))
    finally:
        os.close(fd)
