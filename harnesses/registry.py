"""Harness registry: built-in adapters plus the ``tracetrial.harnesses`` entry-point group.

Names are ``<harness>``, ``<harness>+<variant>`` (mutants of the reference
harness: ``reference+hide_exit_code``) or ``<harness>@<version>``: the same adapter class
running a named version installed next to the pins (``tracetrial install
claude_code@2.1.332``; :func:`harnesses.install.version_problem` says why one cannot be
selected). The plain name is always the pinned install. Entries are ``"module:Class"`` strings
imported lazily, so listing harnesses never imports a CLI wrapper. The group's name
lives with the sandbox, which reads the same entry points to keep each third-party
harness's code visible to the confined harness (:func:`apparatus.sandbox.code_paths`).
"""

from __future__ import annotations

import importlib
from importlib.metadata import entry_points

from apparatus.sandbox.code import HARNESS_ENTRY_POINTS
from harnesses.base import HarnessAdapter
from harnesses.install import split_name, version_problem

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


def _entry(base: str) -> str | None:
    """``"module:Class"`` of a harness base name, ``None`` when none is registered. A built-in
    name never reads the entry points: a built-in wins over an entry point of the same name
    (:func:`_registry`), and reading them all parses every installed distribution's metadata
    (~10 ms a cell, in each cell's setup)."""
    return BUILTIN.get(base) or _registry().get(base)


def available_harnesses() -> list[str]:
    """Registered harness names (built-in and entry points), sorted."""
    return sorted(_registry())


def name_problem(name: str) -> str | None:
    """``None`` when ``name`` selects a harness that can be instantiated here (for a
    ``<harness>@<version>``: that version is installed), else why not (one line)."""
    plain, version = split_name(name)
    base = plain.partition("+")[0]
    reg = _registry()
    if base not in reg:
        known = ", ".join(sorted(reg)) or "none"
        return (f"unknown harness {name!r}; registered: {known}. A package can add one through the "
                f"'{HARNESS_ENTRY_POINTS}' entry-point group.")
    if version is None:
        return None
    if "+" in plain:
        return f"{name!r}: a variant cannot be combined with a named version"
    return version_problem(base, version)


def get_harness(name: str, *, installed: bool = True) -> HarnessAdapter:
    """Instantiate the adapter for ``name`` (``base+variant`` passes the variant,
    ``base@version`` selects that installed named version). ``installed=False`` skips the
    install check of a named version: re-normalizing an archive reads only its files, so a
    version removed since still re-derives."""
    plain, version = split_name(name)
    if version is not None and installed:
        problem = name_problem(name)
        if problem is not None:
            raise UnknownHarnessError(problem)
    base, _, variant = plain.partition("+")
    entry = _entry(base)
    if entry is None:
        known = ", ".join(sorted(_registry())) or "none"
        raise UnknownHarnessError(
            f"unknown harness {name!r}; registered: {known}. A package can add one through the "
            f"'{HARNESS_ENTRY_POINTS}' entry-point group."
        )
    module, _, attr = entry.partition(":")
    cls = getattr(importlib.import_module(module), attr)
    if not (isinstance(cls, type) and issubclass(cls, HarnessAdapter)):
        raise UnknownHarnessError(f"{entry} is not a HarnessAdapter subclass")
    adapter: HarnessAdapter = cls(variant or None)
    if version is not None:
        if not adapter.named_versions:
            raise UnknownHarnessError(f"{name!r}: the {base} adapter cannot run named versions")
        adapter.release = version
    return adapter
