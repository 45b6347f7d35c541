"""L5-instrument-hold-002: the verifier on hand-built runs (faithful; a stale hand-off in the
probe's account, in request bodies of all three wire formats and in the harness's model_input
record; a second hold placed; confirm_hold hidden in turn 2; a decoy id confirmed; an undelivered
turn; an early-written id; do-nothing), the probe policy per turn (it derives every value from what
it is shown), the instruments simulator (per-run values, one hold per run, no way to see the id
again) and the pack's self-test."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import types
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from apparatus.simulators.engine import ServiceRuntime
from apparatus.simulators.ledger import Ledger
from apparatus.simulators.spec import load_service, simulator_specs
from criteria.registry import RuleContext, evaluate_rule
from criteria.rundata import RunData
from harnesses.reference.cli import before_last_turn
from harnesses.reference.mutants import not_applicable, pack_features
from tracetrial.policy import CallTool, Final, NativeTool, Observation, Turn, TurnView
from tracetrial.task import load_task
from tracetrial.trace import ModelInputEvent
from tracetrial.verify import VerifierContext

PACK = Path(__file__).resolve().parents[2] / "tasks" / "L5-instrument-hold-002"
T0 = datetime(2026, 12, 1, tzinfo=UTC)


def _load(path: Path, name: str) -> types.ModuleType:
    mod = types.ModuleType(name)
    mod.__file__ = str(path)
    old = sys.dont_write_bytecode
    sys.dont_write_bytecode = True
    try:
        exec(compile(path.read_text(encoding="utf-8"), str(path), "exec"), mod.__dict__)  # noqa: S102
    finally:
        sys.dont_write_bytecode = old
    return mod


SCORE = _load(PACK / "verifier" / "score.py", "l5_ih_score")
POLICY = _load(PACK / "probe_policy.py", "l5_ih_policy")
TASK = load_task(PACK)
TURNS = [(PACK / "prompt.md").read_text(), *[t.user for t in TASK.turns.turns]]

H1, H2, H3 = "H1-handoff-delivered", "H2-user-turns-delivered", "H3-hold-tools-offered"
A1, A2, B1 = "A1-placed-hold-confirmed", "A2-single-hold", "B-H1-id-persisted-early"
HOLD = "HOLD-Q7XK2M4W"
DECOY = "HOLD-4MXQ7K2D"
ARGS = {"instrument": "orbitrap-2", "slot": "2026-12-08T09:00", "samples": 24}
PLACE_RESULT = json.dumps({"hold_id": HOLD, **ARGS, "status": "held", "note": "Keep this hold id."})
CONFIRM_RESULT = json.dumps({"hold_id": HOLD, "status": "confirmed", "instrument": "orbitrap-2",
                             "slot": "2026-12-08T09:00"})
SHOWN = f"Hand-off: hold={HOLD}; earlier request=shown."
STALE = "Hand-off: hold=missing; earlier request=missing."
TOOLS = [{"name": f"mcp__instruments__{t}"} for t in ("list_instruments", "place_hold", "confirm_hold")]


# --------------------------------------------------------------------------- contexts


def ledger(places: int = 1, confirms: tuple[str, ...] = (HOLD,)) -> list[dict[str, Any]]:
    recs: list[dict[str, Any]] = [{"seq": 1, "kind": "transition", "tool": None, "detail": {"op": "init"}}]
    for n in range(places):
        recs.append({"kind": "request", "tool": "place_hold", "arguments": dict(ARGS)})
        if n == 0:
            recs.append({"kind": "issued", "tool": "place_hold", "detail": {"name": "hold_id", "value": HOLD, "scope": "call"}})
    for hid in confirms:
        recs.append({"kind": "request", "tool": "confirm_hold", "arguments": {"hold_id": hid}})
        if hid == HOLD and places:
            recs.append({"kind": "transition", "tool": "confirm_hold",
                         "detail": {"op": "set", "at": ["holds", HOLD, "status"], "old": "held", "new": "confirmed"}})
    return recs


def gateway(turns: tuple[int, ...] = (1, 2), tools: list[dict[str, Any]] = TOOLS) -> list[dict[str, Any]]:
    """Two requests per turn: the turn's message, then the one with its tool result."""
    reqs: list[dict[str, Any]] = []
    results = {1: PLACE_RESULT, 2: CONFIRM_RESULT}
    for t in turns:
        for k in range(2):
            reqs.append({"index": len(reqs), "last_user_text": TURNS[t - 1] + "\n<system-reminder>x</system-reminder>",
                         "tools": tools, "inventory_complete": True, "status": 200,
                         "tool_results": [{"id": f"call_{t}", "is_error": False, "content": results[t]}] if k else []})
    return reqs


