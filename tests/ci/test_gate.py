"""The regression gate on hand-built archives: detection, exit codes, --update, version refusal."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from ci.baseline import from_output, load, read_output, store
from ci.gate import EXIT_OK, EXIT_REGRESSION, EXIT_USAGE, EXIT_VERSION_CHANGE, Change, compare
from tests.ci.conftest import F, T, U, baseline_corpus, write_run, write_unscored
from tests.criteria.archive_factory import flip_one_byte, forge_clean_score
from tracetrial_cli.main import main


@pytest.fixture
def recorded(tmp_path: Path) -> Path:
    """A stored baseline of :func:`baseline_corpus`."""
    path = tmp_path / "baseline.json"
    store(from_output(baseline_corpus(tmp_path / "base-out")), path)
    return path


def test_identical_output_passes(recorded: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = baseline_corpus(tmp_path / "out")
    assert main(["gate", "--baseline", str(recorded), str(out)]) == EXIT_OK
    text = capsys.readouterr().out
    assert "5 baseline cell(s) compared" in text
    assert "gate: PASS (no changes; exit 0)" in text


def test_every_kind_of_change_is_detected(recorded: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    write_run(out, "E1-a-001", "codex", {"H1": F, "H2": U}, {"A1": T})          # 2 regressions
    write_run(out, "E1-b-001", "codex", {"H1": T, "H2": T}, {"A1": F})          # improved + changed
    write_run(out, "O1-a-001", "codex", {"H1": T, "H3": T}, {"A1": T})          # H3 appeared, A2 vanished
    write_run(out, "E1-a-001", "reference", {"H1": T, "H2": T}, {"A1": T})
    # E1-b-001/reference vanished (no folder), T3 appeared
    write_run(out, "T3-a-001", "reference", {"H1": F}, {"A1": T})
    result = compare(load(recorded), read_output(out))
    assert result.of("regressed") == [
        Change("regressed", "E1-a-001/probe/codex", "H1", "pass", "fail", "does not hold"),
        Change("regressed", "E1-a-001/probe/codex", "H2", "pass", "unscored", "unscored: no judge"),
    ]
    assert [(c.cell, c.criterion, c.old, c.new) for c in result.of("improved")] == [
        ("E1-b-001/probe/codex", "H1", "fail", "pass")]
    assert [(c.cell, c.criterion, c.old, c.new) for c in result.of("changed")] == [
        ("E1-b-001/probe/codex", "A1", "unscored", "fail")]
    assert [(c.cell, c.criterion) for c in result.of("appeared")] == [
        ("O1-a-001/probe/codex", "H3"), ("T3-a-001/probe/reference", None)]
    assert result.of("appeared")[1].reason == "2 criteria, not passing: H1 fail"
    assert [(c.cell, c.criterion) for c in result.of("vanished")] == [
        ("E1-b-001/probe/reference", None), ("O1-a-001/probe/codex", "A2")]
    assert result.failed and result.exit_code == EXIT_REGRESSION


def test_regression_exit_code_and_readable_diff(recorded: Path, tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    out = baseline_corpus(tmp_path / "out")
    write_run(out, "O1-a-001", "codex", {"H1": F}, {"A1": T, "A2": T})
    assert main(["gate", "--baseline", str(recorded), str(out)]) == EXIT_REGRESSION
    lines = capsys.readouterr().out.splitlines()
    at = lines.index("REGRESSED (1)")
    assert lines[at + 1] == "  O1-a-001/probe/codex  H1  pass -> fail"
    assert lines[at + 2] == "      does not hold"
    assert lines[-1] == "gate: FAIL (1 regressed; exit 1)"


def test_improvements_and_appearances_alone_pass(recorded: Path, tmp_path: Path) -> None:
    out = baseline_corpus(tmp_path / "out")
    write_run(out, "E1-b-001", "codex", {"H1": T, "H2": T}, {"A1": T})
    write_run(out, "V1-a-001", "codex", {"H1": F}, {"A1": F})
    result = compare(load(recorded), read_output(out))
    assert {c.kind for c in result.changes} == {"improved", "appeared"}
    assert result.exit_code == EXIT_OK


def test_unmeasured_baseline_cell_fails_the_gate(recorded: Path, tmp_path: Path) -> None:
    out = baseline_corpus(tmp_path / "out")
    shutil.rmtree(out / "traces" / "E1-a-001" / "probe" / "codex")
    write_unscored(out, "E1-a-001", "codex")
    result = compare(load(recorded), read_output(out))
    assert [(c.kind, c.cell, c.reason) for c in result.changes] == [
        ("unmeasured", "E1-a-001/probe/codex", "no combined_score.json; run status apparatus_error")]
    assert result.exit_code == EXIT_REGRESSION


def test_harness_absent_from_the_output_is_not_compared(recorded: Path, tmp_path: Path) -> None:
    """A maintainer runs only their harness: the other harnesses' cells are listed as not run."""
    out = tmp_path / "out"
    write_run(out, "E1-a-001", "reference", {"H1": T, "H2": T}, {"A1": T})
    write_run(out, "E1-b-001", "reference", {"H1": T, "H2": T}, {"A1": T})
    result = compare(load(recorded), read_output(out))
    assert result.changes == () and result.compared == 2 and result.not_run == ("codex",)
    assert result.exit_code == EXIT_OK


