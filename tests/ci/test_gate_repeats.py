"""Issue 24: the gate reads every repetition of a ``--tt-repeat`` output, not only the first.

Each repetition (``<output>/repeats/rep-<i>/``) is compared with the baseline on its own, and a
baseline is recorded only from repetitions that agree (one state per criterion is all it holds).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from ci.baseline import from_output, load, read_output, store
from ci.gate import EXIT_OK, EXIT_REGRESSION, EXIT_USAGE, repetition_disagreements
from tests.ci.conftest import F, T, U, baseline_corpus, write_run, write_unscored
from tests.criteria.archive_factory import flip_one_byte
from tracetrial.archive import repetition_root, repetition_roots
from tracetrial_cli.main import main


def repeated(tmp_path: Path, k: int = 3) -> Path:
    """``k`` identical repetitions of :func:`baseline_corpus`."""
    out = tmp_path / "out"
    for rep in range(1, k + 1):
        baseline_corpus(repetition_root(out, rep))
    assert [rep for rep, _ in repetition_roots(out)] == list(range(1, k + 1))
    return out


@pytest.fixture
def recorded(tmp_path: Path) -> Path:
    path = tmp_path / "baseline.json"
    store(from_output(baseline_corpus(tmp_path / "base-out")), path)
    return path


def test_every_repetition_is_compared(recorded: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = repeated(tmp_path)
    assert main(["gate", "--baseline", str(recorded), str(out)]) == EXIT_OK
    text = capsys.readouterr().out
    for rep in (1, 2, 3):
        assert f"(repetition {rep} of 3) vs " in text
    assert text.count("5 baseline cell(s) compared") == 3
    assert text.splitlines()[-1] == "gate over 3 repetitions: PASS in every repetition (exit 0)"


def test_a_regression_in_a_later_repetition_fails_the_gate(recorded: Path, tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    out = repeated(tmp_path)
    write_run(repetition_root(out, 3), "O1-a-001", "codex", {"H1": F}, {"A1": T, "A2": T})
    assert main(["gate", "--baseline", str(recorded), str(out)]) == EXIT_REGRESSION
    lines = capsys.readouterr().out.splitlines()
    assert "  O1-a-001/probe/codex  H1  pass -> fail" in lines
    assert "note: repetitions disagree: O1-a-001/probe/codex: H1 pass in 1, pass in 2, fail in 3" in lines
    assert lines[-1] == "gate over 3 repetitions: FAIL in repetition(s) 3 (exit 1)"


def test_a_tampered_later_repetition_fails_the_gate(recorded: Path, tmp_path: Path) -> None:
    out = repeated(tmp_path, k=2)
    flip_one_byte(repetition_root(out, 2) / "traces" / "E1-a-001" / "probe" / "codex" / "events.json")
    assert main(["gate", "--baseline", str(recorded), str(out)]) == EXIT_REGRESSION


def test_update_records_agreeing_repetitions(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "baseline.json"
    out = repeated(tmp_path)
    assert main(["gate", "--update", "--baseline", str(path), str(out)]) == EXIT_OK
    assert "the 3 repetitions agree on every cell; recording repetition 1" in capsys.readouterr().out
    assert load(path) == from_output(out)


def test_update_refuses_repetitions_that_disagree(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "baseline.json"
    out = repeated(tmp_path)
    write_run(repetition_root(out, 2), "E1-a-001", "codex", {"H1": T, "H2": U}, {"A1": T})
    assert main(["gate", "--update", "--baseline", str(path), str(out)]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert "error: E1-a-001/probe/codex: H2 pass in 1, unscored in 2, pass in 3" in err
    assert "repetitions disagree on 1 cell(s)" in err
    assert not path.exists()  # nothing recorded


def test_update_refuses_a_tampered_later_repetition(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "baseline.json"
    out = repeated(tmp_path, k=2)
    flip_one_byte(repetition_root(out, 2) / "traces" / "E1-a-001" / "probe" / "codex" / "events.json")
    assert main(["gate", "--update", "--baseline", str(path), str(out)]) == EXIT_USAGE
    assert not path.exists()


def test_disagreement_names_a_cell_measured_in_some_repetitions_only(tmp_path: Path) -> None:
    out = repeated(tmp_path, k=2)
    shutil.rmtree(repetition_root(out, 2) / "traces" / "E1-b-001" / "probe" / "codex")
    write_unscored(repetition_root(out, 2), "E1-b-001", "codex")
    snaps = [(rep, read_output(root)) for rep, root in repetition_roots(out)]
    assert repetition_disagreements(snaps) == ["E1-b-001/probe/codex: measured in repetition(s) 1, not in 2"]
    same = [(rep, read_output(root)) for rep, root in repetition_roots(repeated(tmp_path / "b", k=2))]
    assert repetition_disagreements(same) == []


def test_rescore_visits_every_repetition(tmp_path: Path) -> None:
    from criteria.rescore import rescore_archive

    out = repeated(tmp_path, k=2)
    flip_one_byte(repetition_root(out, 2) / "traces" / "E1-a-001" / "probe" / "codex" / "events.json")
    report = rescore_archive(out)
    visited = [c.cell for c in report.cells]
    assert len(visited) == 10 and visited[5:] == [f"repeats/rep-2/{c}" for c in visited[:5]]
    assert [c.cell for c in report.cells if c.outcome == "tampered"] == [
        "repeats/rep-2/traces/E1-a-001/probe/codex"]
