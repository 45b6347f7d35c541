"""Load-time checks of a pack's rules (``tracetrial validate``).

The kernel validates the rubric schema; this module checks what only the
criteria library knows: every ``rule``, ``bypass`` and link ``activation`` names
a registered kind with valid parameters, truth keys and schema files exist,
selectors name the sources their fields belong to, file parameters stay inside
the run (no absolute path, no ``..``), and each layer has a core criterion (a layer
without one cannot be scored).
"""

from __future__ import annotations

from collections.abc import Iterator

from criteria.errors import RuleParamError
from criteria.evidence import GATEWAY_KEYS
from criteria.registry import parse_params
from tracetrial.rubric import RuleSpec
from tracetrial.task import TaskPack, unsafe_path_reason

#: Rule parameters that name a file of the run (workspace- or run-relative paths or globs;
#: ``schema_file`` is pack-relative and checked by its own rule).
#: A run never follows such a path out of the archive, so one that escapes would only
#: ever fail, and be blamed on the agent; validation names it instead.
PATH_PARAMS = ("path", "paths", "file")


def _path_problems(params: object) -> list[tuple[str, str]]:
    out = []
    for name in PATH_PARAMS:
        value = getattr(params, name, None)
        values = value if isinstance(value, list) else [value]
        for item in values:
            why = unsafe_path_reason(item) if isinstance(item, str) else None
            if why is not None:
                out.append((name, (f"path {item!r} {why}; use a path relative to the run's workspace "
                                   "(or run folder) without '..'")))
    return out


def _check(spec: RuleSpec, task: TaskPack, file: str, owner: str, where: str) -> list[str]:
    try:
        definition, params = parse_params(spec, owner, where=where)
    except RuleParamError as exc:
        return [f"{file}: {exc}"]
    found = _path_problems(params) + (definition.check(params, task) if definition.check is not None else [])
    return [f"{file}: criterion {owner!r} {where} (kind {spec.kind!r}): param {param!r}: {msg}"
            for param, msg in found]


def _rules(task: TaskPack) -> Iterator[tuple[RuleSpec, str, str, str]]:
    """Every rule of the pack: ``(spec, rubric file, owner, where)``, in rubric order."""
    for layer, rubric in (("harness", task.harness_rubric), ("agent", task.agent_rubric)):
        file = f"verifier/{layer}_score.yaml"
        for c in rubric.criteria:
            if c.rule is not None:
                yield c.rule, file, c.id, "rule"
            if c.bypass is not None:
                yield c.bypass, file, c.id, "bypass rule"
    for i, link in enumerate(task.harness_rubric.links):
        if link.activation is not None:
            yield link.activation, "verifier/harness_score.yaml", f"links[{i}]", "activation rule"


def unusable_rules(task: TaskPack) -> list[str]:
    """The rules a run cannot evaluate at all: an unknown kind, or parameters its kind
    rejects (one message each, as ``tracetrial validate`` words them).

    Scoring makes such a run ``apparatus_invalid`` (:func:`criteria.engine.score_run`):
    the pack is broken, so the run measures nothing; it must not pass as ``clean`` with
    the criterion merely ``unscored``.
    """
    problems = []
    for spec, file, owner, where in _rules(task):
        try:
            parse_params(spec, owner, where=where)
        except RuleParamError as exc:
            problems.append(f"{file}: {exc}")
    return problems


def validate_rubric_rules(task: TaskPack) -> list[str]:
    """Every problem of the pack's rules, one message each (empty list: all good).

    Each message names the rubric file, the criterion id, the rule kind and the parameter.
    """
    problems: list[str] = []
    for spec, file, owner, where in _rules(task):
        problems += _check(spec, task, file, owner, where)
    for layer, rubric in (("harness", task.harness_rubric), ("agent", task.agent_rubric)):
        file = f"verifier/{layer}_score.yaml"
        for c in rubric.criteria:
            if c.type == "rubric":
                sel = c.evidence
                gateway_fields = "gateway" in sel.sources and bool(set(sel.fields) & set(GATEWAY_KEYS))
                if (sel.event_types or (sel.fields and not gateway_fields)) and "trace" not in sel.sources:
                    problems.append(f"{file}: criterion {c.id!r} evidence: 'event_types'/'fields' select "
                                    "trace events but 'trace' is not among its sources (fields may also "
                                    f"name gateway record keys with the gateway source: {', '.join(GATEWAY_KEYS)})")
                if sel.files and "workspace" not in sel.sources:
                    problems.append(f"{file}: criterion {c.id!r} evidence: 'files' needs the "
                                    "'workspace' source")
        if not any(c.role == "core" for c in rubric.criteria):
            problems.append(f"{file}: no 'core' criterion: the {layer} layer cannot be scored")
        if not any(c.type == "rule" for c in rubric.criteria):
            problems.append(f"{file}: no deterministic ('rule') criterion; TASK_GUIDE rule 4 asks "
                            "for at least one per layer")
    return problems
