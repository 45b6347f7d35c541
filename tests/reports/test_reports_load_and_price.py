"""Archive reading (:func:`load_runs`) and the price catalogue / cost estimate."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from reports.aggregate import aggregate, load_runs
from reports.pricing import PriceEntry, load_price_catalogue, parse_price_catalogue, run_cost
from reports.synthetic import make_combined, seal, write_cell
from tracetrial.archive import RunPaths
from tracetrial.trace import TokenUsage


def test_every_cell_folder_yields_one_record(corpus_dir: Path) -> None:
    runs = load_runs(corpus_dir)
    assert len(runs) == 11
    by_key = {(r.task_id, r.model, r.harness): r for r in runs}
    r1 = by_key[("C1-a-001", "m1", "hA")]
    assert (r1.component, r1.task_property, r1.protocol, r1.rel_path) == (
        "C", "truncation_disclosure", "probe", "traces/C1-a-001/m1/hA")
    assert (r1.p_H, r1.n_H, r1.p_A, r1.n_A) == (3, 4, 2, 2)
    s4 = by_key[("C1-a-001", "m1", "hB")]
    assert s4.unscored_H == ("H3",) and s4.u_H == 1 and s4.F_H == ()
    assert s4.harness_failing and not s4.clean


def test_unreadable_combined_score_is_listed_not_dropped(corpus_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "c"
    shutil.copytree(corpus_dir, out)
    broken = RunPaths.for_cell(out, "E1-b-001", "m1", "hA").combined_score
    broken.write_text("{not json", encoding="utf-8")
    seal(broken.parents[2])  # sealed that way: the score is unreadable, not tampered
    runs = load_runs(out)
    assert len(runs) == 11
    rec = next(r for r in runs if (r.task_id, r.harness) == ("E1-b-001", "hA"))
    assert rec.status == "not_scored" and rec.reason is not None
    assert rec.reason.startswith("combined_score.json unreadable") and "run status completed" in rec.reason
    assert aggregate(runs).by_harness["hA"].cells.not_scored == 2


def test_nested_result_json_is_not_a_run_and_missing_result_is_reported(tmp_path: Path) -> None:
    cs = make_combined("E1-a-001", "m1", "h", {"H1": True}, {"A1": True})
    paths = write_cell(tmp_path, cs)
    nested = paths.root / "evidence" / "tool" / "x"
    nested.mkdir(parents=True)
    (nested / "result.json").write_text("{}", encoding="utf-8")
    seal(paths.root)
    empty = tmp_path / "traces" / "E1-b-001" / "m1" / "h"
    empty.mkdir(parents=True)
    runs = load_runs(tmp_path)
    assert [(r.task_id, r.status) for r in runs] == [("E1-a-001", "measured"), ("E1-b-001", "not_scored")]
    assert runs[1].reason == "no combined_score.json; result.json missing"
    assert runs[1].component == "E"


def test_inconsistent_layer_score_is_reported(tmp_path: Path) -> None:
    cs = make_combined("E1-a-001", "m1", "h", {"H1": True, "H2": None}, {"A1": True})
    bad = cs.model_copy(update={"harness": cs.harness.model_copy(update={"p": 2, "score": 50.0})})
    write_cell(tmp_path, bad)
    (rec,) = load_runs(tmp_path)
    assert any("p + unscored > n" in p for p in rec.problems)
    assert any("disagrees with the core verdicts" in p for p in rec.problems)
    assert aggregate([rec]).problems


def test_no_traces_folder_gives_no_runs(tmp_path: Path) -> None:
    assert load_runs(tmp_path) == []
    s = aggregate([])
    assert s.overall.runs == 0 and s.overall.agent_score is None and s.protocol_label == "unknown"


PRICE = PriceEntry(input=1.0, output=4.0, cache_read=0.1, cache_write=1.25)


def test_cost_splits_cache_and_keeps_reasoning_inside_output() -> None:
    u = TokenUsage(input_tokens=10_000, output_tokens=2_000, cache_read_tokens=4_000, cache_write_tokens=1_000,
                   reasoning_tokens=500)
    assert run_cost(u, PRICE) == pytest.approx((5_000 * 1 + 4_000 * 0.1 + 1_000 * 1.25 + 2_000 * 4) / 1e6)


def test_missing_cache_prices_fall_back_to_the_input_price() -> None:
    u = TokenUsage(input_tokens=10_000, output_tokens=0, cache_read_tokens=4_000)
    assert run_cost(u, PriceEntry(input=2.0, output=8.0)) == pytest.approx(10_000 * 2.0 / 1e6)


@pytest.mark.parametrize("usage", [
    None,
    TokenUsage(),
    TokenUsage(input_tokens=100),
    TokenUsage(input_tokens=100, output_tokens=10, cache_read_tokens=200),   # cache > input: inconsistent
])
def test_cost_unavailable_is_none_never_zero(usage: TokenUsage | None) -> None:
    assert run_cost(usage, PRICE) is None


def test_measured_zero_usage_costs_zero() -> None:
    assert run_cost(TokenUsage(input_tokens=0, output_tokens=0), PRICE) == 0.0
    assert run_cost(TokenUsage(input_tokens=10, output_tokens=1), None) is None


def test_catalogue_shapes(tmp_path: Path) -> None:
    nested = parse_price_catalogue({"models": {"a": {"route": "x", "price": {"input": 1, "output": 2}},
                                               "b": {"route": "y"}}})
    assert nested.get("a") == PriceEntry(input=1.0, output=2.0) and nested.get("b") is None
    assert nested.note == "no price entry for: b"
    listed = parse_price_catalogue({"models": [{"alias": "c", "pricing": {"input_per_mtok": "0.5",
                                                                          "output_per_mtok": 1.5,
                                                                          "cache_read_per_mtok": 0.05}}]})
    assert listed.get("c") == PriceEntry(input=0.5, output=1.5, cache_read=0.05)
    flat = parse_price_catalogue({"d": {"input": 3, "output": 9, "cache_write": 3.75}})
    assert flat.get("d") == PriceEntry(input=3.0, output=9.0, cache_write=3.75)
    missing = load_price_catalogue(tmp_path / "nope.yaml")
    assert missing.entries == {} and missing.note and "cost unavailable" in missing.note
    bad = tmp_path / "bad.yaml"
    bad.write_text("models: [unclosed", encoding="utf-8")
    assert load_price_catalogue(bad).entries == {}
    good = tmp_path / "models.yaml"
    good.write_text("models:\n  m: {price: {input: 1, output: 2}}\n", encoding="utf-8")
    cat = load_price_catalogue(good)
    assert cat.get("m") is not None and cat.sha256 is not None and len(cat.sha256) == 64