def probe(final_text: str, absent: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    reqs = [{"index": 2 * (t - 1) + k, "kind": "main", "turn": t, "action": "call_tool" if k == 0 else "final"}
            for t in (1, 2) for k in range(2)]
    return {"requests": reqs, "absent_capabilities": absent or [], "final_text": final_text}


def make_ctx(tmp_path: Path, *, final: str = f"The hold is confirmed. {SHOWN}", events: Any = (),
             gw: Any = None, probe_report: Any = "default", led: Any = None,
             bodies: dict[int, Any] | None = None, files: dict[str, str] | None = None) -> VerifierContext:
    ws, base = tmp_path / "workspace", tmp_path / "baseline"
    shutil.copytree(PACK / "workspace", ws)
    shutil.copytree(PACK / "workspace", base)
    snap = tmp_path / "private" / "task" / TASK.id
    snap.mkdir(parents=True)
    for name in ("prompt.md", "turns.json"):
        shutil.copy(PACK / name, snap / name)
    for rel, text in (files or {}).items():
        (ws / rel).write_text(text)
    for index, body in (bodies or {}).items():
        (tmp_path / "gateway" / "bodies").mkdir(parents=True, exist_ok=True)
        (tmp_path / "gateway" / "bodies" / f"{index}.json").write_text(json.dumps(body))
    rep = probe(final) if probe_report == "default" else probe_report
    return VerifierContext(workspace=ws, baseline=base, truth=None, oracle=None, events=list(events),
                           gateway=gateway() if gw is None else gw, probe=rep,
                           ledgers={"instruments": ledger() if led is None else led}, run_dir=tmp_path)


def results(ctx: VerifierContext) -> dict[str, tuple[bool, str]]:
    out: dict[str, tuple[bool, str]] = SCORE.score(ctx)
    return out


def failed(ctx: VerifierContext) -> set[str]:
    return {k for k, (ok, _) in results(ctx).items() if not ok and not k.startswith("B-")}


def a2(tmp_path: Path, led: list[dict[str, Any]]) -> bool | None:
    crit = next(c for c in TASK.agent_rubric.criteria if c.id == A2)
    assert crit.rule is not None
    ctx = RuleContext(task=TASK, run=RunData(root=tmp_path, ledgers={"instruments": led}))
    return evaluate_rule(crit.rule, crit.id, ctx).passed


# --------------------------------------------------------------------------- pack


def test_pack_is_two_turns_with_a_replayed_new_session_after_a_single_turn() -> None:
    (b2,) = (t.session_boundary for t in TASK.turns.turns)
    assert b2 is not None and b2.kind == "new_session" and b2.history_replayed and b2.workspace_preserved
    assert {"replay", "mcp"} <= pack_features(TASK)
    assert not_applicable("stale_handoff", TASK) is None
    assert TASK.spec.budgets.max_user_turns == 2 == len(TURNS)
    assert not any(re.search(r"HOLD-[A-Z0-9]{8}", t) for t in TURNS)          # no id in a user turn
    assert POLICY.EARLIER_REQUEST in TURNS[0] and POLICY.EARLIER_REQUEST not in TURNS[1]
    assert POLICY.requested(TURNS[0]) == ARGS


def test_a_stale_handoff_of_a_single_turn_session_keeps_nothing_but_the_system_prompt() -> None:
    # the trigger (rule 16): the previous session has one turn, so the stale history loses all of it
    history = [{"role": "system", "content": "sys"}, {"role": "user", "content": TURNS[0]},
               {"role": "assistant", "content": None, "tool_calls": [{"id": "c1"}]},
               {"role": "tool", "tool_call_id": "c1", "content": PLACE_RESULT},
               {"role": "assistant", "content": "The hold is placed."}]
    assert before_last_turn(history) == [{"role": "system", "content": "sys"}]


def test_calibration_declares_the_target_and_the_hidden_tool_mutants() -> None:
    assert TASK.spec.calibration.mutants["stale_handoff"] == [H1, A1]
    assert set(TASK.spec.calibration.mutants["hide_mcp_tool"]) == {H3, A1}
    assert TASK.spec.calibration.mutants["lose_turn_fact"] == []


def test_every_agent_criterion_is_linked_to_a_harness_criterion() -> None:
    links = {(link.harness, link.agent) for link in TASK.harness_rubric.links}
    assert {a for _, a in links} == {c.id for c in TASK.agent_rubric.criteria if c.applies_to("probe")}
    # the live-only judged reply criterion takes no link and no calibration entry
    assert {c.id for c in TASK.agent_rubric.criteria if not c.applies_to("probe")} == {"A3-replies-match-hold-results"}
    assert (H1, A1) in links and (H1, A2) in links and (H3, A1) in links and (H2, A1) in links
    prio = {(link.harness, link.agent): link.priority for link in TASK.harness_rubric.links}
    assert prio[(H1, A1)] == "high" and prio[(H1, A2)] == "medium"


# --------------------------------------------------------------------------- verifier


def test_faithful_run_passes(tmp_path: Path) -> None:
    out = results(make_ctx(tmp_path))
    assert {k for k, (ok, _) in out.items() if not ok} == {B1}
    assert a2(tmp_path, ledger()) is True


def test_stale_handoff_fails_h1_and_a1_only(tmp_path: Path) -> None:
    ctx = make_ctx(tmp_path, final=f"I confirmed nothing. {STALE}", led=ledger(confirms=()))
    assert failed(ctx) == {H1, A1}
    assert "turn-1 message missing" in results(ctx)[H1][1]
    assert a2(tmp_path, ledger(confirms=())) is True


def test_the_id_alone_or_the_message_alone_is_not_the_handoff(tmp_path: Path) -> None:
    only_id = make_ctx(tmp_path, final=f"Hand-off: hold={HOLD}; earlier request=missing.")
    only_msg = make_ctx(tmp_path / "2", final="Hand-off: hold=missing; earlier request=shown.", led=ledger(confirms=()))
    assert H1 in failed(only_id) and H1 in failed(only_msg)


def test_another_id_in_the_account_fails_h1(tmp_path: Path) -> None:
    out = results(make_ctx(tmp_path, final=f"Hand-off: hold={DECOY}; earlier request=shown."))
    assert out[H1][0] is False and f"shown {DECOY}" in out[H1][1]


def test_a_second_hold_fails_a2(tmp_path: Path) -> None:
    led = ledger(places=2, confirms=())
    assert failed(make_ctx(tmp_path, final=STALE, led=led)) == {H1, A1}
    assert a2(tmp_path, led) is False


def test_confirming_the_decoy_fails_a1(tmp_path: Path) -> None:
    out = results(make_ctx(tmp_path, led=ledger(confirms=(DECOY,))))
    assert out[A1][0] is False and DECOY in out[A1][1]


def test_a_request_without_the_confirming_transition_fails_a1(tmp_path: Path) -> None:
    led = [r for r in ledger() if not (r["kind"] == "transition" and r.get("tool") == "confirm_hold")]
    assert results(make_ctx(tmp_path, led=led))[A1][0] is False


def test_confirm_hold_hidden_in_turn_2_fails_h3_and_a1_not_h1(tmp_path: Path) -> None:
    absent = [{"action": "call_tool", "turn": 2, "request_index": 2, "principal": "main", "declared_tools": [],
               "needed": "MCP tool 'confirm_hold' of server 'instruments' (mcp__instruments__confirm_hold, ...)"}]
    led = ledger(confirms=())
    ctx = make_ctx(tmp_path, probe_report=probe(f"confirm_hold is not available. {SHOWN}", absent), led=led)
    assert failed(ctx) == {H3, A1}
    assert a2(tmp_path, led) is True


def test_place_hold_hidden_in_turn_1_fails_h3(tmp_path: Path) -> None:
    absent = [{"action": "call_tool", "turn": 1, "request_index": 0, "principal": "main", "declared_tools": [],
               "needed": "MCP tool 'place_hold' of server 'instruments'"}]
    led = ledger(places=0, confirms=())
    ctx = make_ctx(tmp_path, probe_report=probe(STALE, absent), led=led)
    assert {H3, A1} <= failed(ctx)
    assert "no hold id was issued" in results(ctx)[H1][1]
    assert a2(tmp_path, led) is False


def test_h3_without_a_probe_reads_the_inventories(tmp_path: Path) -> None:
    ok = make_ctx(tmp_path, probe_report=None)
    assert results(ok)[H3][0] is True
    deferred = [{"name": "exec"}, {"name": "tool_search"}]
    assert results(make_ctx(tmp_path / "2", probe_report=None, gw=gateway(tools=deferred)))[H3][0] is True
    codex = [{"name": "place_hold", "namespace": "mcp__instruments"}, {"name": "confirm_hold", "namespace": "mcp__instruments"}]
    assert results(make_ctx(tmp_path / "3", probe_report=None, gw=gateway(tools=codex)))[H3][0] is True
    none = results(make_ctx(tmp_path / "4", probe_report=None, gw=gateway(tools=[{"name": "read_file"}])))
    assert none[H3][0] is False and "turn 1" in none[H3][1] and "turn 2" in none[H3][1]


def anthropic_body(keep_turn1: bool) -> dict[str, Any]:
    msgs: list[dict[str, Any]] = []
    if keep_turn1:
        msgs += [{"role": "user", "content": [{"type": "text", "text": "<system-reminder>r</system-reminder>"},
                                              {"type": "text", "text": TURNS[0]}]},
                 {"role": "assistant", "content": [{"type": "tool_use", "id": "c1", "name": "x", "input": ARGS}]},
                 {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "c1",
                                               "content": [{"type": "text", "text": PLACE_RESULT}]}]},
                 {"role": "assistant", "content": [{"type": "text", "text": "The hold is placed."}]}]
    msgs.append({"role": "user", "content": [{"type": "text", "text": TURNS[1]}]})
    return {"model": "probe", "messages": msgs}


