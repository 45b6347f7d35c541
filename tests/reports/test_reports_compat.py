"""The reports read what the real producers write: the criteria engine's
``combined_score.json`` and the gateway's ``models.yaml`` price table."""

from __future__ import annotations

from pathlib import Path

import pytest

from reports.aggregate import aggregate, load_runs
from reports.pricing import load_price_catalogue, run_cost
from reports.synthetic import seal, write_cell
from tracetrial.archive import RunPaths
from tracetrial.results import AdmissionDecision, CellIdentity, CriterionVerdict
from tracetrial.trace import TokenUsage

REPO = Path(__file__).resolve().parents[2]


def _v(cid: str, layer: str, passed: bool | None, role: str = "core") -> CriterionVerdict:
    return CriterionVerdict(id=cid, layer=layer, type="rule", role=role, passed=passed,
                            raw_state=None if passed is None else int(passed), reason="r")


def test_engine_combined_score_with_diagnostic_unscored_and_hard_gate(tmp_path: Path) -> None:
    scoring = pytest.importorskip("criteria.scoring")
    identity = CellIdentity(run_id="r", task_id="E1-x-001", task_revision=1, harness="h", model="m",
                            protocol="probe")
    verdicts = [_v("H1", "harness", True), _v("H2", "harness", None), _v("H9", "harness", False, "diagnostic"),
                _v("A1", "agent", True), _v("A2", "agent", True)]
    cs = scoring.combine(identity, verdicts, admitted=True,
                         admission=[AdmissionDecision(check="identity", ok=True, reason="")],
                         hard_gates=[AdmissionDecision(check="tool_call_cap", ok=False, reason="31 > 30")],
                         bypass={}, activations=[], judge=None)
    paths = RunPaths.for_cell(tmp_path, "E1-x-001", "m", "h")
    write_cell(tmp_path, None, task_id="E1-x-001", model="m", harness="h")
    scoring.write_combined(paths.combined_score, cs)
    seal(paths.root)  # the score written after the cell: re-sealed as scoring does

    (rec,) = load_runs(tmp_path)
    assert rec.problems == ()                         # diagnostic verdicts are not in p/n: no false alarm
    assert (rec.p_H, rec.n_H, rec.u_H, rec.unscored_H) == (1, 2, 1, ("H2",))
    assert rec.gated and not rec.agent_success        # the stored flag: a zeroed run is no success
    g = aggregate([rec]).overall
    assert g.gated_runs == 1 and g.mean_score == 0.0 and g.agent_success.count == 0
    assert g.states.h_only.count == 1                  # unscored H2: not joint-clean
    assert g.harness_macro == pytest.approx(50.0) and g.agent_score == pytest.approx(100.0)


def test_repository_models_yaml_prices_match_the_gateway_registry() -> None:
    registry = pytest.importorskip("apparatus.gateway.registry")
    path = REPO / "models.yaml"
    if not path.is_file():
        pytest.skip("no models.yaml in this checkout")
    ours = load_price_catalogue(path)
    theirs = registry.ModelRegistry.load(path)
    assert set(ours.entries) == set(theirs.models)
    usage = TokenUsage(input_tokens=120_000, output_tokens=9_000, cache_read_tokens=80_000,
                       cache_write_tokens=10_000, reasoning_tokens=3_000)
    for alias, entry in theirs.models.items():
        expected = entry.price.cost_usd(usage.model_dump())
        assert run_cost(usage, ours.get(alias)) == pytest.approx(expected), alias
    assert ours.provenance and "frozen_on" in ours.provenance
