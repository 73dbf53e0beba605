"""Allocator settings that keep a CDR day's working set small, applied when `pipelines` loads.

A day streams through three allocators: polars' jemalloc, Arrow's memory pool and glibc's
malloc (Python objects, msgspec). With their defaults each keeps what the last row groups freed
(jemalloc for 0.5-1 s, Arrow's mimalloc per thread, glibc in one arena per thread), and their
high-water marks add up: about 90 MB of a 1M-CDR day's peak RSS (`bench/RESULTS.md`). So:

* polars' jemalloc: 2 arenas (one per core) and freed pages purged by jemalloc's background
  thread after 100 ms. Polars reads `_RJEM_MALLOC_CONF` when it is first imported (its own
  documented hook, pola-rs/polars#18088), so this only takes effect before that import;
* Arrow: the system allocator (`ARROW_DEFAULT_MEMORY_POOL`, read on first use), so Parquet
  buffers go back to the same glibc arenas as everything else;
* glibc: at most 2 malloc arenas (`mallopt(M_ARENA_MAX)`), instead of 8 per core.

And `release_free_memory()`, called after every few row groups are written
(`pipelines.cdr_day.RELEASE_EVERY_GROUPS`, and after each big one): glibc returns a free page
to the system only from the top of a heap, so the transient Parquet and page buffers of each
row group, freed between long-lived small allocations, stay resident and the day's RSS grows
with its size (+60 MB over a 1M-CDR day). `malloc_trim` releases those interior pages too.

A variable already set in the environment wins, so a deployment can tune or undo each one.
"""

from __future__ import annotations

import ctypes
import os
import sys

POLARS_JEMALLOC = "narenas:2,dirty_decay_ms:100,muzzy_decay_ms:0,background_thread:true"
ARROW_POOL = "system"
MALLOC_ARENAS = 2
_M_ARENA_MAX = -8  # glibc's mallopt parameter number (malloc.h)


def _glibc() -> ctypes.CDLL | None:
    if sys.platform != "linux":
        return None
    try:
        libc = ctypes.CDLL(None)
        libc.malloc_trim  # noqa: B018 - musl has no malloc_trim (nor mallopt)
    except (OSError, AttributeError):
        return None
    return libc


_LIBC = _glibc()


def release_free_memory() -> bool:
    """Give the pages glibc holds free, anywhere in its heaps, back to the system (~1 ms).
    Returns whether anything was released; False where the C library is not glibc."""
    return _LIBC is not None and _LIBC.malloc_trim(0) == 1


def bound_allocators() -> None:
    """Apply, at `pipelines`' import, what still can be and the environment does not set."""
    environ = os.environ
    if "polars" not in sys.modules and "_RJEM_MALLOC_CONF" not in environ:
        environ["_RJEM_MALLOC_CONF"] = POLARS_JEMALLOC
    if "pyarrow" not in sys.modules and "ARROW_DEFAULT_MEMORY_POOL" not in environ:
        environ["ARROW_DEFAULT_MEMORY_POOL"] = ARROW_POOL
    if "MALLOC_ARENA_MAX" not in environ and _LIBC is not None:
        _LIBC.mallopt(_M_ARENA_MAX, MALLOC_ARENAS)
