"""Evaluation order and the resolution of every judge state (SPEC §4), end to end through score_run."""

from __future__ import annotations

import json

import pytest

from criteria import score_run
from criteria.errors import JudgeError
from tests.criteria.archive_factory import rubric_criterion, rule_criterion, tool_event
from tests.criteria.conftest import ScriptedJudge
from tracetrial.task import load_task


def answer(state: int, *cites: str, rationale: str = "see the cited evidence") -> str:
    return json.dumps({"state": state, "rationale": rationale, "citations": list(cites)})


@pytest.fixture
def scored(make_pack, make_run):
    """``scored(answers, *, out_txt=True) -> (CombinedScore, run_dir, judge)``."""
    pack = make_pack(
        harness=[
            rule_criterion("H1", "trace_event_exists", event_type="tool"),
            rubric_criterion("H2", "the build's exit status reaches the model", event_types=["tool"], match=["exit"]),
            rubric_criterion("H3", "a compaction notice is visible", event_types=["context_compaction"]),
            rubric_criterion("H4", "optional evidence", event_types=["context_compaction"], required=False),
        ],
        agent=[
            rule_criterion("A1", "file_exists", path="out.txt"),
            rubric_criterion("A2", "the report states the failure", sources=["workspace"]),
        ],
    )

    def run(answers, *, out_txt=True, judge_present=True):
        builder = make_run(pack)
        builder.events.append(tool_event("Bash", {"command": "make"}, "BUILD OK\nexit code 2", exit_code=2))
        if out_txt:
            builder.workspace["out.txt"] = "build failed (exit 2)\n"
        builder.workspace["report.md"] = "The build failed.\n"
        run_dir = builder.build()
        judge = ScriptedJudge(answers) if judge_present else None
        score = score_run(load_task(run_dir / "private" / "task" / pack.name), run_dir, judge=judge)
        return score, run_dir, judge

    return run


def verdict(score, cid):
    return next(v for v in score.verdicts if v.id == cid)


def test_states_0_and_1(scored):
    score, run_dir, _ = scored({"A2": answer(1, "file:report.md"), "H2": answer(0, "seq:2"), "H4": answer(0)})
    a2, h2 = verdict(score, "A2"), verdict(score, "H2")
    assert (a2.raw_state, a2.passed) == (1, True) and (h2.raw_state, h2.passed) == (0, False)
    record = json.loads((run_dir / "evidence" / "judge" / "A2.json").read_text())
    assert record["parsed"] == {"state": 1, "rationale": "see the cited evidence", "citations": ["file:report.md"]}
    assert record["model"] == "scripted-judge" and record["prompt"][0]["role"] == "system"
    assert a2.packet_path == "evidence/packets/A2.json" and (run_dir / a2.packet_path).is_file()
    assert score.judge == "scripted-judge"


def test_pass_without_citation_is_no_supporting_evidence(scored):
    score, _, _ = scored({"A2": answer(1), "H2": answer(1, "seq:2"), "H4": answer(1, rationale="nothing")})
    a2 = verdict(score, "A2")
    assert a2.passed is False and "without citing evidence" in a2.reason


def test_state_2_passes_iff_every_agent_criterion_passed(scored):
    answers = {"A2": answer(1, "file:report.md"), "H2": answer(2), "H4": answer(0)}
    score, _, _ = scored(answers)
    assert verdict(score, "H2").passed is True and "every agent criterion passed" in verdict(score, "H2").reason
    score, _, _ = scored(answers, out_txt=False)  # A1 fails
    h2 = verdict(score, "H2")
    assert (h2.raw_state, h2.passed) == (2, False) and "agent criteria failed: A1" in h2.reason


def test_state_2_is_unscored_while_an_agent_criterion_is_unscored(scored):
    score, _, _ = scored({"A2": JudgeError("judge down"), "H2": answer(2), "H4": answer(0)})
    h2 = verdict(score, "H2")
    assert h2.passed is None and "agent criteria unscored: A2" in h2.reason


def test_state_3_resolves_to_fail(scored):
    score, _, _ = scored({"A2": answer(1, "file:report.md"), "H2": answer(3, "seq:2"), "H4": answer(0)})
    h2 = verdict(score, "H2")
    assert (h2.raw_state, h2.passed) == (3, False) and "harness fault -> 0" in h2.reason


def test_required_empty_selection_is_zero_with_a_record(scored):
    score, run_dir, judge = scored({"A2": answer(1, "file:report.md"), "H2": answer(1, "seq:2"), "H4": answer(0)})
    h3 = verdict(score, "H3")
    assert (h3.raw_state, h3.passed, h3.empty_selection) == (0, False, True)
    assert "empty selection" in h3.reason and h3.judge_path is None
    assert "H3" not in judge.prompts  # the judge is not asked about an empty required selection
    packet = json.loads((run_dir / "evidence" / "packets" / "H3.json").read_text())
    assert packet["empty_selection"] is True and packet["matched"] == 0
    assert "H4" in judge.prompts  # a non-required empty selector still goes to the judge


def test_order_agent_verdicts_are_downstream_context_for_harness_only(scored):
    _, _, judge = scored({"A2": answer(0, "file:report.md"), "H2": answer(1, "seq:2"), "H4": answer(0)})
    assert "Downstream context" not in judge.prompts["A2"][1]["content"]
    harness_prompt = judge.prompts["H2"][1]["content"]
    assert '"id": "A2"' in harness_prompt and '"verdict": "fail"' in harness_prompt


def test_malformed_output_is_unscored_and_counted(scored):
    score, run_dir, _ = scored({"A2": "I think it passes", "H2": answer(1, "seq:999"), "H4": answer(0)})
    a2, h2 = verdict(score, "A2"), verdict(score, "H2")
    assert a2.passed is None and "malformed judge output: judge output is not JSON" in a2.reason
    assert h2.passed is None and "seq:999" in h2.reason
    assert (score.harness.n, score.harness.unscored) == (4, 1) and score.agent.unscored == 1
    assert not score.agent_success and not score.combined_pass
    assert json.loads((run_dir / "evidence" / "judge" / "A2.json").read_text())["response"] == "I think it passes"


def test_no_judge_and_unreachable_judge_are_unscored(scored):
    score, run_dir, _ = scored({}, judge_present=False)
    assert verdict(score, "A2").reason == "unscored: no judge configured" and score.judge is None
    assert json.loads((run_dir / "evidence" / "judge" / "A2.json").read_text())["error"] == "no judge configured"
    score, _, _ = scored({"A2": JudgeError("judge 'x' unreachable: timeout")})
    assert verdict(score, "A2").passed is None and "unreachable: timeout" in verdict(score, "A2").reason
    assert score.agent.p == 1 and score.agent.n == 2  # unscored stays in n, never in p
