"""The criteria engine: rules, evidence packets, judge, admission, scores and attribution.

Public API::

    score_run(task, run_dir, *, judge=None) -> CombinedScore
    rescore_output(output_dir, judge=None) -> list[Path]        (criteria.rescore)
    validate_rubric_rules(task) -> list[str]
    @rule("kind", Params)                                        register a rule
    LiteLLMJudge / CassetteJudge / ArchivedJudge / make_judge    judges
    build_packet / packet_for / EvidencePacket                   evidence (SPEC §8)
    VerifierContext                                              what score.py receives
"""

from __future__ import annotations

from criteria.admission import AdmissionResult, admit
from criteria.engine import score_run
from criteria.errors import CriteriaError, JudgeError, RescoreError, RuleParamError, Unscorable
from criteria.evidence import EvidencePacket, build_packet, collect_candidates, packet_for
from criteria.judge import ArchivedJudge, CassetteJudge, Judge, LiteLLMJudge, make_judge
from criteria.registry import (
    RULES,
    Params,
    RuleContext,
    RuleOutcome,
    evaluate_rule,
    load_builtin_rules,
    rule,
    rule_reference,
)
from criteria.rescore import rescore_output
from criteria.rundata import RunData, load_run
from criteria.scoring import attribute, combine, layer_score, run_label
from criteria.validate import validate_rubric_rules
from tracetrial.verify import VerifierContext, VerifierOutcome

__all__ = [
    "RULES", "AdmissionResult", "ArchivedJudge", "CassetteJudge", "CriteriaError", "EvidencePacket",
    "Judge", "JudgeError", "LiteLLMJudge", "Params", "RescoreError", "RuleContext", "RuleOutcome",
    "RuleParamError", "RunData", "Unscorable", "VerifierContext", "VerifierOutcome", "admit",
    "attribute", "build_packet", "collect_candidates", "combine", "evaluate_rule", "layer_score",
    "load_builtin_rules", "load_run", "make_judge", "packet_for", "rescore_output", "rule",
    "rule_reference", "run_label",
    "score_run", "validate_rubric_rules",
]
