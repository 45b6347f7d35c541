"""Load a task's ``probe_policy.py`` into a :class:`PolicyModule`."""

from __future__ import annotations

import hashlib
import importlib.util
import inspect
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from apparatus.probe.report import ProbeOptions
from tracetrial.errors import ApparatusError


class PolicyLoadError(ApparatusError):
    """``probe_policy.py`` is missing or malformed; the message names the file and the fix."""


@dataclass(frozen=True)
class PolicyModule:
    """The hooks one ``probe_policy.py`` defines."""

    path: Path
    policy: Callable[..., Any]
    subagent_policy: Callable[..., Any] | None
    compaction_summary: Callable[..., str] | None
    options: dict[str, Any]

    @property
    def subagent_wants_turn(self) -> bool:
        """``subagent_policy(turn)`` gets the child's Turn; any other first parameter name gets the prompt str."""
        if self.subagent_policy is None:
            return False
        params = list(inspect.signature(self.subagent_policy).parameters)
        return bool(params) and params[0] == "turn"


def load_policy(path: Path | str) -> PolicyModule:
    """Import ``path`` under a private module name and check its hooks."""
    path = Path(path).resolve()
    if not path.is_file():
        raise PolicyLoadError(f"{path}: probe policy file not found (fix: create probe_policy.py defining "
                              "`def policy(turn): ...` as a generator)")
    name = "tt_probe_policy_" + hashlib.sha256(str(path).encode()).hexdigest()[:12]
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise PolicyLoadError(f"{path}: cannot be imported as a Python module")
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except Exception as exc:  # the file is task code: report whatever it raised
        raise PolicyLoadError(f"{path}: importing it raised {type(exc).__name__}: {exc}") from exc
    policy = getattr(module, "policy", None)
    if policy is None or not inspect.isgeneratorfunction(policy):
        raise PolicyLoadError(f"{path}: needs `def policy(turn)` written as a generator "
                              "(it must `yield` actions such as shell(...) and final(...))")
    sub = getattr(module, "subagent_policy", None)
    if sub is not None and not inspect.isgeneratorfunction(sub):
        raise PolicyLoadError(f"{path}: subagent_policy must be a generator function (use `yield final(...)`)")
    summary = getattr(module, "compaction_summary", None)
    if summary is not None and not callable(summary):
        raise PolicyLoadError(f"{path}: compaction_summary must be a function `(turn) -> str`")
    options = getattr(module, "PROBE_OPTIONS", None) or {}
    if not isinstance(options, dict):
        raise PolicyLoadError(f"{path}: PROBE_OPTIONS must be a dict, got {type(options).__name__}")
    try:
        ProbeOptions.model_validate(options)
    except ValidationError as exc:
        raise PolicyLoadError(f"{path}: PROBE_OPTIONS is invalid: {_errors(exc)}") from exc
    return PolicyModule(path, policy, sub, summary, dict(options))


def _errors(exc: ValidationError) -> str:
    return "; ".join(f"{'.'.join(str(p) for p in e['loc']) or '<root>'}: {e['msg']}" for e in exc.errors())
