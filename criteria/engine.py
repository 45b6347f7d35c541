"""``score_run``: admission → criteria → scores → ``combined_score.json`` for one run.

Reads only the run archive and the task (normally the run's own snapshot under
``private/task/<task_id>/``). Writes, all outside the sealed set:

    evidence/packets/_verifier.json      score.py output
    evidence/packets/<criterion>.json    bounded packet of each semantic criterion
    evidence/judge/<criterion>.json      prompt, response, parsed state, rationale
    artifacts/llm_judge/combined_score.json

Every file is canonical JSON (sorted keys, no timestamps), so scoring the same
archive with the same judge responses gives byte-identical files.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from criteria.admission import LedgerVerifier, admit
from criteria.judge import Judge
from criteria.resolve import Evaluation, criteria_in_order, evaluate, unscored_all
from criteria.rundata import load_run, read_json_file
from criteria.scoring import combine, write_combined
from criteria.verifier import VERIFIER_OUTPUT
from tracetrial.archive import RunPaths
from tracetrial.files import atomic_write_text
from tracetrial.redact import Redactor
from tracetrial.results import CombinedScore
from tracetrial.task import TaskPack


def _write_json(path: Path, data: Any, redactor: Redactor) -> None:
    atomic_write_text(path, json.dumps(redactor.value(data), indent=1, ensure_ascii=False, sort_keys=True) + "\n")


def _sealed(root: Path) -> set[str]:
    raw, _ = read_json_file(root, "manifest.json")
    if not isinstance(raw, dict):
        return set()
    return {str(e.get("path")) for e in raw.get("files", []) if isinstance(e, dict)}


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


def score_run(task: TaskPack, run_dir: Path, *, judge: Judge | None = None,
              ledger_verifier: LedgerVerifier | None = None, write: bool = True) -> CombinedScore:
    """Score one archived run: the authoritative :class:`CombinedScore`.

    Args:
        task: the task pack (the run's snapshot; admission checks that they agree).
        run_dir: the run directory ``<output>/traces/<task>/<model>/<harness>/``.
        judge: the semantic judge; ``None`` leaves every judged criterion unscored.
        ledger_verifier: override of ``apparatus.simulators.ledger.verify_ledger``.
        write: archive the evidence and ``combined_score.json`` (default).

    Returns:
        The combined score (also written to ``artifacts/llm_judge/combined_score.json``).
    """
    root = Path(run_dir)
    run = load_run(root)
    admission = admit(task, run, ledger_verifier=ledger_verifier)
    if admission.admitted:
        ev = evaluate(task, run, judge)
    else:
        failed = "; ".join(f"{d.check}: {d.reason}" for d in admission.decisions if not d.ok)
        failed = failed if len(failed) <= 300 else failed[:297] + "..."
        ev = Evaluation(verdicts=unscored_all(task, f"not scored: run not admitted ({failed})"))
    verdicts = [ev.verdicts[c.id] for c in criteria_in_order(task)]
    score = combine(admission.identity, verdicts, admitted=admission.admitted, admission=admission.decisions,
                    hard_gates=admission.hard_gates, bypass=ev.bypass, activations=ev.activations,
                    # the judge actually asked (none for a run without judged criteria): the
                    # archive-replay judge of ``rescore`` then reports the same name
                    judge=judge.name if judge is not None and ev.judge_records else None)
    if write:
        write_evaluation(root, task, ev, score)
    return score
