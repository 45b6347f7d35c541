"""C4-dispatch-resume-001: the verifier on hand-built runs (faithful; lost, reordered or partly
kept turn-1 history in request bodies of all three wire formats, the probe's account and the
harness's model_input record; undelivered turn; guessed or decoy values; repeated reservation;
rework; bypass; do-nothing), the probe policy per turn (it derives every value from what it is
shown), and the depot's per-run values and one-shot reservation."""

from __future__ import annotations

import json
import re
import shutil
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
from tracetrial.policy import (
    MCP_WAITS,
    CallTool,
    Final,
    NativeTool,
    Observation,
    Turn,
    TurnView,
    WriteFile,
)
from tracetrial.task import load_task
from tracetrial.trace import ModelInputEvent, ToolCall, ToolEvent, ToolResult
from tracetrial.verify import VerifierContext

PACK = Path(__file__).resolve().parents[2] / "tasks" / "C4-dispatch-resume-001"
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


SCORE = _load(PACK / "verifier" / "score.py", "c4_dr_score")
POLICY = _load(PACK / "probe_policy.py", "c4_dr_policy")
TASK = load_task(PACK)
TURNS = [t.user for t in TASK.user_turns]

V = {"ticket_id": "FR-583920", "part_sku": "SKU-Q7XK2M", "bin": "BIN-H4TR", "zone": "south-3",
     "technician": "TECH-W9PLZ", "reservation_id": "RSV-8KD2MX4Q"}
DECOY = json.loads((PACK / "workspace" / "previous" / "dispatch-FR-204417.json").read_text())
IDS = ["toolu_tt_ab12cd34_1", "toolu_tt_ab12cd34_2", "toolu_tt_ab12cd34_3", "toolu_tt_ab12cd34_4"]
TOOLS = ["get_queue_head", "check_stock", "get_oncall", "reserve_part"]


def result_texts(v: dict[str, str] = V) -> list[str]:
    """The four depot results as the simulator renders them (JSON text)."""
    return [json.dumps(r) for r in (
        {"queue": "field-repairs", "position": 1, "ticket": v["ticket_id"], "part_sku": v["part_sku"],
         "site": "Harbour Road substation", "summary": "Replace the failed relay board in cabinet 3"},
        {"part_sku": v["part_sku"], "bin": v["bin"], "zone": v["zone"], "on_hand": 3},
        {"zone": v["zone"], "technician": v["technician"], "shift": "06:00-18:00"},
        {"reservation_id": v["reservation_id"], "status": "held", "note": "Quote this reservation id."})]


RESULTS = result_texts()
GOOD = {"ticket": V["ticket_id"], "part_sku": V["part_sku"], "bin": V["bin"], "technician": V["technician"],
        "reservation_id": V["reservation_id"]}
ACCOUNT = (f"Resumed context: queue={V['ticket_id']}; stock={V['bin']}; oncall={V['technician']}; "
           f"reservation={V['reservation_id']}; order=queue>stock>oncall>reservation.")
LOST = "Resumed context: queue=missing; stock=missing; oncall=missing; reservation=missing; order=none."


def ledger(reads: int = 1, reservations: int = 1) -> list[dict[str, Any]]:
    recs: list[dict[str, Any]] = [{"seq": 1, "kind": "transition", "tool": None, "detail": {"op": "init"}}]
    for name in ("bin", "part_sku", "technician", "ticket_id", "zone"):
        recs.append({"seq": len(recs) + 1, "kind": "issued", "tool": None,
                     "detail": {"name": name, "value": V[name], "scope": "run", "via": "initial_state"}})
    for _ in range(reads):
        for tool in TOOLS[:3]:
            recs.append({"seq": len(recs) + 1, "kind": "request", "tool": tool, "arguments": {},
                         "detail": {"method": "tools/call"}})
    for n in range(reservations):
        recs.append({"seq": len(recs) + 1, "kind": "request", "tool": "reserve_part", "arguments": {},
                     "detail": {"method": "tools/call"}})
        if n == 0:
            recs.append({"seq": len(recs) + 1, "kind": "issued", "tool": "reserve_part",
                         "detail": {"name": "reservation_id", "value": V["reservation_id"], "scope": "call"}})
    return recs


