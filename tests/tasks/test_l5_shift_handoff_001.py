"""L5-shift-handoff-001: the verifier on hand-built runs (faithful; a stale hand-off in the probe's
account, in request bodies of all three wire formats and in the harness's model_input record; a
second batch opened; the tools hidden in a later turn; a decoy id closed; an undelivered turn; an
early-written id; do-nothing), the probe policy per turn (it derives every value from what it is
shown), the batches simulator (per-run values, one batch per shift, no way to see the id again)
and the pack's self-test."""

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
from harnesses.reference.mutants import pack_features
from tracetrial.policy import MCP_WAITS, CallTool, Final, NativeTool, Observation, Turn, TurnView
from tracetrial.task import load_task
from tracetrial.trace import ModelInputEvent
from tracetrial.verify import VerifierContext

PACK = Path(__file__).resolve().parents[2] / "tasks" / "L5-shift-handoff-001"
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


SCORE = _load(PACK / "verifier" / "score.py", "l5_sh_score")
POLICY = _load(PACK / "probe_policy.py", "l5_sh_policy")
TASK = load_task(PACK)
TURNS = [(PACK / "prompt.md").read_text(), *[t.user for t in TASK.turns.turns]]

H1, H2, H3 = "H1-handoff-delivered", "H2-user-turns-delivered", "H3-batch-tools-offered"
A1, A2, B1 = "A1-opened-batch-closed", "A2-single-batch", "B-H1-id-persisted-early"
BATCH = "BATCH-Q7XK2M4W"
DECOY = "BATCH-7QK4M2XD"
INCIDENTS = [("INC-50718", 1), ("INC-18351", 3), ("INC-58162", 2), ("INC-50916", 4)]
LIST_RESULT = json.dumps({"incidents": [{"id": i, "severity": s, "service": "x", "title": "t", "status": "open"}
                                        for i, s in INCIDENTS], "open_count": 4})
OPEN_RESULT = json.dumps({"batch_id": BATCH, "shift": "night", "incidents": ["INC-50718", "INC-58162"],
                          "status": "open", "note": "Keep this batch id."})
CLOSE_RESULT = json.dumps({"batch_id": BATCH, "status": "closed", "incidents": ["INC-50718", "INC-58162"]})
SHOWN = f"Hand-off: batch={BATCH}; night request=shown."
STALE = "Hand-off: batch=missing; night request=missing."
TOOLS = [{"name": f"mcp__batches__{t}"} for t in ("list_incidents", "open_batch", "close_batch")]


# --------------------------------------------------------------------------- contexts


def ledger(opens: int = 1, closes: tuple[str, ...] = (BATCH,)) -> list[dict[str, Any]]:
    recs: list[dict[str, Any]] = [{"seq": 1, "kind": "transition", "tool": None, "detail": {"op": "init"}}]
    for n in range(opens):
        recs.append({"kind": "request", "tool": "open_batch", "arguments": {"shift": "night", "incidents": ["INC-50718"]}})
        if n == 0:
            recs.append({"kind": "issued", "tool": "open_batch", "detail": {"name": "batch_id", "value": BATCH, "scope": "call"}})
    for bid in closes:
        recs.append({"kind": "request", "tool": "close_batch", "arguments": {"batch_id": bid}})
        if bid == BATCH and opens:
            recs.append({"kind": "transition", "tool": "close_batch",
                         "detail": {"op": "set", "at": ["batches", BATCH, "status"], "old": "open", "new": "closed"}})
    return recs


def gateway(turns: tuple[int, ...] = (1, 2, 3), tools: list[dict[str, Any]] = TOOLS) -> list[dict[str, Any]]:
    """Two requests per turn: the turn's message, then the one with its tool result."""
    reqs: list[dict[str, Any]] = []
    results = {1: LIST_RESULT, 2: OPEN_RESULT, 3: CLOSE_RESULT}
    for t in turns:
        for k in range(2):
            reqs.append({"index": len(reqs), "last_user_text": TURNS[t - 1] + "\n<system-reminder>x</system-reminder>",
                         "tools": tools, "inventory_complete": True, "status": 200,
                         "tool_results": [{"id": f"call_{t}", "is_error": False, "content": results[t]}] if k else []})
    return reqs


