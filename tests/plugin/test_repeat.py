"""``--tt-repeat K`` (issue 24 item 4): each cell K times, each repetition seeded from the cell and
its index, archived side by side (repetition 1 in ``<output>/traces/``, repetition i in
``<output>/repeats/rep-<i>/traces/``), and the readers on that layout.

One real session per module (E1 on the reference harness, twice, local sandbox) gives the archive.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.plugin.test_collection import collected, make_suite
from tests.plugin.test_session import write_suite
from tests.plugin.test_usage_errors import usage_error
from tracetrial.results import CombinedScore, ResultRecord
from tracetrial_fixtures.cell import run_seed

pytestmark = pytest.mark.filterwarnings("ignore::pytest.PytestAssertRewriteWarning")

TASK = "E1-build-status-001"
ARGS = ["--tt-harness=reference", "--tt-repeat=2", "--tt-sandbox=local"]


def _cell(out: Path, rep: int) -> Path:
    root = out if rep == 1 else out / "repeats" / f"rep-{rep}"
    return root / "traces" / TASK / "probe" / "reference"


@pytest.fixture(scope="module")
def session(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A real session with ``--tt-repeat 2``: its output folder and its terminal output."""
    root = tmp_path_factory.mktemp("repeat-run")
    write_suite(root)
    out = root / "out"
    proc = subprocess.run([sys.executable, "-m", "pytest", "tasks", "-p", "no:cacheprovider", *ARGS,
                           f"--tt-output={out}"], cwd=root, env={**os.environ, "COLUMNS": "80"},
                          capture_output=True, text=True, timeout=900, check=False)
    assert "2 passed" in proc.stdout, proc.stdout[-3000:] + proc.stderr[-2000:]
    return out, proc.stdout


def test_ids_one_test_per_repetition(pytester: pytest.Pytester) -> None:
    make_suite(pytester)
    result = pytester.runpytest("tasks", "--collect-only", "-q", "--tt-harness", "reference,codex", "--tt-repeat", "2")
    assert collected(result) == [f"test_cell[{TASK}-{h}-probe-rep{i}]" for h in ("reference", "codex") for i in (1, 2)]
    single = pytester.runpytest("tasks", "--collect-only", "-q", "--tt-harness", "reference")
    assert collected(single) == [f"test_cell[{TASK}-reference-probe]"]      # unchanged without repeats


@pytest.mark.parametrize("value", ["0", "many", "51"])
def test_bad_repeat_is_a_usage_error(pytester: pytest.Pytester, value: str) -> None:
    make_suite(pytester)
    line = usage_error(pytester.runpytest("tasks", "--collect-only", "-q", "--tt-repeat", value))
    assert line.startswith("ERROR: --tt-repeat: ") and "from 1 to 50" in line


def test_repeat_from_the_environment(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    make_suite(pytester)
    monkeypatch.setenv("TT_REPEAT", "3")
    result = pytester.runpytest("tasks", "--collect-only", "-q", "--tt-harness", "reference")
    assert collected(result)[-1] == f"test_cell[{TASK}-reference-probe-rep3]"


def test_repetitions_are_archived_side_by_side_and_seeded(session: tuple[Path, str]) -> None:
    out, _ = session
    records = [ResultRecord.model_validate_json((_cell(out, rep) / "result.json").read_bytes()) for rep in (1, 2)]
    assert records[0].identity.run_id != records[1].identity.run_id
    for rep, record in enumerate(records, start=1):
        config = record.resolved_config
        assert config["repetition"] == {"index": rep, "of": 2}
        assert config["seed"] == run_seed(record.identity.run_id, TASK, "probe", "reference", rep, 2)
    assert records[0].resolved_config["seed"] != records[1].resolved_config["seed"]
    # the seed is the repetition's, not the run's: running repetition 2 again gives it the same seed
    assert run_seed("another-run-id", TASK, "probe", "reference", 2, 2) == records[1].resolved_config["seed"]


def test_progress_lines_and_terminal_table(session: tuple[Path, str]) -> None:
    _, stdout = session
    lines = stdout.splitlines()
    tt = [re.sub(r"\s*\[\s*\d+%\]$", "", ln) for ln in lines if ln.startswith("[tt] ")]  # without pytest's [ 50%]
    assert tt == [f"[tt] {TASK} reference probe  S_H 50.0 S_A 50.0 S 100.0  failed none  clean",
                  f"[tt] {TASK} reference probe rep 2  S_H 50.0 S_A 50.0 S 100.0  failed none  clean"]
    at = lines.index("repeated runs (up to 2 per cell; a run passes at S = 100):")
    assert lines[at + 3].split() == ["reference", "1", "100.0", "100.0", "100.0", "100.0", "(1/1)"]


def test_report_gives_pass_k_and_full_agreement(session: tuple[Path, str]) -> None:
    out, _ = session
    summary = json.loads((out / "reports" / "summary.json").read_text(encoding="utf-8"))
    rep = summary["repeats"]
    assert rep["k"] == 2 and rep["agreement_label"] == "determinism"
    ref = rep["by_harness"]["reference"]
    assert ref["combined"]["pass_hat"] == [100.0, 100.0] and ref["combined"]["pass_at"] == [100.0, 100.0]
    assert ref["agreement"]["pct"] == 100.0 and ref["agreement"]["criteria_pct"] == 100.0
    assert summary["calibration"]["by_harness"]["reference"]["runs"] == 2


def test_every_reader_works_on_a_repetition_root(session: tuple[Path, str], tmp_path: Path) -> None:
    from ci.baseline import read_output
    from criteria.rescore import rescore_archive
    from reports.export import export_atif

    out = tmp_path / "out"
    shutil.copytree(session[0], out)
    rep2 = out / "repeats" / "rep-2"
    # the gate's reader: repetition 2 is a complete output of its own; the output itself is repetition 1
    assert list(read_output(rep2).baseline.cells) == [f"{TASK}/probe/reference"]
    assert list(read_output(out).baseline.cells) == [f"{TASK}/probe/reference"]
    before = _cell(out, 2) / "artifacts" / "llm_judge" / "combined_score.json"
    report = rescore_archive(rep2)
    assert [c.outcome for c in report.cells] == ["rescored"]
    assert CombinedScore.model_validate_json(before.read_bytes()).S == 100.0
    exported = export_atif(out)
    assert sorted(p.relative_to(out / "exports" / "atif").as_posix() for p in exported.written) == [
        f"{TASK}/probe/reference/trajectory.json", f"repeats/rep-2/{TASK}/probe/reference/trajectory.json"]


def test_a_second_session_resumes_every_repetition(pytester: pytest.Pytester, session: tuple[Path, str]) -> None:
    write_suite(pytester.path)
    out = pytester.path / "out"
    shutil.copytree(session[0], out)
    ids = [ResultRecord.model_validate_json((_cell(out, rep) / "result.json").read_bytes()).identity.run_id
           for rep in (1, 2)]
    result = pytester.runpytest("tasks", "-p", "no:cacheprovider", *ARGS, f"--tt-output={out}")
    result.assert_outcomes(passed=2)
    assert ids == [ResultRecord.model_validate_json((_cell(out, rep) / "result.json").read_bytes()).identity.run_id
                   for rep in (1, 2)]
