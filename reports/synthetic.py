"""Synthetic run archives for tests, the scale benchmark and report previews.

:func:`make_combined` builds a self-consistent :class:`CombinedScore` from
per-criterion outcomes (``True`` pass, ``False`` fail, ``None`` unscored) and
candidate links, applying the SPEC §5 scores and the SPEC §6 label rules;
:func:`write_cell` lays out one run folder the way the archive does. Nothing
here is used by the real pipeline.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from criteria.scoring import run_label
from tracetrial.archive import RunPaths, build_manifest, write_manifest
from tracetrial.results import (
    AdmissionDecision,
    Attribution,
    CellIdentity,
    CombinedScore,
    CriterionVerdict,
    ExceptionInfo,
    LayerScore,
    ResultRecord,
    Summary,
)
from tracetrial.taxonomy import PROPERTIES
from tracetrial.trace import TokenUsage

Outcome = bool | None


def _layer(outcomes: Mapping[str, Outcome]) -> LayerScore:
    n = len(outcomes)
    p = sum(1 for v in outcomes.values() if v is True)
    return LayerScore(p=p, n=n, unscored=sum(1 for v in outcomes.values() if v is None),
                      score=50 * p / n if n else 0.0)


def label_for(admitted: bool, l_act: Sequence[object], z_h: Sequence[str], z_a: Sequence[str],
              b: Sequence[str]) -> tuple[str, int]:
    """SPEC §6 label of a synthetic run: the criteria engine's own rule (one implementation)."""
    return run_label(admitted, list(l_act), z_h, z_a, b)


def make_combined(task_id: str, model: str, harness: str, harness_outcomes: Mapping[str, Outcome],
                  agent_outcomes: Mapping[str, Outcome], *, links: Iterable[tuple[str, str]] = (),
                  bypassed: Iterable[str] = (), admitted: bool = True, protocol: str = "probe",
                  effective_score: float | None = None, judge: str | None = None,
                  with_packets: bool = False) -> CombinedScore:
    """A consistent combined score. Unscored criteria are not in ``F_H``/``Z_A`` (like a judge-less
    run); links activate when both endpoints failed."""
    h, a = _layer(harness_outcomes), _layer(agent_outcomes)
    f_h = [k for k, v in harness_outcomes.items() if v is False]
    z_a = [k for k, v in agent_outcomes.items() if v is False]
    b = [k for k in bypassed if k in f_h]
    z_h = [k for k in f_h if k not in b]
    l_act = [{"harness": hc, "agent": ac, "distortion": "synthetic"} for hc, ac in links
             if hc in f_h and ac in z_a]
    linked = list(dict.fromkeys(link["agent"] for link in l_act))
    label, rule = label_for(admitted, l_act, z_h, z_a, b)
    s_h, s_a = h.score, a.score
    verdicts = [
        CriterionVerdict(id=k, layer=layer, type="rule" if v is not None else "rubric", passed=v,
                         raw_state=None if v is None else int(v),
                         reason="unscored: no judge" if v is None else ("holds" if v else "does not hold"),
                         bypassed=k in b,
                         packet_path=f"evidence/packets/{k}.json" if with_packets else None)
        for layer, outcomes in (("harness", harness_outcomes), ("agent", agent_outcomes))
        for k, v in outcomes.items()
    ]
    # Mirrors criteria.scoring.combine: a hard gate (effective_score < S) or a run not
    # admitted is not an agent success nor a combined pass.
    gated = effective_score is not None and effective_score < s_h + s_a
    effective = 0.0 if not admitted else (s_h + s_a if effective_score is None else effective_score)
    all_pass = admitted and h.n > 0 and a.n > 0 and h.p == h.n and a.p == a.n
    return CombinedScore(
        identity=CellIdentity(run_id=f"{task_id}.{model}.{harness}", task_id=task_id, task_revision=1,
                              harness=harness, model=model, protocol=protocol),
        admitted=admitted,
        admission=[AdmissionDecision(check="identity", ok=admitted, reason="" if admitted else "identity mismatch")],
        harness=h, agent=a, S_H=s_h, S_A=s_a, S=s_h + s_a,
        effective_score=effective, combined_pass=all_pass and not gated,
        agent_success=admitted and not gated and a.n > 0 and a.p == a.n,
        clean=admitted and all(v.passed is True for v in verdicts),
        verdicts=verdicts,
        attribution=Attribution(F_H=f_h, Z_A=z_a, B=b, Z_H=z_h, L_act=l_act, linked_agent_failures=linked,
                                unlinked_agent_failures=[k for k in z_a if k not in linked],
                                label=label, label_rule=rule),
        judge=judge,
    )


