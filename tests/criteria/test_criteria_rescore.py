"""Offline re-scoring reproduces every scoring file byte for byte from the archive alone."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml

from criteria import score_run
from criteria.errors import RescoreError
from criteria.judge import CassetteJudge
from criteria.rescore import rescore_output
from tests.criteria.archive_factory import (
    RunBuilder,
    rubric_criterion,
    rule_criterion,
    tool_event,
    write_task_pack,
)
from tests.criteria.conftest import ScriptedJudge
from tracetrial.archive import build_manifest, verify_manifest, write_manifest
from tracetrial.task import load_task

ANSWERS = {
    "H2": json.dumps({"state": 2, "rationale": "the path was not exercised", "citations": []}),
    "A2": json.dumps({"state": 1, "rationale": "report.md says failed", "citations": ["file:report.md"]}),
    "A3": "not json at all",
}


def tree(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture
def output(tmp_path: Path) -> Path:
    """An output folder with a judged cell, a second harness, a tampered cell and a skipped cell."""
    pack = write_task_pack(
        tmp_path / "tasks", truth={"verifier_pass": {"A1": True}},
        harness=[rule_criterion("H1", "trace_event_exists", event_type="tool"),
                 rubric_criterion("H2", "exit status visible", event_types=["tool"])],
        agent=[rule_criterion("A1", "verifier"),
               rubric_criterion("A2", "report states the failure", sources=["workspace"]),
               rubric_criterion("A3", "report is concise", sources=["workspace"])],
        links=[{"harness": "H1", "agent": "A1", "distortion": "d"}])
    out = tmp_path / "out"
    for harness, run_id in (("reference", "run-0001"), ("codex", "run-0002"), ("tampered", "run-0003")):
        run = RunBuilder(out, pack, harness=harness, run_id=run_id)
        run.events.append(tool_event("Bash", {"command": "make"}, "BUILD OK\nexit code 2" + "!" * 30_000, exit_code=2))
        run.gateway = []
        run.workspace["report.md"] = "The build failed.\n"
        run_dir = run.build()
        if harness == "tampered":
            (run_dir / "workspace" / "report.md").write_text("edited after sealing")
        score_run(load_task(run_dir / "private" / "task" / pack.name), run_dir, judge=ScriptedJudge(ANSWERS))
    RunBuilder(out, pack, harness="unsupported", run_id="run-0004", status="skipped").build()
    return out


def test_rescore_is_byte_identical(output: Path):
    cells = sorted(output.glob("traces/*/*/*"))
    before = {c.name: tree(c) for c in cells}
    assert "artifacts/llm_judge/combined_score.json" in before["reference"]
    assert "evidence/judge/A3.json" in before["reference"] and "evidence/packets/_verifier.json" in before["reference"]
    errors: list[str] = []
    written = rescore_output(output, errors=errors)
    assert [p.parents[2].name for p in written] == ["codex", "reference"]
    assert errors == [("traces/E1-synthetic-check-001/probe/tampered: tampered: workspace/report.md: content changed "
                       "since the manifest was written (sha256 mismatch)")]
    after = {c.name: tree(c) for c in cells}
    assert after == before  # the tampered cell included: kept exactly as found
    assert "artifacts/llm_judge/combined_score.json" not in after["unsupported"]  # never measured


def test_combined_score_is_canonical(output: Path):
    path = output / "traces" / "E1-synthetic-check-001" / "probe" / "reference" / "artifacts" / "llm_judge" / "combined_score.json"
    text = path.read_text()
    data = json.loads(text)
    assert text == json.dumps(data, indent=1, ensure_ascii=False, sort_keys=True) + "\n"
    assert "2026" not in text and "timestamp" not in text  # no times: re-scoring is reproducible
    assert data["judge"] == "scripted-judge" and data["verdicts"][3]["passed"] is True  # A2
    assert data["verdicts"][1]["passed"] is None and "agent criteria unscored: A3" in data["verdicts"][1]["reason"]
    assert data["verdicts"][4]["passed"] is None and "not JSON" in data["verdicts"][4]["reason"]
    # Scoring writes nothing into a cell whose seal does not verify (it is scored, not admitted).
    assert not (path.parents[3] / "tampered" / "artifacts" / "llm_judge" / "combined_score.json").exists()


def test_rescore_with_a_cassette_judge(output: Path, tmp_path: Path):
    cell = output / "traces" / "E1-synthetic-check-001" / "probe" / "reference"
    before = tree(cell)
    cassette = CassetteJudge(tmp_path / "cassette.json", name="scripted-judge", record=ScriptedJudge(ANSWERS))
    rescore_output(output, judge=cassette, errors=[])
    assert tree(cell) == before
    replay = CassetteJudge(tmp_path / "cassette.json")
    assert len(replay.entries) == 3
    rescore_output(output, judge=replay, errors=[])
    assert tree(cell) == before


def test_rescore_replays_a_changed_answer_only_through_a_new_judge(output: Path):
    cell = output / "traces" / "E1-synthetic-check-001" / "probe" / "reference"
    changed = dict(ANSWERS, A3=json.dumps({"state": 0, "rationale": "too long", "citations": ["file:report.md"]}))
    rescore_output(output, judge=ScriptedJudge(changed), errors=[])
    data = json.loads((cell / "artifacts" / "llm_judge" / "combined_score.json").read_text())
    assert next(v for v in data["verdicts"] if v["id"] == "A3")["passed"] is False
    rescore_output(output, errors=[])  # replaying the archive now reproduces the new answer
    assert json.loads((cell / "artifacts" / "llm_judge" / "combined_score.json").read_text()) == data


def test_a_broken_cell_is_reported_and_the_others_are_rescored(output: Path):
    broken = output / "traces" / "E1-synthetic-check-001" / "probe" / "codex"
    # A task snapshot that does not load, sealed that way (removing it would make the
    # cell half-written instead: see test_tamper_evidence.py).
    (broken / "private" / "task" / "E1-synthetic-check-001" / "task.yaml").write_text("id: [unclosed\n")
    write_manifest(broken, build_manifest(broken, "run-0002"))
    errors: list[str] = []
    written = rescore_output(output, errors=errors)
    assert [p.parents[2].name for p in written] == ["reference"]
    assert len(errors) == 2 and errors[0].startswith("traces/E1-synthetic-check-001/probe/codex: TaskPackErrors")
    assert errors[1].startswith("traces/E1-synthetic-check-001/probe/tampered: tampered: workspace/report.md")
    with pytest.raises(RescoreError, match="2 cell"):
        rescore_output(output)


def test_evidence_of_a_previous_scoring_does_not_outlive_it(output: Path, tmp_path: Path):
    cell = output / "traces" / "E1-synthetic-check-001" / "probe" / "reference"
    assert (cell / "evidence" / "packets" / "A2.json").is_file()
    # Scored against a newer revision of the task: not admitted, so no packets and no judge
    # records this time. The old ones go (sealed by the last scoring, not by the run), and
    # the cell is re-sealed without them.
    newer = tmp_path / "newer" / "E1-synthetic-check-001"
    shutil.copytree(cell / "private" / "task" / "E1-synthetic-check-001", newer)
    spec = yaml.safe_load((newer / "task.yaml").read_text())
    (newer / "task.yaml").write_text(yaml.safe_dump({**spec, "revision": 2}, default_style='"'))
    score_run(load_task(newer), cell, judge=ScriptedJudge(ANSWERS))
    data = json.loads((cell / "artifacts" / "llm_judge" / "combined_score.json").read_text())
    assert data["admitted"] is False
    assert not list((cell / "evidence" / "packets").glob("*.json"))
    assert not list((cell / "evidence" / "judge").glob("*.json"))
    assert verify_manifest(cell).ok
