"""Pure SPEC §5/§6 corpus metrics over a list of :class:`~reports.records.RunRecord`.

Every function takes records and returns a schema object; none reads files.
Rates are ×100 and ``None`` when their denominator is empty. Only *measured*
runs (scored, admitted, eligible) enter the rates; the other cells are counted
by :func:`cell_counts`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence

from reports.pricing import PriceCatalogue, run_cost
from reports.records import RunRecord
from reports.schema import (
    AttributionTotals,
    CellCounts,
    Diagnostics,
    GroupMetrics,
    LinkActivation,
    LinkRate,
    Resources,
    Share,
    States,
    Unscored,
)


def pct(count: float, of: float) -> float | None:
    """``100·count/of``, or ``None`` when ``of`` is 0."""
    return 100.0 * count / of if of else None


def share(count: int, of: int) -> Share:
    return Share(count=count, of=of, pct=pct(count, of))


def mean_pct(values: Sequence[float]) -> float | None:
    """``100·mean(values)`` or ``None`` for no values."""
    return 100.0 * sum(values) / len(values) if values else None


def cell_counts(records: Iterable[RunRecord]) -> CellCounts:
    """Cells by status (measured, apparatus-invalid, unsupported, non-comparable, not scored, tampered)."""
    counter = Counter(r.status for r in records)
    return CellCounts(total=sum(counter.values()), measured=counter["measured"],
                      apparatus_invalid=counter["apparatus_invalid"], unsupported=counter["unsupported"],
                      non_comparable=counter["non_comparable"], not_scored=counter["not_scored"],
                      tampered=counter["tampered"])


def states(runs: Sequence[RunRecord]) -> States:
    """The four exclusive states from raw ``F_H``/``Z_A`` emptiness (unscored counts as not passed)."""
    counter = Counter((r.harness_failing, r.agent_failing) for r in runs)
    n = len(runs)
    return States(
        joint_clean=share(counter[(False, False)], n),
        h_only=share(counter[(True, False)], n),
        a_only=share(counter[(False, True)], n),
        joint_failure=share(counter[(True, True)], n),
    )


def link_activation(runs: Sequence[RunRecord]) -> LinkActivation:
    """Per primary dimension ``d``: ``J_d`` = runs failing in both layers, ``L_d ⊆ J_d`` with
    ≥1 stored link; pooled = ``ΣL_d / ΣJ_d`` (each run counts once, whatever its link count)."""
    joint: Counter[str] = Counter()
    linked: Counter[str] = Counter()
    for r in runs:
        if r.harness_failing and r.agent_failing:
            joint[r.component] += 1
            if r.links:
                linked[r.component] += 1
    by_comp = {d: LinkRate(joint_failures=joint[d], linked=linked[d], pct=pct(linked[d], joint[d]))
               for d in sorted(joint)}
    j, l = sum(joint.values()), sum(linked.values())
    return LinkActivation(by_component=by_comp, pooled=LinkRate(joint_failures=j, linked=l, pct=pct(l, j)))


def attribution_totals(runs: Sequence[RunRecord]) -> AttributionTotals:
    """``|Z_H|``, ``|B|``, ``|L_act|`` and the linked/unlinked split of agent failures."""
    n = len(runs)
    return AttributionTotals(
        z_h_total=sum(len(r.Z_H) for r in runs),
        runs_with_z_h=sum(1 for r in runs if r.Z_H),
        bypassed_total=sum(len(r.B) for r in runs),
        activated_links_total=sum(r.links for r in runs),
        linked_agent_failures=sum(r.linked_agent_failures for r in runs),
        unlinked_agent_failures=sum(r.unlinked_agent_failures for r in runs),
        runs_with_activated_link=share(sum(1 for r in runs if r.links), n),
        runs_with_unlinked_agent_failure=share(sum(1 for r in runs if r.unlinked_agent_failures), n),
    )


def _mean_k(values: list[int]) -> float | None:
    return sum(values) / len(values) / 1000.0 if values else None


def resources(runs: Sequence[RunRecord], prices: PriceCatalogue | None) -> Resources:
    """Mean thousands of tokens per run with usage, and the estimated agent cost.

    Total tokens = input + output (reasoning is inside output). Cost is averaged
    over runs with usage and a price entry; ``None`` (unavailable) if there is none.
    """
    with_usage = [r.usage for r in runs if r.usage is not None]
    inputs = [u.input_tokens for u in with_usage if u.input_tokens is not None]
    outputs = [u.output_tokens for u in with_usage if u.output_tokens is not None]
    totals = [u.input_tokens + u.output_tokens for u in with_usage
              if u.input_tokens is not None and u.output_tokens is not None]
    reasoning = [u.reasoning_tokens for u in with_usage if u.reasoning_tokens is not None]
    costs: list[float] = []
    missing_price: set[str] = set()
    for r in runs:
        price = prices.get(r.model) if prices is not None else None
        if price is None:
            missing_price.add(r.model)
        cost = run_cost(r.usage, price)
        if cost is not None:
            costs.append(cost)
    notes = []
    if prices is None or (not prices.entries and prices.note):
        notes.append(prices.note if prices is not None and prices.note else "no price catalogue: cost unavailable")
    elif missing_price:
        notes.append(f"no price for model(s) {', '.join(sorted(missing_price))}")
    if len(with_usage) < len(runs):
        notes.append(f"{len(runs) - len(with_usage)} run(s) without recorded usage")
    uncosted = len(runs) - len(costs)
    if uncosted and not notes:
        notes.append(f"{uncosted} run(s) with incomplete or inconsistent usage counters")
    return Resources(
        runs_with_usage=len(with_usage),
        runs_without_usage=len(runs) - len(with_usage),
        mean_input_k=_mean_k(inputs),
        mean_output_k=_mean_k(outputs),
        mean_total_k=_mean_k(totals),
        mean_reasoning_k=_mean_k(reasoning),
        runs_costed=len(costs),
        mean_cost_usd=sum(costs) / len(costs) if costs else None,
        total_cost_usd=sum(costs) if costs else None,
        cost_note="; ".join(notes) if notes else None,
    )


def group_metrics(records: Sequence[RunRecord], prices: PriceCatalogue | None) -> GroupMetrics:
    """All SPEC §5 metrics of one group; ``records`` are all its cells, measured or not."""
    runs = [r for r in records if r.measured]
    n = len(runs)
    agent_ratios = [r.p_A / r.n_A for r in runs if r.n_A > 0]
    harness_ratios = [r.p_H / r.n_H for r in runs if r.n_H > 0]
    agent_score, harness_macro = mean_pct(agent_ratios), mean_pct(harness_ratios)
    sum_p_h, sum_n_h = sum(r.p_H for r in runs), sum(r.n_H for r in runs)
    sum_p_a, sum_n_a = sum(r.p_A for r in runs), sum(r.n_A for r in runs)
    scores = [r.effective_score for r in runs if r.effective_score is not None]
    return GroupMetrics(
        cells=cell_counts(records),
        runs=n,
        agent_success=share(sum(1 for r in runs if r.agent_success), n),
        agent_score=agent_score,
        harness_macro=harness_macro,
        harness_micro=pct(sum_p_h, sum_n_h),
        agent_micro=pct(sum_p_a, sum_n_a),
        overall=(agent_score + harness_macro) / 2 if agent_score is not None and harness_macro is not None else None,
        clean=share(sum(1 for r in runs if r.clean), n),
        mean_score=sum(scores) / len(scores) if scores else None,
        harness_items_passed=sum_p_h,
        harness_items_total=sum_n_h,
        agent_items_passed=sum_p_a,
        agent_items_total=sum_n_a,
        gated_runs=sum(1 for r in runs if r.gated),
        unscored=Unscored(
            harness_criteria=sum(r.u_H for r in runs),
            agent_criteria=sum(r.u_A for r in runs),
            runs_with_unscored=sum(1 for r in runs if r.u_H or r.u_A),
        ),
        diagnostics=Diagnostics(
            failed=sum(len(r.diagnostic_failed) for r in runs),
            unscored=sum(len(r.diagnostic_unscored) for r in runs),
            runs_with_failed=sum(1 for r in runs if r.diagnostic_failed),
        ),
        states=states(runs),
        links=link_activation(runs),
        attribution=attribution_totals(runs),
        labels=dict(sorted(Counter(r.label for r in records if r.combined and r.label).items())),
        resources=resources(runs, prices),
    )
