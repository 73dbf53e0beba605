"""Helpers shared by the test suites: served sandboxes, ports, the clock, lake reads, asset keys,
`cdrhouse` in a fresh interpreter, runs that must fail at once.

Plain modules, not fixtures: each suite's conftest builds its fixtures from them.
"""
