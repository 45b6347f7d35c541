"""Scores (SPEC §5) and attribution: sets, bypass, link activation and the seven label rules (SPEC §6)."""

from __future__ import annotations

import pytest

from criteria import score_run
from criteria.registry import RuleOutcome
from criteria.scoring import attribute, combine, layer_score, run_label
from tests.criteria.archive_factory import rule_criterion, tool_event
from tracetrial.results import AdmissionDecision, CellIdentity, CriterionVerdict
from tracetrial.rubric import LinkSpec, RuleSpec
from tracetrial.task import load_task

IDENT = CellIdentity(run_id="r", task_id="E1-x-001", task_revision=1, harness="h", model="m", protocol="probe")


def v(cid: str, layer: str, passed: bool | None, role: str = "core") -> CriterionVerdict:
    return CriterionVerdict(id=cid, layer=layer, type="rule", role=role, passed=passed,  # type: ignore[arg-type]
                            raw_state=None if passed is None else int(passed), reason="r")


@pytest.mark.parametrize(("admitted", "l_act", "z_h", "z_a", "b", "label", "rule"), [
    (False, [{"l": 1}], ["h"], ["a"], [], "apparatus_invalid", 1),
    (True, [{"l": 1}], ["h"], ["a"], [], "harness_caused", 2),
    (True, [], ["h"], [], [], "harness_absorbed", 3),
    (True, [], ["h"], ["a"], [], "agent_caused", 4),
    (True, [], [], [], ["h"], "measurement_bypass", 5),
    (True, [], [], ["a"], [], "agent_caused", 6),
    (True, [], [], [], [], "clean", 7),
])
def test_seven_label_rules(admitted, l_act, z_h, z_a, b, label, rule):
    assert run_label(admitted, l_act, z_h, z_a, b) == (label, rule)


def test_bypass_moves_a_harness_failure_out_of_z_h():
    verdicts = [v("H1", "harness", False), v("H2", "harness", True), v("A1", "agent", True)]
    plain = attribute(verdicts, admitted=True, bypass={}, activations=[])
    assert (plain.F_H, plain.Z_H, plain.B, plain.label, plain.label_rule) == (["H1"], ["H1"], [], "harness_absorbed", 3)
    bypassed = attribute(verdicts, admitted=True, bypass={"H1": RuleOutcome.ok("wrapper replaced status")},
                         activations=[])
    assert (bypassed.F_H, bypassed.B, bypassed.Z_H) == (["H1"], ["H1"], [])
    assert (bypassed.label, bypassed.label_rule) == ("measurement_bypass", 5)
    # a bypass rule on a passing criterion puts nothing in B (B ⊆ F_H)
    assert attribute(verdicts, admitted=True, bypass={"H2": RuleOutcome.ok("x")}, activations=[]).B == []


def test_bypass_with_agent_failure_is_agent_caused():
    verdicts = [v("H1", "harness", False), v("A1", "agent", False)]
    out = attribute(verdicts, admitted=True, bypass={"H1": RuleOutcome.ok("x")}, activations=[])
    assert (out.Z_H, out.label, out.label_rule) == ([], "agent_caused", 6)


def test_link_activation_and_linked_split():
    verdicts = [v("H1", "harness", False), v("H2", "harness", False), v("A1", "agent", False), v("A2", "agent", False)]
    no_q = LinkSpec(harness="H1", agent="A1", distortion="exit status hidden")
    with_q = LinkSpec(harness="H2", agent="A2", distortion="d", activation=RuleSpec(kind="trace_event_exists"))
    held = attribute(verdicts, admitted=True, bypass={},
                     activations=[(no_q, None), (with_q, RuleOutcome.ok("q holds"))])
    assert [e["harness"] for e in held.L_act] == ["H1", "H2"]
    assert held.L_act[0]["reason"].startswith("both endpoints failed")
    assert (held.label, held.linked_agent_failures, held.unlinked_agent_failures) == ("harness_caused", ["A1", "A2"], [])
    not_held = attribute(verdicts, admitted=True, bypass={},
                         activations=[(no_q, None), (with_q, RuleOutcome.fail("q does not hold"))])
    assert [e["agent"] for e in not_held.L_act] == ["A1"] and not_held.unlinked_agent_failures == ["A2"]
    passing = [v("H1", "harness", True), v("A1", "agent", False)]
    assert attribute(passing, admitted=True, bypass={}, activations=[(no_q, None)]).L_act == []


