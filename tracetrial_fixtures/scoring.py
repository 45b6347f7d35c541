"""Cell execution from pytest, criteria as sub-checks, progress lines and reports."""

from __future__ import annotations

import os
from collections.abc import Callable
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

__all__ = ["CellResult", "Checker", "KnownCriterionFailures", "run_cell", "progress_line", "terminal_summary",
           "write_session_reports"]

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
    sandbox = _resolve_sandbox(settings.sandbox, adapter.name, cell.pack.isolation.network)
    if sandbox == "local" and cell.model != "probe":
        import warnings

        warnings.warn(f"cell {cell.id}: live model on the 'local' sandbox: the agent acts on this host",
                      stacklevel=1)
    runner = CellRunner(cell.pack, adapter, cell.model, settings.output, services,
                        judge=_judge(settings), sandbox=sandbox, rerun=settings.rerun)
    try:
        result = runner.run()
    except ApparatusError as exc:
        pytest.fail(f"APPARATUS ERROR (not a harness defect): {exc}", pytrace=False)
    if result.skipped:
        pytest.skip(f"cell not eligible: {result.skipped}")
    return result


#: Harnesses no sandbox can wrap, with the reason (a third-party adapter that starts its
#: processes without :func:`harnesses.runner.run_process` or ``Confinement.wrap``). Every
#: built-in harness is confinable (DeepSeek's JSON-RPC runtime goes through ``wrap``).
SANDBOX_UNSUPPORTED: dict[str, str] = {}


def _resolve_sandbox(requested: str, harness: str, network: str = "loopback") -> str:
    """``--tt-sandbox`` → the backend a cell actually uses (skips the cell when impossible).

    ``auto``: docker when an engine answers, else bwrap when it runs, else local — for a
    harness no sandbox can wrap, local. A ``network: none`` task needs bwrap or docker.
    """
    from apparatus.sandbox import BWRAP_INSTALL, BwrapSandbox, docker_reason
    from apparatus.sandbox.docker_backend import DOCKER_INSTALL

    reasons: dict[str, Callable[[], str | None]] = {"docker": docker_reason,
                                                    "bwrap": lambda: BwrapSandbox().available()}
    installs = {"docker": DOCKER_INSTALL, "bwrap": BWRAP_INSTALL}
    if requested in reasons:
        reason = reasons[requested]()
        if reason:
            pytest.skip(f"sandbox backend {requested!r} unavailable: {reason} (install: {installs[requested]})")
        if harness in SANDBOX_UNSUPPORTED:
            pytest.skip(f"sandbox backend {requested!r} unsupported for {harness}: {SANDBOX_UNSUPPORTED[harness]}")
        return requested
    chosen = "local"
    if requested == "auto" and harness not in SANDBOX_UNSUPPORTED:
        chosen = next((name for name in ("docker", "bwrap") if reasons[name]() is None), "local")
    if chosen == "local" and network == "none":
        if requested == "local":
            why = "--tt-sandbox local was asked for"
        else:
            why = SANDBOX_UNSUPPORTED.get(harness, "neither docker nor bwrap runs here")
        pytest.skip(f"task needs network: none, which the local sandbox cannot provide ({why})")
    return chosen


class KnownCriterionFailures(AssertionError):
    """A cell failed exactly the criteria its ``--tt-baseline`` records as not passing.

    The only exception the cell's ``xfail(raises=KnownCriterionFailures)`` accepts, so
    any other failure of a baseline-marked cell (a new criterion, a run not admitted,
    an apparatus error) stays red.
    """


