"""Load-time checks of a pack's rules (``tracetrial validate``).

The kernel validates the rubric schema; this module checks what only the
criteria library knows: every ``rule``, ``bypass`` and link ``activation`` names
a registered kind with valid parameters, truth keys and schema files exist,
selectors name the sources their fields belong to, and each layer has a core
criterion (a layer without one cannot be scored).
"""

from __future__ import annotations

from criteria.errors import RuleParamError
from criteria.registry import parse_params
from tracetrial.rubric import RuleSpec
from tracetrial.task import TaskPack


def _check(spec: RuleSpec, task: TaskPack, file: str, owner: str, where: str) -> list[str]:
    try:
        definition, params = parse_params(spec, owner, where=where)
    except RuleParamError as exc:
        return [f"{file}: {exc}"]
    if definition.check is None:
        return []
    return [f"{file}: criterion {owner!r} {where} (kind {spec.kind!r}): param {param!r}: {msg}"
            for param, msg in definition.check(params, task)]


def validate_rubric_rules(task: TaskPack) -> list[str]:
    """Every problem of the pack's rules, one message each (empty list: all good).

    Each message names the rubric file, the criterion id, the rule kind and the parameter.
    """
    problems: list[str] = []
    for layer, rubric in (("harness", task.harness_rubric), ("agent", task.agent_rubric)):
        file = f"verifier/{layer}_score.yaml"
        for c in rubric.criteria:
            if c.rule is not None:
                problems += _check(c.rule, task, file, c.id, "rule")
            if c.bypass is not None:
                problems += _check(c.bypass, task, file, c.id, "bypass rule")
            if c.type == "rubric":
                sel = c.evidence
                if (sel.event_types or sel.fields) and "trace" not in sel.sources:
                    problems.append(f"{file}: criterion {c.id!r} evidence: 'event_types'/'fields' select "
                                    "trace events but 'trace' is not among its sources")
                if sel.files and "workspace" not in sel.sources:
                    problems.append(f"{file}: criterion {c.id!r} evidence: 'files' needs the "
                                    "'workspace' source")
        if not any(c.role == "core" for c in rubric.criteria):
            problems.append(f"{file}: no 'core' criterion: the {layer} layer cannot be scored")
        if not any(c.type == "rule" for c in rubric.criteria):
            problems.append(f"{file}: no deterministic ('rule') criterion; TASK_GUIDE rule 4 asks "
                            "for at least one per layer")
    for i, link in enumerate(task.harness_rubric.links):
        if link.activation is not None:
            problems += _check(link.activation, task, "verifier/harness_score.yaml", f"links[{i}]",
                               "activation rule")
    return problems
