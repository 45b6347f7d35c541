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


# ----------------------------------------------------------------------------- mutants that cannot act


def _events(out: Path, harness: str, events: list[dict]) -> None:
    import json

    from tracetrial.archive import RunPaths

    root = RunPaths.for_cell(out, "E1-build-status-001", "probe", harness).root
    root.mkdir(parents=True, exist_ok=True)
    (root / "events.json").write_text(json.dumps(events))


def test_a_mutant_the_pack_cannot_trigger_is_not_applicable_unless_the_faithful_run_used_it(tmp_path: Path) -> None:
    from harnesses.reference.mutants import not_applicable, pack_features

    task = task_with({"hide_exit_code": [H[0], A[0]]})
    assert pack_features(task) == frozenset()  # E1: shell only, one turn, no simulator, no deny rule
    assert "needs subagent" in (not_applicable("premature_subagent_done", task) or "")
    assert not_applicable("hide_exit_code", task) is None and not_applicable("hide_mcp_tool", task) is not None
    cell(tmp_path, "reference", set())
    cell(tmp_path, "reference+hide_exit_code", {H[0], A[0]})
    _events(tmp_path, "reference", [{"event_type": "tool", "principal_id": "main",
                                     "tool_call": {"name": "shell"}}])
    report = calibrate(tmp_path, [task], ["hide_exit_code", "premature_subagent_done"])
    rows = {r.variant: r for r in report.rows}
    assert rows["reference+premature_subagent_done"].status == "not_applicable" and report.ok
    # the faithful run spawned a child although the pack does not say so: pruning it would be unsound
    _events(tmp_path, "reference", [{"event_type": "tool", "principal_id": "child-1",
                                     "tool_call": {"name": "shell"}}])
    report = calibrate(tmp_path, [task], ["hide_exit_code", "premature_subagent_done"])
    row = {r.variant: r for r in report.rows}["reference+premature_subagent_done"]
    assert row.status == "unexpected" and "the faithful run used subagent" in row.detail and not report.ok
    # a mutant declared for the pack is never pruned silently
    task2 = task_with({"hide_exit_code": [H[0], A[0]], "premature_subagent_done": [H[1]]})
    _events(tmp_path, "reference", [])
    row = {r.variant: r for r in calibrate(tmp_path, [task2], ["hide_exit_code", "premature_subagent_done"]).rows}[
        "reference+premature_subagent_done"]
    assert row.status == "unexpected" and "declares flips" in row.detail


def test_prune_option_leaves_out_exactly_the_inapplicable_mutant_cells(pytester) -> None:  # type: ignore[no-untyped-def]
    from tests.conftest import REPO

    tasks = REPO / "tasks"
    harness = "reference,reference+hide_exit_code,reference+premature_subagent_done"
    args = [str(tasks), f"--tt-harness={harness}", "--collect-only", "-q", "-k", "E1-build-status-001",
            "-p", "no:cacheprovider"]
    full = pytester.runpytest_subprocess(*args)
    pruned = pytester.runpytest_subprocess(*args, "--tt-prune-mutants")
    ids = [line for line in full.outlines if "test_cell[" in line]
    kept = [line for line in pruned.outlines if "test_cell[" in line]
    assert len(ids) == 3 and len(kept) == 2
    assert not any("premature_subagent_done" in line for line in kept)


def test_a_needed_feature_the_pack_has_is_no_contradiction(tmp_path: Path) -> None:
    """hide_mcp_tool needs MCP and a resumed turn: on a two-turn pack without MCP it is not
    applicable, and the faithful run's second turn is no reason to doubt that."""
    import json

    from tracetrial.archive import RunPaths

    task = task_with({"hide_exit_code": [H[0], A[0]]})
    task = dataclasses.replace(task, spec=task.spec.model_copy(update={"conversation": "multi"}))
    cell(tmp_path, "reference", set())
    cell(tmp_path, "reference+hide_exit_code", {H[0], A[0]})
    root = RunPaths.for_cell(tmp_path, "E1-build-status-001", "probe", "reference").root
    (root / "result.json").write_text(json.dumps({"turns": [{}, {}]}))
    rows = {r.variant: r for r in calibrate(tmp_path, [task], ["hide_exit_code", "hide_mcp_tool"]).rows}
    assert rows["reference+hide_mcp_tool"].status == "not_applicable", rows["reference+hide_mcp_tool"].detail


# ----------------------------------------------------------------------------- stale archives


def _stamp(out: Path, harness: str, *, digest: str, version: str) -> None:
    """Name the pack digest and harness version a cell ran with, as a real run's result.json does."""
    import json

    from tracetrial.archive import RunPaths

    path = RunPaths.for_cell(out, "E1-build-status-001", "probe", harness).result
    record = json.loads(path.read_text(encoding="utf-8"))
    record["resolved_config"] = {"pack_digest": digest}
    record["identity"]["harness_version"] = version
    path.write_text(json.dumps(record), encoding="utf-8")


def test_a_cell_run_on_another_pack_or_reference_version_is_stale_not_calibrated(tmp_path: Path) -> None:
    """``calibrate --report-only`` must not record an old archive as this pack's calibration."""
    task = task_with({"hide_exit_code": [H[0], A[0]]})
    cell(tmp_path, "reference", set())
    cell(tmp_path, "reference+hide_exit_code", {H[0], A[0]})
    for h in ("reference", "reference+hide_exit_code"):
        _stamp(tmp_path, h, digest=task.digest, version="0.1.0+src.new")
    assert calibrate(tmp_path, [task], ["hide_exit_code"], reference_version="0.1.0+src.new").ok

    _stamp(tmp_path, "reference+hide_exit_code", digest="0" * 64, version="0.1.0+src.new")
    report = calibrate(tmp_path, [task], ["hide_exit_code"], reference_version="0.1.0+src.new")
    (row,) = [r for r in report.rows if r.variant == "reference+hide_exit_code"]
    assert row.status == "stale" and "another version of the pack (digest 000000000000" in row.detail
    assert not report.ok

    _stamp(tmp_path, "reference+hide_exit_code", digest=task.digest, version="0.1.0+src.new")
    _stamp(tmp_path, "reference", digest=task.digest, version="0.1.0+src.old")
    report = calibrate(tmp_path, [task], ["hide_exit_code"], reference_version="0.1.0+src.new")
    assert [(r.variant, r.status) for r in report.rows] == [("reference", "stale")]
    assert "run by reference 0.1.0+src.old, now 0.1.0+src.new" in report.rows[0].detail
    assert "NOT calibrated" in "\n".join(format_table(report))