def test_version_change_is_refused_with_names_and_versions(recorded: Path, tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    out = baseline_corpus(tmp_path / "out", codex_version="1.1")
    assert main(["gate", "--baseline", str(recorded), str(out)]) == EXIT_VERSION_CHANGE
    text = capsys.readouterr().out
    assert "REFUSED: refusing to compare across harness versions (harness codex: baseline version 1.0, " \
           "output version 1.1)" in text
    assert "--allow-version-change" in text and "REGRESSED" not in text


def test_allowed_version_change_compares_and_labels(recorded: Path, tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    out = baseline_corpus(tmp_path / "out", codex_version="1.1")
    write_run(out, "O1-a-001", "codex", {"H1": F}, {"A1": T, "A2": T}, version="1.1")
    code = main(["gate", "--allow-version-change", "--baseline", str(recorded), str(out)])
    assert code == EXIT_REGRESSION
    text = capsys.readouterr().out
    assert "ACROSS HARNESS VERSIONS (--allow-version-change): codex 1.0 -> 1.1" in text
    assert "  O1-a-001/probe/codex  H1  pass -> fail  [codex 1.0 -> 1.1]" in text


def test_protocol_mismatch_is_a_usage_error(recorded: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    write_run(out, "E1-a-001", "codex", {"H1": T}, {"A1": T}, model="deepseek-v4-pro", protocol="live")
    result = compare(load(recorded), read_output(out))
    assert result.refused and result.exit_code == EXIT_USAGE
    assert "protocol live but the baseline records probe" in result.refusal


def test_update_creates_then_rewrites_keeping_other_harnesses(tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "ci" / "baseline.json"
    out = baseline_corpus(tmp_path / "out")
    assert main(["gate", "--baseline", str(path), str(out)]) == EXIT_USAGE  # no baseline yet
    assert "no baseline at" in capsys.readouterr().err
    assert main(["gate", "--update", "--baseline", str(path), str(out)]) == EXIT_OK
    assert load(path) == from_output(out)
    capsys.readouterr()
    # a codex-only session at a new version, with a regression: --update accepts it
    codex = tmp_path / "codex-out"
    write_run(codex, "E1-a-001", "codex", {"H1": F, "H2": T}, {"A1": T}, version="2.0")
    assert main(["gate", "--baseline", str(path), str(codex)]) == EXIT_VERSION_CHANGE
    assert main(["gate", "--update", "--baseline", str(path), str(codex)]) == EXIT_OK
    text = capsys.readouterr().out
    assert "  E1-a-001/probe/codex  H1  pass -> fail  [codex 1.0 -> 2.0]" in text  # the diff is shown
    assert "updated " in text and "2 cell(s) of other harnesses kept" in text
    stored = json.loads(path.read_text(encoding="utf-8"))
    assert stored["harness_versions"] == {"codex": "2.0", "reference": "1.0"}
    assert sorted(stored["cells"]) == ["E1-a-001/probe/codex", "E1-a-001/probe/reference",
                                       "E1-b-001/probe/reference"]
    assert main(["gate", "--baseline", str(path), str(codex)]) == EXIT_OK


def test_update_cells_only_adds_new_cells_and_keeps_the_rest(tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    """Recording a new task pack: only its cells are replaced; the harness's other cells stay."""
    path = tmp_path / "baseline.json"
    out = baseline_corpus(tmp_path / "out")
    assert main(["gate", "--update", "--baseline", str(path), str(out)]) == EXIT_OK
    before = load(path)
    new = tmp_path / "new-out"
    write_run(new, "E1-c-001", "reference", {"H1": T}, {"A1": T}, version="1.0")
    capsys.readouterr()
    assert main(["gate", "--cells-only", "--baseline", str(path), str(new)]) == EXIT_USAGE  # needs --update
    assert "only applies with --update" in capsys.readouterr().err
    assert main(["gate", "--update", "--cells-only", "--baseline", str(path), str(new)]) == EXIT_OK
    assert "other cell(s) kept" in capsys.readouterr().out
    after = load(path)
    assert set(after.cells) == set(before.cells) | {"E1-c-001/probe/reference"}
    assert all(after.cells[k] == v for k, v in before.cells.items())
    # plain --update would have dropped the reference cells the output does not hold
    assert set(load(path).cells) != set(from_output(new).cells)
    # a harness at another version is refused: its kept cells were measured at the recorded one
    moved = tmp_path / "moved-out"
    write_run(moved, "E1-d-001", "reference", {"H1": T}, {"A1": T}, version="2.0")
    assert main(["gate", "--update", "--cells-only", "--baseline", str(path), str(moved)]) == EXIT_USAGE
    assert "reference ran at 2.0 but" in capsys.readouterr().err
    assert load(path) == after


def test_output_without_cells_is_a_usage_error(recorded: Path, tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["gate", "--baseline", str(recorded), str(tmp_path / "nowhere")]) == EXIT_USAGE
    assert "has no traces/ folder" in capsys.readouterr().err
    (tmp_path / "empty" / "traces").mkdir(parents=True)
    assert main(["gate", "--baseline", str(recorded), str(tmp_path / "empty")]) == EXIT_USAGE
    assert "no cells under" in capsys.readouterr().err


# ------------------------------------------------------------------- tamper evidence (issue 17)
def test_a_consistently_forged_score_fails_the_gate_naming_the_cell(recorded: Path, tmp_path: Path,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    out = baseline_corpus(tmp_path / "out")
    # E1-b-001/codex fails H1 in the baseline; a forger makes it look all-passing.
    forge_clean_score(out / "traces" / "E1-b-001" / "probe" / "codex")
    assert main(["gate", "--baseline", str(recorded), str(out)]) == EXIT_REGRESSION
    lines = capsys.readouterr().out.splitlines()
    at = lines.index("TAMPERED (1)")
    assert lines[at + 1] == "  E1-b-001/probe/codex  (whole cell)"
    assert lines[at + 2] == ("      refusing to trust this cell: artifacts/llm_judge/combined_score.json: content "
                             "changed since the manifest was written (sha256 mismatch)")
    assert "IMPROVED" not in lines  # the forged verdicts are never read
    assert lines[-1] == "gate: FAIL (1 tampered; exit 1)"


def test_one_changed_byte_in_events_json_fails_the_gate(recorded: Path, tmp_path: Path) -> None:
    out = baseline_corpus(tmp_path / "out")
    flip_one_byte(out / "traces" / "E1-a-001" / "probe" / "reference" / "events.json")
    result = compare(load(recorded), read_output(out))
    assert [(c.kind, c.cell) for c in result.changes] == [("tampered", "E1-a-001/probe/reference")]
    assert "events.json: content changed" in result.changes[0].reason
    assert result.exit_code == EXIT_REGRESSION


def test_a_tampered_cell_outside_the_baseline_fails_too(recorded: Path, tmp_path: Path) -> None:
    out = baseline_corpus(tmp_path / "out")
    extra = write_run(out, "V1-a-001", "codex", {"H1": F}, {"A1": F})
    forge_clean_score(extra)
    result = compare(load(recorded), read_output(out))
    assert [(c.kind, c.cell) for c in result.changes] == [("tampered", "V1-a-001/probe/codex")]
    assert result.exit_code == EXIT_REGRESSION


def test_update_refuses_to_record_a_tampered_output(recorded: Path, tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    out = baseline_corpus(tmp_path / "out")
    forge_clean_score(out / "traces" / "E1-b-001" / "probe" / "codex")
    before = recorded.read_bytes()
    assert main(["gate", "--update", "--baseline", str(recorded), str(out)]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert "error: E1-b-001/probe/codex: tampered: artifacts/llm_judge/combined_score.json" in err
    assert recorded.read_bytes() == before
