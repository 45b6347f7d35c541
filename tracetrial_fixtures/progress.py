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
from tracetrial_fixtures.spend import CAP_REASON, SpendLedger, cell_cost, is_priced, prices_for

__all__ = ["CellProgress", "progress_line", "terminal_summary", "write_session_reports"]


#: ``[tt] `` in front of every cell line.
PREFIX = "[tt] "


class CellProgress:
    """Writes one ``[tt]`` line per cell as it finishes (registered on the controller only;
    under xdist it sees the reports the workers send back).

    At the default verbosity the ``[tt]`` line *is* the cell's progress output, in pytest's own
    layout: pytest's one-letter status of a cell (and of each of its sub-checks) is left out,
    the line is written onto pytest's current line through the terminal reporter, padded so that
    pytest itself ends it with its progress figure (``[ 25%]``, or ``[100%]`` after the last
    cell), and on a terminal it is fitted to the width so it never wraps
    (:func:`reports.terminal.progress_line`). A scored cell shows its scores; a skipped cell,
    one that errored in setup or failed without a score says so on its line. Outcomes, counts
    and the failure sections are pytest's as ever; ``-q`` shows no ``[tt]`` lines and ``-v``
    shows them under pytest's own line per test.
    """

    def __init__(self, config: pytest.Config, session: Session):
        self.config = config
        self.session = session
        #: pytest's current line holds something (a file's path, status letters): a ``[tt]`` line
        #: must start a line of its own.
        self._open_line = False
        #: Tests pytest counts in its progress figure (a report with a status letter or word).
        self._counted: set[str] = set()
        #: Our last line may still be open: written as the last test's, waiting for [100%] (under
        #: xdist another cell's report may still follow it).
        self._pending = False

    @pytest.hookimpl(wrapper=True)
    def pytest_report_teststatus(self, report: pytest.TestReport,
                                 config: pytest.Config) -> Generator[None, object, object]:
        """A cell's reports keep their category and word but show no letter (its line says it)."""
        status = yield
        if not (isinstance(status, tuple) and len(status) == 3):
            return status
        if status[1] or status[2]:
            self._counted.add(report.nodeid)
        if config.get_verbosity() == 0 and _cell_report(report) and report.when in ("setup", "call"):
            category, _letter, word = status
            return category, "", word
        if status[1]:
            self._open_line = True
        return status

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_logstart(self, nodeid: str, location: tuple[str, int | None, str]) -> None:
        """Before pytest's own: it is about to write a file's path when the file changes."""
        tr = self.config.pluginmanager.get_plugin("terminalreporter")
        if tr is not None and tr.currentfspath != self.config.rootpath / nodeid.split("::")[0]:
            self._open_line = True

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> Generator[None, None, None]:
        """A cell's line, once per cell, from its own call report (not its sub-checks') or from the
        setup report that skipped or errored it. At the default verbosity it is written before
        pytest's reporter handles the report, so that pytest adds its progress figure to the line;
        under ``-v``, after pytest's own line for the test."""
        line, run_dir = self._line(report)
        verbose = self.config.get_verbosity() > 0
        if line is not None and not verbose:
            # pytest counts this test before it decides on the figure; it leaves the last test's
            # line open for [100%] until the run loop ends
            last = len(self._counted | {report.nodeid}) >= getattr(
                self.config.pluginmanager.get_plugin("session"), "testscollected", 0)
            self._write(line, run_dir, last=last)
        yield
        if line is not None and verbose:
            self._write(line, run_dir)

    def _line(self, report: pytest.TestReport) -> tuple[str | None, Path | None]:
        """The cell's line and (for a scored cell) its folder; ``(None, None)`` when the report
        gets none."""
        if (not _cell_report(report) or isinstance(report, pytest.SubtestReport)
                or report.nodeid in self.session.reported):
            return None, None
        props = dict(report.user_properties)
        run_dir = Path(str(props["tt_run_dir"])) if "tt_run_dir" in props else None
        line = progress_line(run_dir) if run_dir is not None and report.when == "call" else None
        if line is not None:
            self.session.progress.append(line)
        else:
            run_dir, line = None, _outcome_line(report)
            if line is None:
                return None, None
            if CAP_REASON in line:
                self.session.capped += 1
        self.session.reported.add(report.nodeid)
        return line, run_dir

    def _write(self, line: str, run_dir: Path | None, *, last: bool = False) -> None:
        """Write a cell's line through the terminal reporter (``run_dir``: a scored cell's folder,
        to fit its line to the terminal; ``last``: pytest counts this the session's last test)."""
        tr = self.config.pluginmanager.get_plugin("terminalreporter")
        verbosity = self.config.get_verbosity()
        if tr is None or verbosity < 0:
            return
        progress = _progress_width(self.config) if verbosity == 0 else 0
        width = terminal_width()
        if tr.isatty():
            # On a terminal the line must not wrap (pytest's progress figure included); logs keep
            # every failed id.
            room = width - len(PREFIX) - (progress + 1 if progress else 0)
            line = (progress_line(run_dir, width=room) if run_dir is not None else None) or _fit(line, room)
        text = PREFIX + line
        if verbosity > 0:
            # After pytest's own line for the test: end it, write ours and leave it open; -2 (what
            # pytest itself sets under xdist) makes the next test's line, or the next section,
            # start a new line.
            tr.ensure_newline()
            tr.write(text)
            tr.currentfspath = -2
            return
        # ensure_newline ends pytest's line (and forgets the file's path, which pytest would then
        # print again before the next cell): end it only when it holds something, then give the
        # path back.
        fspath = tr.currentfspath
        if self._pending:
            tr.write("\n")  # a line left open for [100%], yet another cell finished after it (xdist)
        elif self._open_line:
            tr.ensure_newline()
        tr.currentfspath = fspath
        self._open_line = self._pending = False
        if progress:
            # pytest ends a line that reaches its edge with the progress figure (the last cell's
            # line gets [100%] when the run loop ends): padding the line to the edge hands it over.
            tr.write(text.ljust(width - progress - 1))
            self._pending = last
        else:
            tr.line(text)


