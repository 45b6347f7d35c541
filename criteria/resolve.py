"""Criterion evaluation in the order SPEC §4 fixes, and the resolution of judge states.

1. deterministic rules of both layers (0|1, or unscored);
2. agent rubrics, judged on their packets (0|1);
3. harness rubrics, judged on theirs (0..3), with the finished agent verdicts
   as downstream context only. State 2 ("target path not exercised") passes iff
   every core agent criterion passed (unscored while an agent criterion is
   unscored and none failed); state 3 ("harness fault") resolves to 0.

A required selector that returns nothing is 0 with an explicit empty-selection
record, and the judge is not asked. A judge pass that cites no evidence is 0
("no supporting evidence → 0"). No judge, an unreachable one or malformed output
leaves the criterion unscored with the reason: counted, never a pass.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from criteria.errors import JudgeError
from criteria.evidence import EvidencePacket, packet_for
from criteria.judge import (
    TEMPLATE_VERSION,
    Judge,
    MalformedJudgeOutput,
    parse_response,
    prompt_hash,
    prompt_messages,
)
from criteria.registry import RuleContext, RuleOutcome, evaluate_rule
from criteria.rundata import RunData
from criteria.verifier import run_verifier
from tracetrial.results import CriterionVerdict
from tracetrial.rubric import CriterionSpec, LinkSpec
from tracetrial.task import TaskPack
from tracetrial.verify import VerifierOutcome

Layer = Literal["harness", "agent"]
JUDGE_RECORD_SCHEMA = "tt-judge-record/1"


@dataclass
class Evaluation:
    """Everything criterion evaluation produced for one run (written by the engine)."""

    verdicts: dict[str, CriterionVerdict] = field(default_factory=dict)
    packets: dict[str, EvidencePacket] = field(default_factory=dict)
    judge_records: dict[str, dict[str, Any]] = field(default_factory=dict)
    bypass: dict[str, RuleOutcome] = field(default_factory=dict)
    activations: list[tuple[LinkSpec, RuleOutcome | None]] = field(default_factory=list)
    verifier: VerifierOutcome | None = None


def criteria_in_order(task: TaskPack) -> list[CriterionSpec]:
    """Harness criteria then agent criteria, each in rubric order (the reporting order)."""
    return [*task.harness_rubric.criteria, *task.agent_rubric.criteria]


def _verdict(c: CriterionSpec, state: int | None, passed: bool | None, reason: str, **extra: Any) -> CriterionVerdict:
    return CriterionVerdict(id=c.id, layer=c.layer or "agent", type=c.type, role=c.role,
                            component=c.component, raw_state=state, passed=passed, reason=reason, **extra)


def unscored_all(task: TaskPack, reason: str) -> dict[str, CriterionVerdict]:
    """Every criterion unscored with ``reason`` (a run that was not admitted)."""
    return {c.id: _verdict(c, None, None, reason) for c in criteria_in_order(task)}


def _clip(text: str, limit: int = 400) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def agent_gate(verdicts: dict[str, CriterionVerdict], task: TaskPack) -> tuple[bool | None, str]:
    """Resolution of harness state 2: (True, …) iff every core agent criterion passed."""
    core = [verdicts[c.id] for c in task.agent_rubric.criteria if c.role == "core"]
    failed = [v.id for v in core if v.passed is False]
    unscored = [v.id for v in core if v.passed is None]
    if failed:
        return False, f"agent criteria failed: {', '.join(failed)}"
    if unscored:
        return None, f"agent criteria unscored: {', '.join(unscored)}"
    return True, "every agent criterion passed"


def _resolve(state: int, cited: bool, gate: tuple[bool | None, str]) -> tuple[bool | None, str]:
    if state == 1:
        if cited:
            return True, "holds"
        return False, "judge passed it without citing evidence (no supporting evidence -> 0)"
    if state == 0:
        return False, "does not hold"
    if state == 2:
        passed, why = gate
        verdict = {True: "pass", False: "fail", None: "unscored"}[passed]
        return passed, f"target path not exercised -> {verdict} ({why})"
    return False, "harness fault -> 0"


def judge_criterion(c: CriterionSpec, layer: Layer, packet: EvidencePacket, judge: Judge | None,
                    agent_context: list[dict[str, Any]] | None,
                    gate: tuple[bool | None, str]) -> tuple[CriterionVerdict, dict[str, Any]]:
    """Ask the judge about one rubric criterion; returns the verdict and the judge record."""
    messages = prompt_messages(criterion_id=c.id, layer=layer, statement=c.statement, component=c.component,
                               trigger=c.trigger_text, packet=packet.model_dump(mode="json", by_alias=True),
                               agent_context=agent_context)
    record: dict[str, Any] = {
        "schema": JUDGE_RECORD_SCHEMA, "criterion": c.id, "layer": layer, "template": TEMPLATE_VERSION,
        "model": judge.name if judge is not None else None, "prompt_sha256": prompt_hash(messages),
        "prompt": messages, "response": None, "error": None, "parsed": None, "state": None, "passed": None,
    }
    paths = {"packet_path": f"evidence/packets/{c.id}.json", "judge_path": f"evidence/judge/{c.id}.json"}
    if judge is None:
        record["error"] = "no judge configured"
        return _verdict(c, None, None, "unscored: no judge configured", **paths), record
    try:
        record["response"] = judge.complete(messages)
    except JudgeError as exc:
        record["error"] = str(exc)
        return _verdict(c, None, None, f"unscored: {exc}", **paths), record
    try:
        parsed = parse_response(record["response"], layer, packet.refs)
    except MalformedJudgeOutput as exc:
        record["error"] = f"malformed judge output: {exc}"
        return _verdict(c, None, None, f"unscored: malformed judge output: {exc}", **paths), record
    record["parsed"] = {"state": parsed.state, "rationale": parsed.rationale, "citations": parsed.citations}
    passed, why = _resolve(parsed.state, bool(parsed.citations), gate)
    record["state"], record["passed"] = parsed.state, passed
    reason = f"judge state {parsed.state}: {why}. {_clip(parsed.rationale)}"
    return _verdict(c, parsed.state, passed, reason, **paths), record


def _rubric(c: CriterionSpec, layer: Layer, ctx: RuleContext, ev: Evaluation, judge: Judge | None,
            agent_context: list[dict[str, Any]] | None, gate: tuple[bool | None, str]) -> None:
    packet = packet_for(c.id, layer, c.evidence, ctx.run, ev.verifier)
    ev.packets[c.id] = packet
    if c.evidence.required and packet.empty_selection:
        gone = packet.unavailable_sources
        missing = f"; unavailable: {', '.join(sorted(gone))}" if gone else ""
        ev.verdicts[c.id] = _verdict(
            c, 0, False, f"empty selection: the required selector returned no evidence (scanned "
            f"{packet.scanned}, matched 0){missing}; satisfaction not established",
            empty_selection=True, packet_path=f"evidence/packets/{c.id}.json")
        return
    verdict, record = judge_criterion(c, layer, packet, judge, agent_context, gate)
    ev.verdicts[c.id] = verdict
    ev.judge_records[c.id] = record


def evaluate(task: TaskPack, run: RunData, judge: Judge | None, *,
             verifier: VerifierOutcome | None = None) -> Evaluation:
    """Evaluate every criterion of ``task`` on an admitted run, in SPEC §4 order (``verifier``:
    the outcome of ``score.py`` when the caller already ran it; else it is run here)."""
    verifier = verifier if verifier is not None else run_verifier(task, run)
    ev = Evaluation(verifier=verifier)
    ctx = RuleContext(task=task, run=run, verifier_fn=lambda: verifier)
    ordered = criteria_in_order(task)
    for c in ordered:  # 1. deterministic rules
        if c.type == "rule" and c.rule is not None:
            out = evaluate_rule(c.rule, c.id, ctx)
            state = None if out.passed is None else int(out.passed)
            ev.verdicts[c.id] = _verdict(c, state, out.passed, out.reason)
    no_gate: tuple[bool | None, str] = (None, "not applicable")
    for c in task.agent_rubric.criteria:  # 2. agent rubrics
        if c.type == "rubric":
            _rubric(c, "agent", ctx, ev, judge, None, no_gate)
    context = [{"id": c.id, "statement": c.statement, "role": c.role,
                "verdict": {True: "pass", False: "fail", None: "unscored"}[ev.verdicts[c.id].passed]}
               for c in task.agent_rubric.criteria]
    gate = agent_gate(ev.verdicts, task)
    for c in task.harness_rubric.criteria:  # 3. harness rubrics, agent verdicts as context
        if c.type == "rubric":
            _rubric(c, "harness", ctx, ev, judge, context, gate)
    for c in task.harness_rubric.criteria:  # bypass annotations (SPEC §6, set B)
        if c.bypass is not None:
            ev.bypass[c.id] = evaluate_rule(c.bypass, c.id, ctx, where="bypass rule")
    failed = {cid for cid, v in ev.verdicts.items() if v.passed is False}
    for i, link in enumerate(task.harness_rubric.links):  # q_l only where both endpoints failed
        if link.activation is not None and link.harness in failed and link.agent in failed:
            ev.activations.append((link, evaluate_rule(link.activation, f"links[{i}]", ctx, where="activation rule")))
        else:
            ev.activations.append((link, None))
    return ev