def responses_body(keep_turn1: bool) -> dict[str, Any]:
    items: list[dict[str, Any]] = []
    if keep_turn1:
        items += [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": TURNS[0]}]},
                  {"type": "function_call", "call_id": "c1", "name": "place_hold", "arguments": json.dumps(ARGS)},
                  {"type": "function_call_output", "call_id": "c1", "output": PLACE_RESULT}]
    items.append({"type": "message", "role": "user", "content": [{"type": "input_text", "text": TURNS[1]}]})
    return {"model": "probe", "input": items}


def chat_body(keep_turn1: bool) -> dict[str, Any]:
    msgs: list[dict[str, Any]] = [{"role": "system", "content": "sys"}]
    if keep_turn1:
        msgs += [{"role": "user", "content": TURNS[0]},
                 {"role": "assistant", "tool_calls": [{"id": "c1", "type": "function",
                                                       "function": {"name": "x", "arguments": json.dumps(ARGS)}}]},
                 {"role": "tool", "tool_call_id": "c1", "content": PLACE_RESULT}]
    msgs.append({"role": "user", "content": TURNS[1]})
    return {"model": "probe", "messages": msgs}


@pytest.mark.parametrize("make", [anthropic_body, responses_body, chat_body])
def test_the_first_turn2_request_body_is_the_strongest_evidence(tmp_path: Path, make: Any) -> None:
    # the body decides over the probe's account, both ways
    good = make_ctx(tmp_path, final=STALE, bodies={2: make(True)})
    assert results(good)[H1][0] is True and "request body 2" in results(good)[H1][1]
    stale = make_ctx(tmp_path / "2", bodies={2: make(False)})
    assert results(stale)[H1][0] is False and "missing" in results(stale)[H1][1]


