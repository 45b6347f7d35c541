"""Errors of the criteria engine. Messages name the criterion, the parameter and the fix."""

from __future__ import annotations

from tracetrial.errors import TraceTrialError


class CriteriaError(TraceTrialError):
    """Base class of the criteria engine's errors."""


class RuleParamError(CriteriaError):
    """A rule's parameters are invalid (raised on load by ``validate_rubric_rules``).

    Attributes:
        criterion: the criterion id whose rule is wrong.
        kind: the rule kind (``file_contains``, ...).
        problems: ``(param, message)`` pairs, one per problem found.
    """

    def __init__(self, criterion: str, kind: str, problems: list[tuple[str, str]], *, where: str = "rule"):
        self.criterion = criterion
        self.kind = kind
        self.where = where
        self.problems = problems
        text = "; ".join(f"param {param!r}: {msg}" for param, msg in problems)
        super().__init__(f"criterion {criterion!r} {where} (kind {kind!r}): {text}")


class Unscorable(CriteriaError):
    """Raised inside a rule when satisfaction cannot be established for an apparatus or task
    reason (a missing recorder file, a truth key absent from truth.json). The criterion
    becomes *unscored*, never a pass and never a harness failure."""


class JudgeError(CriteriaError):
    """The judge could not answer (not configured, unreachable, no cassette entry)."""


class RescoreError(CriteriaError):
    """One or more cells could not be re-scored; every other cell still was."""

    def __init__(self, failures: list[str]):
        self.failures = failures
        lines = "\n".join(f"  - {f}" for f in failures)
        super().__init__(f"{len(failures)} cell(s) could not be re-scored:\n{lines}")
