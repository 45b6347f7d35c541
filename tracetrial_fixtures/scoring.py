"""Cell execution from pytest, criteria as sub-checks, progress lines and reports."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from tracetrial.archive import RunPaths
from tracetrial.errors import ApparatusError
from tracetrial.results import CombinedScore
from tracetrial.task import BrokenPack

from tracetrial_fixtures.cell import CellResult, CellRunner
from tracetrial_fixtures.collect import CellSpec
from tracetrial_fixtures.services import Services
from tracetrial_fixtures.settings import Settings

__all__ = ["CellResult", "Checker", "run_cell", "progress_line", "terminal_summary", "write_session_reports"]

#: Progress lines of finished cells, collected on the controller.
PROGRESS: list[str] = []
#: Node ids already given a progress line.
REPORTED: set[str] = set()


def _judge(settings: Settings) -> Any:
    if not settings.judge:
        return None
    from criteria.judge import make_judge

    return make_judge(settings.judge)


def run_cell(cell: CellSpec, settings: Settings, services: Services) -> CellResult:
    """Resolve the harness, check eligibility, run (or resume) the cell.

    A broken pack or an unknown harness is returned as a ``problem`` so the cell
    *fails* (in its call phase) with the precise message; other cells still run.
    """
    paths = RunPaths.for_cell(settings.output, cell.pack.id, cell.model, cell.harness)
    if isinstance(cell.pack, BrokenPack):
        return CellResult(paths, None, problem=str(cell.pack.error))
    from harnesses.registry import UnknownHarnessError, get_harness

    problem: str | None = None
    try:
        adapter = get_harness(cell.harness)
    except UnknownHarnessError as exc:
        problem = str(exc)
    except Exception as exc:  # noqa: BLE001 - a broken third-party adapter fails its own cells only
        problem = f"harness {cell.harness!r} could not be loaded: {type(exc).__name__}: {exc}"
    if problem is not None:
        return CellResult(paths, None, problem=problem)
    reason = adapter.unavailable_reason()
    if reason:
        pytest.skip(reason)
    if cell.model != "probe":
        missing = services.registry.missing_key(cell.model)
        if missing:
            pytest.skip(f"model {cell.model!r} needs the environment variable {missing}")
    sandbox = settings.sandbox
    if sandbox in ("auto", "local"):
        sandbox = "local"
        if cell.model != "probe":
            import warnings

            warnings.warn(f"cell {cell.id}: live model on the 'local' sandbox: the agent acts on this host",
                          stacklevel=1)
    elif sandbox in ("docker", "bwrap"):
        pytest.skip(f"sandbox backend {sandbox!r} is not available in this build; use --tt-sandbox local")
    runner = CellRunner(cell.pack, adapter, cell.model, settings.output, services,
                        judge=_judge(settings), sandbox=sandbox, rerun=settings.rerun)
    try:
        result = runner.run()
    except ApparatusError as exc:
        pytest.fail(f"APPARATUS ERROR (not a harness defect): {exc}", pytrace=False)
    if result.skipped:
        pytest.skip(f"cell not eligible: {result.skipped}")
    return result


class Checker:
    """Reports each criterion as a sub-check (pytest's built-in ``subtests``)."""

    def __init__(self, subtests: Any):
        self.subtests = subtests

    def __call__(self, result: CellResult) -> None:
        if result.problem:
            pytest.fail(result.problem, pytrace=False)
        score = result.score
        assert score is not None, f"no score for {result.paths.root}"
        from reports.allure import attach_cell

        attach_cell(result.paths, score)  # no-op without --alluredir
        # pytrace=False: the verdict's reason *is* the report; a traceback of this
        # checker would only bury it.
        for v in score.verdicts:
            with self.subtests.test(msg=f"{v.layer}:{v.id}"):
                if v.passed is None:
                    pytest.skip(f"unscored: {v.reason}")
                if not v.passed:
                    pytest.fail(f"{v.id} ({v.layer}) failed: {v.reason}", pytrace=False)
        failed = [v.id for v in score.verdicts if v.passed is False]
        if not score.admitted:
            pytest.fail("run not admitted: " + "; ".join(d.reason for d in score.admission if not d.ok)
                        + f" — archive: {result.paths.root}", pytrace=False)
        if not score.combined_pass:
            pytest.fail(
                f"S={score.effective_score:.1f} (S_H={score.S_H:.1f}, S_A={score.S_A:.1f}); failed: "
                f"{', '.join(failed) or 'none'}; unscored: {score.harness.unscored + score.agent.unscored}; "
                f"label: {score.attribution.label} — archive: {result.paths.root}", pytrace=False)


def progress_line(run_dir: Path) -> str | None:
    path = run_dir / "artifacts" / "llm_judge" / "combined_score.json"
    if not path.is_file():
        return None
    try:
        score = CombinedScore.model_validate_json(path.read_text(encoding="utf-8"))
    except ValueError:
        return None
    try:
        from reports.terminal import progress_line as fmt

        return fmt(score)
    except ImportError:
        failed = ",".join(v.id for v in score.verdicts if v.passed is False) or "-"
        i = score.identity
        return (f"{i.task_id} {i.harness} {i.model}: S_H={score.S_H:.1f} S_A={score.S_A:.1f} "
                f"failed={failed} label={score.attribution.label}")


def terminal_summary(tr: pytest.TerminalReporter, settings: Settings) -> None:
    if not PROGRESS:
        return
    tr.section("TraceTrial")
    try:
        from reports.aggregate import aggregate, load_runs
        from reports.terminal import summary_table

        runs = load_runs(settings.output)
        for line in summary_table(aggregate(runs)):
            tr.write_line(line)
    except Exception as exc:  # noqa: BLE001 - the summary must never hide test results
        tr.write_line(f"(summary table unavailable: {type(exc).__name__}: {exc})")
    tr.write_line(f"archive: {settings.output}")


def write_session_reports(settings: Settings) -> None:
    if not PROGRESS or os.environ.get("TT_NO_REPORTS") == "1":
        return
    try:
        from reports import write_reports

        write_reports(settings.output)
    except Exception as exc:  # noqa: BLE001
        PROGRESS.append(f"(reports not written: {type(exc).__name__}: {exc})")
