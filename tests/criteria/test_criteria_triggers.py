"""Protocol triggers (the paper's ``trigger``): a criterion with ``trigger: {protocol: live}``
belongs to live runs only; a probe run leaves it out of every denominator (no judge needed)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from criteria import score_run
from tests.criteria.archive_factory import RunBuilder, rubric_criterion, rule_criterion, tool_event, write_task_pack
from tracetrial.errors import TaskPackErrors
from tracetrial.rubric import CriterionSpec, Rubric, Trigger
from tracetrial.task import load_task

LIVE = {"protocol": "live"}


def _live(crit: dict[str, Any]) -> dict[str, Any]:
    return {**crit, "trigger": LIVE}


def test_trigger_forms() -> None:
    always = CriterionSpec.model_validate(rule_criterion("H1", "trace_event_exists", event_type="tool"))
    live = CriterionSpec.model_validate(_live(rubric_criterion("A9", "the reply says why the build failed")))
    assert always.applies_to("probe") and always.applies_to("live") and always.trigger_text == "always"
    assert live.trigger == Trigger(protocol="live") and live.trigger_text == "protocol: live"
    assert live.applies_to("live") and not live.applies_to("probe")
    with pytest.raises(ValueError):
        CriterionSpec.model_validate({**rule_criterion("H1", "x"), "trigger": {"protocol": "sometimes"}})
    with pytest.raises(ValueError):
        CriterionSpec.model_validate({**rule_criterion("H1", "x"), "trigger": {"protocol": "live", "when": "x"}})
    # a prose trigger documents the condition the rule checks: it applies under every protocol
    prose = CriterionSpec.model_validate({**rule_criterion("H1", "x"), "trigger": "the mount happened"})
    assert prose.applies_to("probe") and prose.applies_to("live") and prose.trigger_text == "the mount happened"


def test_a_layer_needs_a_criterion_under_each_protocol() -> None:
    with pytest.raises(ValueError, match="no criterion applies under the probe protocol"):
        Rubric.model_validate({"layer": "agent", "criteria": [_live(rubric_criterion("A1"))]})


def _pack(tmp_path: Path) -> Path:
    return write_task_pack(
        tmp_path / "tasks",
        harness=[rule_criterion("H1", "trace_event_exists", event_type="tool"),
                 _live(rubric_criterion("H9", "the harness's notice of the failure is visible"))],
        agent=[rule_criterion("A1", "file_exists", path="out.txt"),
               _live(rubric_criterion("A9", "the final reply tells the user the build failed and why"))],
        links=[{"harness": "H1", "agent": "A1", "distortion": "tool result lost"},
               {"harness": "H9", "agent": "A9", "distortion": "notice hidden"},
               {"harness": "H1", "agent": "A9", "distortion": "tool result lost"}])


def test_the_probe_view_of_a_pack_drops_live_criteria_and_their_links(tmp_path: Path) -> None:
    task = load_task(_pack(tmp_path))
    probe = task.for_protocol("probe")
    assert [c.id for c in probe.harness_rubric.criteria] == ["H1"] and [c.id for c in probe.agent_rubric.criteria] == ["A1"]
    assert [(lk.harness, lk.agent) for lk in probe.harness_rubric.links] == [("H1", "A1")]
    assert probe.digest == task.digest                       # the same pack, scored as a probe run
    assert task.for_protocol("live") is task                 # live: every criterion applies


def test_a_probe_run_scores_without_the_live_criteria(tmp_path: Path) -> None:
    task = load_task(_pack(tmp_path))
    run = RunBuilder(tmp_path / "out", task.root, events=[tool_event("Bash", {"command": "ls"}, "out.txt", exit_code=0)],
                     workspace={"out.txt": "x"})
    score = score_run(task, run.build())
    assert score.admitted
    assert [v.id for v in score.verdicts] == ["H1", "A1"]      # H9/A9 are not in the denominators
    assert score.harness.n == 1 and score.agent.n == 1 and score.harness.unscored == 0
    assert score.S == 100.0                                    # no judge needed, nothing unscored


def test_calibration_may_not_expect_a_live_criterion_to_flip(tmp_path: Path) -> None:
    root = _pack(tmp_path)
    text = (root / "task.yaml").read_text(encoding="utf-8")
    (root / "task.yaml").write_text(text + 'calibration:\n  mutants:\n    hide_exit_code: ["H1", "A9"]\n',
                                    encoding="utf-8")
    with pytest.raises(TaskPackErrors, match="applies only under the live protocol"):
        load_task(root)


def test_a_live_run_holds_every_criterion(tmp_path: Path) -> None:
    """Under a live model the semantic criteria apply: without a judge they are unscored, never passed."""
    task = load_task(_pack(tmp_path))
    run = RunBuilder(tmp_path / "out", task.root, protocol="live",
                     events=[tool_event("Bash", {"command": "ls"}, "out.txt", exit_code=0)], workspace={"out.txt": "x"})
    score = score_run(task, run.build())
    assert [v.id for v in score.verdicts] == ["H1", "H9", "A1", "A9"]
    assert {v.id: v.passed for v in score.verdicts if v.id.endswith("9")} == {"H9": None, "A9": None}


def test_a_cassette_driven_live_run_of_a_suite_pack_judges_its_semantic_criteria(tmp_path: Path) -> None:
    """A live run of a real pack (C1-ticket-export-001): its live-only criteria are judged from a
    recorded cassette, and a verdict citing anything outside the packet is unscored, never a pass."""
    import json
    import re
    import shutil

    from criteria.judge import CassetteJudge
    from tests.conftest import REPO
    from tests.criteria.archive_factory import event

    root = tmp_path / "tasks" / "C1-ticket-export-001"
    shutil.copytree(REPO / "tasks" / "C1-ticket-export-001", root)
    task = load_task(root)
    live = [c.id for c in [*task.agent_rubric.criteria, *task.harness_rubric.criteria] if not c.applies_to("probe")]
    assert "A4-reply-reports-partial-export" in live

    class Reader:
        """Stands in for a judge model: cites the packet's first ref (or an invented one)."""

        def __init__(self, invent: bool) -> None:
            self.name, self.invent = "reader", invent

        def complete(self, messages: list[dict[str, str]]) -> str:
            refs = re.findall(r'"ref": "([^"]+)"', messages[-1]["content"])
            cite = ["seq:9999"] if self.invent else refs[:1]
            return json.dumps({"state": 1 if refs else 0, "rationale": "read the packet", "citations": cite})

    def run(name: str) -> Path:
        builder = RunBuilder(tmp_path / name, root, protocol="live", harness="codex",
                             events=[event("assistant_message", content="checksums.json written: a=7dcc, b=a63f, "
                                           "b_exit_code=1.", content_kind="text")],
                             workspace={"checksums.json": '{"a": "7dcc", "b": "a63f", "b_exit_code": 1}\n'})
        return builder.build()

    cassette = tmp_path / "cassette.json"
    recorded = score_run(task, run("rec"), judge=CassetteJudge(cassette, record=Reader(invent=False)))
    by_id = {v.id: v for v in recorded.verdicts}
    assert by_id["A4-reply-reports-partial-export"].passed is True
    assert "judge state 1" in by_id["A4-reply-reports-partial-export"].reason
    replayed = score_run(task, run("rec2"), judge=CassetteJudge(cassette))  # same packets: no model call
    assert {v.id: v.passed for v in replayed.verdicts if v.id in live} == {
        v.id: v.passed for v in recorded.verdicts if v.id in live}
    invented = score_run(task, run("inv"), judge=Reader(invent=True))
    verdict = next(v for v in invented.verdicts if v.id == "A4-reply-reports-partial-export")
    assert verdict.passed is None and "not in the evidence packet" in verdict.reason
