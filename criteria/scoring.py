"""Scores (SPEC §5), run attribution (SPEC §6) and ``combined_score.json``. Pure functions.

* ``S_H = 50·p_H/n_H``, ``S_A = 50·p_A/n_A``, ``S = S_H + S_A``; combined pass iff
  ``S = 100``; agent success iff ``p_A = n_A``. Unscored criteria stay in ``n`` and
  are not in ``p``. Only ``role: core`` criteria count (``diagnostic`` ones are
  reported but contribute to no metric, as the paper's ``role`` field defines).
* ``F_H``/``Z_A`` are the failed (``passed is False``) core criteria; ``B ⊆ F_H``
  those whose ``bypass`` rule holds; ``Z_H = F_H \\ B``; ``L_act`` the declared links
  with both endpoints failed and ``q_ℓ`` holding (no ``q_ℓ`` = both failed suffices).
* The label follows the seven ordered rules of SPEC §6; first match wins.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from criteria.registry import RuleOutcome
from tracetrial.files import atomic_write_text
from tracetrial.results import (
    AdmissionDecision,
    Attribution,
    CellIdentity,
    CombinedScore,
    CriterionVerdict,
    LayerScore,
    RunLabel,
)
from tracetrial.rubric import LinkSpec


def layer_score(verdicts: Sequence[CriterionVerdict]) -> LayerScore:
    """``p`` passed of ``n`` core criteria; unscored ones count in ``n`` and ``unscored``."""
    core = [v for v in verdicts if v.role == "core"]
    p = sum(1 for v in core if v.passed is True)
    n = len(core)
    return LayerScore(p=p, n=n, unscored=sum(1 for v in core if v.passed is None),
                      score=50.0 * p / n if n else 0.0)


def run_label(admitted: bool, l_act: Sequence[Any], z_h: Sequence[str], z_a: Sequence[str],
              b: Sequence[str]) -> tuple[RunLabel, int]:
    """The stored run label and the number of the rule that produced it (SPEC §6)."""
    outcome_problem = bool(z_a) or bool(b)
    if not admitted:
        return "apparatus_invalid", 1
    if l_act:
        return "harness_caused", 2
    if z_h and not outcome_problem:
        return "harness_absorbed", 3
    if z_h and z_a:
        return "agent_caused", 4
    if b and not z_a:
        return "measurement_bypass", 5
    if z_a:
        return "agent_caused", 6
    return "clean", 7


def attribute(verdicts: Sequence[CriterionVerdict], *, admitted: bool,
              bypass: dict[str, RuleOutcome],
              activations: Sequence[tuple[LinkSpec, RuleOutcome | None]]) -> Attribution:
    """The SPEC §6 sets and the run label from final verdicts (in their given order)."""
    core = [v for v in verdicts if v.role == "core"]
    f_h = [v.id for v in core if v.layer == "harness" and v.passed is False]
    z_a = [v.id for v in core if v.layer == "agent" and v.passed is False]
    b = [h for h in f_h if h in bypass and bypass[h].passed is True]
    z_h = [h for h in f_h if h not in b]
    l_act: list[dict[str, Any]] = []
    for link, q in activations:
        if link.harness not in f_h or link.agent not in z_a:
            continue
        if link.activation is not None and (q is None or q.passed is not True):
            continue
        l_act.append({
            "harness": link.harness, "agent": link.agent, "distortion": link.distortion,
            "priority": link.priority,
            "activation": link.activation.kind if link.activation is not None else None,
            "reason": q.reason if q is not None else "both endpoints failed (no activation condition declared)",
        })
    linked = {entry["agent"] for entry in l_act}
    label, rule = run_label(admitted, l_act, z_h, z_a, b)
    return Attribution(F_H=f_h, Z_A=z_a, B=b, Z_H=z_h, L_act=l_act,
                       linked_agent_failures=[a for a in z_a if a in linked],
                       unlinked_agent_failures=[a for a in z_a if a not in linked],
                       label=label, label_rule=rule)


def combine(identity: CellIdentity, verdicts: Sequence[CriterionVerdict], *, admitted: bool,
            admission: list[AdmissionDecision], hard_gates: list[AdmissionDecision],
            bypass: dict[str, RuleOutcome], activations: Sequence[tuple[LinkSpec, RuleOutcome | None]],
            judge: str | None) -> CombinedScore:
    """The authoritative per-run score. A failed hard gate zeroes the effective score."""
    marked = [v.model_copy(update={"bypassed": True}) if v.layer == "harness" and v.passed is False
              and v.id in bypass and bypass[v.id].passed is True else v for v in verdicts]
    h = layer_score([v for v in marked if v.layer == "harness"])
    a = layer_score([v for v in marked if v.layer == "agent"])
    zeroed = any(not g.ok for g in hard_gates)
    all_pass = admitted and h.n > 0 and a.n > 0 and h.p == h.n and a.p == a.n
    s = h.score + a.score
    attribution = attribute(marked, admitted=admitted, bypass=bypass, activations=activations)
    return CombinedScore(
        identity=identity, admitted=admitted, admission=admission, hard_gates=hard_gates,
        harness=h, agent=a, S_H=h.score, S_A=a.score, S=s,
        effective_score=0.0 if (zeroed or not admitted) else s,
        combined_pass=all_pass and not zeroed,
        agent_success=admitted and not zeroed and a.n > 0 and a.p == a.n,
        clean=all_pass,
        verdicts=marked, attribution=attribution, judge=judge,
    )


def combined_json(score: CombinedScore) -> str:
    """Canonical text of ``combined_score.json``: sorted keys, no timestamps, one trailing newline."""
    data = score.model_dump(mode="json", by_alias=True)
    return json.dumps(data, indent=1, ensure_ascii=False, sort_keys=True) + "\n"


def write_combined(path: Path, score: CombinedScore) -> Path:
    """Write ``combined_score.json`` atomically (byte-identical for identical scores)."""
    atomic_write_text(path, combined_json(score))
    return path
