"""Offline re-scoring of an output folder from its archives alone (SPEC §10).

Nothing is run but the task's deterministic verifier: each cell's task comes
from its own snapshot (``private/task/<task_id>/``), and without an explicit
judge the run's archived judge responses are replayed by prompt hash
(:class:`~criteria.judge.ArchivedJudge`), so an unchanged archive re-scores to
byte-identical files. Cells that were never measured (``status: skipped``) are
left alone.

Only a cell whose seal verifies is re-scored (scoring then re-seals it, score
included). Every other cell is reported, never scored and never written to:

* **tampered** -- a sealed file changed, a file is not in the manifest, the manifest is
  unreadable, or a score sits in a cell that was never sealed;
* **half-written** -- no ``manifest.json`` (the cell never finished), files the manifest
  lists are missing, or ``result.json`` is missing or unreadable.

A ``tt-manifest/1`` (legacy) cell, sealed before the manifest covered the score, is
re-scored from its verified run files and re-sealed.

With ``renormalize``, each cell's ``events.json`` (and ``summary.json``) is first
re-derived from its archived native records by the current normalizer
(:func:`harnesses.rederive.renormalize_run`): what a user does after a normalizer fix; the
cell's dual-source reconciliation (``evidence/reconciliation.json``, counts in ``summary.json``)
is then re-derived from the new trace and the cell re-sealed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from criteria.admission import LedgerVerifier
from criteria.engine import score_run
from criteria.errors import CriteriaError, RescoreError
from criteria.judge import ArchivedJudge, Judge
from criteria.rules_reconcile import write_reconciliation
from criteria.rundata import TASK_SNAPSHOT_DIR
from harnesses.rederive import renormalize_run
from tracetrial.archive import RunArchive, RunPaths, SealCheck, check_seal, repetition_roots
from tracetrial.redact import Redactor
from tracetrial.results import ResultRecord
from tracetrial.task import load_task

__all__ = ["CellRescore", "RescoreReport", "UntrustedCell", "rescore_archive", "rescore_output", "rescore_run"]

#: What happened to one cell: re-scored, never measured (skipped), or not re-scored because
#: its archive is tampered, half-written, or scoring failed.
Outcome = Literal["rescored", "skipped", "tampered", "incomplete", "failed"]
#: How each outcome is named in messages.
NAMES: dict[Outcome, str] = {"rescored": "rescored", "skipped": "not measured (skipped)", "tampered": "tampered",
                             "incomplete": "half-written", "failed": "failed"}


class UntrustedCell(CriteriaError):
    """A cell whose archive does not verify: tampered or half-written (never scored).

    Attributes:
        outcome: ``tampered`` or ``incomplete`` (half-written).
        reason: what does not match, naming the first file.
    """

    def __init__(self, run_dir: Path, outcome: Literal["tampered", "incomplete"], reason: str):
        self.outcome: Literal["tampered", "incomplete"] = outcome
        self.reason = reason
        super().__init__(f"{run_dir}: {NAMES[outcome]} archive, not scored: {reason}")


def integrity_problem(run_dir: Path, seal: SealCheck | None = None) -> tuple[Literal["tampered", "incomplete"], str] | None:
    """Why a cell must not be scored (``None`` when its files verify). Pure over the files."""
    seal = seal if seal is not None else check_seal(run_dir)
    if seal.state == "tampered":
        return "tampered", seal.describe(3)
    if seal.state == "unsealed":
        return "incomplete", "no manifest.json: the cell never finished (the session stopped mid-cell)"
    if seal.state == "incomplete":
        return "incomplete", seal.describe(3)
    try:
        ResultRecord.model_validate_json(RunPaths(run_dir).result.read_bytes())
    except FileNotFoundError:
        return "incomplete", "result.json missing: the run never recorded its outcome"
    except (OSError, ValueError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        return "incomplete", f"result.json unreadable: {first}"
    return None


def rescore_run(run_dir: Path, judge: Judge | None = None, *,
                ledger_verifier: LedgerVerifier | None = None, renormalize: bool = False) -> Path | None:
    """Re-score one cell; returns its ``combined_score.json`` (None for a skipped cell).

    Raises:
        UntrustedCell: the cell is tampered or half-written (nothing is written).
        TaskPackErrors: the run's task snapshot does not load.
    """
    seal = check_seal(run_dir)
    problem = integrity_problem(run_dir, seal)
    if problem is not None:
        raise UntrustedCell(run_dir, *problem)
    record = ResultRecord.model_validate_json(RunPaths(run_dir).result.read_bytes())
    if record.status == "skipped":
        return None
    task = load_task(run_dir / TASK_SNAPSHOT_DIR / record.identity.task_id)
    replay = judge if judge is not None else ArchivedJudge.from_run(run_dir)
    if renormalize and record.status != "apparatus_error":
        if seal.state == "legacy":
            # Re-derivation refuses any seal short of a full one: upgrade the seal first.
            score_run(task, run_dir, judge=replay, ledger_verifier=ledger_verifier)
        renormalize_run(run_dir)
        # the re-derived trace gets its reconciliation re-derived too (evidence + summary counts)
        archive = RunArchive(RunPaths(run_dir), Redactor.from_environment(extra=task.spec.secrets))
        write_reconciliation(archive)
        archive.seal(record.identity.run_id)
    score_run(task, run_dir, judge=replay, ledger_verifier=ledger_verifier)
    return RunPaths(run_dir).combined_score


@dataclass(frozen=True)
class CellRescore:
    """The outcome of one cell (``cell`` relative to the output folder)."""

    cell: str
    outcome: Outcome
    reason: str = ""
    path: Path | None = None

    def __str__(self) -> str:
        return f"{NAMES[self.outcome]}: {self.cell}" + (f": {self.reason}" if self.reason else "")


@dataclass
class RescoreReport:
    """What ``rescore`` found, cell by cell, in sorted cell order."""

    cells: list[CellRescore] = field(default_factory=list)

    def of(self, outcome: Outcome) -> list[CellRescore]:
        """The cells with that outcome."""
        return [c for c in self.cells if c.outcome == outcome]

    @property
    def written(self) -> list[Path]:
        """The ``combined_score.json`` files written."""
        return [c.path for c in self.cells if c.path is not None]

    @property
    def bad(self) -> list[CellRescore]:
        """Cells not re-scored for a problem: tampered, half-written, failed."""
        return [c for c in self.cells if c.outcome in ("tampered", "incomplete", "failed")]

    def counts(self) -> str:
        """``3 rescored, 1 tampered, 0 half-written, 0 failed, 1 not measured (skipped)``."""
        order: tuple[Outcome, ...] = ("rescored", "tampered", "incomplete", "failed", "skipped")
        return ", ".join(f"{len(self.of(o))} {NAMES[o]}" for o in order)


def rescore_archive(output_dir: Path, judge: Judge | None = None, *,
                    ledger_verifier: LedgerVerifier | None = None, renormalize: bool = False) -> RescoreReport:
    """Re-score every cell under ``<output_dir>/traces/*/*/*/`` — and under each repetition's
    ``<output_dir>/repeats/rep-<i>/traces/*/*/*/`` (``--tt-repeat``) — and say what happened to each.

    Tampered and half-written cells are reported and left untouched (their evidence is
    kept as found); a cell whose scoring raises is reported as failed; every other cell
    is still re-scored.
    """
    output_dir = Path(output_dir)
    report = RescoreReport()
    cells = [p for _, root in repetition_roots(output_dir)
             for p in sorted(root.glob("traces/*/*/*")) if p.is_dir() and not p.is_symlink()]
    for run_dir in cells:
        rel = run_dir.relative_to(output_dir).as_posix()
        try:
            path = rescore_run(run_dir, judge, ledger_verifier=ledger_verifier, renormalize=renormalize)
        except UntrustedCell as exc:
            report.cells.append(CellRescore(rel, exc.outcome, exc.reason))
            continue
        except Exception as exc:  # noqa: BLE001 - one broken cell must not stop the others
            report.cells.append(CellRescore(rel, "failed", f"{type(exc).__name__}: {exc}"))
            continue
        report.cells.append(CellRescore(rel, "rescored", path=path) if path is not None
                            else CellRescore(rel, "skipped"))
    return report


def rescore_output(output_dir: Path, judge: Judge | None = None, *,
                   ledger_verifier: LedgerVerifier | None = None,
                   errors: list[str] | None = None, renormalize: bool = False) -> list[Path]:
    """Re-score every cell under ``<output_dir>/traces/*/*/*/`` (see :func:`rescore_archive`).

    Args:
        output_dir: the ``--tt-output`` folder.
        judge: a judge to re-ask; ``None`` replays each run's archived judge records.
        renormalize: re-derive each cell's ``events.json`` from its native records first.
        ledger_verifier: override of the ledger integrity check.
        errors: collects one line per cell not re-scored (``<cell>: <reason>`` for a failure,
            ``<cell>: tampered: <reason>`` / ``<cell>: half-written: <reason>``); when
            ``None`` they are raised together at the end.

    Returns:
        The ``combined_score.json`` paths written, in sorted cell order.

    Raises:
        RescoreError: some cells were not re-scored (only when ``errors`` is None); every
            other cell was still re-scored.
    """
    report = rescore_archive(output_dir, judge, ledger_verifier=ledger_verifier, renormalize=renormalize)
    failures = [f"{c.cell}: {c.reason}" if c.outcome == "failed" else f"{c.cell}: {NAMES[c.outcome]}: {c.reason}"
                for c in report.bad]
    if failures:
        if errors is None:
            raise RescoreError(failures)
        errors.extend(failures)
    return report.written
