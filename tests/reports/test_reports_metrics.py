"""SPEC §5/§6 corpus metrics against the hand-computed corpus of ``conftest.py``."""

from __future__ import annotations

from pathlib import Path

import pytest

from reports.aggregate import aggregate, load_runs, protocol_label
from reports.pricing import find_price_catalogue, load_price_catalogue
from reports.schema import CorpusSummary, GroupMetrics

approx = pytest.approx


@pytest.fixture(scope="module")
def summary(corpus_dir: Path) -> CorpusSummary:
    prices = load_price_catalogue(find_price_catalogue(corpus_dir))
    return aggregate(load_runs(corpus_dir), prices)


def test_harness_a_layer_metrics(summary: CorpusSummary) -> None:
    a = summary.by_harness["hA"]
    assert a.runs == 4
    assert (a.agent_success.count, a.agent_success.pct) == (2, 50.0)
    assert a.agent_score == approx(100 * (1 + 0 + 1 / 3 + 1) / 4)          # 58.33
    assert a.harness_macro == approx(100 * (3 / 4 + 1 / 2 + 1 + 1) / 4)    # 81.25
    assert a.harness_micro == approx(100 * 11 / 13)
    assert a.overall == approx((100 * 7 / 12 + 81.25) / 2)
    assert (a.clean.count, a.clean.pct) == (1, 25.0)


def test_harness_b_layer_metrics_with_unscored_never_a_pass(summary: CorpusSummary) -> None:
    b = summary.by_harness["hB"]
    assert b.runs == 4
    assert b.agent_success.pct == 25.0
    assert b.agent_score == approx(100 * (0 + 1 / 2 + 0 + 1) / 4)          # 37.5
    # s4 is 2/3: its unscored H3 stays in n and is not a pass
    assert b.harness_macro == approx(100 * (0 + 1 / 4 + 2 / 4 + 2 / 3) / 4)
    assert b.harness_micro == approx(100 * 5 / 14)
    assert b.clean.count == 0
    assert (b.unscored.harness_criteria, b.unscored.agent_criteria, b.unscored.runs_with_unscored) == (1, 0, 1)
    # s4 has F_H = Z_A = ∅ but an unscored harness criterion: H-only, not joint-clean
    assert b.states.joint_clean.count == 0 and b.states.h_only.count == 1


@pytest.mark.parametrize("key", ["overall", "hA", "hB"])
def test_micro_is_sum_p_over_sum_n(summary: CorpusSummary, key: str) -> None:
    g = summary.overall if key == "overall" else summary.by_harness[key]
    assert g.harness_micro == approx(100 * g.harness_items_passed / g.harness_items_total)
    assert g.agent_micro == approx(100 * g.agent_items_passed / g.agent_items_total)


def test_overall_figures(summary: CorpusSummary) -> None:
    o = summary.overall
    assert o.runs == 8
    assert o.agent_success.pct == 37.5
    assert o.agent_score == approx(100 * (7 / 3 + 3 / 2) / 8)
    assert o.harness_macro == approx(100 * (3.25 + (1 / 4 + 1 / 2 + 2 / 3)) / 8)
    assert (o.harness_items_passed, o.harness_items_total) == (16, 27)
    assert o.harness_micro == approx(100 * 16 / 27)
    assert o.agent_score is not None and o.harness_macro is not None
    assert o.overall == approx((o.agent_score + o.harness_macro) / 2)


def test_four_states_exclusive_and_sum_to_100(summary: CorpusSummary) -> None:
    expected = {"hA": (1, 1, 1, 1), "hB": (0, 1, 0, 3)}
    for h, g in summary.by_harness.items():
        st = g.states
        counts = (st.joint_clean.count, st.h_only.count, st.a_only.count, st.joint_failure.count)
        assert counts == expected[h]
        assert sum(counts) == g.runs
        assert sum(s.pct or 0 for s in (st.joint_clean, st.h_only, st.a_only, st.joint_failure)) == approx(100)
        # joint-clean is exactly the clean rate
        assert st.joint_clean.count == g.clean.count


def test_link_activation_pooled_differs_from_mean_of_dimension_rates(summary: CorpusSummary) -> None:
    links = summary.overall.links
    c, e = links.by_component["C"], links.by_component["E"]
    assert (c.joint_failures, c.linked, c.pct) == (1, 1, 100.0)
    assert (e.joint_failures, e.linked) == (3, 2) and e.pct == approx(200 / 3)
    assert (links.pooled.joint_failures, links.pooled.linked, links.pooled.pct) == (4, 3, 75.0)
    mean_of_rates = (100.0 + 200 / 3) / 2
    assert mean_of_rates == approx(83.333, abs=1e-3)
    assert links.pooled.pct != approx(mean_of_rates)
    # Σ|J_d| is the joint-failure state count
    assert links.pooled.joint_failures == summary.overall.states.joint_failure.count
    assert summary.by_harness["hB"].links.pooled.pct == approx(200 / 3)


