"""The incremental calibration record (reports.calibration_record) and ``tracetrial calibrate --record``."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from ci.sampling import sample_ids
from reports.calibration import CalibrationReport, calibrate
from reports.calibration_record import load_record, merge, stale_tasks, write_record
from tests.calibration.test_calibration_table import A, H, cell
from tests.conftest import EXAMPLE_PACK
from tracetrial.task import TaskPack, load_task, pack_digest

REPO = Path(__file__).resolve().parents[2]

MUTANTS = ["drop_stderr", "hide_exit_code"]
REF = "0.1.0+src.aaaaaaaaaaaa"


@pytest.fixture
def pack(tmp_path: Path) -> TaskPack:
    root = tmp_path / "tasks" / EXAMPLE_PACK.name
    shutil.copytree(EXAMPLE_PACK, root)
    return load_task(root)


def measured(out: Path, task: TaskPack) -> CalibrationReport:
    """A calibrated archive of ``task`` (as E1 declares it) under ``out``, and its report."""
    cell(out, "reference", set())
    cell(out, "reference+hide_exit_code", set(task.spec.calibration.mutants["hide_exit_code"]))
    cell(out, "reference+drop_stderr", set())
    return calibrate(out, [task], MUTANTS)


def test_digest_changes_with_any_file_but_not_with_caches(pack: TaskPack) -> None:
    before = pack_digest(pack.root)
    (pack.root / "__pycache__").mkdir(exist_ok=True)
    (pack.root / "__pycache__" / "x.pyc").write_bytes(b"cache")
    assert pack_digest(pack.root) == before
    (pack.root / "workspace" / "extra.txt").write_text("new file")
    assert pack_digest(pack.root) != before


def test_only_changed_or_unrecorded_or_uncalibrated_tasks_are_stale(tmp_path: Path, pack: TaskPack) -> None:
    record = load_record(tmp_path / "none.json")
    assert stale_tasks(record, [pack], REF, MUTANTS) == [pack.id]  # never recorded
    fresh = measured(tmp_path / "out", pack)
    assert fresh.ok
    record, report = merge(record, fresh, [pack], REF, MUTANTS)
    assert report.ok
    assert stale_tasks(record, [pack], REF, MUTANTS) == []
    assert stale_tasks(record, [pack], "0.1.0+src.bbbbbbbbbbbb", MUTANTS) == [pack.id]  # harness changed
    assert stale_tasks(record, [pack], REF, [*MUTANTS, "leak_secret"]) == [pack.id]  # new mutant
    (pack.root / "prompt.md").write_text((pack.root / "prompt.md").read_text() + "\nOne more line.\n")
    assert stale_tasks(record, [load_task(pack.root)], REF, MUTANTS) == [pack.id]  # pack changed


def test_a_task_card_edit_or_a_live_only_criterion_leaves_the_calibration_current(tmp_path: Path,
                                                                                  pack: TaskPack) -> None:
    """The record is keyed by what a probe run reads (tracetrial.task.probe_digest): documentation, the
    verifier's self-test and semantic criteria that only live runs judge cannot change a probe
    calibration; anything else can."""
    record, _ = merge(load_record(tmp_path / "none.json"), measured(tmp_path / "out", pack), [pack], REF, MUTANTS)
    full, probe = pack.digest, pack.probe_digest  # both are read from the folder each time
    (pack.root / "README.md").write_text("# The task card, rewritten\n")
    (pack.root / "verifier" / "selftest.py").write_text("# rule 13's self-test: run by the unit test, never by a cell\n")
    agent = pack.root / "verifier" / "agent_score.yaml"
    probe_rubric = agent.read_text()
    agent.write_text(probe_rubric + """  - id: A9-reply-explains
    type: rubric
    component: E
    trigger: {protocol: live}
    statement: The final reply tells the user the build failed and why.
    evidence: {sources: [trace], event_types: [assistant_message], max_records: 4}