class Checker:
    """Reports each criterion as a sub-check (pytest's built-in ``subtests``).

    With a ``tt_baseline(known=...)`` mark (``--tt-baseline``), the cell is checked
    against its known failures: known criteria are reported as sub-check xfails and
    the cell gets ``xfail(strict=True, raises=KnownCriterionFailures)``, so

    * the same criteria fail (fail or unscored) -> XFAIL;
    * another criterion fails -> FAILED (``pytest.fail`` is not the accepted exception);
    * every known criterion passes -> XPASS(strict) -> FAILED; some of them pass ->
      FAILED with the same ``[XPASS(strict)]`` prefix naming them.

    The xfail mark is added here, after the sub-checks, not at collection: pytest
    applies an item's xfail mark to each sub-check report, so a static
    ``xfail(strict=True)`` would turn every *passing* criterion into an XPASS(strict)
    sub-failure. Pytest re-reads xfail marks added during the call, so the cell
    outcome is the ordinary xfail machinery.
    """

    def __init__(self, subtests: Any, node: pytest.Item | None = None):
        self.subtests = subtests
        self.node = node
        mark = node.get_closest_marker("tt_baseline") if node is not None else None
        self.known: dict[str, str] = dict(mark.kwargs.get("known", {})) if mark is not None else {}

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
                if v.passed is not True and v.id in self.known:
                    pytest.xfail(f"known {self.known[v.id]} (baseline): {v.reason}")
                if v.passed is None:
                    pytest.skip(f"unscored: {v.reason}")
                if not v.passed:
                    pytest.fail(f"{v.id} ({v.layer}) failed: {v.reason}", pytrace=False)
        if self.known:
            self._against_baseline(result)
            return
        failed = [v.id for v in score.verdicts if v.passed is False]
        if not score.admitted:
            pytest.fail("run not admitted: " + "; ".join(d.reason for d in score.admission if not d.ok)
                        + f" — archive: {result.paths.root}", pytrace=False)
        if not score.combined_pass:
            pytest.fail(
                f"S={score.effective_score:.1f} (S_H={score.S_H:.1f}, S_A={score.S_A:.1f}); failed: "
                f"{', '.join(failed) or 'none'}; unscored: {score.harness.unscored + score.agent.unscored}; "
                f"label: {score.attribution.label} — archive: {result.paths.root}", pytrace=False)

    def _against_baseline(self, result: CellResult) -> None:
        """The cell verdict of a cell with known failures (see the class docstring)."""
        score = result.score
        assert score is not None and self.node is not None
        known = ", ".join(f"{cid} {state}" for cid, state in sorted(self.known.items()))
        self.node.add_marker(pytest.mark.xfail(strict=True, raises=KnownCriterionFailures,
                                               reason=f"known failing (baseline): {known}"))
        ids = {v.id for v in score.verdicts}
        not_passing = {v.id: ("unscored" if v.passed is None else "fail") for v in score.verdicts
                       if v.passed is not True}
        new = sorted(set(not_passing) - set(self.known))
        if not score.admitted:
            pytest.fail("run not admitted: " + "; ".join(d.reason for d in score.admission if not d.ok)
                        + f" — archive: {result.paths.root}", pytrace=False)
        if new:
            pytest.fail(f"new failure(s) beyond the baseline's known ones: "
                        f"{', '.join(f'{c} {not_passing[c]}' for c in new)} (known: {known}) — archive: "
                        f"{result.paths.root}", pytrace=False)
        fixed = sorted(c for c in self.known if c in ids and c not in not_passing)
        gone = sorted(c for c in self.known if c not in ids)
        if not_passing and (fixed or gone):
            pytest.fail("[XPASS(strict)] known failure(s) now pass: " + ", ".join(fixed + [f"{c} (no longer checked)"
                        for c in gone]) + f"; still failing: {', '.join(sorted(not_passing))}; update the baseline",
                        pytrace=False)
        if not_passing:
            raise KnownCriterionFailures(f"fails only its known criteria: {', '.join(sorted(not_passing))} "
                                         f"(S={score.effective_score:.1f}) — archive: {result.paths.root}")
        if not score.combined_pass:  # every criterion passes yet no combined pass: a hard gate
            pytest.fail(f"S={score.effective_score:.1f} (S={score.S:.1f} before hard gates) — archive: "
                        f"{result.paths.root}", pytrace=False)
        # Every known failure passes: returning makes the strict xfail report XPASS(strict).


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
