"""``score_run``: admission → criteria → scores → ``combined_score.json`` for one run.

Reads only the run archive and the task (normally the run's own snapshot under
``private/task/<task_id>/``). Writes, then re-seals the manifest over them (only into a
cell whose seal verifies; see :func:`tracetrial.archive.reseal_scoring`):

    evidence/packets/_verifier.json      score.py output
    evidence/packets/<criterion>.json    bounded packet of each semantic criterion
    evidence/judge/<criterion>.json      prompt, response, parsed state, rationale
    artifacts/llm_judge/combined_score.json

A pack that cannot be measured makes its run ``apparatus_invalid`` (a failed admission
decision with the reason), never a measured run with ``unscored`` criteria: a rule of an
unknown kind or with parameters its kind rejects (``pack_rules``), and a ``score.py`` that
raises, exceeds its bound or dies (``verifier``; see :mod:`criteria.verifier`).

Every file is canonical JSON (sorted keys, no timestamps), so scoring the same
archive with the same judge responses gives byte-identical files.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from criteria.admission import AdmissionResult, LedgerVerifier, admit
from criteria.judge import Judge
from criteria.resolve import Evaluation, criteria_in_order, evaluate, unscored_all
from criteria.rundata import RunData, load_run, read_json_file
from criteria.scoring import combine, write_combined
from criteria.validate import unusable_rules
from criteria.verifier import VERIFIER_OUTPUT, run_verifier
from tracetrial.archive import (
    SCORABLE,
    SCORING_OUTPUTS,
    RunPaths,
    SealCheck,
    check_seal,
    reseal_scoring,
)
from tracetrial.files import atomic_write_text
from tracetrial.redact import Redactor
from tracetrial.results import AdmissionDecision, CombinedScore
from tracetrial.task import TaskPack
from tracetrial.verify import VerifierOutcome


def _write_json(path: Path, data: Any, redactor: Redactor) -> None:
    atomic_write_text(path, json.dumps(redactor.value(data), indent=1, ensure_ascii=False, sort_keys=True) + "\n")


def _sealed(root: Path) -> set[str]:
    """Files the run itself sealed (scoring's own outputs are sealed too, but replaceable)."""
    raw, _ = read_json_file(root, "manifest.json")
    if not isinstance(raw, dict):
        return set()
    paths = {str(e.get("path")) for e in raw.get("files", []) if isinstance(e, dict)}
    return {p for p in paths if not p.startswith(SCORING_OUTPUTS)}


def write_evaluation(root: Path, task: TaskPack, ev: Evaluation, score: CombinedScore) -> Path:
    """Archive packets, judge records, verifier output and the combined score.

    Files a previous scoring wrote for criteria that produced nothing this time are
    removed (never files the manifest seals), so the archive shows only current evidence.
    """
    redactor = Redactor.from_environment(extra=task.spec.secrets)
    sealed = _sealed(root)
    wanted: dict[str, Any] = {}
    if ev.verifier is not None:
        wanted[VERIFIER_OUTPUT] = ev.verifier.to_json()
    for cid, packet in ev.packets.items():
        wanted[f"evidence/packets/{cid}.json"] = packet.model_dump(mode="json", by_alias=True)
    for cid, record in ev.judge_records.items():
        wanted[f"evidence/judge/{cid}.json"] = record
    owned = [VERIFIER_OUTPUT] + [f"evidence/{kind}/{c.id}.json" for c in criteria_in_order(task)
                                 for kind in ("packets", "judge")]
    for rel in owned:
        path = root / rel
        if rel not in wanted and rel not in sealed and path.is_file() and not path.is_symlink():
            path.unlink()
    for rel, data in wanted.items():
        _write_json(root / rel, data, redactor)
    return write_combined(RunPaths(root).combined_score, score)


def _pack_problems(task: TaskPack, run: RunData, admission: AdmissionResult) -> VerifierOutcome | None:
    """What of the pack itself keeps an admitted run from being measured: rules a run cannot
    evaluate, and a verifier that raised, exceeded its bound or died. Each adds a failed
    admission decision (the cell becomes ``apparatus_invalid`` with the reason) instead of
    leaving criteria ``unscored`` in a run counted as measured. Returns the verifier's
    outcome (``None`` when the rules already failed: it is not run then)."""
    broken = unusable_rules(task)
    if broken:
        admission.decisions.append(AdmissionDecision(check="pack_rules", ok=False, reason="; ".join(broken)))
        return None
    verifier = run_verifier(task, run)
    if verifier.error is not None:
        admission.decisions.append(AdmissionDecision(
            check="verifier", ok=False,
            reason=f"verifier/score.py failed (a task/apparatus bug, not a harness defect): {verifier.error}"))
    return verifier


def score_run(task: TaskPack, run_dir: Path, *, judge: Judge | None = None,
              ledger_verifier: LedgerVerifier | None = None, write: bool = True,
              sealed: SealCheck | None = None) -> CombinedScore:
    """Score one archived run: the authoritative :class:`CombinedScore`.

    Args:
        task: the task pack (the run's snapshot; admission checks that they agree).
        run_dir: the run directory ``<output>/traces/<task>/<model>/<harness>/``.
        judge: the semantic judge; ``None`` leaves every judged criterion unscored.
        ledger_verifier: override of ``apparatus.simulators.ledger.verify_ledger``.
        write: archive the evidence and ``combined_score.json`` and re-seal (default);
            nothing is written into a cell whose seal does not verify.
        sealed: the seal of ``run_dir`` as the calling process has just written it, with
            nothing written into the folder since (the cell flow scores right after
            :meth:`tracetrial.archive.RunArchive.seal`, once every process of the run has
            ended): admission takes it instead of hashing every file again. Never one read back
            from disk or kept from earlier: resumed and re-scored cells are checked afresh.
            Scoring still checks the seal again before it writes (the verifier, the pack's own
            code, has run by then).

    Returns:
        The combined score (also written to ``artifacts/llm_judge/combined_score.json``).
    """
    root = Path(run_dir)
    run = load_run(root)
    admission = admit(task, run, ledger_verifier=ledger_verifier, seal=sealed)
    # Criteria triggered by another protocol are no part of this run (not in its denominators).
    task = task.for_protocol(admission.identity.protocol)
    verifier = _pack_problems(task, run, admission) if admission.admitted else None
    if admission.admitted:
        ev = evaluate(task, run, judge, verifier=verifier)
    else:
        failed = "; ".join(f"{d.check}: {d.reason}" for d in admission.decisions if not d.ok)
        failed = failed if len(failed) <= 300 else failed[:297] + "..."
        ev = Evaluation(verdicts=unscored_all(task, f"not scored: run not admitted ({failed})"), verifier=verifier)
    verdicts = [ev.verdicts[c.id] for c in criteria_in_order(task)]
    score = combine(admission.identity, verdicts, admitted=admission.admitted, admission=admission.decisions,
                    hard_gates=admission.hard_gates, bypass=ev.bypass, activations=ev.activations,
                    # the judge actually asked (none for a run without judged criteria): the
                    # archive-replay judge of ``rescore`` then reports the same name
                    judge=judge.name if judge is not None and ev.judge_records else None)
    # Reasons quote the run (a verifier's message, an exception's text, a judge's words): the
    # score is redacted like every other archived file before it is written or shown, so a
    # planted secret never reaches combined_score.json, the terminal or a report.
    redactor = Redactor.from_environment(extra=task.spec.secrets)
    score = CombinedScore.model_validate(redactor.value(score.model_dump(mode="json", by_alias=True)))
    if write:
        # Scoring writes only into a cell whose files verify, then re-seals it (score
        # included); into a tampered or half-written cell it writes nothing, so neither the
        # evidence nor a forged score is overwritten, and nothing tampered is ever sealed.
        seal = check_seal(root)
        if seal.state in SCORABLE:
            write_evaluation(root, task, ev, score)
            reseal_scoring(root, seal)
    return score