def test_attribution_totals(summary: CorpusSummary) -> None:
    a, b = summary.by_harness["hA"].attribution, summary.by_harness["hB"].attribution
    assert (a.z_h_total, a.bypassed_total, a.activated_links_total) == (1, 1, 1)   # r1's H1 bypassed
    assert (a.linked_agent_failures, a.unlinked_agent_failures) == (1, 2)
    assert (b.z_h_total, b.runs_with_z_h, b.activated_links_total) == (8, 3, 2)
    assert (b.linked_agent_failures, b.unlinked_agent_failures) == (2, 2)
    assert b.runs_with_activated_link.pct == 50.0 and b.runs_with_unlinked_agent_failure.pct == 25.0


def test_labels_and_excluded_cells_counted_separately(summary: CorpusSummary) -> None:
    a, b = summary.by_harness["hA"], summary.by_harness["hB"]
    assert a.labels == {"agent_caused": 1, "clean": 1, "harness_caused": 1, "measurement_bypass": 1}
    assert b.labels == {"agent_caused": 1, "apparatus_invalid": 1, "clean": 1, "harness_caused": 2}
    assert (a.cells.total, a.cells.measured, a.cells.not_scored) == (5, 4, 1)
    assert (b.cells.total, b.cells.measured, b.cells.apparatus_invalid, b.cells.unsupported) == (6, 4, 1, 1)
    o = summary.overall.cells
    assert o.total == o.measured + o.apparatus_invalid + o.unsupported + o.non_comparable + o.not_scored == 11


def test_not_scored_cell_is_listed_with_its_reason(summary: CorpusSummary) -> None:
    rows = [c for c in summary.cells if c.status == "not_scored"]
    assert [(c.task_id, c.harness) for c in rows] == [("G1-x-001", "hA")]
    assert rows[0].reason is not None
    assert "no combined_score.json" in rows[0].reason and "HarnessCrashError: codex exited with 139" in rows[0].reason
    unsupported = [c for c in summary.cells if c.status == "unsupported"]
    assert unsupported[0].reason == "no MCP channel"


def test_per_component_and_empty_groups_are_none_not_zero(summary: CorpusSummary) -> None:
    c, e = summary.by_component["C"], summary.by_component["E"]
    assert (c.runs, c.agent_success.count) == (3, 2) and c.harness_micro == approx(100 * 6 / 9)
    assert (e.runs, e.agent_success.count) == (5, 1) and e.harness_micro == approx(100 * 10 / 18)
    m2: GroupMetrics = summary.by_model["m2"]
    assert m2.runs == 0 and m2.cells.unsupported == 1
    assert m2.agent_success.pct is None and m2.agent_score is None and m2.harness_macro is None
    assert m2.harness_micro is None and m2.overall is None and m2.states.joint_clean.pct is None


def test_resources_and_cost(summary: CorpusSummary) -> None:
    r = summary.by_harness["hA"].resources
    assert (r.runs_with_usage, r.runs_without_usage, r.runs_costed) == (2, 2, 2)
    assert [r.mean_input_k, r.mean_output_k, r.mean_total_k] == approx([15.0, 1.5, 16.5])
    assert r.mean_reasoning_k == approx(0.5)
    assert r.mean_cost_usd == approx((0.01465 + 0.024) / 2)
    assert r.total_cost_usd == approx(0.03865)
    cells = {(c.task_id, c.harness): c for c in summary.cells}
    assert cells[("C1-a-001", "hA")].cost_usd == approx(0.01465)
    assert cells[("C1-b-001", "hA")].cost_usd is None          # no usage: unavailable, not 0


def test_missing_usage_everywhere_gives_unavailable_cost_not_zero(summary: CorpusSummary) -> None:
    r = summary.by_harness["hB"].resources
    assert r.runs_with_usage == 0 and r.runs_costed == 0
    assert r.mean_cost_usd is None and r.total_cost_usd is None and r.mean_input_k is None
    assert r.cost_note is not None and "without recorded usage" in r.cost_note


def test_without_price_catalogue_cost_is_unavailable(corpus_dir: Path) -> None:
    s = aggregate(load_runs(corpus_dir), None)
    r = s.by_harness["hA"].resources
    assert r.mean_input_k == approx(15.0)                       # tokens still reported
    assert r.mean_cost_usd is None and r.runs_costed == 0
    assert r.cost_note and "no price catalogue" in r.cost_note


def test_protocol_label_and_judges(summary: CorpusSummary) -> None:
    assert summary.protocols == ["probe"] and summary.protocol_label == "probe"
    assert summary.judges == ["judge-x"]
    assert protocol_label(["live", "probe", "live"]) == "mixed: live, probe"
    assert protocol_label([]) == "unknown"
    assert summary.problems == []


def test_aggregate_is_pure_and_deterministic(corpus_dir: Path) -> None:
    runs = load_runs(corpus_dir)
    assert aggregate(runs).model_dump() == aggregate(list(runs)).model_dump()
