"""A shorter Dagster backfill tick, for the daemons that tests start (never shipped).

Dagster 1.13 sleeps `DEFAULT_DAEMON_INTERVAL_SECONDS` (30 s, no setting or variable changes
it) between two iterations of the backfill daemon, and a backfill takes at least two (submit
its runs, then see them done): most of a UI or GraphQL backfill test was that sleep. The tests'
`dagster dev` puts this directory on PYTHONPATH with `CDRHOUSE_TEST_DAEMON_TICK_S` set, so
each of its Python processes imports this file at startup (Python's `sitecustomize` hook);
the daemon's module then gets the shorter tick as it is imported. What the daemon does on
each tick is Dagster's own, unchanged. Without the variable this file does nothing.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import os
import sys
from collections.abc import Sequence
from types import ModuleType

_MODULE = "dagster._daemon.controller"
_TICK = os.environ.get("CDRHOUSE_TEST_DAEMON_TICK_S")


class _Loader(importlib.abc.Loader):
    def __init__(self, inner: importlib.abc.Loader, tick: float) -> None:
        self._inner, self._tick = inner, tick

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return self._inner.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        self._inner.exec_module(module)
        module.DEFAULT_DAEMON_INTERVAL_SECONDS = self._tick  # type: ignore[attr-defined]


class _Finder(importlib.abc.MetaPathFinder):
    def __init__(self, tick: float) -> None:
        self._tick = tick

    def find_spec(
        self,
        fullname: str,
        path: Sequence[str] | None,
        target: ModuleType | None = None,  # noqa: ARG002 (the finder protocol's)
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname != _MODULE:
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is not None and spec.loader is not None:
            spec.loader = _Loader(spec.loader, self._tick)
        return spec


if _TICK:
    sys.meta_path.insert(0, _Finder(float(_TICK)))