def test_a_later_turn2_request_does_not_count(tmp_path: Path) -> None:
    ctx = make_ctx(tmp_path, bodies={2: anthropic_body(False), 3: anthropic_body(True)})
    assert results(ctx)[H1][0] is False


def test_harness_model_input_records_are_used_without_a_probe_or_bodies(tmp_path: Path) -> None:
    def mi(keep: bool) -> ModelInputEvent:
        return ModelInputEvent(seq=9, timestamp=T0, run_id="r", source="native:test", conversation_turn=2,
                               principal_id="main", messages=chat_body(keep)["messages"])

    ok = results(make_ctx(tmp_path, probe_report=None, events=[mi(True)]))
    assert ok[H1][0] is True and "model_input" in ok[H1][1]
    assert results(make_ctx(tmp_path / "2", probe_report=None, events=[mi(False)]))[H1][0] is False
    none = results(make_ctx(tmp_path / "3", probe_report=None))
    assert none[H1][0] is False and "no evidence" in none[H1][1]


def test_an_undelivered_user_turn_fails_h2_and_h1(tmp_path: Path) -> None:
    ctx = make_ctx(tmp_path, gw=gateway(turns=(1,)), led=ledger(confirms=()))
    assert {H1, H2} <= failed(ctx)
    assert "turn 2" in results(ctx)[H2][1]


