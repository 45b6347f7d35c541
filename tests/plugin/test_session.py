"""The plugin's session: state on the config (not in module globals), the controller's
progress lines, summary table and reports — in process, under xdist — and the sandbox
choice it applies per cell.

The cells here resume a real archive made once per module (E1 on the reference harness
and one mutant, local sandbox), so the sessions under test start no gateway.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.conftest import EXAMPLE_PACK, REPO

pytestmark = pytest.mark.filterwarnings("ignore::pytest.PytestAssertRewriteWarning")

HARNESSES = "reference,reference+hide_exit_code"
#: The ``[tt]`` line of each cell, as fnmatch patterns (``[[]``: a literal ``[``); under xdist
#: a line may follow the progress characters of the same terminal line.
LINES = {
    "reference": "*[[]tt] E1-build-status-001 reference probe  S_H 50.0 S_A 50.0 S 100.0  failed none  clean",
    "reference+hide_exit_code": ("*[[]tt] E1-build-status-001 reference+hide_exit_code probe  S_H 0.0 S_A 0.0 S 0.0  "
                                 "failed H1-exit-status-visible,H2-exit-status-recorded,A1-status-reports-failure,"
                                 "A2-failed-build-not-published  harness_caused"),
}


def write_suite(root: Path) -> Path:
    """The cells module, the packs' conftest and the example pack under ``root/tasks``."""
    tasks = root / "tasks"
    tasks.mkdir(exist_ok=True)
    shutil.copy(REPO / "tasks" / "test_cells.py", tasks / "test_cells.py")
    shutil.copy(REPO / "tasks" / "conftest.py", tasks / "conftest.py")
    shutil.copytree(EXAMPLE_PACK, tasks / EXAMPLE_PACK.name, ignore=shutil.ignore_patterns("__pycache__"),
                    dirs_exist_ok=True)
    return tasks


@pytest.fixture(scope="module")
def archive(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real session's archive: E1 on ``reference`` (passes) and ``reference+hide_exit_code``."""
    root = tmp_path_factory.mktemp("session-run")
    write_suite(root)
    out = root / "out"
    proc = subprocess.run([sys.executable, "-m", "pytest", "tasks", "-q", "-p", "no:cacheprovider",
                           f"--tt-harness={HARNESSES}", f"--tt-output={out}", "--tt-sandbox=local"],
                          cwd=root, env={**os.environ, "TT_NO_REPORTS": "1"}, capture_output=True, text=True,
                          timeout=600, check=False)
    assert "5 failed, 1 passed" in proc.stdout, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert not (out / "reports").exists()
    return out


def _resume(pytester: pytest.Pytester, archive: Path) -> list[str]:
    """A suite over a copy of ``archive``: the arguments of a session that resumes its cells."""
    write_suite(pytester.path)
    out = pytester.path / "out"
    shutil.copytree(archive, out)
    return ["tasks", "-p", "no:cacheprovider", f"--tt-harness={HARNESSES}", f"--tt-output={out}",
            "--tt-sandbox=local"]


def _once_each(result: pytest.RunResult) -> None:
    """One ``[tt]`` line per cell, in the controller's output."""
    result.stdout.fnmatch_lines_random(list(LINES.values()))
    tt = [line for line in result.outlines if "[tt] " in line]
    assert len(tt) == len(LINES), tt


def _tidy(result: pytest.RunResult) -> None:
    """At the default verbosity the ``[tt]`` lines are the cells' progress output: every one
    starts its own line, and no line is left holding pytest's status letters of a cell
    (``uF`` broke the output up before)."""
    assert all(line.startswith("[tt] ") for line in result.outlines if "[tt] " in line), result.outlines
    letters = [line for line in result.outlines if line.strip() and set(line.strip()) <= set("uU.FfsExX")]
    assert not letters, letters


def test_progress_summary_and_reports(pytester: pytest.Pytester, archive: Path, request: pytest.FixtureRequest,
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    from tracetrial_fixtures.session import session_of

    monkeypatch.delenv("TT_NO_REPORTS", raising=False)
    args = _resume(pytester, archive)
    result = pytester.runpytest(*args)
    result.assert_outcomes(passed=1, failed=5)  # the mutant's 4 criteria and its cell
    _once_each(result)
    _tidy(result)
    out = pytester.path / "out"
    result.stdout.fnmatch_lines(["tracetrial sandbox: local", "*= TraceTrial =*", "TraceTrial corpus (protocol: probe)",
                                 "reference  *", f"archive: {out}"])
    assert (out / "reports" / "summary.json").is_file() and (out / "reports" / "report.html").is_file()
    # The in-process session had a config of its own: nothing of it reached this session.
    assert session_of(request.config).progress == [] and session_of(request.config).reported == set()


def test_xdist_controller_prints_and_reports_the_workers_cells(pytester: pytest.Pytester, archive: Path) -> None:
    pytest.importorskip("xdist")
    args = _resume(pytester, archive)
    out = pytester.path / "out"
    shutil.rmtree(out / "reports", ignore_errors=True)
    result = pytester.runpytest_subprocess(*args, "-n", "2")
    result.assert_outcomes(passed=1, failed=5)  # the mutant's 4 criteria and its cell
    _once_each(result)
    result.stdout.fnmatch_lines(["TraceTrial corpus (protocol: probe)", f"archive: {out}"])
    assert (out / "reports" / "summary.json").is_file()


def test_report_header_names_what_auto_means_here(pytester: pytest.Pytester) -> None:
    from apparatus.sandbox import choose_backend

    write_suite(pytester.path)
    result = pytester.runpytest("tasks", "--collect-only", "--tt-harness=reference")
    result.stdout.fnmatch_lines([f"tracetrial sandbox: auto -> {choose_backend('auto')}"])
    result = pytester.runpytest("tasks", "--collect-only", "--tt-harness=reference", "--tt-sandbox=bwrap")
    result.stdout.fnmatch_lines(["tracetrial sandbox: bwrap"])


def test_a_harness_the_session_marks_unconfinable_is_skipped_where_it_cannot_run(pytester: pytest.Pytester,
                                                                                  tmp_path: Path) -> None:
    """The session's ``unconfinable`` reaches the sandbox choice of the harness's cells: under
    ``auto`` a ``network: none`` task is skipped with the harness's reason (it would run on
    local, which cannot take the network away)."""
    tasks = write_suite(pytester.path)
    iso = tasks / EXAMPLE_PACK.name / "isolation.yaml"
    data = (yaml.safe_load(iso.read_text()) if iso.exists() else None) or {}
    iso.write_text(yaml.safe_dump({**data, "network": "none"}))
    with (tasks / "conftest.py").open("a") as fh:
        fh.write("\n\nimport pytest\n\nfrom tracetrial_fixtures.session import session_of\n\n\n"
                 "@pytest.hookimpl(trylast=True)\ndef pytest_configure(config):\n"
                 "    session_of(config).unconfinable['reference'] = 'it starts its agent by itself'\n")
    result = pytester.runpytest("tasks", "-rs", "--tt-harness=reference", f"--tt-output={tmp_path / 'out'}")
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines([("SKIPPED *task needs network: none, which the local sandbox cannot provide "
                                  "(it starts its agent by itself)")])
