"""What the controller shows and writes: a ``[tt]`` line per finished cell, the session's
summary table, and ``<output>/reports/`` (controller only; workers never write shared files).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tracetrial.results import CombinedScore
from tracetrial_fixtures.session import Session

__all__ = ["CellProgress", "progress_line", "terminal_summary", "write_session_reports"]


class CellProgress:
    """Writes one progress line per finished cell as it finishes (registered on the
    controller only; under xdist it sees the reports the workers send back)."""

    def __init__(self, config: pytest.Config, session: Session):
        self.config = config
        self.session = session

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """A cell's call report: record and print its ``[tt]`` line (once per cell)."""
        if report.when != "call":
            return
        props = dict(report.user_properties)
        # Sub-check reports of a cell carry the same properties: one line per cell.
        if "tt_run_dir" not in props or report.nodeid in self.session.reported:
            return
        self.session.reported.add(report.nodeid)
        line = progress_line(Path(str(props["tt_run_dir"])))
        if not line:
            return
        self.session.progress.append(line)
        tr = self.config.pluginmanager.get_plugin("terminalreporter")
        if tr is not None and self.config.get_verbosity() >= 0:
            tr.ensure_newline()
            tr.write_line(f"[tt] {line}")


def progress_line(run_dir: Path) -> str | None:
    """The one-line result of an archived cell (``None`` while it has no score)."""
    path = run_dir / "artifacts" / "llm_judge" / "combined_score.json"
    if not path.is_file():
        return None
    try:
        score = CombinedScore.model_validate_json(path.read_text(encoding="utf-8"))
    except ValueError:
        return None
    from reports.terminal import progress_line as fmt

    return fmt(score)


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