def terminal_width() -> int:
    """The columns pytest's terminal writer uses (``COLUMNS``, the terminal, else 80; never under 40)."""
    width = shutil.get_terminal_size(fallback=(80, 24)).columns
    return width if width >= 40 else 80


def _progress_width(config: pytest.Config) -> int:
    """The width of pytest's progress figure at the end of a line (`` [ 25%]``), 0 when it shows
    none (``console_output_style = classic``, ``-s``, ``--setup-show``): the rule of pytest's
    terminal reporter, from the public configuration."""
    style = config.getini("console_output_style")
    if config.getoption("capture", "no") == "no" and style != "progress-even-when-capture-no":
        return 0
    if config.getoption("setupshow", False):
        return 0
    if style in ("progress", "progress-even-when-capture-no"):
        return len(" [100%]")
    if style == "count":
        # pytest sizes it by the number of tests collected (the session registers as a plugin)
        n = getattr(config.pluginmanager.get_plugin("session"), "testscollected", 0)
        return len(f" [{n}/{n}]")
    if style == "times":
        return len(" 99h 59m")
    return 0


def _fit(line: str, width: int) -> str:
    return line if len(line) <= width else line[:max(width - 1, 0)] + "…"


def _cell_report(report: pytest.TestReport) -> bool:
    """A report of a cell test (marked ``tt_cell`` at collection)."""
    return "tt_cell" in report.keywords


def _cell_id(report: pytest.TestReport) -> str:
    """``E1-build-status-001 codex probe`` as the cell fixture named it, else the cell's parameter id."""
    label = dict(report.user_properties).get("tt_cell")
    if isinstance(label, str):
        return label
    name = report.nodeid.rsplit("::", 1)[-1]
    return name[name.find("[") + 1:-1] if name.endswith("]") and "[" in name else name


def _outcome_line(report: pytest.TestReport) -> str | None:
    """The line of a cell without a score: skipped, errored in setup, failed in its call (a broken
    pack, an unknown harness, an untrusted archive); ``None`` for a report that is no outcome."""
    if report.when == "setup" and report.passed:
        return None
    if report.skipped:
        longrepr = report.longrepr
        reason = longrepr[2] if isinstance(longrepr, tuple) and len(longrepr) == 3 else str(longrepr)
        return f"{_cell_id(report)}  skipped: {reason.removeprefix('Skipped: ')}"
    if report.failed:
        lines = [ln.strip() for ln in report.longreprtext.strip().splitlines() if ln.strip()]
        errors = [ln[1:].strip() for ln in lines if ln.startswith("E ")]
        what = "ERROR" if report.when == "setup" else "FAILED"
        return f"{_cell_id(report)}  {what}: {errors[-1] if errors else (lines[0] if lines else '')}"
    return None


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
    from reports.terminal import progress_line as fmt
    from tracetrial.archive import repetition_of

    seal = check_seal(run_dir)
    rep = repetition_of(run_dir)
    if seal.state in ("tampered", "incomplete"):
        task, model, harness = run_dir.parts[-3:]
        what = "TAMPERED" if seal.state == "tampered" else "HALF-WRITTEN"
        model += f" rep {rep}" if rep > 1 else ""
        return f"{task} {harness} {model}  archive {what}, not trusted: {seal.describe()}"
    try:
        score = CombinedScore.model_validate_json(path.read_text(encoding="utf-8"))
    except ValueError:
        return None
    return fmt(score, width, rep, cost=_cell_usd(run_dir, rep, score.identity.model))


def _cell_usd(run_dir: Path, repetition: int, model: str) -> float | None:
    """A live cell's cost by the frozen catalogue (None for a free model or unknown usage)."""
    # <root>/traces/<task>/<model>/<harness>; a repetition's root is <output>/repeats/rep-<i>: the
    # catalogue frozen with the output is the one the session priced its spend with
    root = run_dir.parents[3]
    prices = prices_for(root.parents[1] if repetition > 1 else root)
    return cell_cost(RunPaths(run_dir).summary, prices.get(model)) if is_priced(prices, model) else None


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


def spend_summary(tr: pytest.TerminalReporter, session: Session) -> None:
    """What the session spent on priced models (its ledger), and the cells ``--tt-max-cost`` kept back."""
    settings = session.settings
    spent = SpendLedger(settings.output, session.spend_id).total()
    if not spent.cells and not session.capped and settings.max_cost is None:
        return
    cap = f" of --tt-max-cost ${settings.max_cost:g}" if settings.max_cost is not None else ""
    line = f"spent this session: ${spent.usd:.4f}{cap} over {spent.cells} cell(s) (frozen prices, archived usage)"
    if spent.unknown:
        line += f"; {spent.unknown} cell(s) reported no usage and are not counted"
    tr.write_line(line)
    if session.capped:
        tr.write_line(f"{session.capped} cell(s) not started: the cap was reached (re-run with a higher "
                      "--tt-max-cost to run them; finished cells are kept)")


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