""")
    edited = load_task(pack.root)
    assert any(c.id == "A9-reply-explains" for c in edited.agent_rubric.criteria)
    assert edited.digest != full, "the archive's pack digest still sees every byte"
    assert edited.probe_digest == probe
    assert stale_tasks(record, [edited], REF, MUTANTS) == []
    agent.write_text(probe_rubric.replace("status.json reports", "status.json must report", 1))  # a probe criterion
    assert stale_tasks(record, [load_task(pack.root)], REF, MUTANTS) == [pack.id]
    agent.write_text(probe_rubric)
    assert stale_tasks(record, [load_task(pack.root)], REF, MUTANTS) == []
    (pack.root / "workspace" / "README.md").write_text("a workspace file the agent reads\n")
    assert stale_tasks(record, [load_task(pack.root)], REF, MUTANTS) == [pack.id]


def test_a_failed_calibration_is_recorded_and_stays_stale(tmp_path: Path, pack: TaskPack) -> None:
    cell(tmp_path, "reference", {A[1]})
    fresh = calibrate(tmp_path, [pack], MUTANTS)
    record, report = merge(load_record(tmp_path / "none.json"), fresh, [pack], REF, MUTANTS)
    assert not report.ok and not record.tasks[pack.id].ok
    assert stale_tasks(record, [pack], REF, MUTANTS) == [pack.id]


def test_recorded_rows_are_marked_and_round_trip(tmp_path: Path, pack: TaskPack) -> None:
    fresh = measured(tmp_path / "out", pack)
    record, _ = merge(load_record(tmp_path / "none.json"), fresh, [pack], REF, MUTANTS)
    path = tmp_path / "ci" / "probe.json"
    write_record(path, record)
    text = path.read_text()
    write_record(path, load_record(path))
    assert path.read_text() == text, "re-writing an unchanged record changes no byte"
    empty = calibrate(tmp_path / "nothing", [], MUTANTS)
    again, report = merge(load_record(path), empty, [pack], REF, MUTANTS)
    assert report.ok and {r.variant for r in report.rows} == {"reference", *(f"reference+{m}" for m in MUTANTS)}
    assert all(r.detail.endswith("recorded") for r in report.rows)
    assert again == record


def test_without_a_current_record_nothing_is_taken_on_trust(tmp_path: Path, pack: TaskPack) -> None:
    fresh = measured(tmp_path / "out", pack)
    record, _ = merge(load_record(tmp_path / "none.json"), fresh, [pack], REF, MUTANTS)
    empty = calibrate(tmp_path / "nothing", [], MUTANTS)
    _, report = merge(record, empty, [pack], "0.1.0+src.cccccccccccc", MUTANTS)
    assert not report.ok and [r.status for r in report.rows] == ["not_run"]


def test_a_removed_task_leaves_the_record(tmp_path: Path, pack: TaskPack) -> None:
    fresh = measured(tmp_path / "out", pack)
    record, _ = merge(load_record(tmp_path / "none.json"), fresh, [pack], REF, MUTANTS)
    empty = calibrate(tmp_path / "nothing", [], MUTANTS)
    pruned, report = merge(record, empty, [], REF, MUTANTS)
    assert pruned.tasks == {} and report.rows == []


def test_sample_is_reproducible_and_bounded() -> None:
    ids = [f"T{i}-x-001" for i in range(20)]
    assert sample_ids(ids, 3, "abc") == sample_ids(ids, 3, "abc")
    assert len(sample_ids(ids, 3, "abc")) == 3 and set(sample_ids(ids, 3, "abc")) <= set(ids)
    assert {tuple(sample_ids(ids, 3, s)) for s in "abcdefgh"} != {tuple(sample_ids(ids, 3, "a"))}
    assert sample_ids(ids[:2], 5, "x") == sorted(ids[:2])


def test_h_and_a_are_the_example_packs_criteria(pack: TaskPack) -> None:
    ids = {c.id for c in pack.harness_rubric.criteria} | {c.id for c in pack.agent_rubric.criteria}
    assert set(H) | set(A) <= ids


def test_only_reports_the_named_packs_and_keeps_the_others_recorded(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``calibrate --only`` (one pack at a time while others are being written) runs and reports just
    that pack; the record keeps every other task's entry as it was."""
    from tracetrial_cli.main import main as cli

    record = tmp_path / "record.json"
    shutil.copy(REPO / "ci" / "calibration" / "probe.json", record)
    before = json.loads(record.read_text(encoding="utf-8"))
    cli(["calibrate", "--only", "E1-build-status-001", "--record", str(record), "--report-only",
         "--output", str(tmp_path / "out")])
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("reference")]
    assert rows and all(" E1-build-status-001 " in line for line in rows)
    after = json.loads(record.read_text(encoding="utf-8"))["tasks"]
    assert {k: v for k, v in after.items() if k != "E1-build-status-001"} == {
        k: v for k, v in before["tasks"].items() if k != "E1-build-status-001"}
    assert cli(["calibrate", "--only", "no-such-pack", "--output", str(tmp_path / "out")]) == 2