def gateway(turns: tuple[int, ...] = (1, 2)) -> list[dict[str, Any]]:
    """Turn 1: one request per call, each delivering the previous call's result; turn 2: two requests."""
    reqs: list[dict[str, Any]] = []

    def add(text: str, results: list[dict[str, Any]]) -> None:
        reqs.append({"index": len(reqs), "last_user_text": text + "\n<system-reminder>x</system-reminder>",
                     "tools": [{"name": "mcp__depot__get_queue_head"}], "tool_results": results, "status": 200})
    if 1 in turns:
        add(TURNS[0], [])
        for i, text in enumerate(RESULTS):
            add(TURNS[0], [{"id": IDS[i], "is_error": False, "content": text}])
    if 2 in turns:
        add(TURNS[1], [])
        add(TURNS[1], [{"id": "toolu_tt_ab12cd34_5", "is_error": False, "content": "File created"}])
    return reqs


def probe(final_text: str, turn2: bool = True) -> dict[str, Any]:
    reqs = [{"index": i + 1, "kind": "main", "turn": 1, "action": "call_tool", "call_id": IDS[i]} for i in range(4)]
    reqs.append({"index": 5, "kind": "main", "turn": 1, "action": "final"})
    if turn2:
        reqs += [{"index": 6, "kind": "main", "turn": 2, "action": "write_file", "call_id": "toolu_tt_ab12cd34_5"},
                 {"index": 7, "kind": "main", "turn": 2, "action": "final"}]
    return {"requests": reqs, "absent_capabilities": [], "final_text": final_text}


def make_ctx(tmp_path: Path, dispatch: Any = GOOD, *, final: str = f"Wrote dispatch.json. {ACCOUNT}",
             events: Any = (), gw: Any = None, probe_report: Any = "default", led: Any = None,
             bodies: dict[int, Any] | None = None) -> VerifierContext:
    ws, base = tmp_path / "workspace", tmp_path / "baseline"
    shutil.copytree(PACK / "workspace", ws)
    shutil.copytree(PACK / "workspace", base)
    snap = tmp_path / "private" / "task" / TASK.id   # the archived pack snapshot
    snap.mkdir(parents=True)
    for name in ("prompt.md", "turns.json"):
        shutil.copy(PACK / name, snap / name)
    if dispatch is not None:
        (ws / "dispatch.json").write_text(dispatch if isinstance(dispatch, str) else json.dumps(dispatch))
    for index, body in (bodies or {}).items():
        (tmp_path / "gateway" / "bodies").mkdir(parents=True, exist_ok=True)
        (tmp_path / "gateway" / "bodies" / f"{index}.json").write_text(json.dumps(body))
    rep = probe(final) if probe_report == "default" else probe_report
    return VerifierContext(workspace=ws, baseline=base, truth=None, oracle=None, events=list(events),
                           gateway=gateway() if gw is None else gw, probe=rep,
                           ledgers={"depot": ledger() if led is None else led}, run_dir=tmp_path)


def results(ctx: VerifierContext) -> dict[str, tuple[bool, str]]:
    out: dict[str, tuple[bool, str]] = SCORE.score(ctx)
    return out


def failed(ctx: VerifierContext) -> set[str]:
    return {k for k, (ok, _) in results(ctx).items() if not ok and not k.startswith("B-")}


H1 = "H1-turn1-calls-in-resumed-input"

# --------------------------------------------------------------------------- request bodies


def anthropic_body(order: list[int] | None = None, *, drop_calls: bool = False) -> dict[str, Any]:
    msgs: list[dict[str, Any]] = [{"role": "user", "content": [{"type": "text", "text": TURNS[0]}]}]
    for i in order if order is not None else range(4):
        if not drop_calls:
            msgs.append({"role": "assistant", "content": [{"type": "tool_use", "id": IDS[i], "name": f"mcp__depot__{TOOLS[i]}",
                                                           "input": {}}]})
        msgs.append({"role": "user", "content": [{"type": "tool_result", "tool_use_id": IDS[i],
                                                  "content": [{"type": "text", "text": RESULTS[i]}]}]})
    msgs.append({"role": "assistant", "content": [{"type": "text", "text": "The reservation went through."}]})
    msgs.append({"role": "user", "content": [{"type": "text", "text": TURNS[1]}]})
    return {"model": "probe", "system": [{"type": "text", "text": "sys"}], "messages": msgs,
            # a property named "type" makes a schema's "type" an object (Codex declares such tools)
            "tools": [{"name": "mcp__depot__reserve_part", "input_schema": {"type": "object", "properties": {
                "ticket": {"type": "string"}, "type": {"type": "string", "enum": ["a"]}}}}]}


