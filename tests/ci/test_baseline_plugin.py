"""``--tt-baseline`` with pytester: real reference / reference+hide_exit_code cells on a copy of the
E1 pack, checked against hand-written baselines.

The cells are run once for real (module fixture, a separate pytest process); each test then
copies that archive, so its session *resumes* the cells (as a CI re-run would) and only the
baseline differs. ``test_known_failure_is_xfailed_on_a_fresh_run`` re-runs them from scratch.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ci.baseline import Baseline, from_output, store
from tests.conftest import EXAMPLE_PACK, REPO

pytestmark = pytest.mark.filterwarnings("ignore::pytest.PytestAssertRewriteWarning")

MUTANT = "reference+hide_exit_code"
HARNESSES = f"reference,{MUTANT}"
E1 = EXAMPLE_PACK.name
ALL_E1 = {"A1-status-reports-failure": "fail", "A2-failed-build-not-published": "fail",
          "H1-exit-status-visible": "fail", "H2-exit-status-recorded": "fail"}


def write_suite(root: Path) -> Path:
    """``root/tasks``: the cells module, its conftest and a copy of the E1 pack."""
    tasks = root / "tasks"
    tasks.mkdir(parents=True)
    shutil.copy(REPO / "tasks" / "test_cells.py", tasks / "test_cells.py")
    shutil.copy(REPO / "tasks" / "conftest.py", tasks / "conftest.py")
    shutil.copytree(EXAMPLE_PACK, tasks / E1, ignore=shutil.ignore_patterns("__pycache__"))
    return tasks


@pytest.fixture(scope="module")
def e1_archive(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The archive of a real session: E1 on ``reference`` (passes) and ``reference+hide_exit_code``."""
    root = tmp_path_factory.mktemp("e1-run")
    write_suite(root)
    out = root / "out"
    env = {**os.environ, "TT_NO_REPORTS": "1"}
    proc = subprocess.run([sys.executable, "-m", "pytest", "tasks", "-q", "-p", "no:cacheprovider",
                           f"--tt-harness={HARNESSES}", f"--tt-output={out}"],
                          cwd=root, env=env, capture_output=True, text=True, timeout=600, check=False)
    # 4 failing criteria (sub-checks) + the mutant cell; the faithful cell passes
    assert "5 failed, 1 passed" in proc.stdout, proc.stdout[-3000:] + proc.stderr[-2000:]
    return out


def session(pytester: pytest.Pytester, archive: Path, cells: dict[str, dict[str, str]], *extra: str,
            rerun: bool = False) -> pytest.RunResult:
    """Run the copied suite against a baseline holding ``cells`` (the rest of the baseline is real)."""
    write_suite(pytester.path)
    out = pytester.path / "out"
    shutil.copytree(archive, out)
    recorded = from_output(archive)
    baseline = Baseline(protocol="probe", harness_versions=recorded.harness_versions,
                        cells={**recorded.cells, **{f"{E1}/probe/{h}": v for h, v in cells.items()}})
    store(baseline, pytester.path / "baseline.json")
    args = ["tasks", "-rA", f"--tt-harness={HARNESSES}", f"--tt-output={out}",
            f"--tt-baseline={pytester.path / 'baseline.json'}", *extra]
    if rerun:
        args.append("--tt-rerun")
    return pytester.runpytest(*args)


@pytest.fixture(autouse=True)
def _isolate_plugin_state(monkeypatch: pytest.MonkeyPatch) -> None:
    """In-process sessions keep their own plugin session (a stash on their own config); they
    write no reports into this one's output."""
    monkeypatch.setenv("TT_NO_REPORTS", "1")


def test_recorded_baseline_matches_the_run(e1_archive: Path) -> None:
    """Sanity: the mutant fails exactly its four E1 criteria; the faithful harness passes."""
    recorded = from_output(e1_archive)
    assert recorded.cells[f"{E1}/probe/{MUTANT}"] == ALL_E1
    assert set(recorded.cells[f"{E1}/probe/reference"].values()) == {"pass"}