def test_layer_score_counts_unscored_in_n_and_ignores_diagnostic():
    score = layer_score([v("A1", "agent", True), v("A2", "agent", None), v("A3", "agent", False),
                         v("A4", "agent", False, role="diagnostic")])
    assert (score.p, score.n, score.unscored, score.score) == (1, 3, 1, pytest.approx(50 / 3))
    out = attribute([v("A4", "agent", False, role="diagnostic")], admitted=True, bypass={}, activations=[])
    assert out.Z_A == [] and out.label == "clean"


def test_combine_scores_pass_flags_and_gate():
    verdicts = [v("H1", "harness", True), v("H2", "harness", True), v("A1", "agent", True)]
    ok = combine(IDENT, verdicts, admitted=True, admission=[], hard_gates=[], bypass={}, activations=[], judge=None)
    assert (ok.S_H, ok.S_A, ok.S, ok.effective_score) == (50.0, 50.0, 100.0, 100.0)
    assert ok.combined_pass and ok.agent_success and ok.clean
    gate = AdmissionDecision(check="tool_call_cap", ok=False, reason="exceeded")
    zeroed = combine(IDENT, verdicts, admitted=True, admission=[], hard_gates=[gate], bypass={}, activations=[],
                     judge=None)
    assert zeroed.S == 100.0 and zeroed.effective_score == 0.0 and not zeroed.combined_pass
    half = combine(IDENT, [v("H1", "harness", False), v("H2", "harness", True), v("A1", "agent", True)],
                   admitted=True, admission=[], hard_gates=[], bypass={"H1": RuleOutcome.ok("b")}, activations=[],
                   judge=None)
    assert half.S_H == 25.0 and half.agent_success and not half.combined_pass
    assert next(x for x in half.verdicts if x.id == "H1").bypassed  # bypass-affected zeros stay in n


def test_end_to_end_bypass_and_link(make_pack, make_run):
    wrapper = {"kind": "trace_event_exists", "event_type": "tool",
               "where": {"tool_call.arguments.command": {"contains": "|| true"}}}
    pack = make_pack(
        harness=[{**rule_criterion("H1", "trace_field_match", event_type="tool", field="tool_result.exit_code", gte=1),
                  "bypass": wrapper},
                 rule_criterion("H2", "trace_event_exists", event_type="tool", where={"tool_call.name": "Read"})],
        agent=[rule_criterion("A1", "file_exists", path="status.json"), rule_criterion("A2", "file_exists", path="x")],
        links=[{"harness": "H2", "agent": "A1", "distortion": "file content never delivered",
                "activation": {"kind": "trace_event_count", "event_type": "tool", "max": 5}},
               {"harness": "H1", "agent": "A2", "distortion": "d",
                "activation": {"kind": "trace_event_count", "event_type": "tool", "min": 5}}],
    )
    run = make_run(pack)
    run.events.append(tool_event("Bash", {"command": "make || true"}, "BUILD OK", exit_code=0))
    run_dir = run.build()
    score = score_run(load_task(run_dir / "private" / "task" / pack.name), run_dir)
    att = score.attribution
    assert (att.F_H, att.B, att.Z_H, att.Z_A) == (["H1", "H2"], ["H1"], ["H2"], ["A1", "A2"])
    assert [(e["harness"], e["agent"]) for e in att.L_act] == [("H2", "A1")]  # H1's q_l does not hold
    assert (att.label, att.label_rule) == ("harness_caused", 2)
    assert att.linked_agent_failures == ["A1"] and att.unlinked_agent_failures == ["A2"]