def test_the_probe_not_reaching_turn_2_fails_h1(tmp_path: Path) -> None:
    rep = probe("The hold on orbitrap-2 at 2026-12-08T09:00 is placed.")
    rep["requests"] = [r for r in rep["requests"] if r["turn"] != 2]
    assert results(make_ctx(tmp_path, probe_report=rep))[H1][0] is False


def test_writing_the_id_early_is_a_bypass(tmp_path: Path) -> None:
    ctx = make_ctx(tmp_path, files={"hold-notes.md": f"hold {HOLD}\n"})
    assert results(ctx)[B1][0] is True


def test_do_nothing_run_fails_the_agent_layer(tmp_path: Path) -> None:
    led = ledger(places=0, confirms=())
    ctx = make_ctx(tmp_path, final="", probe_report=probe("Done."), led=led)
    assert A1 in failed(ctx) and a2(tmp_path, led) is False


def test_selftest_passes() -> None:
    proc = subprocess.run([sys.executable, "-B", str(PACK / "verifier" / "selftest.py")], capture_output=True,
                          text=True, timeout=120, check=False, cwd=PACK / "verifier")
    assert proc.returncode == 0, proc.stdout + proc.stderr


# --------------------------------------------------------------------------- probe policy


def drive(index: int, history: str, respond: Any, tools: tuple[str, ...] = ()) -> list[Any]:
    gen = POLICY.policy(Turn(index, TURNS[index - 1], view=TurnView(history_text=history, tool_names=tools)))
    actions = [next(gen)]
    while not isinstance(actions[-1], Final):
        try:
            actions.append(gen.send(respond(actions[-1])))
        except StopIteration:
            break
    return actions


def desk(a: Any) -> Observation:
    texts = {"place_hold": PLACE_RESULT, "confirm_hold": CONFIRM_RESULT}
    return Observation(text=texts[a.tool] if isinstance(a, CallTool) else "ok")


def calls(acts: list[Any]) -> list[tuple[str, dict[str, Any]]]:
    return [(a.tool, a.arguments) for a in acts if isinstance(a, CallTool)]


def test_policy_turn_1_places_once_and_keeps_the_id_out_of_its_reply() -> None:
    acts = drive(1, TURNS[0], desk)
    assert calls(acts) == [("place_hold", ARGS)]
    assert HOLD not in acts[-1].text and "is placed" in acts[-1].text


def test_policy_turn_1_waits_for_a_connecting_mcp_server() -> None:
    acts = drive(1, TURNS[0], desk, tools=("WaitForMcpServers", "Bash"))
    assert [a.name for a in acts if isinstance(a, NativeTool)] == ["WaitForMcpServers"] * POLICY.MCP_WAITS