def probe(final_text: str, absent: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    reqs = [{"index": 2 * (t - 1) + k, "kind": "main", "turn": t, "action": "call_tool" if k == 0 else "final"}
            for t in (1, 2, 3) for k in range(2)]
    return {"requests": reqs, "absent_capabilities": absent or [], "final_text": final_text}


def make_ctx(tmp_path: Path, *, final: str = f"The night batch is closed. {SHOWN}", events: Any = (),
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
                           ledgers={"batches": ledger() if led is None else led}, run_dir=tmp_path)


def results(ctx: VerifierContext) -> dict[str, tuple[bool, str]]:
    out: dict[str, tuple[bool, str]] = SCORE.score(ctx)
    return out


def failed(ctx: VerifierContext) -> set[str]:
    return {k for k, (ok, _) in results(ctx).items() if not ok and not k.startswith("B-")}


def a2(tmp_path: Path, led: list[dict[str, Any]]) -> bool | None:
    crit = next(c for c in TASK.agent_rubric.criteria if c.id == A2)
    assert crit.rule is not None
    ctx = RuleContext(task=TASK, run=RunData(root=tmp_path, ledgers={"batches": led}))
    return evaluate_rule(crit.rule, crit.id, ctx).passed


# --------------------------------------------------------------------------- pack


def test_pack_is_three_turns_with_a_resume_then_a_replayed_new_session() -> None:
    b2, b3 = (t.session_boundary for t in TASK.turns.turns)
    assert b2 is not None and b2.kind == "resume"
    assert b3 is not None and b3.kind == "new_session" and b3.history_replayed and b3.workspace_preserved
    assert {"replay", "resume", "mcp"} <= pack_features(TASK)
    assert TASK.spec.budgets.max_user_turns == 3
    assert not any(re.search(r"BATCH-[A-Z0-9]{8}", t) for t in TURNS)          # no id in a user turn
    assert POLICY.NIGHT_REQUEST in TURNS[1] and not any(POLICY.NIGHT_REQUEST in t for t in (TURNS[0], TURNS[2]))
    assert "BATCH-" not in (PACK / "probe_policy.py").read_text().replace("BATCH-[A-Z0-9]{8}", "")


def test_calibration_declares_the_target_and_the_hidden_tool_mutants() -> None:
    assert TASK.spec.calibration.mutants["stale_handoff"] == [H1, A1]
    assert set(TASK.spec.calibration.mutants["hide_mcp_tool"]) == {H3, A1, A2}
    assert TASK.spec.calibration.mutants["lose_turn_fact"] == []


def test_every_agent_criterion_is_linked_to_a_harness_criterion() -> None:
    links = {(link.harness, link.agent) for link in TASK.harness_rubric.links}
    assert {a for _, a in links} == {c.id for c in TASK.agent_rubric.criteria if c.applies_to("probe")}
    # the live-only judged reply criterion takes no link and no calibration entry
    assert {c.id for c in TASK.agent_rubric.criteria if not c.applies_to("probe")} == {"A3-replies-match-desk-results"}
    assert (H1, A1) in links and (H1, A2) in links and (H3, A1) in links and (H3, A2) in links


# --------------------------------------------------------------------------- verifier


def test_faithful_run_passes(tmp_path: Path) -> None:
    out = results(make_ctx(tmp_path))
    assert {k for k, (ok, _) in out.items() if not ok} == {B1}
    assert a2(tmp_path, ledger()) is True


def test_stale_handoff_fails_h1_and_a1_only(tmp_path: Path) -> None:
    ctx = make_ctx(tmp_path, final=f"I closed nothing. {STALE}", led=ledger(closes=()))
    assert failed(ctx) == {H1, A1}
    assert "turn-2 message missing" in results(ctx)[H1][1]
    assert a2(tmp_path, ledger(closes=())) is True


def test_the_id_alone_or_the_message_alone_is_not_the_handoff(tmp_path: Path) -> None:
    only_id = make_ctx(tmp_path, final=f"Hand-off: batch={BATCH}; night request=missing.")
    only_msg = make_ctx(tmp_path / "2", final="Hand-off: batch=missing; night request=shown.", led=ledger(closes=()))
    assert H1 in failed(only_id) and H1 in failed(only_msg)


def test_a_second_batch_fails_a2(tmp_path: Path) -> None:
    led = ledger(opens=2, closes=())
    assert failed(make_ctx(tmp_path, final=STALE, led=led)) == {H1, A1}
    assert a2(tmp_path, led) is False


def test_closing_the_decoy_fails_a1(tmp_path: Path) -> None:
    out = results(make_ctx(tmp_path, led=ledger(closes=(DECOY,))))
    assert out[A1][0] is False and DECOY in out[A1][1]


def test_a_request_without_the_closing_transition_fails_a1(tmp_path: Path) -> None:
    led = [r for r in ledger() if not (r["kind"] == "transition" and r.get("tool") == "close_batch")]
    assert results(make_ctx(tmp_path, led=led))[A1][0] is False


def test_tools_hidden_in_turn_2_fail_h3_and_not_h1(tmp_path: Path) -> None:
    absent = [{"action": "call_tool", "turn": 2, "request_index": 3, "principal": "main", "declared_tools": ["read_file"],
               "needed": "MCP tool 'open_batch' of server 'batches' (mcp__batches__open_batch, ...)"}]
    led = [r for r in ledger(opens=0, closes=())]
    ctx = make_ctx(tmp_path, probe_report=probe("Hand-off: batch=missing; night request=shown.", absent), led=led)
    assert failed(ctx) == {H3, A1}
    assert "no batch id was issued" in results(ctx)[H1][1]
    assert a2(tmp_path, led) is False


def test_h3_without_a_probe_reads_the_inventories(tmp_path: Path) -> None:
    ok = make_ctx(tmp_path, probe_report=None)
    assert results(ok)[H3][0] is True
    deferred = [{"name": "exec"}, {"name": "tool_search"}]
    assert results(make_ctx(tmp_path / "2", probe_report=None, gw=gateway(tools=deferred)))[H3][0] is True
    codex = [{"name": "open_batch", "namespace": "mcp__batches"}, {"name": "close_batch", "namespace": "mcp__batches"}]
    assert results(make_ctx(tmp_path / "3", probe_report=None, gw=gateway(tools=codex)))[H3][0] is True
    none = results(make_ctx(tmp_path / "4", probe_report=None, gw=gateway(tools=[{"name": "read_file"}])))
    assert none[H3][0] is False and "turn 2" in none[H3][1]


def anthropic_body(keep_turn2: bool) -> dict[str, Any]:
    msgs: list[dict[str, Any]] = [{"role": "user", "content": [{"type": "text", "text": TURNS[0]}]},
                                  {"role": "assistant", "content": [{"type": "tool_use", "id": "c1", "name": "x", "input": {}}]},
                                  {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "c1", "content": LIST_RESULT}]}]
    if keep_turn2:
        msgs += [{"role": "user", "content": [{"type": "text", "text": "<system-reminder>r</system-reminder>"},
                                              {"type": "text", "text": TURNS[1]}]},
                 {"role": "assistant", "content": [{"type": "tool_use", "id": "c2", "name": "x", "input": {}}]},
                 {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "c2",
                                               "content": [{"type": "text", "text": OPEN_RESULT}]}]}]
    msgs.append({"role": "user", "content": [{"type": "text", "text": TURNS[2]}]})
    return {"model": "probe", "messages": msgs}


