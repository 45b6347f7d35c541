"""Repeated cells (``--tt-repeat K``): pass^k, pass@k and the agreement of repetitions.

Pure: it reads only :class:`~reports.records.RunRecord` fields. The runs of one cell
(task × model × harness) are its repetitions; only *measured* repetitions enter the figures,
the others are counted (``runs_not_measured``).

* **pass^k / pass@k** (tau-bench's unbiased estimators, also in Inspect): for a cell with ``n``
  measured repetitions of which ``c`` passed, ``pass^j = C(c, j) / C(n, j)`` — the chance that
  ``j`` repetitions drawn without replacement all pass — and ``pass@j = 1 − C(n − c, j) / C(n, j)``
  — that at least one does. A group's figure is the mean over its cells with ``n ≥ j`` (×100).
  Two notions of a passing run are reported: the stored ``combined_pass`` (S = 100 after hard
  gates) and the stored ``agent_success``.
* **Agreement**: over cells with at least two measured repetitions, the share whose verdict
  vectors (every criterion, core and diagnostic, as pass / fail / unscored) are identical, the
  share of criterion × cell pairs in the same state in every repetition, and the mean standard
  deviation of the effective S. Under the probe protocol the model is scripted, so anything
  below 100 % is non-determinism of the apparatus or the harness; under a live protocol it is
  the noise floor of a single run.
"""

from __future__ import annotations

import statistics
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from math import comb
from typing import Any

from reports.metrics import pct
from reports.records import RunRecord
from reports.schema import Agreement, PassK, RepeatMetrics, RepeatSection

__all__ = ["agreement", "agreement_label", "pass_at", "pass_hat", "pass_k", "repeat_metrics", "repeat_section"]

Cell = tuple[str, str, str]


def pass_hat(n: int, c: int, k: int) -> float:
    """``C(c, k) / C(n, k)``: the chance that ``k`` of the ``n`` runs, ``c`` of them passing, all pass."""
    if not 1 <= k <= n or not 0 <= c <= n:
        raise ValueError(f"pass^k needs 1 <= k <= n and 0 <= c <= n (n={n}, c={c}, k={k})")
    return comb(c, k) / comb(n, k)


def pass_at(n: int, c: int, k: int) -> float:
    """``1 − C(n − c, k) / C(n, k)``: the chance that at least one of ``k`` of the ``n`` runs passes."""
    if not 1 <= k <= n or not 0 <= c <= n:
        raise ValueError(f"pass@k needs 1 <= k <= n and 0 <= c <= n (n={n}, c={c}, k={k})")
    return 1.0 - comb(n - c, k) / comb(n, k)


def _cells(runs: Sequence[RunRecord]) -> dict[Cell, list[RunRecord]]:
    """Measured repetitions per cell, in repetition order."""
    cells: dict[Cell, list[RunRecord]] = defaultdict(list)
    for r in sorted(runs, key=lambda r: r.repetition):
        if r.measured:
            cells[r.cell_key].append(r)
    return cells


def pass_k(cells: dict[Cell, list[RunRecord]], k: int, passed: Callable[[RunRecord], bool]) -> PassK:
    """pass^j and pass@j for j = 1..k, each the mean over the cells with at least j repetitions."""
    hat: list[float | None] = []
    at: list[float | None] = []
    counts = [(len(reps), sum(1 for r in reps if passed(r))) for reps in cells.values() if reps]
    for j in range(1, k + 1):
        eligible = [(n, c) for n, c in counts if n >= j]
        hat.append(pct(sum(pass_hat(n, c, j) for n, c in eligible), len(eligible)))
        at.append(pct(sum(pass_at(n, c, j) for n, c in eligible), len(eligible)))
    return PassK(cells=len(counts), pass_hat=hat, pass_at=at)


def agreement(cells: dict[Cell, list[RunRecord]]) -> Agreement:
    """How often the repetitions of a cell agree (see the module docstring)."""
    compared = identical = pairs = agreeing = 0
    sds: list[float] = []
    flipping: Counter[str] = Counter()
    for reps in cells.values():
        if len(reps) < 2:
            continue
        compared += 1
        vectors = [{cid: state for cid, _layer, state in r.verdicts} for r in reps]
        identical += all(v == vectors[0] for v in vectors[1:])
        ids = list(dict.fromkeys(cid for v in vectors for cid in v))
        for cid in ids:
            pairs += 1
            # A criterion missing from one repetition's verdicts does not agree with one present.
            if len({v.get(cid) for v in vectors}) == 1:
                agreeing += 1
            else:
                flipping[cid] += 1
        scores = [r.effective_score for r in reps if r.effective_score is not None]
        if len(scores) >= 2:
            sds.append(statistics.pstdev(scores))
    return Agreement(cells=compared, identical=identical, pct=pct(identical, compared), criteria=pairs,
                     criteria_agreeing=agreeing, criteria_pct=pct(agreeing, pairs),
                     mean_score_sd=sum(sds) / len(sds) if sds else None,
                     flipping=dict(sorted(flipping.items(), key=lambda kv: (-kv[1], kv[0]))))


def repeat_metrics(runs: Sequence[RunRecord]) -> RepeatMetrics:
    """Every repeated-run figure of one group of runs (all repetitions of its cells)."""
    cells = _cells(runs)
    per_cell = Counter(r.cell_key for r in runs)
    k = max(per_cell.values(), default=0)
    return RepeatMetrics(
        repetitions=k,
        runs_not_measured=sum(1 for r in runs if not r.measured),
        combined=pass_k(cells, k, lambda r: r.combined_pass),
        agent=pass_k(cells, k, lambda r: r.agent_success),
        agreement=agreement(cells),
    )


def agreement_label(protocols: Sequence[str]) -> str:
    """``determinism`` under probe only, ``noise floor`` under live only, else ``agreement``."""
    unique = set(protocols)
    if unique == {"probe"}:
        return "determinism"
    if unique == {"live"}:
        return "noise floor"
    return "agreement"


def _group(runs: Sequence[RunRecord], key: Callable[[RunRecord], str],
           order: Callable[[str], Any] = str) -> dict[str, RepeatMetrics]:
    buckets: dict[str, list[RunRecord]] = defaultdict(list)
    for r in runs:
        buckets[key(r)].append(r)
    return {k: repeat_metrics(buckets[k]) for k in sorted(buckets, key=order)}


def repeat_section(runs: Sequence[RunRecord], pool: Sequence[RunRecord], protocols: Sequence[str],
                   component_order: Callable[[str], int]) -> RepeatSection | None:
    """The ``repeats`` section, or ``None`` when no cell ran more than once.

    Args:
        runs: every run (per harness and per task, calibration harnesses are listed too).
        pool: the corpus pool (overall and per component).
        protocols: the protocols of the runs (names the agreement figure).
        component_order: sort key of component letters.
    """
    if not any(r.repetition > 1 for r in runs):
        return None
    by_task: dict[str, list[RunRecord]] = defaultdict(list)
    for r in runs:
        by_task[r.task_id].append(r)
    overall = repeat_metrics(pool)
    return RepeatSection(
        k=max(Counter(r.cell_key for r in runs).values()),
        agreement_label=agreement_label(protocols),
        overall=overall,
        by_harness=_group(runs, lambda r: r.harness),
        by_component=_group(pool, lambda r: r.component, component_order),
        by_task={t: _group(by_task[t], lambda r: r.harness) for t in sorted(by_task)},
    )