def test_known_failure_is_xfailed(pytester: pytest.Pytester, e1_archive: Path) -> None:
    result = session(pytester, e1_archive, {})
    result.assert_outcomes(passed=1, xfailed=1)
    assert result.ret == 0
    result.stdout.fnmatch_lines([
        "tracetrial baseline: * (probe, 2 cells, 1 with known failing criteria)",
        (f"XFAIL tasks/test_cells.py::test_cell[{E1}-{MUTANT}-probe] - known failing (baseline): "
         "A1-status-reports-failure fail, A2-failed-build-not-published fail, H1-exit-status-visible fail, "
         "H2-exit-status-recorded fail"),
    ])
    # the known criteria are sub-check xfails, not failures
    assert "SUBFAILED" not in result.stdout.str()


def test_known_failure_is_xfailed_on_a_fresh_run(pytester: pytest.Pytester, e1_archive: Path) -> None:
    result = session(pytester, e1_archive, {}, "-k", "hide_exit_code", rerun=True)
    result.assert_outcomes(xfailed=1, deselected=1)
    assert result.ret == 0


def test_new_failure_beyond_the_known_ones_is_red(pytester: pytest.Pytester, e1_archive: Path) -> None:
    known = {"H1-exit-status-visible": "fail", "H2-exit-status-recorded": "fail"}
    result = session(pytester, e1_archive, {MUTANT: known})
    result.assert_outcomes(passed=1, failed=3)  # the cell + its two new failing criteria
    result.stdout.fnmatch_lines([
        ("*new failure(s) beyond the baseline's known ones: A1-status-reports-failure fail, "
         "A2-failed-build-not-published fail (known: H1-exit-status-visible fail, H2-exit-status-recorded fail)*"),
        f"SUBFAILED[[]agent:A1-status-reports-failure[]] tasks/test_cells.py::test_cell[[]{E1}-{MUTANT}-probe[]]*",
        f"FAILED tasks/test_cells.py::test_cell[[]{E1}-{MUTANT}-probe[]]*",
    ])
    assert "XFAIL tasks" not in result.stdout.str()


def test_fixed_failure_is_xpass_strict(pytester: pytest.Pytester, e1_archive: Path) -> None:
    """The faithful harness passes a criterion the baseline says fails: XPASS(strict) -> failed."""
    result = session(pytester, e1_archive, {"reference": {"H1-exit-status-visible": "fail",
                                                          "H2-exit-status-recorded": "pass"}})
    result.assert_outcomes(failed=1, xfailed=1)
    result.stdout.fnmatch_lines([
        f"*_ test_cell[[]{E1}-reference-probe[]] _*",
        "[[]XPASS(strict)[]] known failing (baseline): H1-exit-status-visible fail",
    ])


def test_partly_fixed_cell_is_red_and_names_the_fixed_criteria(pytester: pytest.Pytester,
                                                               e1_archive: Path) -> None:
    result = session(pytester, e1_archive, {MUTANT: {**ALL_E1, "H3-gone-criterion": "fail"}})
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines([
        ("*[[]XPASS(strict)[]] known failure(s) now pass: H3-gone-criterion (no longer checked); still failing: "
         "A1-status-reports-failure, A2-failed-build-not-published, H1-exit-status-visible, H2-exit-status-recorded;"
         " update the baseline*"),
    ])


def test_broken_baseline_is_a_usage_error(pytester: pytest.Pytester) -> None:
    write_suite(pytester.path)
    (pytester.path / "bad.json").write_text(json.dumps({"schema": "tt-baseline/1"}))
    result = pytester.runpytest("tasks", "--collect-only", f"--tt-baseline={pytester.path / 'bad.json'}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--tt-baseline: * is not a tt-baseline/1 baseline: protocol: Field required*"])
