"""Errors of the simulator package. Messages name the file, the place and the fix."""

from __future__ import annotations

from tracetrial.errors import ApparatusError, TraceTrialError


class SimulatorConfigError(TraceTrialError):
    """A service definition (``simulators/<name>.yaml`` or its module) is invalid.

    Carries every problem found, each already phrased as ``file, field: problem (fix: ...)``.
    """

    def __init__(self, source: str, problems: list[str]):
        self.source = source
        self.problems = problems
        lines = "\n".join(f"  - {p}" for p in problems)
        super().__init__(f"simulator service {source} is invalid ({len(problems)} problem(s)):\n{lines}")


class TemplateError(TraceTrialError):
    """A ``{{ ... }}`` expression of a service definition cannot be parsed or evaluated."""


class LedgerError(ApparatusError):
    """A ledger cannot be written or read (an apparatus failure, never a harness defect)."""