def write_cell(output: Path, cs: CombinedScore | None, *, task_id: str | None = None, model: str | None = None,
               harness: str | None = None, usage: TokenUsage | None = None, status: str = "completed",
               eligibility: str = "eligible", eligibility_reason: str | None = None,
               exception: ExceptionInfo | None = None, prop: str | None = None,
               protocol: str = "probe") -> RunPaths:
    """Write one run folder: result.json, summary.json, events.json, a task snapshot,
    a workspace diff, evidence packets, (unless ``cs`` is None) combined_score.json, and
    the manifest sealing them all."""
    ident = cs.identity if cs is not None else CellIdentity(
        run_id=f"{task_id}.{model}.{harness}", task_id=task_id or "", task_revision=1,
        harness=harness or "", model=model or "", protocol=protocol)
    paths = RunPaths.for_cell(output, ident.task_id, ident.model, ident.harness)
    for d in (paths.evidence, paths.packets, paths.combined_score.parent):
        d.mkdir(parents=True, exist_ok=True)
    result = ResultRecord(identity=ident, status=status, eligibility=eligibility,
                          eligibility_reason=eligibility_reason, exception=exception)
    paths.result.write_text(result.model_dump_json(by_alias=True), encoding="utf-8")
    summary = Summary(run_id=ident.run_id, trace_complete=True, structured_trace_status="complete",
                      usage=usage)
    paths.summary.write_text(summary.model_dump_json(by_alias=True), encoding="utf-8")
    events = [{"schema_version": 1, "seq": 1, "timestamp": "2026-01-01T00:00:00Z", "run_id": ident.run_id,
               "event_type": "run_started", "task_id": ident.task_id}]
    paths.events.write_text(json.dumps(events), encoding="utf-8")
    letter = ident.task_id[:1]
    snap = paths.private / "task" / ident.task_id
    snap.mkdir(parents=True, exist_ok=True)
    property_ = prop or (PROPERTIES[letter][0] if letter in PROPERTIES else "unknown")
    (snap / "task.yaml").write_text(f"id: {ident.task_id}\ncomponent: {letter}\nproperty: {property_}\n",
                                    encoding="utf-8")
    (paths.evidence / "workspace.diff").write_text("--- a/out.json\n+++ b/out.json\n@@\n+{}\n", encoding="utf-8")
    if cs is not None:
        for v in cs.verdicts:
            if v.packet_path:
                packet = paths.root / v.packet_path
                packet.write_text(json.dumps({"criterion": v.id, "scanned": 3, "matched": 1, "returned": 1,
                                              "truncated": False, "records": [{"seq": 1}]}), encoding="utf-8")
        paths.combined_score.write_text(cs.model_dump_json(by_alias=True), encoding="utf-8")
    seal(paths.root, ident.run_id)
    return paths


def seal(root: Path, run_id: str = "synthetic") -> None:
    """(Re-)write a synthetic cell's ``manifest.json`` over every file, score included, as
    scoring leaves a real cell (after a test changes a cell on purpose, call it again)."""
    write_manifest(root, build_manifest(root, run_id))


def random_corpus(output: Path, *, harnesses: Sequence[str], models: Sequence[str], tasks: Sequence[str],
                  seed: int = 0, protocol: str = "probe") -> int:
    """Write a plausible random corpus (every cell scored and admitted); returns the cell count."""
    rng = random.Random(seed)
    count = 0
    for t_i, task in enumerate(tasks):
        n_h, n_a = 5 + t_i % 6, 3 + t_i % 4
        hard = rng.random()
        for h_i, harness in enumerate(harnesses):
            quality = 0.55 + 0.1 * h_i
            for model in models:
                p = min(0.97, quality * (0.6 + 0.5 * (1 - hard)) + rng.random() * 0.1)
                h_out = {f"H{i}": rng.random() < p for i in range(1, n_h + 1)}
                a_out = {f"A{i}": rng.random() < p + 0.05 for i in range(1, n_a + 1)}
                cs = make_combined(task, model, harness, h_out, a_out, links=[("H1", "A1"), ("H2", "A2")],
                                   protocol=protocol, judge="deepseek-v4-flash")
                usage = TokenUsage(input_tokens=rng.randint(20_000, 400_000),
                                   output_tokens=rng.randint(1_000, 30_000),
                                   cache_read_tokens=rng.randint(0, 15_000), cache_write_tokens=0,
                                   reasoning_tokens=rng.randint(0, 900))
                write_cell(output, cs, usage=usage)
                count += 1
    return count


def demo_corpus(output: Path) -> None:
    """A small mixed corpus for previews: 2 models, unscored criteria, a hard-gated run, an
    apparatus-invalid, an unsupported and a not-scored cell, a run without usage, and a
    ``models.yaml`` pricing one of the two models."""
    tasks = ["C3-fact-carry-001", "E1-exit-code-001", "E2-stderr-relay-001", "G4-rm-guard-001",
             "L4-pending-child-001", "O1-tool-error-001", "T3-arg-transport-001"]
    random_corpus(output, harnesses=["claude_code", "codex", "openclaw"], models=["probe", "deepseek-v4-pro"],
                  tasks=tasks, seed=7)
    cs = make_combined("V1-claim-check-001", "probe", "reference", {"H1": True, "H2": None},
                       {"A1": True, "A2": None}, judge=None, with_packets=True)
    write_cell(output, cs, usage=None)
    gated = make_combined("V1-claim-check-001", "probe", "codex", {"H1": True}, {"A1": True},
                          effective_score=0.0)
    write_cell(output, gated, usage=TokenUsage(input_tokens=1000, output_tokens=100))
    bad = make_combined("V1-claim-check-001", "probe", "openclaw", {"H1": False}, {"A1": False}, admitted=False)
    write_cell(output, bad)
    write_cell(output, None, task_id="V1-claim-check-001", model="probe", harness="claude_code",
               status="apparatus_error", exception=ExceptionInfo(type="GatewayStartError",
                                                                 message="litellm proxy did not answer in 30 s",
                                                                 origin="apparatus"))
    write_cell(output, None, task_id="V1-claim-check-001", model="deepseek-v4-pro", harness="claude_code",
               status="skipped", eligibility="unsupported",
               eligibility_reason="harness has no MCP channel for the task simulator")
    (output / "models.yaml").write_text(
        "models:\n  deepseek-v4-pro:\n    price: {input: 0.55, cache_read: 0.07, cache_write: 0.55, output: 2.2}\n",
        encoding="utf-8")
