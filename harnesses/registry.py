"""Harness registry: built-in adapters plus the ``tracetrial.harnesses`` entry-point group.

Names are ``<harness>`` or ``<harness>+<variant>`` (mutants of the reference
harness: ``reference+hide_exit_code``). Entries are ``"module:Class"`` strings
imported lazily, so listing harnesses never imports a CLI wrapper. The group's name
lives with the sandbox, which reads the same entry points to keep each third-party
harness's code visible to the confined harness (:func:`apparatus.sandbox.code_paths`).
"""

from __future__ import annotations

import importlib
from importlib.metadata import entry_points

from apparatus.sandbox.code import HARNESS_ENTRY_POINTS
from harnesses.base import HarnessAdapter

#: Built-in adapters (name -> "module:Class").
BUILTIN: dict[str, str] = {
    "reference": "harnesses.reference.adapter:ReferenceAdapter",
    "claude_code": "harnesses.claude_code.adapter:ClaudeCodeAdapter",
    "codex": "harnesses.codex.adapter:CodexAdapter",
    "openclaw": "harnesses.openclaw.adapter:OpenClawAdapter",
    "deepseek": "harnesses.deepseek.adapter:DeepSeekAdapter",
}


class UnknownHarnessError(LookupError):
    """The harness name is not registered."""


def _registry() -> dict[str, str]:
    reg = dict(BUILTIN)
    for ep in entry_points(group=HARNESS_ENTRY_POINTS):
        reg.setdefault(ep.name, ep.value)
    return reg


def available_harnesses() -> list[str]:
    """Registered harness names (built-in and entry points), sorted."""
    return sorted(_registry())


def get_harness(name: str) -> HarnessAdapter:
    """Instantiate the adapter for ``name`` (``base+variant`` passes the variant)."""
    base, _, variant = name.partition("+")
    reg = _registry()
    if base not in reg:
        known = ", ".join(sorted(reg)) or "none"
        raise UnknownHarnessError(
            f"unknown harness {name!r}; registered: {known}. A package can add one through the "
            f"'{HARNESS_ENTRY_POINTS}' entry-point group."
        )
    module, _, attr = reg[base].partition(":")
    cls = getattr(importlib.import_module(module), attr)
    if not (isinstance(cls, type) and issubclass(cls, HarnessAdapter)):
        raise UnknownHarnessError(f"{reg[base]} is not a HarnessAdapter subclass")
    return cls(variant or None)
