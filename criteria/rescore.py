"""Offline re-scoring of an output folder from its archives alone (SPEC §10).

Nothing is run but the task's deterministic verifier: each cell's task comes
from its own snapshot (``private/task/<task_id>/``), and without an explicit
judge the run's archived judge responses are replayed by prompt hash
(:class:`~criteria.judge.ArchivedJudge`), so an unchanged archive re-scores to
byte-identical files. Cells that were never measured (``status: skipped``) are
left alone.

With ``renormalize``, each cell's ``events.json`` (and ``summary.json``) is first
re-derived from its archived native records by the current normalizer
(:func:`harnesses.rederive.renormalize_run`): what a user does after a normalizer fix.
"""

from __future__ import annotations

from pathlib import Path

from criteria.admission import LedgerVerifier
from criteria.engine import score_run
from criteria.errors import RescoreError
from criteria.judge import ArchivedJudge, Judge
from criteria.rundata import TASK_SNAPSHOT_DIR, read_json_file
from harnesses.rederive import renormalize_run
from tracetrial.archive import RunPaths
from tracetrial.task import load_task


def rescore_run(run_dir: Path, judge: Judge | None = None, *,
                ledger_verifier: LedgerVerifier | None = None, renormalize: bool = False) -> Path | None:
    """Re-score one cell; returns its ``combined_score.json`` (None for a skipped cell).

    Raises:
        TaskPackErrors: the run's task snapshot does not load.
    """
    raw, _ = read_json_file(run_dir, "result.json")
    task_id = run_dir.parent.parent.name
    if isinstance(raw, dict):
        if raw.get("status") == "skipped":
            return None
        ident = raw.get("identity")
        if isinstance(ident, dict) and isinstance(ident.get("task_id"), str):
            task_id = ident["task_id"]
    task = load_task(run_dir / TASK_SNAPSHOT_DIR / task_id)
    if renormalize and not (isinstance(raw, dict) and raw.get("status") == "apparatus_error"):
        renormalize_run(run_dir)
    replay = judge if judge is not None else ArchivedJudge.from_run(run_dir)
    score_run(task, run_dir, judge=replay, ledger_verifier=ledger_verifier)
    return RunPaths(run_dir).combined_score


def rescore_output(output_dir: Path, judge: Judge | None = None, *,
                   ledger_verifier: LedgerVerifier | None = None,
                   errors: list[str] | None = None, renormalize: bool = False) -> list[Path]:
    """Re-score every cell under ``<output_dir>/traces/*/*/*/``.

    Args:
        output_dir: the ``--tt-output`` folder.
        judge: a judge to re-ask; ``None`` replays each run's archived judge records.
        renormalize: re-derive each cell's ``events.json`` from its native records first.
        ledger_verifier: override of the ledger integrity check.
        errors: collects per-cell failures; when ``None`` they are raised together at the end.

    Returns:
        The ``combined_score.json`` paths written, in sorted cell order.

    Raises:
        RescoreError: some cells failed (only when ``errors`` is None); every other
            cell was still re-scored.
    """
    written: list[Path] = []
    failures: list[str] = []
    cells = sorted(p for p in Path(output_dir).glob("traces/*/*/*") if p.is_dir() and not p.is_symlink())
    for run_dir in cells:
        try:
            path = rescore_run(run_dir, judge, ledger_verifier=ledger_verifier, renormalize=renormalize)
        except Exception as exc:  # noqa: BLE001 - one broken cell must not stop the others
            failures.append(f"{run_dir.relative_to(output_dir)}: {type(exc).__name__}: {exc}")
            continue
        if path is not None:
            written.append(path)
    if failures:
        if errors is None:
            raise RescoreError(failures)
        errors.extend(failures)
    return written
