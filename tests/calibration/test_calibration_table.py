"""The discrimination table logic (reports.calibration) on synthetic archives."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from reports.calibration import calibrate, format_table
from reports.synthetic import make_combined, write_cell
from tests.conftest import EXAMPLE_PACK
from tracetrial.task import CalibrationSpec, TaskPack, load_task

H = ("H1-exit-status-visible", "H2-exit-status-recorded")
A = ("A1-status-reports-failure", "A2-failed-build-not-published")


def task_with(mutants: dict[str, list[str]]) -> TaskPack:
    task = load_task(EXAMPLE_PACK)
    spec = task.spec.model_copy(update={"calibration": CalibrationSpec(mutants=mutants)})
    return dataclasses.replace(task, spec=spec)


#: E1's declared links: each harness criterion can cause each agent failure.
LINKS = tuple((h, a) for h in H for a in A)


def cell(out: Path, harness: str, failed: set[str], admitted: bool = True,
         links: tuple[tuple[str, str], ...] = LINKS) -> None:
    cs = make_combined("E1-build-status-001", "probe", harness,
                       {h: h not in failed for h in H}, {a: a not in failed for a in A}, admitted=admitted,
                       links=links)
    write_cell(out, cs)


def test_declared_flips_are_ok_and_undeclared_flips_are_not(tmp_path: Path) -> None:
    task = task_with({"hide_exit_code": [H[0], A[0]]})
    cell(tmp_path, "reference", set())
    cell(tmp_path, "reference+hide_exit_code", {H[0], A[0]})
    cell(tmp_path, "reference+drop_stderr", {A[1]})
    report = calibrate(tmp_path, [task], ["hide_exit_code", "drop_stderr"])
    by_variant = {r.variant: r for r in report.rows}
    assert by_variant["reference"].status == "ok"
    assert by_variant["reference+hide_exit_code"].status == "ok"
    assert by_variant["reference+drop_stderr"].status == "unexpected"
    assert "also flipped: A2-failed-build-not-published" in by_variant["reference+drop_stderr"].detail
    assert not report.ok
    text = "\n".join(format_table(report))
    assert "NOT calibrated" in text and "1 problem(s)" in text


def test_missing_flip_unrun_cell_and_failing_reference(tmp_path: Path) -> None:
    task = task_with({"hide_exit_code": [H[0], A[0]]})
    cell(tmp_path, "reference+hide_exit_code", {H[0]})
    report = calibrate(tmp_path, [task], ["hide_exit_code"])
    assert [r.status for r in report.rows] == ["not_run"]  # no reference cell: nothing to compare with
    cell(tmp_path, "reference", {A[1]})
    report = calibrate(tmp_path, [task], ["hide_exit_code", "drop_stderr"])
    statuses = {r.variant: (r.status, r.detail) for r in report.rows}
    assert statuses["reference"][0] == "unexpected"
    assert statuses["reference+hide_exit_code"] == ("missing", "did not flip: A1-status-reports-failure")
    assert statuses["reference+drop_stderr"][0] == "not_run"


def test_fully_calibrated(tmp_path: Path) -> None:
    task = task_with({"hide_exit_code": list(H + A)})
    cell(tmp_path, "reference", set())
    cell(tmp_path, "reference+hide_exit_code", set(H + A))
    cell(tmp_path, "reference+drop_stderr", set())
    report = calibrate(tmp_path, [task], ["hide_exit_code", "drop_stderr"])
    assert report.ok
    assert format_table(report)[-1].endswith("calibrated")


def test_agent_failures_of_a_mutant_must_be_attributed_to_the_harness(tmp_path: Path) -> None:
    """TASK_GUIDE rule 10: the declared flips alone are not enough when the run blames the agent."""
    task = task_with({"hide_exit_code": [H[0], A[0]]})
    cell(tmp_path, "reference", set())
    cell(tmp_path, "reference+hide_exit_code", {H[0], A[0]}, links=())
    (row,) = [r for r in calibrate(tmp_path, [task], ["hide_exit_code"]).rows if r.variant != "reference"]
    assert row.status == "mislabelled"
    assert "A1-status-reports-failure" in row.detail and "harness_caused" in row.detail
    cell(tmp_path, "reference+hide_exit_code", {H[0], A[0]})
    assert calibrate(tmp_path, [task], ["hide_exit_code"]).ok
