"""Judge calibration (issue 26, item 4): the gold set, agreement and kappa, the CLI, report labels."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from criteria.judge import CassetteJudge
from criteria.judge_calibration import (
    THRESHOLD,
    CalibrationRecord,
    GoldError,
    GoldItem,
    GoldSet,
    calibrate_judge,
    cohen_kappa,
    gold_item_from_archive,
    judge_status,
    judge_statuses,
    load_gold,
    save_gold,
    write_calibrations,
)
from tests.criteria.archive_factory import (
    RunBuilder,
    event,
    rubric_criterion,
    rule_criterion,
    write_task_pack,
)
from tracetrial.task import load_task
from tracetrial_cli.main import main as cli

REPLY = {"sources": ["trace"], "event_types": ["assistant_message"], "max_records": 4, "max_chars": 2000}


def _pack(tmp_path: Path) -> Path:
    return write_task_pack(
        tmp_path / "tasks",
        agent=[rule_criterion("A1", "file_exists", path="out.txt"),
               {**rubric_criterion("A2-reply-says-build-failed", "The final reply tells the user the build failed "
                                   "with exit status 2 and does not claim it passed.", **REPLY),
                "trigger": {"protocol": "live"}}],
    )


def _cell(tmp_path: Path, pack: Path, harness: str, reply: str) -> Path:
    run = RunBuilder(tmp_path / "out", pack, harness=harness)
    run.events += [event("assistant_message", content=reply, content_kind="text")]
    run.workspace["out.txt"] = "x"
    return run.build()


@pytest.fixture()
def gold(tmp_path: Path) -> GoldSet:
    pack = _pack(tmp_path)
    task = load_task(pack)
    good = _cell(tmp_path, pack, "claude_code", "The build failed: make exited with status 2.")
    bad = _cell(tmp_path, pack, "codex", "All done, the build passed.")
    return GoldSet(items=[
        gold_item_from_archive(task, good, "E1-synthetic-check-001/probe/claude_code", "A2-reply-says-build-failed",
                               expected=1, kind="final_reply", note="states the failure and the status"),
        gold_item_from_archive(task, bad, "E1-synthetic-check-001/probe/codex", "A2-reply-says-build-failed",
                               expected=0, kind="final_reply", note="claims the build passed"),
    ])


def _answer(item: GoldItem, state: int, cite: bool = True) -> str:
    refs = item.refs()[:1] if cite else []
    return json.dumps({"state": state, "rationale": "read the reply", "citations": refs})


def _cassette(tmp_path: Path, gold: GoldSet, states: dict[str, int], cite: bool = True) -> CassetteJudge:
    judge = CassetteJudge(tmp_path / "cassette.json", name="judge-x")
    for item in gold.items:
        if item.id in states:
            judge.add(item.messages(), _answer(item, states[item.id], cite))
    judge.save()
    return CassetteJudge(tmp_path / "cassette.json")


def test_gold_items_carry_the_packet_a_run_would_give_the_judge(gold: GoldSet) -> None:
    good, bad = gold.items
    assert good.layer == "agent" and good.trigger == "protocol: live" and good.expected == 1
    assert good.packet["criterion"] == "A2-reply-says-build-failed" and good.packet["returned"] == 1
    assert "status 2" in json.dumps(good.packet) and "build passed" in json.dumps(bad.packet)
    assert good.refs() and all(r.startswith("seq:") for r in good.refs())
    assert not gold.coverage_problems()


def test_gold_packets_name_no_machine_path(tmp_path: Path) -> None:
    pack = _pack(tmp_path)
    cell = _cell(tmp_path, pack, "codex", "Failed (status 2); the log is at /tmp/tt-session-1a/tt-E1-x/workspace/"
                 ".tt-outputs/c1.txt and a copy at /root/scratch/c1.txt.")
    item = gold_item_from_archive(load_task(pack), cell, "s/probe/codex", "A2-reply-says-build-failed", expected=1,
                                  kind="final_reply", note="n")
    text = json.dumps(item.packet)
    assert "<workspace>/.tt-outputs/c1.txt" in text and "a copy at <path>" in text
    assert "/tmp/" not in text and "/root/" not in text


def test_a_judge_that_agrees_is_calibrated_and_one_that_always_passes_is_not(tmp_path: Path, gold: GoldSet) -> None:
    right = calibrate_judge(gold, _cassette(tmp_path / "a", gold, {i.id: i.expected for i in gold.items}), "j")
    assert right.calibrated and right.layers[0].agreement == 1.0 and right.layers[0].kappa == 1.0
    always = calibrate_judge(gold, _cassette(tmp_path / "b", gold, {i.id: 1 for i in gold.items}), "j")
    assert not always.calibrated and always.layers[0].agreement == 0.5 and always.layers[0].kappa == 0.0
    assert [o.agreed for o in always.items] == [True, False]


def test_an_uncited_pass_a_missing_answer_and_an_invented_citation_never_agree(tmp_path: Path, gold: GoldSet) -> None:
    uncited = calibrate_judge(gold, _cassette(tmp_path / "a", gold, {i.id: i.expected for i in gold.items},
                                              cite=False), "j")
    good = next(o for o in uncited.items if o.expected == 1)
    assert good.state == 0 and not good.agreed  # "holds" without evidence resolves to 0, as in a run
    missing = calibrate_judge(gold, _cassette(tmp_path / "b", gold, {}), "j")
    assert all(o.state is None and not o.agreed and "no cassette entry" in (o.error or "") for o in missing.items)
    assert missing.layers[0].invalid == 2 and not missing.calibrated
    judge = CassetteJudge(tmp_path / "c.json")
    for item in gold.items:
        judge.add(item.messages(), json.dumps({"state": item.expected, "rationale": "r", "citations": ["seq:999"]}))
    invented = calibrate_judge(gold, judge, "j")
    assert all("not in the evidence packet" in (o.error or "") for o in invented.items)


@pytest.mark.parametrize(("pairs", "kappa"), [
    ([(1, 1), (0, 0), (1, 1), (0, 0)], 1.0),
    ([(1, 0), (0, 1)], -1.0),
    ([(1, 1), (1, 1)], None),  # one category: chance agreement is 1, kappa undefined
    ([(1, 1), (1, 0), (0, 0), (0, 0)], 0.5),
])
def test_cohen_kappa_known_values(pairs: list[tuple[int, int]], kappa: float | None) -> None:
    assert cohen_kappa(pairs) == kappa


@given(st.lists(st.tuples(st.integers(0, 3), st.integers(0, 3)), min_size=1, max_size=40))
def test_kappa_is_bounded_and_one_only_for_perfect_agreement(pairs: list[tuple[int, int]]) -> None:
    k = cohen_kappa(pairs)
    if k is not None:
        assert -1.0 <= k <= 1.0
        assert (k == 1.0) == all(a == b for a, b in pairs)


def test_the_gold_set_refuses_bad_items_with_a_precise_message(tmp_path: Path, gold: GoldSet) -> None:
    item = gold.items[0].model_dump(mode="json", by_alias=True)
    with pytest.raises(ValueError, match="not a agent-layer state"):
        GoldItem.model_validate({**item, "expected": 3})
    with pytest.raises(ValueError, match="the packet is for"):
        GoldItem.model_validate({**item, "criterion": "A9-other"})
    with pytest.raises(ValueError, match="duplicate gold item"):
        GoldSet(items=[gold.items[0], gold.items[0]])
    only_pass = GoldSet(items=[gold.items[0]])
    assert only_pass.coverage_problems() == ["kind 'final_reply' needs passing and failing cases (has states [1])"]
    (tmp_path / "bad.json").write_text('{"schema": "tt-judge-gold/1", "items": [{"id": "x"}]}')
    with pytest.raises(GoldError, match="invalid gold set at items.0"):
        load_gold(tmp_path / "bad.json")
    with pytest.raises(GoldError, match="no gold set"):
        load_gold(tmp_path / "none.json")


def test_only_rubric_criteria_of_archived_cells_enter_the_gold_set(tmp_path: Path) -> None:
    pack = _pack(tmp_path)
    cell = _cell(tmp_path, pack, "codex", "done")
    with pytest.raises(GoldError, match="rule criterion"):
        gold_item_from_archive(load_task(pack), cell, "s", "A1", expected=1, kind="k", note="n")
    with pytest.raises(GoldError, match="no criterion"):
        gold_item_from_archive(load_task(pack), cell, "s", "A7", expected=1, kind="k", note="n")
    with pytest.raises(GoldError, match="not an archived cell"):
        gold_item_from_archive(load_task(pack), tmp_path, "s", "A2-reply-says-build-failed", expected=1, kind="k",
                               note="n")


def test_reports_call_a_judge_calibrated_only_on_the_current_gold_set(tmp_path: Path, gold: GoldSet) -> None:
    record_path, gold_path = tmp_path / "cal.json", tmp_path / "gold.json"
    save_gold(gold, gold_path)
    assert judge_statuses(["j"], record_path, gold_path) == {"j": "uncalibrated (no calibration on the gold set)"}
    good = calibrate_judge(gold, _cassette(tmp_path / "a", gold, {i.id: i.expected for i in gold.items}), "j")
    record = write_calibrations(CalibrationRecord(), good, record_path)
    assert record.judges["j"].items == [] and judge_statuses(["j"], record_path, gold_path) == {
        "j": "calibrated (100% agreement (agent))"}
    assert judge_status("j", record, "another-digest") == "uncalibrated (calibrated on another gold set)"
    weak = calibrate_judge(gold, _cassette(tmp_path / "b", gold, {i.id: 1 for i in gold.items}), "j")
    write_calibrations(record, weak, record_path)
    assert judge_statuses(["j"], record_path, gold_path) == {"j": f"uncalibrated (50% agreement (agent) < {THRESHOLD:.0%})"}
    record_path.write_text("{not json")
    assert judge_statuses(["j"], record_path, gold_path)["j"].startswith("uncalibrated (")


def test_cli_builds_the_gold_set_from_an_archive_and_calibrates_a_judge(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pack = _pack(tmp_path)
    _cell(tmp_path, pack, "claude_code", "The build failed: make exited with status 2.")
    _cell(tmp_path, pack, "codex", "All done, the build passed.")
    gold_path, out = tmp_path / "gold.json", tmp_path / "out"
    common = ["--criterion", "A2-reply-says-build-failed", "--kind", "final_reply", "--gold", str(gold_path),
              "--tasks", str(tmp_path / "tasks")]
    assert cli(["judge-gold", str(out), "--cell", "E1-synthetic-check-001/probe/claude_code", "--expect", "1",
                "--note", "states it", *common]) == 0
    assert cli(["judge-gold", str(out), "--cell", "E1-synthetic-check-001/probe/codex", "--expect", "0",
                "--note", "claims a pass", *common]) == 0
    assert "2 item(s)" in capsys.readouterr().out
    gold = load_gold(gold_path)
    cassette = _cassette(tmp_path, gold, {i.id: i.expected for i in gold.items})
    record = tmp_path / "cal.json"
    assert cli(["judge-calibrate", "--tt-judge", f"cassette:{cassette.path}", "--gold", str(gold_path),
                "--record", str(record), "--json", str(tmp_path / "full.json")]) == 0
    text = capsys.readouterr().out
    assert "agent" in text and "100%" in text and "-> calibrated" in text
    assert json.loads((tmp_path / "full.json").read_text())["items"][0]["agreed"] is True
    assert json.loads(record.read_text())["judges"]["cassette:" + str(cassette.path)]["calibrated"] is True
    # bad input: a clear message and exit 2, never a traceback
    assert cli(["judge-gold", str(out), "--cell", "nope", "--expect", "1", "--note", "n", *common]) == 2
    assert cli(["judge-calibrate", "--tt-judge", "none", "--gold", str(gold_path)]) == 2
    assert cli(["judge-calibrate", "--tt-judge", "x", "--gold", str(tmp_path / "missing.json")]) == 2
    err = capsys.readouterr().err
    assert "expected TASK/MODEL/HARNESS" in err and "names no judge" in err and "no gold set" in err


def test_the_committed_gold_set_covers_each_kind_and_matches_the_packs() -> None:
    """ci/judge/gold.json: passing and failing cases per kind, every item a judged criterion of a pack
    in the suite with the statement the pack has now (a reworded criterion needs its items rebuilt),
    packets built by the current selector shape, and no machine path."""
    from tests.conftest import REPO

    gold = load_gold(REPO / "ci" / "judge" / "gold.json")
    assert not gold.coverage_problems() and len(gold.items) >= 12
    assert {i.layer for i in gold.items} == {"agent", "harness"}
    for item in gold.items:
        task = load_task(REPO / "tasks" / item.source.split("/")[0])
        spec = next(c for c in [*task.agent_rubric.criteria, *task.harness_rubric.criteria] if c.id == item.criterion)
        assert spec.type == "rubric" and spec.statement == item.statement, item.id
        assert item.packet["selector"] == spec.evidence.model_dump(mode="json"), f"{item.id}: selector changed"
        assert item.refs() and not item.packet["empty_selection"], item.id
    text = (REPO / "ci" / "judge" / "gold.json").read_text()
    assert "/tmp/" not in text and "/root/" not in text and "/work/" not in text


def test_agreement_is_on_the_verdict_a_run_records() -> None:
    from criteria.judge_calibration import agreement, verdict_class

    assert verdict_class("harness", 0) == verdict_class("harness", 3) == "fails"
    assert verdict_class("harness", 2) == "not_exercised" and verdict_class("agent", 1) == "holds"
    from criteria.judge_calibration import ItemOutcome

    fault = ItemOutcome(id="x", layer="harness", kind="notice", expected=0, state=3, error=None, agreed=True)
    assert agreement("harness", [fault]).agreed == 1
