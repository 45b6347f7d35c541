"""What the controller shows and writes: a ``[tt]`` line per finished cell, the session's
summary table, and ``<output>/reports/`` (controller only; workers never write shared files).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Generator
from pathlib import Path

import pytest

from tracetrial.archive import RunPaths, check_seal
from tracetrial.results import CombinedScore
from tracetrial_fixtures.session import Session

__all__ = ["CellProgress", "progress_line", "terminal_summary", "write_session_reports"]


class CellProgress:
    """Writes one progress line per finished cell as it finishes (registered on the
    controller only; under xdist it sees the reports the workers send back).

    At the default verbosity the ``[tt]`` line *is* the cell's progress output: pytest's
    one-letter status of a scored cell (and of each of its sub-checks) is left out, so
    the letters do not break up the lines (``uF`` on a line of its own before each
    ``[tt]`` line). Outcomes, counts and the failure sections are pytest's as ever; with
    ``-q`` (no ``[tt]`` lines) or ``-v`` (pytest's own line per test) nothing changes.
    """

    def __init__(self, config: pytest.Config, session: Session):
        self.config = config
        self.session = session
        #: pytest wrote a status letter since our last line (the cursor is mid-line).
        self._letters_since_line = True

    @pytest.hookimpl(wrapper=True)
    def pytest_report_teststatus(self, report: pytest.TestReport,
                                 config: pytest.Config) -> Generator[None, object, object]:
        """A scored cell's call reports keep their category and word but show no letter."""
        status = yield
        if (config.get_verbosity() == 0 and report.when == "call" and isinstance(status, tuple)
                and len(status) == 3 and _scored_cell(report)):
            category, _letter, word = status
            return category, "", word
        if isinstance(status, tuple) and len(status) == 3 and status[1]:
            self._letters_since_line = True
        return status

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """A cell's call report: record and print its ``[tt]`` line (once per cell)."""
        if report.when != "call":
            return
        props = dict(report.user_properties)
        # Sub-check reports of a cell carry the same properties: one line per cell.
        if "tt_run_dir" not in props or report.nodeid in self.session.reported:
            return
        self.session.reported.add(report.nodeid)
        run_dir = Path(str(props["tt_run_dir"]))
        line = progress_line(run_dir)
        if not line:
            return
        self.session.progress.append(line)
        tr = self.config.pluginmanager.get_plugin("terminalreporter")
        if tr is None or self.config.get_verbosity() < 0:
            return
        if tr.isatty():
            # On a terminal the line must not wrap; logs keep every failed id.
            line = progress_line(run_dir, width=shutil.get_terminal_size().columns - len("[tt] ")) or line
        # pytest prints a file's path once, then status letters on the same line; it starts a
        # new line (and prints the path again) only after a line of ours reset ``currentfspath``.
        # So: end pytest's line only when it holds letters, then give the path back.
        fspath = tr.currentfspath
        if self._letters_since_line:
            tr.ensure_newline()
        tr.line(f"[tt] {line}")
        tr.currentfspath = fspath
        self._letters_since_line = False


def _scored_cell(report: pytest.TestReport) -> bool:
    """Whether ``report`` belongs to a cell that gets a ``[tt]`` line (it has a score)."""
    run_dir = dict(report.user_properties).get("tt_run_dir")
    return run_dir is not None and RunPaths(Path(str(run_dir))).combined_score.is_file()


def progress_line(run_dir: Path, width: int | None = None) -> str | None:
    """The one-line result of an archived cell (``None`` while it has no score), fitted to
    ``width`` columns where it can be (see :func:`reports.terminal.progress_line`). A cell
    whose seal does not verify shows no score (a forged one would read as real): the line
    says so and names the first mismatching file."""
    path = RunPaths(run_dir).combined_score
    if not path.is_file():
        return None
    seal = check_seal(run_dir)
    if seal.state in ("tampered", "incomplete"):
        task, model, harness = run_dir.parts[-3:]
        what = "TAMPERED" if seal.state == "tampered" else "HALF-WRITTEN"
        return f"{task} {harness} {model}  archive {what}, not trusted: {seal.describe()}"
    try:
        score = CombinedScore.model_validate_json(path.read_text(encoding="utf-8"))
    except ValueError:
        return None
    from reports.terminal import progress_line as fmt

    return fmt(score, width)


def terminal_summary(tr: pytest.TerminalReporter, session: Session) -> None:
    """The per-harness table of the archive, after the test results (when a cell finished)."""
    if not session.progress:
        return
    tr.section("TraceTrial")
    try:
        from reports.aggregate import aggregate, load_runs
        from reports.terminal import summary_table

        runs = load_runs(session.settings.output)
        for line in summary_table(aggregate(runs)):
            tr.write_line(line)
    except Exception as exc:  # noqa: BLE001 - the summary must never hide test results
        tr.write_line(f"(summary table unavailable: {type(exc).__name__}: {exc})")
    for note in session.notes:
        tr.write_line(note)
    tr.write_line(f"archive: {session.settings.output}")


def write_session_reports(session: Session) -> None:
    """``<output>/reports/`` for the whole archive, when a cell finished (``TT_NO_REPORTS=1``: never)."""
    if not session.progress or os.environ.get("TT_NO_REPORTS") == "1":
        return
    try:
        from reports import write_reports

        write_reports(session.settings.output)
    except Exception as exc:  # noqa: BLE001
        # Shown under the summary table (reports are written before it is printed).
        session.notes.append(f"(reports not written: {type(exc).__name__}: {exc})")
