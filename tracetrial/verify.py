"""The verifier API: what a task pack's ``verifier/score.py`` receives and returns.

``score.py`` defines ``score(ctx) -> dict[str, bool | tuple[bool, str]]`` over a
:class:`VerifierContext`; the criteria engine (``criteria.verifier``) builds the context
from the run archive, calls ``score`` and records a :class:`VerifierOutcome`. A pack
imports only this module and :mod:`tracetrial.policy`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tracetrial.trace import EventBase


@dataclass(frozen=True)
class VerifierContext:
    """What ``score(ctx)`` receives. Paths point into the run archive (read them, do not write)."""

    workspace: Path
    baseline: Path
    truth: Any
    oracle: Any
    events: list[EventBase]
    gateway: list[dict[str, Any]]
    probe: dict[str, Any] | None
    ledgers: dict[str, list[dict[str, Any]]]
    run_dir: Path


@dataclass(frozen=True)
class VerifierOutcome:
    """The verifier's output: ``results[id] = (passed, reason)``; ``error`` when it crashed."""

    ran: bool
    error: str | None = None
    results: dict[str, tuple[bool, str]] = field(default_factory=dict)
    problems: dict[str, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "schema": "tt-verifier/1",
            "ran": self.ran,
            "error": self.error,
            "results": {k: {"passed": v[0], "reason": v[1]} for k, v in sorted(self.results.items())},
            "problems": dict(sorted(self.problems.items())),
        }