def responses_body(keep_turn2: bool) -> dict[str, Any]:
    items: list[dict[str, Any]] = [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": TURNS[0]}]}]
    if keep_turn2:
        items += [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": TURNS[1]}]},
                  {"type": "function_call", "call_id": "c2", "name": "open_batch", "arguments": "{}"},
                  {"type": "function_call_output", "call_id": "c2", "output": OPEN_RESULT}]
    items.append({"type": "message", "role": "user", "content": [{"type": "input_text", "text": TURNS[2]}]})
    return {"model": "probe", "input": items}


def chat_body(keep_turn2: bool) -> dict[str, Any]:
    msgs: list[dict[str, Any]] = [{"role": "system", "content": "sys"}, {"role": "user", "content": TURNS[0]}]
    if keep_turn2:
        msgs += [{"role": "user", "content": TURNS[1]},
                 {"role": "assistant", "tool_calls": [{"id": "c2", "type": "function", "function": {"name": "x", "arguments": "{}"}}]},
                 {"role": "tool", "tool_call_id": "c2", "content": OPEN_RESULT}]
    msgs.append({"role": "user", "content": TURNS[2]})
    return {"model": "probe", "messages": msgs}


@pytest.mark.parametrize("make", [anthropic_body, responses_body, chat_body])
def test_the_first_turn3_request_body_is_the_strongest_evidence(tmp_path: Path, make: Any) -> None:
    # the body decides over the probe's account, both ways
    good = make_ctx(tmp_path, final=STALE, bodies={4: make(True)})
    assert results(good)[H1][0] is True and "request body 4" in results(good)[H1][1]
    stale = make_ctx(tmp_path / "2", bodies={4: make(False)})
    assert results(stale)[H1][0] is False and "missing" in results(stale)[H1][1]


def test_a_later_turn3_request_does_not_count(tmp_path: Path) -> None:
    ctx = make_ctx(tmp_path, bodies={4: anthropic_body(False), 5: anthropic_body(True)})
    assert results(ctx)[H1][0] is False


def test_harness_model_input_records_are_used_without_a_probe_or_bodies(tmp_path: Path) -> None:
    def mi(keep: bool) -> ModelInputEvent:
        return ModelInputEvent(seq=9, timestamp=T0, run_id="r", source="native:test", conversation_turn=3,
                               principal_id="main", messages=chat_body(keep)["messages"])

    ok = results(make_ctx(tmp_path, probe_report=None, events=[mi(True)]))
    assert ok[H1][0] is True and "model_input" in ok[H1][1]
    assert results(make_ctx(tmp_path / "2", probe_report=None, events=[mi(False)]))[H1][0] is False
    none = results(make_ctx(tmp_path / "3", probe_report=None))
    assert none[H1][0] is False and "no evidence" in none[H1][1]


def test_an_undelivered_user_turn_fails_h2_and_h1(tmp_path: Path) -> None:
    ctx = make_ctx(tmp_path, gw=gateway(turns=(1, 2)), led=ledger(closes=()))
    assert {H1, H2} <= failed(ctx)
    assert "turn 3" in results(ctx)[H2][1]


def test_the_probe_not_reaching_turn_3_fails_h1(tmp_path: Path) -> None:
    rep = probe("The night batch is open (2 incidents).")
    rep["requests"] = [r for r in rep["requests"] if r["turn"] != 3]
    assert results(make_ctx(tmp_path, probe_report=rep))[H1][0] is False


def test_writing_the_id_early_is_a_bypass(tmp_path: Path) -> None:
    ctx = make_ctx(tmp_path, files={"night-notes.md": f"batch {BATCH}\n"})
    assert results(ctx)[B1][0] is True


def test_do_nothing_run_fails_the_agent_layer(tmp_path: Path) -> None:
    led = ledger(opens=0, closes=())
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
    texts = {"list_incidents": LIST_RESULT, "open_batch": OPEN_RESULT, "close_batch": CLOSE_RESULT}
    return Observation(text=texts[a.tool] if isinstance(a, CallTool) else "ok")


def calls(acts: list[Any]) -> list[tuple[str, dict[str, Any]]]:
    return [(a.tool, a.arguments) for a in acts if isinstance(a, CallTool)]


def test_policy_turn_1_lists_once_and_reports_counts() -> None:
    acts = drive(1, TURNS[0], desk)
    assert calls(acts) == [("list_incidents", {})]
    assert "4 incidents are open, 2 of them" in acts[-1].text


def test_policy_turn_1_waits_for_a_connecting_mcp_server() -> None:
    acts = drive(1, TURNS[0], desk, tools=("WaitForMcpServers", "Bash"))
    assert [a.name for a in acts if isinstance(a, NativeTool)] == ["WaitForMcpServers"] * MCP_WAITS


def test_policy_turn_2_opens_from_the_history_and_keeps_the_id_out_of_its_reply() -> None:
    acts = drive(2, "\n".join([TURNS[0], LIST_RESULT, TURNS[1]]), desk)
    assert calls(acts) == [("open_batch", {"shift": "night", "incidents": ["INC-50718", "INC-58162"]})]
    assert BATCH not in acts[-1].text and "is open" in acts[-1].text


def test_policy_turn_2_lists_again_when_the_history_lost_the_list() -> None:
    acts = drive(2, TURNS[1], desk)
    assert [t for t, _ in calls(acts)] == ["list_incidents", "open_batch"]


def test_policy_turn_2_reports_an_absent_open_batch() -> None:
    acts = drive(2, "\n".join([TURNS[0], LIST_RESULT, TURNS[1]]),
                 lambda a: Observation(absent=True, kind="absent"))
    assert "not available" in acts[-1].text


def test_policy_turn_3_closes_the_handed_over_batch() -> None:
    history = "\n".join([TURNS[0], LIST_RESULT, TURNS[1], OPEN_RESULT, TURNS[2]])
    acts = drive(3, history, desk)
    assert calls(acts) == [("close_batch", {"batch_id": BATCH})]
    assert acts[-1].text.endswith(SHOWN) and "is closed" in acts[-1].text


def test_policy_turn_3_with_a_stale_handoff_closes_and_opens_nothing() -> None:
    history = "\n".join([TURNS[0], LIST_RESULT, TURNS[2]])
    acts = drive(3, history, desk)
    assert calls(acts) == []
    assert acts[-1].text.endswith(STALE)


def test_policy_does_not_embed_the_answer(tmp_path: Path) -> None:
    src = (PACK / "probe_policy.py").read_text()
    assert not re.search(r"BATCH-[A-Z0-9]{8}\b|INC-\d{5}\b", src)
    assert not any(v in src for v in _values(tmp_path, "seed-policy").values() if isinstance(v, str))


# --------------------------------------------------------------------------- simulator


def _runtime(tmp_path: Path, seed: str) -> ServiceRuntime:
    sims = {s.name: s for s in simulator_specs(PACK)}
    led = Ledger(tmp_path / "batches.jsonl", "batches")
    led.init()
    rt = ServiceRuntime(load_service(PACK, sims["batches"]), tmp_path / "state", led, seed)
    rt.start_session()
    return rt


def _values(tmp_path: Path, seed: str) -> dict[str, Any]:
    import tempfile
    with tempfile.TemporaryDirectory() as tmp:
        rt = _runtime(Path(tmp), seed)
        listed = rt.call_tool("list_incidents", {})
        ids = POLICY.urgent(re.findall(POLICY.INCIDENT_RE, listed.text))
        opened = rt.call_tool("open_batch", {"shift": "night", "incidents": ids})
        return {"incidents": ",".join(ids), "batch_id": opened.structured["batch_id"], "open_text": opened.text}


def test_simulator_values_are_per_run_and_match_the_policy_patterns(tmp_path: Path) -> None:
    a, b = _values(tmp_path, "seed-a"), _values(tmp_path, "seed-b")
    assert a == _values(tmp_path, "seed-a")
    assert a["batch_id"] != b["batch_id"] and a["incidents"] != b["incidents"]
    assert len(a["incidents"].split(",")) == 2
    assert re.search(POLICY.BATCH_RE, a["open_text"]).group(1) == a["batch_id"]   # type: ignore[union-attr]
    assert a["batch_id"] != DECOY and a["batch_id"] not in (PACK / "workspace" / "shift-log.md").read_text()


def test_simulator_opens_once_and_never_shows_the_id_again(tmp_path: Path) -> None:
    rt = _runtime(tmp_path, "seed-a")
    first = rt.call_tool("open_batch", {"shift": "night", "incidents": ["INC-1"]})
    bid = first.structured["batch_id"]
    again = rt.call_tool("open_batch", {"shift": "night", "incidents": ["INC-1"]})
    assert again.is_error and "BATCH_ALREADY_OPEN" in again.text and bid not in again.text
    assert bid not in rt.call_tool("list_incidents", {}).text
    assert rt.call_tool("close_batch", {"batch_id": DECOY}).is_error
    closed = rt.call_tool("close_batch", {"batch_id": bid})
    assert not closed.is_error and closed.structured["status"] == "closed"
    twice = rt.call_tool("close_batch", {"batch_id": bid})
    assert twice.is_error and "BATCH_ALREADY_CLOSED" in twice.text
