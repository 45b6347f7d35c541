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
#: The ``[tt]`` line of each cell, as fnmatch patterns (``[[]``: a literal ``[``); pytest ends each
#: with its progress figure (``[ 50%]``; under xdist not always: reports arrive interleaved).
LINES = {
    "reference": "[[]tt] E1-build-status-001 reference probe  S_H 50.0 S_A 50.0 S 100.0  failed none  clean*",
    "reference+hide_exit_code": ("[[]tt] E1-build-status-001 reference+hide_exit_code probe  S_H 0.0 S_A 0.0 S 0.0  "
                                 "failed H1-exit-status-visible,H2-exit-status-recorded,A1-status-reports-failure,"
                                 "A2-failed-build-not-published  harness_caused*"),
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


# ------------------------------------------------------------------ the [tt] line in pytest's layout


def _pty_run(argv: list[str], cwd: Path, columns: int, drop: tuple[str, ...] = ()) -> list[str]:
    """Run pytest in a pseudo-terminal ``columns`` wide (a real terminal as pytest sees one) and
    return its screen lines, ANSI escapes removed."""
    import pty
    import re
    import select

    master, slave = pty.openpty()
    env = {**{k: v for k, v in os.environ.items() if k not in drop}, "COLUMNS": str(columns), "LINES": "50",
           "TERM": "xterm"}
    proc = subprocess.Popen([sys.executable, "-m", "pytest", *argv], cwd=cwd, stdin=slave, stdout=slave,
                            stderr=slave, env=env, close_fds=True)
    os.close(slave)
    chunks: list[bytes] = []
    while True:
        ready, _, _ = select.select([master], [], [], 600)
        if not ready:
            proc.kill()
            break
        try:
            data = os.read(master, 65536)
        except OSError:  # the child closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    proc.wait(timeout=60)
    os.close(master)
    text = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", b"".join(chunks).decode("utf-8", "replace"))
    return text.replace("\r\n", "\n").split("\n")


def test_on_an_80_column_terminal_each_cell_is_one_line_with_pytest_progress(archive: Path, tmp_path: Path) -> None:
    """In a real terminal 80 columns wide: one [tt] line per cell, never wrapped, each ended by
    pytest's own progress figure; a skipped cell (a live model without its key) says so on its
    line; no line of status letters; the session table fits too."""
    root = tmp_path / "suite"
    root.mkdir()
    write_suite(root)
    out = root / "out"
    shutil.copytree(archive, out)
    lines = _pty_run(["tasks", "-p", "no:cacheprovider", f"--tt-harness={HARNESSES}", "--tt-model=probe,deepseek-v4-pro",
                      f"--tt-output={out}", "--tt-sandbox=local"], root, 80, drop=("DEEPSEEK_API_KEY",))
    tt = [ln for ln in lines if "[tt]" in ln]
    assert [ln.split("  ")[0] for ln in tt] == [
        "[tt] E1-build-status-001 reference probe", "[tt] E1-build-status-001 reference deepseek-v4-pro",
        "[tt] E1-build-status-001 reference+hide_exit_co… probe",
        "[tt] E1-build-status-001 reference+hide_exit_code deepseek-v4-pro"], tt
    assert all(ln.startswith("[tt] ") and len(ln) == 79 for ln in tt), tt
    assert [ln[-6:] for ln in tt] == ["[ 25%]", "[ 50%]", "[ 75%]", "[100%]"]
    assert tt[0].startswith("[tt] E1-build-status-001 reference probe  S 100.0  failed none  clean")
    assert "S 0.0  failed +4" in tt[2] and "  skipped: model 'dee…" in tt[1]
    assert not [ln for ln in lines if ln.strip() and set(ln.strip()) <= set("uU.FfsExX")]
    start = lines.index(next(ln for ln in lines if ln.startswith("TraceTrial corpus")))
    table = lines[start:lines.index(next(ln for ln in lines if ln.startswith("archive: ")))]
    assert len(table) >= 5 and all(len(ln) <= 80 for ln in table), table


def test_verbose_puts_the_line_under_pytest_own(pytester: pytest.Pytester, archive: Path) -> None:
    """Under -v pytest prints its own line per test; the cell's [tt] line follows its final one."""
    args = _resume(pytester, archive)
    result = pytester.runpytest(*args, "-v")
    result.assert_outcomes(passed=1, failed=5)
    out = result.outlines
    i = next(n for n, ln in enumerate(out) if ln.startswith("[tt] E1-build-status-001 reference probe"))
    assert out[i - 1].startswith("tasks/test_cells.py::test_cell[E1-build-status-001-reference-probe] PASSED")
    assert out[i + 1].startswith("tasks/test_cells.py::test_cell[E1-build-status-001-reference+hide_exit_code")


def test_classic_output_style_gets_plain_lines(pytester: pytest.Pytester, archive: Path) -> None:
    """No progress figure in pytest's layout: the [tt] lines are not padded for one."""
    args = _resume(pytester, archive)
    result = pytester.runpytest(*args, "-o", "console_output_style=classic")
    tt = [ln for ln in result.outlines if ln.startswith("[tt] ")]
    assert len(tt) == 2 and all(ln == ln.rstrip() and not ln.endswith("%]") for ln in tt), tt
