"""Harness adapters: one per harness (launch + pure normalizer), and the registry.

Third-party packages add a harness through the ``tracetrial.harnesses``
entry-point group (value ``"package.module:AdapterClass"``).
"""

from __future__ import annotations

from harnesses.base import (
    HarnessAdapter,
    HarnessCapabilities,
    McpServer,
    NormalizedTrace,
    RunContext,
    TurnContext,
    TurnOutcome,
)
from harnesses.registry import available_harnesses, get_harness

__all__ = [
    "HarnessAdapter",
    "HarnessCapabilities",
    "McpServer",
    "NormalizedTrace",
    "RunContext",
    "TurnContext",
    "TurnOutcome",
    "available_harnesses",
    "get_harness",
]
