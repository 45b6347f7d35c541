"""Corpus aggregation: archive -> :class:`~reports.records.RunRecord` list -> :class:`CorpusSummary`.

:func:`load_runs` is the only function here that reads files; :func:`aggregate`
is pure (its result depends only on the records and the price catalogue).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence
from typing import Any

from reports.cellpage import needs_page, page_path
from reports.metrics import group_metrics
from reports.pricing import PriceCatalogue, run_cost
from reports.records import RunRecord, load_runs
from reports.repeats import repeat_section
from reports.schema import CalibrationSection, CellRow, CorpusSummary, GroupMetrics, PriceInfo
from reports.versions import version_diff

__all__ = ["MAX_PROBLEMS", "aggregate", "load_runs", "protocol_label"]

#: Consistency warnings listed in the summary (the count of the rest is given).
MAX_PROBLEMS = 200

_COMPONENT_ORDER = "CEGLOTV?"


def protocol_label(protocols: Sequence[str]) -> str:
    """``probe`` / ``live`` for a single protocol, ``mixed: a, b`` otherwise, ``unknown`` if none."""
    unique = sorted(set(protocols))
    if not unique:
        return "unknown"
    return unique[0] if len(unique) == 1 else "mixed: " + ", ".join(unique)


def _groups(records: Sequence[RunRecord], key: Callable[[RunRecord], str],
            prices: PriceCatalogue | None, order: Callable[[str], Any] = str) -> dict[str, GroupMetrics]:
    buckets: dict[str, list[RunRecord]] = defaultdict(list)
    for r in records:
        buckets[key(r)].append(r)
    return {k: group_metrics(buckets[k], prices) for k in sorted(buckets, key=order)}


def _cross(records: Sequence[RunRecord], outer: Callable[[RunRecord], str], inner: Callable[[RunRecord], str],
           prices: PriceCatalogue | None, order: Callable[[str], Any] = str) -> dict[str, dict[str, GroupMetrics]]:
    buckets: dict[str, list[RunRecord]] = defaultdict(list)
    for r in records:
        buckets[outer(r)].append(r)
    return {k: _groups(buckets[k], inner, prices, order) for k in sorted(buckets)}


def _component_order(letter: str) -> int:
    return _COMPONENT_ORDER.find(letter) if letter in _COMPONENT_ORDER else len(_COMPONENT_ORDER)


def _cell_row(r: RunRecord, prices: PriceCatalogue | None) -> CellRow:
    failed = list(dict.fromkeys((*r.F_H, *r.unscored_H, *r.Z_A, *r.unscored_A)))
    return CellRow(
        task_id=r.task_id, component=r.component, property=r.task_property, model=r.model, harness=r.harness,
        protocol=r.protocol, status=r.status, reason=r.reason, path=r.rel_path,
        S_H=r.S_H, S_A=r.S_A, S=r.S, effective_score=r.effective_score, label=r.label,
        failed=failed, unscored=[*r.unscored_H, *r.unscored_A], links=r.links,
        cost_usd=run_cost(r.usage, prices.get(r.model)) if prices is not None else None,
        diagnostic_failed=list(r.diagnostic_failed), diagnostic_unscored=list(r.diagnostic_unscored),
        calibration=r.calibration, repetition=r.repetition, harness_version=r.harness_version,
        page=page_path(r.rel_path) if needs_page(r) else None,
    )


def _price_info(prices: PriceCatalogue | None) -> PriceInfo:
    if prices is None:
        return PriceInfo(source=None, sha256=None, models_priced=[], note="no price catalogue: cost unavailable")
    return PriceInfo(source=prices.source, sha256=prices.sha256, models_priced=sorted(prices.entries),
                     note=prices.note, provenance=prices.provenance)


def _versions(runs: Sequence[RunRecord]) -> dict[str, list[str]]:
    found: dict[str, set[str]] = defaultdict(set)
    for r in runs:
        found.setdefault(r.harness, set())
        if r.harness_version:
            found[r.harness].add(r.harness_version)
    return {h: sorted(v) for h, v in sorted(found.items())}


def aggregate(runs: Sequence[RunRecord], prices: PriceCatalogue | None = None, *,
              include_calibration: bool = False) -> CorpusSummary:
    """Compute every SPEC §5/§6 corpus figure: overall, per harness, model, component and
    the harness × model / harness × component blocks, the calibration section, the repeated-run
    section, plus the cell list.

    Args:
        runs: all cells, measured or not (only measured runs enter the rates), every repetition.
        prices: the frozen price catalogue; ``None`` reports cost as unavailable.
        include_calibration: pool the calibration instrument's runs (``reference`` and its
            mutants) into the corpus figures too; by default they are only in their own section.
    """
    problems = [f"{r.rel_path}: {p}" for r in runs for p in r.problems]
    if len(problems) > MAX_PROBLEMS:
        problems = problems[:MAX_PROBLEMS] + [f"... and {len(problems) - MAX_PROBLEMS} more"]
    protocols = sorted({r.protocol for r in runs if r.protocol})
    harness_of: Callable[[RunRecord], str] = lambda r: r.harness
    component_of: Callable[[RunRecord], str] = lambda r: r.component
    # The calibration instrument audits the tasks (the faithful reference scores 100 by design):
    # pooled with the evaluated harnesses it would inflate every corpus figure.
    pool = [r for r in runs if include_calibration or not r.calibration]
    instrument = [r for r in runs if r.calibration]
    calibration = None
    if instrument:
        calibration = CalibrationSection(included_in_pools=include_calibration,
                                         by_harness=_groups(instrument, harness_of, prices),
                                         overall=group_metrics(instrument, prices))
    return CorpusSummary(
        protocols=protocols,
        protocol_label=protocol_label(protocols),
        judges=sorted({r.judge for r in runs if r.judge}),
        overall=group_metrics(pool, prices),
        by_harness=_groups(pool, harness_of, prices),
        by_model=_groups(pool, lambda r: r.model, prices),
        by_component=_groups(pool, component_of, prices, _component_order),
        by_harness_model=_cross(pool, harness_of, lambda r: r.model, prices),
        by_harness_component=_cross(pool, harness_of, component_of, prices, _component_order),
        calibration=calibration,
        harness_versions=_versions(runs),
        repeats=repeat_section(runs, pool, protocols, _component_order),
        cells=[_cell_row(r, prices) for r in runs],
        prices=_price_info(prices),
        problems=problems,
        # Versions are compared on the first repetition (one run per task × model × name).
        version_diff=version_diff([r for r in runs if r.repetition == 1]),
    )
