"""The Contact Center API v4 sandbox: a deterministic, stateful, fault-injecting emulator.

`Sandbox` (in `emulator.py`) wires the layers; see docs/architecture.md for the module map.
"""

from connectors.sandbox.config import ALL_SCOPES, DEFAULT_API_KEY, SandboxConfig
from connectors.sandbox.emulator import Sandbox
from connectors.sandbox.faults import FaultConfig
from connectors.sandbox.server import ServerHandle
from connectors.sandbox.state import Clock

__all__ = [
    "ALL_SCOPES",
    "DEFAULT_API_KEY",
    "Clock",
    "FaultConfig",
    "Sandbox",
    "SandboxConfig",
    "ServerHandle",
]
