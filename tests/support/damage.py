"""A partition file damaged on disk, as a failing disk or a bad copy leaves it."""

from __future__ import annotations

import struct
from pathlib import Path


def damage_footer(path: Path) -> None:
    """Flip the first 200 bytes of the Parquet footer (the file keeps its size and magic):
    pyarrow then fails to read it ("Couldn't deserialize thrift")."""
    data = bytearray(path.read_bytes())
    footer = struct.unpack("<I", data[-8:-4])[0]
    start = len(data) - 8 - footer
    for i in range(start, start + min(200, footer)):
        data[i] ^= 0xA5
    path.write_bytes(bytes(data))
