"""Gate keys of named harness versions (issue 18 item 4): ``name@version`` keys its own
cells and version next to the plain pinned name, whose keys stay as they were."""

from __future__ import annotations

from pathlib import Path

from ci.baseline import from_output, read_output
from ci.gate import compare
from tests.ci.conftest import F, T, write_run


def test_pin_and_named_version_are_separate_harnesses(tmp_path: Path) -> None:
    out = tmp_path / "out"
    write_run(out, "E1-a-001", "codex", {"H1": T}, {"A1": T}, version="0.145.0")
    write_run(out, "E1-a-001", "codex@0.171.0", {"H1": F}, {"A1": T}, version="0.171.0")
    snap = read_output(out)
    assert snap.problems == ()  # two versions, two names: not "one harness at several versions"
    baseline = snap.baseline
    assert baseline.harness_versions == {"codex": "0.145.0", "codex@0.171.0": "0.171.0"}
    assert baseline.cells["E1-a-001/probe/codex"] == {"H1": "pass", "A1": "pass"}
    assert baseline.cells["E1-a-001/probe/codex@0.171.0"] == {"H1": "fail", "A1": "pass"}
    assert baseline.harness_of("E1-a-001/probe/codex@0.171.0") == "codex@0.171.0"
    # The same output compares clean against its own baseline (no version change).
    result = compare(from_output(out), read_output(out))
    assert not result.refused and not result.version_changes and not result.failed
    assert result.compared == 2


def test_a_named_version_that_ran_another_version_is_a_problem(tmp_path: Path) -> None:
    out = tmp_path / "out"
    write_run(out, "E1-a-001", "codex@0.171.0", {"H1": T}, {"A1": T}, version="0.170.0")
    assert read_output(out).problems == (
        "harness codex@0.171.0 is named for version 0.171.0 but ran version 0.170.0",)


def test_a_new_named_version_against_an_old_baseline_is_not_a_version_change(tmp_path: Path) -> None:
    old = tmp_path / "old"
    write_run(old, "E1-a-001", "codex", {"H1": T}, {"A1": T}, version="0.145.0")
    new = tmp_path / "new"
    write_run(new, "E1-a-001", "codex", {"H1": T}, {"A1": T}, version="0.145.0")
    write_run(new, "E1-a-001", "codex@0.171.0", {"H1": F}, {"A1": T}, version="0.171.0")
    result = compare(from_output(old), read_output(new))
    # The pin's cells compare as before; the named version is new to the baseline (appeared).
    assert not result.refused and not result.failed and result.compared == 1
    assert {c.cell for c in result.changes} <= {"E1-a-001/probe/codex@0.171.0"}
