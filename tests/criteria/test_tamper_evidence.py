"""Tamper evidence (issue 17): the manifest seals every file of a cell, the score included;
scoring re-seals only an intact cell; ``tracetrial rescore`` names tampered and half-written
cells, scores none of them, keeps them as found, and exits non-zero."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from criteria import score_run
from tests.criteria.archive_factory import (
    RunBuilder,
    flip_one_byte,
    forge_clean_score,
    rubric_criterion,
    rule_criterion,
    tool_event,
    write_task_pack,
)
from tests.criteria.conftest import ScriptedJudge
from tracetrial.archive import (
    COMBINED_SCORE,
    LEGACY_MANIFEST_SCHEMA,
    MANIFEST,
    SCORING_OUTPUTS,
    Manifest,
    build_manifest,
    check_seal,
    reseal_scoring,
    verify_manifest,
    write_manifest,
)
from tracetrial.errors import ArchiveError
from tracetrial.task import load_task
from tracetrial_cli.main import main

TASK = "E1-synthetic-check-001"
ANSWERS = {"A2": json.dumps({"state": 1, "rationale": "report.md says failed", "citations": ["file:report.md"]})}


def tree(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture
def pack(tmp_path: Path) -> Path:
    return write_task_pack(
        tmp_path / "tasks", truth={"verifier_pass": {"A1": True}},
        harness=[rule_criterion("H1", "trace_event_exists", event_type="tool")],
        agent=[rule_criterion("A1", "verifier"),
               rubric_criterion("A2", "report states the failure", sources=["workspace"])])


def scored_cell(out: Path, pack: Path, harness: str, run_id: str, *, seal: bool = True) -> Path:
    """A cell as a live session leaves it: sealed, scored, re-sealed (a failing H1: no tool event)."""
    run = RunBuilder(out, pack, harness=harness, run_id=run_id)
    if harness != "failing":
        run.events.append(tool_event("Bash", {"command": "make"}, "BUILD OK", exit_code=0))
    run.workspace["report.md"] = "The build failed.\n"
    run_dir = run.build(seal=seal)
    if seal:
        score_run(load_task(run_dir / "private" / "task" / TASK), run_dir, judge=ScriptedJudge(ANSWERS))
    return run_dir


def cell_of(out: Path, harness: str) -> Path:
    return out / "traces" / TASK / "probe" / harness


def rescore_cli(out: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(["rescore", str(out)])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_the_manifest_seals_every_file_the_score_included(tmp_path: Path, pack: Path) -> None:
    run_dir = scored_cell(tmp_path / "out", pack, "reference", "run-1")
    listed = {e.path for e in Manifest.model_validate_json((run_dir / MANIFEST).read_text()).files}
    on_disk = set(tree(run_dir)) - {MANIFEST}
    assert listed == on_disk
    assert {COMBINED_SCORE, "evidence/packets/_verifier.json", "evidence/packets/A2.json",
            "evidence/judge/A2.json"} <= listed
    assert check_seal(run_dir).state == "sealed" and verify_manifest(run_dir).ok


def test_a_consistently_forged_score_breaks_the_seal(tmp_path: Path, pack: Path) -> None:
    run_dir = scored_cell(tmp_path / "out", pack, "failing", "run-1")
    assert json.loads((run_dir / COMBINED_SCORE).read_text())["S"] < 100
    forge_clean_score(run_dir)
    check = check_seal(run_dir)
    assert check.state == "tampered" and check.first_file == COMBINED_SCORE
    assert "sha256 mismatch" in check.describe()


def test_scoring_never_writes_into_nor_seals_a_tampered_cell(tmp_path: Path, pack: Path) -> None:
    run_dir = scored_cell(tmp_path / "out", pack, "reference", "run-1")
    flip_one_byte(run_dir / "events.json")
    before = tree(run_dir)
    score = score_run(load_task(run_dir / "private" / "task" / TASK), run_dir, judge=ScriptedJudge(ANSWERS))
    assert not score.admitted  # scored in memory: not admitted ...
    assert tree(run_dir) == before  # ... but nothing written, the manifest not re-sealed
    with pytest.raises(ArchiveError, match="refusing to re-seal a tampered cell"):
        reseal_scoring(run_dir, check_seal(run_dir))


def test_reseal_refuses_a_change_outside_the_scoring_outputs(tmp_path: Path, pack: Path) -> None:
    run_dir = scored_cell(tmp_path / "out", pack, "reference", "run-1")
    intact = check_seal(run_dir)
    (run_dir / "workspace" / "report.md").write_text("changed while scoring")
    with pytest.raises(ArchiveError, match="workspace/report.md"):
        reseal_scoring(run_dir, intact)
    assert check_seal(run_dir).first_file == "workspace/report.md"


def test_rescore_names_a_forged_score_keeps_it_and_exits_non_zero(tmp_path: Path, pack: Path,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    scored_cell(out, pack, "reference", "run-1")
    forged = scored_cell(out, pack, "failing", "run-2")
    forge_clean_score(forged)
    kept = tree(forged)
    code, stdout, stderr = rescore_cli(out, capsys)
    assert code == 1
    assert f"tampered: traces/{TASK}/probe/failing: {COMBINED_SCORE}: content changed" in stderr
    assert "(1 rescored, 1 tampered, 0 half-written, 0 failed, 0 not measured (skipped))" in stdout
    assert tree(forged) == kept  # the evidence is kept as found, the forgery not overwritten


def test_rescore_names_one_changed_byte_in_events_json(tmp_path: Path, pack: Path,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    run_dir = scored_cell(out, pack, "reference", "run-1")
    flip_one_byte(run_dir / "events.json")
    kept = tree(run_dir)
    code, stdout, stderr = rescore_cli(out, capsys)
    assert code == 1
    assert f"tampered: traces/{TASK}/probe/reference: events.json: content changed" in stderr
    assert "rescored 0 cell(s)" in stdout and "1 tampered" in stdout
    assert tree(run_dir) == kept


def test_a_half_written_cell_is_reported_and_not_scored(tmp_path: Path, pack: Path,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    unsealed = scored_cell(out, pack, "killed", "run-1", seal=False)  # the session died before the seal
    emptied = scored_cell(out, pack, "emptied", "run-2")
    (emptied / "summary.json").unlink()  # a file the manifest lists
    code, stdout, stderr = rescore_cli(out, capsys)
    assert code == 1
    assert f"half-written: traces/{TASK}/probe/killed: no manifest.json: the cell never finished" in stderr
    assert f"half-written: traces/{TASK}/probe/emptied: summary.json: listed in the manifest but missing" in stderr
    assert "(0 rescored, 0 tampered, 2 half-written, 0 failed, 0 not measured (skipped))" in stdout
    assert not (unsealed / COMBINED_SCORE).exists()  # never scored
    assert check_seal(unsealed).state == "unsealed"


def test_intact_cells_rescore_with_exit_zero_and_counts(tmp_path: Path, pack: Path,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    run_dir = scored_cell(out, pack, "reference", "run-1")
    RunBuilder(out, pack, harness="unsupported", run_id="run-2", status="skipped").build()
    before = tree(run_dir)
    code, stdout, stderr = rescore_cli(out, capsys)
    assert code == 0, stderr
    assert stdout.strip() == (f"rescored 1 cell(s) under {out} (1 rescored, 0 tampered, 0 half-written, 0 failed, "
                              "1 not measured (skipped))")
    assert tree(run_dir) == before and check_seal(run_dir).ok


def test_a_legacy_seal_is_rescored_and_resealed(tmp_path: Path, pack: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    run_dir = scored_cell(out, pack, "reference", "run-1")
    score = (run_dir / COMBINED_SCORE).read_bytes()
    old = build_manifest(run_dir, "run-1", exclude=SCORING_OUTPUTS).model_copy(update={"schema_": LEGACY_MANIFEST_SCHEMA})
    write_manifest(run_dir, old)
    assert check_seal(run_dir).state == "legacy" and not verify_manifest(run_dir).ok
    code, _, stderr = rescore_cli(out, capsys)
    assert code == 0, stderr
    assert check_seal(run_dir).ok and (run_dir / COMBINED_SCORE).read_bytes() == score
