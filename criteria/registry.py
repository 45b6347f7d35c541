"""The rule registry: ``@rule("kind", Params)`` and rule evaluation.

A rule is a pure function ``fn(params, ctx) -> RuleOutcome`` over the run
archive. Its parameters are a pydantic model (``extra="forbid"``), so an unknown
or missing parameter is reported by name, together with the criterion id, when
the rubric is validated (``tracetrial validate``) and again when it is
evaluated. The rubric stores ``kind`` and the parameters, so any verdict can be
recomputed from the archived rubric (inspect's ``ScorerSpec`` idea).

Outcomes are three-valued: pass, fail, or *unscored* (``passed=None``) when
satisfaction cannot be established for a reason outside the harness (a missing
recorder file, a truth key the task forgot). Unscored is never a pass.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError

from criteria.errors import RuleParamError, Unscorable
from tracetrial.rubric import RuleSpec

if TYPE_CHECKING:
    from criteria.rundata import RunData
    from tracetrial.task import TaskPack
    from tracetrial.verify import VerifierOutcome

P = TypeVar("P", bound=BaseModel)

#: Modules whose import registers the built-in rules.
RULE_MODULES = (
    "criteria.rules_files",
    "criteria.rules_ledger",
    "criteria.rules_trace",
    "criteria.rules_gateway",
    "criteria.rules_reconcile",
    "criteria.verifier",
)


class Params(BaseModel):
    """Base of every rule's parameter model: unknown parameters are errors."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)


@dataclass(frozen=True)
class RuleOutcome:
    """The result of one rule: ``passed`` is True, False, or None (unscored)."""

    passed: bool | None
    reason: str
    refs: tuple[str, ...] = ()

    @classmethod
    def ok(cls, reason: str, refs: tuple[str, ...] = ()) -> RuleOutcome:
        return cls(True, reason, refs)

    @classmethod
    def fail(cls, reason: str, refs: tuple[str, ...] = ()) -> RuleOutcome:
        return cls(False, reason, refs)

    @classmethod
    def unscored(cls, reason: str) -> RuleOutcome:
        return cls(None, reason)


@dataclass
class RuleContext:
    """What a rule may read: the task (snapshot), the run archive, the verifier output."""

    task: TaskPack
    run: RunData
    verifier_fn: Callable[[], VerifierOutcome] | None = None
    criterion_id: str = ""

    @property
    def truth(self) -> Any:
        return self.task.truth

    @cached_property
    def verifier(self) -> VerifierOutcome:
        """The task's ``score.py`` output, computed once per run on first use."""
        if self.verifier_fn is None:
            raise Unscorable("no verifier was run for this evaluation")
        return self.verifier_fn()


RuleFn = Callable[[Any, RuleContext], RuleOutcome]
CheckFn = Callable[[Any, "TaskPack"], list[tuple[str, str]]]


@dataclass(frozen=True)
class RuleDef(Generic[P]):
    """A registered rule kind."""

    kind: str
    params: type[P]
    fn: RuleFn
    doc: str
    check: CheckFn | None = None


RULES: dict[str, RuleDef[Any]] = {}


def rule(kind: str, params: type[P], *, check: CheckFn | None = None) -> Callable[[RuleFn], RuleFn]:
    """Register ``fn`` as rule ``kind`` with parameter model ``params``.

    Args:
        kind: the name rubrics use in ``rule: {kind: ...}``.
        params: pydantic model of the parameters (subclass :class:`Params`).
        check: optional load-time check against the task (truth keys exist, schema
            files exist); returns ``(param, problem)`` pairs.
    """

    def register(fn: RuleFn) -> RuleFn:
        existing = RULES.get(kind)
        if existing is not None and existing.fn.__qualname__ != fn.__qualname__:
            raise ValueError(f"rule kind {kind!r} is registered twice")
        RULES[kind] = RuleDef(kind, params, fn, inspect.getdoc(fn) or "", check)
        return fn

    return register


def load_builtin_rules() -> dict[str, RuleDef[Any]]:
    """Import the rule modules (idempotent) and return the registry."""
    for name in RULE_MODULES:
        importlib.import_module(name)
    return RULES


def parse_params(spec: RuleSpec, criterion_id: str, *, where: str = "rule") -> tuple[RuleDef[Any], Any]:
    """Look up ``spec.kind`` and validate its parameters.

    Raises:
        RuleParamError: unknown kind, unknown/missing/ill-typed parameter.
    """
    rules = load_builtin_rules()
    definition = rules.get(spec.kind)
    if definition is None:
        known = ", ".join(sorted(rules))
        raise RuleParamError(criterion_id, spec.kind, [("kind", f"unknown rule kind; known kinds: {known}")],
                             where=where)
    try:
        params = definition.params.model_validate(spec.params())
    except ValidationError as exc:
        problems = []
        for item in exc.errors():
            loc = ".".join(str(p) for p in item["loc"]) or "(params)"
            problems.append((loc, item["msg"].removeprefix("Value error, ")))
        raise RuleParamError(criterion_id, spec.kind, problems, where=where) from None
    return definition, params


def evaluate_rule(spec: RuleSpec, criterion_id: str, ctx: RuleContext, *, where: str = "rule") -> RuleOutcome:
    """Evaluate one rule; never raises. Parameter errors and rule crashes are unscored."""
    try:
        definition, params = parse_params(spec, criterion_id, where=where)
    except RuleParamError as exc:
        return RuleOutcome.unscored(f"invalid rule: {exc}")
    ctx.criterion_id = criterion_id
    try:
        return definition.fn(params, ctx)
    except Unscorable as exc:
        return RuleOutcome.unscored(str(exc))
    except Exception as exc:  # noqa: BLE001 - a rule bug or unexpected data: never a pass, never hidden
        first = str(exc).strip().splitlines()
        return RuleOutcome.unscored(f"rule {spec.kind!r} raised {type(exc).__name__}: {first[0] if first else ''}")


def rule_reference() -> str:
    """A Markdown reference of every registered rule: kind, parameters, description.

    Generated from the registry so it never drifts from the code (task authors read it).
    """
    lines = ["| kind | parameters | what holds |", "|---|---|---|"]
    for kind, definition in sorted(load_builtin_rules().items()):
        fields = sorted(definition.params.model_fields.items(), key=lambda item: not item[1].is_required())
        params = [f"`{info.alias or name}`" + ("" if info.is_required() else "?") for name, info in fields]
        doc = " ".join(definition.doc.split())
        lines.append(f"| `{kind}` | {', '.join(params) or '-'} | {doc} |")
    return "\n".join(lines) + "\n"