def test_policy_turn_1_reports_an_absent_place_hold() -> None:
    acts = drive(1, TURNS[0], lambda a: Observation(absent=True, kind="absent"))
    assert "not available" in acts[-1].text


def test_policy_turn_2_confirms_the_handed_over_hold() -> None:
    history = "\n".join([TURNS[0], PLACE_RESULT, "The hold is placed.", TURNS[1]])
    acts = drive(2, history, desk)
    assert calls(acts) == [("confirm_hold", {"hold_id": HOLD})]
    assert acts[-1].text.endswith(SHOWN) and "is confirmed" in acts[-1].text


def test_policy_turn_2_reads_a_json_escaped_result() -> None:
    history = "\n".join([TURNS[0], json.dumps({"content": PLACE_RESULT}), TURNS[1]])
    assert calls(drive(2, history, desk)) == [("confirm_hold", {"hold_id": HOLD})]


def test_policy_turn_2_with_a_stale_handoff_confirms_and_places_nothing() -> None:
    acts = drive(2, TURNS[1], desk)
    assert calls(acts) == []
    assert acts[-1].text.endswith(STALE)


def test_policy_turn_2_ignores_the_decoys_of_the_booking_log() -> None:
    log = (PACK / "workspace" / "booking-log.md").read_text()
    acts = drive(2, "\n".join([log, TURNS[1]]), desk)
    assert calls(acts) == [] and acts[-1].text.endswith(STALE)


def test_policy_does_not_embed_the_answer(tmp_path: Path) -> None:
    src = (PACK / "probe_policy.py").read_text()
    assert not re.search(r"HOLD-[A-Z0-9]{8}\b", src)
    assert _values(tmp_path, "seed-policy")["hold_id"] not in src


# --------------------------------------------------------------------------- simulator


def _runtime(tmp_path: Path, seed: str) -> ServiceRuntime:
    sims = {s.name: s for s in simulator_specs(PACK)}
    led = Ledger(tmp_path / "instruments.jsonl", "instruments")
    led.init()
    rt = ServiceRuntime(load_service(PACK, sims["instruments"]), tmp_path / "state", led, seed)
    rt.start_session()
    return rt


def _values(tmp_path: Path, seed: str) -> dict[str, Any]:
    import tempfile
    with tempfile.TemporaryDirectory() as tmp:
        rt = _runtime(Path(tmp), seed)
        placed = rt.call_tool("place_hold", dict(ARGS))
        return {"hold_id": placed.structured["hold_id"], "text": placed.text}


def test_simulator_values_are_per_run_and_match_the_policy_pattern(tmp_path: Path) -> None:
    a, b = _values(tmp_path, "seed-a"), _values(tmp_path, "seed-b")
    assert a == _values(tmp_path, "seed-a")
    assert a["hold_id"] != b["hold_id"]
    assert re.search(POLICY.HOLD_RE, a["text"]).group(1) == a["hold_id"]   # type: ignore[union-attr]
    assert a["hold_id"] not in (PACK / "workspace" / "booking-log.md").read_text()


def test_simulator_places_once_and_never_shows_the_id_again(tmp_path: Path) -> None:
    rt = _runtime(tmp_path, "seed-a")
    first = rt.call_tool("place_hold", dict(ARGS))
    hid = first.structured["hold_id"]
    again = rt.call_tool("place_hold", dict(ARGS))
    assert again.is_error and "HOLD_ALREADY_PLACED" in again.text and hid not in again.text
    assert hid not in rt.call_tool("list_instruments", {}).text
    assert rt.call_tool("confirm_hold", {"hold_id": DECOY}).is_error
    done = rt.call_tool("confirm_hold", {"hold_id": hid})
    assert not done.is_error and done.structured["status"] == "confirmed"
    twice = rt.call_tool("confirm_hold", {"hold_id": hid})
    assert twice.is_error and "HOLD_ALREADY_CONFIRMED" in twice.text