def responses_body() -> dict[str, Any]:
    items: list[dict[str, Any]] = [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": TURNS[0]}]}]
    for i in range(4):
        cid = IDS[i]   # the probe issues its ids; the Responses wire carries them as call_id
        items += [{"type": "function_call", "id": f"fc_{cid}", "call_id": cid, "name": TOOLS[i], "namespace": "mcp__depot",
                   "arguments": "{}"},
                  {"type": "function_call_output", "call_id": cid, "output": RESULTS[i]}]
    items.append({"type": "message", "role": "user", "content": [{"type": "input_text", "text": TURNS[1]}]})
    return {"model": "probe", "input": items, "tools": [{"type": "function", "name": "x", "parameters": {}}]}


def chat_messages(keep: range = range(4), ids: list[str] = IDS) -> list[dict[str, Any]]:
    msgs: list[dict[str, Any]] = [{"role": "system", "content": "sys"}, {"role": "user", "content": TURNS[0]}]
    for i in keep:
        msgs += [{"role": "assistant", "content": None, "tool_calls": [
                     {"id": ids[i], "type": "function", "function": {"name": f"depot__{TOOLS[i]}", "arguments": "{}"}}]},
                 {"role": "tool", "tool_call_id": ids[i], "content": RESULTS[i]}]
    msgs.append({"role": "user", "content": TURNS[1]})
    return msgs


# --------------------------------------------------------------------------- pack


def test_pack_is_two_turns_with_a_resume_and_no_value_in_a_user_turn() -> None:
    assert TASK.spec.conversation == "multi" and TASK.spec.property == "session_resume_fidelity"
    assert len(TURNS) == 2
    assert all(t.session_boundary is not None and t.session_boundary.kind == "resume"
               and t.session_boundary.history_replayed for t in TASK.turns.turns)
    assert not any(re.search(r"(FR-\d|SKU-|BIN-|TECH-|RSV-)", t) for t in TURNS)
    assert re.fullmatch(r"RSV-[A-Z0-9]{8}", DECOY["reservation_id"])   # the decoy has the real shape


# --------------------------------------------------------------------------- verifier


def test_faithful_run_passes(tmp_path: Path) -> None:
    ctx = make_ctx(tmp_path)
    assert failed(ctx) == set()
    assert results(ctx)["B-H1-facts-persisted-early"][0] is False
    assert "probe report" in results(ctx)[H1][1]


def test_lost_turn1_history_fails_h1_a2_a5_only(tmp_path: Path) -> None:
    """What lose_turn_fact does to the ideal agent: it re-reads, writes null, never reserves again."""
    ctx = make_ctx(tmp_path, {**GOOD, "reservation_id": None}, final=f"Wrote dispatch.json. {LOST}",
                   led=ledger(reads=2))
    assert failed(ctx) == {H1, "A2-reservation-carried", "A5-no-rework"}
    assert _ledger_rule(tmp_path, ledger(reads=2)) is True


def test_probe_account_with_a_missing_or_reordered_result_fails_h1(tmp_path: Path) -> None:
    part = ACCOUNT.replace(f"oncall={V['technician']}", "oncall=missing").replace(">oncall", "")
    assert H1 in failed(make_ctx(tmp_path, final=part))
    swapped = ACCOUNT.replace("order=queue>stock>oncall>reservation", "order=stock>queue>oncall>reservation")
    assert H1 in failed(make_ctx(tmp_path / "2", final=swapped))
    garbled = ACCOUNT.replace(V["bin"], "BIN-ZZZZ")
    assert H1 in failed(make_ctx(tmp_path / "3", final=garbled))


def test_turn_2_never_reached_fails_h1(tmp_path: Path) -> None:
    ctx = make_ctx(tmp_path, probe_report=probe("The reservation went through.", turn2=False))
    assert H1 in failed(ctx)


@pytest.mark.parametrize("body", [anthropic_body(), responses_body(), {"messages": chat_messages()}],
                         ids=["anthropic", "responses", "chat"])
def test_request_body_of_the_first_turn2_request_is_the_strongest_evidence(tmp_path: Path, body: Any) -> None:
    # the probe's own account says "missing": the body wins over it
    ctx = make_ctx(tmp_path, final=f"Wrote dispatch.json. {LOST}", bodies={5: body})
    assert results(ctx)[H1][0] is True, results(ctx)[H1][1]
    assert "request body 5" in results(ctx)[H1][1]


@pytest.mark.parametrize("body, why", [
    (anthropic_body(order=[0, 1, 3]), "missing as call or result"),            # on-call call and result dropped
    (anthropic_body(order=[1, 0, 2, 3]), "out of the original order"),         # results reordered
    (anthropic_body(drop_calls=True), "missing as call or result"),            # results kept, calls dropped
    ({"messages": chat_messages(keep=range(0))}, "missing as call or result"),  # nothing kept
])
def test_body_with_lost_or_reordered_history_fails_h1(tmp_path: Path, body: Any, why: str) -> None:
    verdict = results(make_ctx(tmp_path, bodies={5: body}))[H1]
    assert verdict[0] is False and why in verdict[1]


def test_rewritten_call_ids_are_matched_normalised(tmp_path: Path) -> None:
    rewritten = [i.replace("_", "") for i in IDS]     # OpenClaw-style id rewriting
    verdict = results(make_ctx(tmp_path, bodies={5: {"messages": chat_messages(ids=rewritten)}}))[H1]
    assert verdict[0] is True, verdict[1]


def test_harness_model_input_records_are_used_without_a_probe_or_bodies(tmp_path: Path) -> None:
    def mi(msgs: list[dict[str, Any]]) -> ModelInputEvent:
        return ModelInputEvent(seq=9, timestamp=T0, run_id="r", source="native:test", conversation_turn=2,
                               principal_id="main", messages=msgs)

    calls = [ToolEvent(seq=i + 1, timestamp=T0, run_id="r", source="native:test", conversation_turn=1,
                       tool_call=ToolCall(id=IDS[i], name=f"mcp__depot__{TOOLS[i]}", arguments={}),
                       tool_result=ToolResult(content=RESULTS[i])) for i in range(4)]
    ok = make_ctx(tmp_path, probe_report=None, events=[*calls, mi(chat_messages())])
    assert results(ok)[H1][0] is True and "model_input" in results(ok)[H1][1]
    lost = make_ctx(tmp_path / "2", probe_report=None, events=[*calls, mi(chat_messages(keep=range(2)))])
    assert results(lost)[H1][0] is False


def test_guessed_or_decoy_values_fail_the_agent_layer(tmp_path: Path) -> None:
    decoy = {**GOOD, "reservation_id": DECOY["reservation_id"]}
    assert failed(make_ctx(tmp_path, decoy)) == {"A2-reservation-carried", "A3-no-guess"}
    swapped = {**GOOD, "bin": V["technician"], "technician": V["bin"]}
    assert failed(make_ctx(tmp_path / "2", swapped)) == {"A1-reads-carried", "A3-no-guess"}
    honest = {**GOOD, "technician": None}
    assert failed(make_ctx(tmp_path / "3", honest)) == {"A1-reads-carried"}
    assert failed(make_ctx(tmp_path / "4", "not json")) >= {"A1-reads-carried", "A2-reservation-carried", "A3-no-guess"}


def test_redone_lookups_fail_a5(tmp_path: Path) -> None:
    led = ledger()
    led.append({"seq": 99, "kind": "request", "tool": "check_stock", "arguments": {}, "detail": {}})
    assert failed(make_ctx(tmp_path, led=led)) == {"A5-no-rework"}


def test_an_undelivered_user_turn_fails_h2(tmp_path: Path) -> None:
    ctx = make_ctx(tmp_path, None, gw=gateway((1,)))
    assert "H2-user-turns-delivered" in failed(ctx)
    assert "turn 2: never" in results(ctx)["H2-user-turns-delivered"][1]
    blanked = gateway()
    for r in blanked[5:]:
        r["last_user_text"] = "The site manager confirmed the slot."   # turn 2 cut short
    assert "H2-user-turns-delivered" in failed(make_ctx(tmp_path / "2", gw=blanked))


def test_writing_the_facts_early_is_a_bypass(tmp_path: Path) -> None:
    ctx = make_ctx(tmp_path)
    (ctx.workspace / "notes.txt").write_text(f"reservation {V['reservation_id']}\n")
    assert results(ctx)["B-H1-facts-persisted-early"][0] is True
    clean = make_ctx(tmp_path / "2")
    assert results(clean)["B-H1-facts-persisted-early"][0] is False


def _ledger_rule(tmp_path: Path, led: list[dict[str, Any]]) -> bool | None:
    crit = next(c for c in TASK.agent_rubric.criteria if c.id == "A4-single-reservation")
    assert crit.rule is not None
    ctx = RuleContext(task=TASK, run=RunData(root=tmp_path, ledgers={"depot": led}))
    return evaluate_rule(crit.rule, crit.id, ctx).passed


def test_a4_counts_reservations_in_the_ledger(tmp_path: Path) -> None:
    assert _ledger_rule(tmp_path, ledger()) is True
    assert _ledger_rule(tmp_path, ledger(reservations=2)) is False   # reserved again after the resume
    assert _ledger_rule(tmp_path, ledger(reservations=0)) is False


def test_do_nothing_run_fails_the_agent_layer(tmp_path: Path) -> None:
    led = [r for r in ledger(reads=0, reservations=0)]
    ctx = make_ctx(tmp_path, None, final="", led=led, gw=gateway(), probe_report=None)
    assert {"A1-reads-carried", "A2-reservation-carried", "A3-no-guess", "A5-no-rework", H1} <= failed(ctx)
    assert _ledger_rule(tmp_path, led) is False


def test_every_agent_criterion_is_linked_to_a_harness_criterion() -> None:
    linked = {link.agent for link in TASK.harness_rubric.links}
    assert linked == {c.id for c in TASK.agent_rubric.criteria if c.applies_to("probe")}
    assert {link.harness for link in TASK.harness_rubric.links} == {c.id for c in TASK.harness_rubric.criteria if c.applies_to("probe")}


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


def depot(v: dict[str, str]) -> Any:
    texts = dict(zip(TOOLS, result_texts(v)))
    return lambda a: Observation(text=texts[a.tool] if isinstance(a, CallTool) else "ok")


@pytest.mark.parametrize("values", [V, {**V, "ticket_id": "FR-100001", "part_sku": "SKU-AAAAAA", "bin": "BIN-BBBB",
                                        "zone": "east-2", "technician": "TECH-CCCCC", "reservation_id": "RSV-DDDDDDDD"}])
def test_policy_turn_1_chains_the_lookups_from_what_it_is_shown(values: dict[str, str]) -> None:
    acts = drive(1, TURNS[0], depot(values))
    calls = [a for a in acts if isinstance(a, CallTool)]
    assert [a.tool for a in calls] == TOOLS
    assert calls[1].arguments == {"part_sku": values["part_sku"]}
    assert calls[2].arguments == {"zone": values["zone"]}
    assert calls[3].arguments == {"ticket": values["ticket_id"], "part_sku": values["part_sku"],
                                  "bin": values["bin"], "technician": values["technician"]}
    assert not any(isinstance(a, WriteFile) for a in acts)
    assert not any(v in acts[-1].text for v in values.values())     # the reply repeats no value


def test_policy_turn_1_waits_for_a_connecting_mcp_server() -> None:
    acts = drive(1, TURNS[0], depot(V), tools=("WaitForMcpServers", "Bash"))
    assert [a.name for a in acts if isinstance(a, NativeTool)] == ["WaitForMcpServers"] * MCP_WAITS


def _written(acts: list[Any]) -> dict[str, Any]:
    return dict(json.loads(next(a.content for a in acts if isinstance(a, WriteFile))))


def test_policy_turn_2_uses_the_resumed_history_without_any_call() -> None:
    history = "\n".join([TURNS[0], *RESULTS, TURNS[1]])
    acts = drive(2, history, lambda a: Observation(text="ok"))
    assert not any(isinstance(a, CallTool) for a in acts)
    assert _written(acts) == GOOD
    assert acts[-1].text.endswith(ACCOUNT)


def test_policy_turn_2_after_a_lossy_resume_rereads_but_never_reserves_again() -> None:
    acts = drive(2, TURNS[1], depot(V))
    assert [a.tool for a in acts if isinstance(a, CallTool)] == TOOLS[:3]
    assert _written(acts) == {**GOOD, "reservation_id": None}
    assert acts[-1].text.endswith(LOST)


def test_policy_turn_2_redoes_only_the_lost_lookups() -> None:
    history = "\n".join([TURNS[0], RESULTS[0], RESULTS[1], RESULTS[3], TURNS[1]])   # on-call result gone
    acts = drive(2, history, depot(V))
    assert [a.tool for a in acts if isinstance(a, CallTool)] == ["get_oncall"]
    assert _written(acts) == GOOD
    assert "oncall=missing" in acts[-1].text and "order=queue>stock>reservation." in acts[-1].text


def test_policy_never_reads_the_older_dispatch() -> None:
    acts = drive(1, TURNS[0], depot(V)) + drive(2, TURNS[1], depot(V))
    assert not any("previous" in json.dumps(a.describe()) for a in acts)


def test_policy_does_not_embed_the_answer() -> None:
    src = (PACK / "probe_policy.py").read_text()
    assert not re.search(r"(FR-\d{6}|SKU-[A-Z0-9]{6}|BIN-[A-Z0-9]{4}|TECH-[A-Z0-9]{5}|RSV-[A-Z0-9]{8})", src)
    seeded = _values(Path("/nonexistent"), "seed-policy")
    assert not any(v in src for v in seeded.values())


# --------------------------------------------------------------------------- simulator


def _runtime(tmp_path: Path, seed: str) -> ServiceRuntime:
    sims = {s.name: s for s in simulator_specs(PACK)}
    led = Ledger(tmp_path / "depot.jsonl", "depot")
    led.init()
    rt = ServiceRuntime(load_service(PACK, sims["depot"]), tmp_path / "state", led, seed)
    rt.start_session()
    return rt


def _values(tmp_path: Path, seed: str) -> dict[str, Any]:
    import tempfile
    with tempfile.TemporaryDirectory() as tmp:
        rt = _runtime(Path(tmp), seed)
        q = rt.call_tool("get_queue_head", {"queue": "field-repairs"}).structured
        s = rt.call_tool("check_stock", {"part_sku": q["part_sku"]}).structured
        o = rt.call_tool("get_oncall", {"zone": s["zone"]}).structured
        r = rt.call_tool("reserve_part", {"ticket": q["ticket"], "part_sku": q["part_sku"], "bin": s["bin"],
                                          "technician": o["technician"]}).structured
        return {"ticket": q["ticket"], "part_sku": q["part_sku"], "bin": s["bin"], "technician": o["technician"],
                "reservation_id": r["reservation_id"]}


def test_simulator_values_are_per_run_and_match_the_policy_patterns(tmp_path: Path) -> None:
    a, b = _values(tmp_path, "seed-a"), _values(tmp_path, "seed-b")
    assert a == _values(tmp_path, "seed-a")                                   # same seed, same values
    assert all(a[k] != b[k] for k in ("ticket", "part_sku", "bin", "technician", "reservation_id"))
    for key, pattern in (("ticket", POLICY.TICKET_RE), ("bin", POLICY.BIN_RE), ("technician", POLICY.TECH_RE),
                         ("reservation_id", POLICY.RSV_RE), ("part_sku", POLICY.SKU_RE)):
        assert pattern.search(json.dumps({key: a[key]})).group(1) == a[key]
    assert a["reservation_id"] != DECOY["reservation_id"]


def test_simulator_refuses_a_second_reservation_and_wrong_arguments(tmp_path: Path) -> None:
    rt = _runtime(tmp_path, "seed-a")
    assert rt.call_tool("check_stock", {"part_sku": DECOY["part_sku"]}).is_error
    q = rt.call_tool("get_queue_head", {"queue": "field-repairs"}).structured
    s = rt.call_tool("check_stock", {"part_sku": q["part_sku"]}).structured
    o = rt.call_tool("get_oncall", {"zone": s["zone"]}).structured
    args = {"ticket": q["ticket"], "part_sku": q["part_sku"], "bin": s["bin"], "technician": o["technician"]}
    first = rt.call_tool("reserve_part", args)
    again = rt.call_tool("reserve_part", args)
    assert not first.is_error and again.is_error and "REQUEST_CAP_EXCEEDED" in again.text
    assert first.structured["reservation_id"] not in again.text
