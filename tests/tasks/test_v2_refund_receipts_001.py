"""V2-refund-receipts-001: the verifier on hand-built runs (the final-record shapes of the
reference harness, Claude Code, Codex and OpenClaw; a completion record stripped of its
receipts; receipts not relayed; a lossy final text; wrong, swapped or missing deliverables;
repeated operations), the probe policy (derives everything from what it is shown), and the
real payments simulator (seeded receipts, non-idempotent operations)."""

from __future__ import annotations

import json
import subprocess
import sys
import types
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from apparatus.simulators import mcp_servers_for, read_ledger, verify_ledger
from tracetrial.policy import CallTool, Final, Observation, ReadFile, Turn, WriteFile
from tracetrial.task import load_task
from tracetrial.trace import (
    AssistantMessageEvent,
    NativeDiagnosticEvent,
    NativeEvent,
    TaskCompletionEvent,
    ToolCall,
    ToolEvent,
    ToolResult,
)
from tracetrial.verify import VerifierContext

PACK = Path(__file__).resolve().parents[2] / "tasks" / "V2-refund-receipts-001"


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


SCORE = _load(PACK / "verifier" / "score.py", "v2_score")
POLICY = _load(PACK / "probe_policy.py", "v2_policy")
TASK = load_task(PACK)
NOW = datetime.now(UTC)
IDS = {"H1-receipts-delivered", "H2-final-record-carries-receipts", "A1-receipts-match-ledger",
       "A2-each-operation-once"}
OPS = TASK.truth["operations"]
AMOUNTS = {"ORD-48213": 4599, "ORD-48227": 1250, "ORD-48240": 2000}
RECEIPTS = ["RF-7KQ2MZXW9D", "RF-H4TNB8PC6V", "CN-X3F9RKD2LM"]
CALLS = ["c1", "c2", "c3"]


def result_text(op: dict[str, Any], receipt: str) -> str:
    if op["operation"] == "refund":
        return json.dumps({"order_id": op["order_id"], "status": "refunded",
                           "refund": {"amount_cents": AMOUNTS[op["order_id"]], "currency": "EUR",
                                      "receipt_id": receipt}})
    return json.dumps({"order_id": op["order_id"], "status": "credited", "amount_cents": AMOUNTS[op["order_id"]],
                       "confirmation": receipt})


def final_answer(receipts: list[str | None]) -> str:
    return "Adjustment batch processed, one call per approved operation:\n" + "\n".join(
        f"- {op['order_id']} {op['operation']}: {r or 'no receipt returned'}" for op, r in zip(OPS, receipts))


FINAL = final_answer(list(RECEIPTS))


def ledger(ops: list[tuple[str, str]] | None = None) -> list[dict[str, Any]]:
    """Requests (tool, order) in order; each first one per order issues its receipt from RECEIPTS."""
    if ops is None:
        ops = [(op["tool"], op["order_id"]) for op in OPS]
    recs: list[dict[str, Any]] = [{"seq": 1, "kind": "transition", "tool": None, "detail": {"op": "init"}}]
    done: set[tuple[str, str]] = set()
    counts: dict[str, int] = {}
    for tool, order in ops:
        seq = len(recs) + 1
        recs.append({"seq": seq, "kind": "request", "tool": tool,
                     "arguments": {"order_id": order, "amount_cents": AMOUNTS.get(order, 1), "reason": "x"},
                     "detail": {"method": "tools/call", "session": 1}})
        if (tool, order) in done:
            recs.append({"seq": seq + 1, "kind": "error", "tool": tool,
                         "detail": {"code": "ALREADY_REFUNDED", "message": "x", "request_seq": seq}})
            continue
        done.add((tool, order))
        counts[tool] = counts.get(tool, 0) + 1
        idx = next(i for i, op in enumerate(OPS) if op["order_id"] == order) if order in AMOUNTS else 0
        recs.append({"seq": seq + 1, "kind": "issued", "tool": tool,
                     "detail": {"name": "receipt" if tool == "issue_refund" else "confirmation",
                                "value": RECEIPTS[idx], "scope": "call", "call": counts[tool],
                                "request_seq": seq}})
    return recs


def tool(seq: int, cid: str, name: str, args: dict[str, Any], result: ToolResult | None) -> ToolEvent:
    return ToolEvent(seq=seq, timestamp=NOW, run_id="r", tool_call=ToolCall(id=cid, name=name, arguments=args),
                     tool_result=result)


def completion_of(shape: str, final_text: str, *, receipts: bool = True) -> list[Any]:
    if shape == "reference":
        rec = [{"call_id": c, "tool": f"mcp__payments__{op['tool']}",
                "key": "receipt_id" if op["operation"] == "refund" else "confirmation", "value": r}
               for c, op, r in zip(CALLS, OPS, RECEIPTS)]
        return [TaskCompletionEvent(seq=30, timestamp=NOW, run_id="r", principal_id="main", status="completed",
                                    content={"status": "completed", "final_text": final_text,
                                             "failed_tool_call_ids": [],
                                             "evidence_call_ids": ["c0", *CALLS, "c4"] if receipts else [],
                                             "receipts": rec if receipts else []})]
    if shape == "claude":
        return [NativeEvent(seq=30, timestamp=NOW, run_id="r", native_event_type="result", status="success",
                            raw_event={"type": "result", "subtype": "success", "is_error": False,
                                       "num_turns": 6, "result": final_text})]
    if shape == "codex":
        return [NativeEvent(seq=29, timestamp=NOW, run_id="r", native_event_type="item.completed/mcp_tool_call",
                            status="completed", raw_event={"type": "item.completed", "item": {
                                "type": "mcp_tool_call", "tool": "issue_refund", "status": "completed"}}),
                NativeEvent(seq=30, timestamp=NOW, run_id="r", native_event_type="item.completed/agent_message",
                            raw_event={"type": "item.completed", "item": {"id": "item_9", "type": "agent_message",
                                                                           "text": final_text}})]
    assert shape == "openclaw"
    return [NativeEvent(seq=29, timestamp=NOW, run_id="r", native_event_type="result"),
            TaskCompletionEvent(seq=30, timestamp=NOW, run_id="r", principal_id="main", status="completed",
                                content={"final_text": final_text, "model_calls": 7,
                                         "tool_summary": {"calls": 5, "tools": ["read", "tool_call", "write"]}})]


NAMES = {"reference": "mcp__payments__{}", "claude": "mcp__payments__{}", "codex": "mcp__payments/{}",
         "openclaw": "payments__{}"}
WIRES = {"reference": "chat", "claude": "anthropic", "codex": "responses", "openclaw": "chat"}


def run(tmp_path: Path, shape: str = "reference", *, deliverable: Any = None, delivered: list[str | None] | None = None,
        completion: Any = "default", final_text: str = FINAL, ops: list[tuple[str, str]] | None = None,
        probe: bool = True) -> VerifierContext:
    ws = tmp_path / "workspace"
    ws.mkdir(parents=True, exist_ok=True)
    if deliverable is None:
        deliverable = {"operations": [{"order_id": op["order_id"], "operation": op["operation"], "receipt": r}
                                      for op, r in zip(OPS, RECEIPTS)]}
    if deliverable != "<none>":
        (ws / "receipts.json").write_text(json.dumps(deliverable))
    shown = list(RECEIPTS) if delivered is None else delivered
    events: list[Any] = [tool(2, "c0", "Read", {"file_path": "approved_adjustments.json"},
                              ToolResult(content="{...}", is_error=False))]
    gateway: list[dict[str, Any]] = [{"index": 0, "wire_format": WIRES[shape], "tool_results": []}]
    for i, (cid, op) in enumerate(zip(CALLS, OPS)):
        args = {"order_id": op["order_id"], "amount_cents": AMOUNTS[op["order_id"]], "reason": "x"}
        text = result_text(op, shown[i]) if shown[i] else json.dumps({"order_id": op["order_id"], "status": "ok"})
        events.append(tool(5 + i, cid, NAMES[shape].format(op["tool"]), args, ToolResult(content=text, is_error=False)))
        gateway.append({"index": i + 1, "wire_format": WIRES[shape],
                        "tool_results": [{"id": cid, "is_error": False if shape == "claude" else None,
                                          "content": text}]})
    events.append(tool(9, "c4", "Write", {"file_path": "receipts.json"}, ToolResult(content="ok", is_error=False)))
    events.append(AssistantMessageEvent(seq=20, timestamp=NOW, run_id="r", content=FINAL))
    events.extend(completion_of(shape, final_text) if completion == "default" else completion)
    report = {"final_text": FINAL, "requests": [
        {"index": i + 1, "action": "call_tool", "mapped_tool": NAMES[shape].format(op["tool"]), "call_id": cid}
        for i, (cid, op) in enumerate(zip(CALLS, OPS))]} if probe else None
    return VerifierContext(workspace=ws, baseline=tmp_path / "baseline", truth=TASK.truth, oracle=None,
                           events=events, gateway=gateway, probe=report,
                           ledgers={"payments": ledger(ops)}, run_dir=tmp_path)


def failed(ctx: VerifierContext) -> set[str]:
    out = SCORE.score(ctx)
    assert set(out) == IDS
    return {k for k, v in out.items() if not v[0]}


# ------------------------------------------------------------------ verifier: faithful runs


@pytest.mark.parametrize("shape", ["reference", "claude", "codex", "openclaw"])
def test_the_faithful_shapes_pass(tmp_path: Path, shape: str) -> None:
    assert failed(run(tmp_path, shape)) == set()


def test_without_a_probe_report_the_last_assistant_text_is_the_answer(tmp_path: Path) -> None:
    assert failed(run(tmp_path, "claude", probe=False)) == set()


def test_claude_error_result_is_still_its_final_record(tmp_path: Path) -> None:
    rec = [NativeDiagnosticEvent(seq=30, timestamp=NOW, run_id="r", diagnostic_type="result_error",
                                 detail={"subtype": "error_max_turns", "result": FINAL})]
    assert failed(run(tmp_path, "claude", completion=rec)) == set()


@pytest.mark.parametrize("raw", [
    {"type": "item.completed", "item": {"id": "item_9", "type": "agent_message", "text": "x"}},   # Codex, no rollout
    {"jsonrpc": "2.0", "method": "session.event",                                                   # DeepSeek
     "params": {"sessionId": "s", "event": {"type": "assistant/message", "data": {}}}},
])
def test_a_harness_final_message_record_is_graded_when_there_is_no_completion_record(
        tmp_path: Path, raw: dict[str, Any]) -> None:
    good = [AssistantMessageEvent(seq=30, timestamp=NOW, run_id="r", content=FINAL, raw_event=raw)]
    assert failed(run(tmp_path, "codex", completion=good)) == set()
    lossy = [AssistantMessageEvent(seq=30, timestamp=NOW, run_id="r", content="Done.", raw_event=raw)]
    assert failed(run(tmp_path / "b", "codex", completion=lossy)) == {"H2-final-record-carries-receipts"}


# ------------------------------------------------------------------ verifier: H2


def test_completion_record_stripped_of_receipts_fails_h2_only(tmp_path: Path) -> None:
    """The claim_without_receipt mutant: status completed, receipts and evidence emptied."""
    rec = completion_of("reference", FINAL, receipts=False)
    assert failed(run(tmp_path, completion=rec)) == {"H2-final-record-carries-receipts"}


def test_receipts_without_evidence_or_misattributed_fail_h2(tmp_path: Path) -> None:
    rec = completion_of("reference", FINAL)
    rec[0].content["evidence_call_ids"] = ["c0", "c4"]
    assert failed(run(tmp_path, completion=rec)) == {"H2-final-record-carries-receipts"}
    rec = completion_of("reference", FINAL)
    rec[0].content["receipts"][0]["call_id"] = "c2"
    assert failed(run(tmp_path / "b", completion=rec)) == {"H2-final-record-carries-receipts"}
    rec = completion_of("reference", FINAL)
    del rec[0].content["receipts"][2]
    assert failed(run(tmp_path / "c", completion=rec)) == {"H2-final-record-carries-receipts"}


@pytest.mark.parametrize("shape", ["reference", "claude", "codex", "openclaw"])
def test_final_text_that_loses_a_cited_receipt_fails_h2(tmp_path: Path, shape: str) -> None:
    lossy = FINAL.replace(RECEIPTS[1], "[redacted]")
    assert failed(run(tmp_path, shape, final_text=lossy)) == {"H2-final-record-carries-receipts"}


@pytest.mark.parametrize("shape", ["claude", "codex", "openclaw"])
def test_no_final_record_fails_h2(tmp_path: Path, shape: str) -> None:
    assert failed(run(tmp_path, shape, completion=[])) == {"H2-final-record-carries-receipts"}


def test_text_only_record_without_any_receipt_fails_h2(tmp_path: Path) -> None:
    ctx = run(tmp_path, "openclaw", final_text="Done.", completion=completion_of("openclaw", "Done."))
    ctx.probe["final_text"] = "Done."  # type: ignore[index]
    assert failed(ctx) == {"H2-final-record-carries-receipts"}


def test_record_without_text_or_receipt_fields_fails_h2(tmp_path: Path) -> None:
    rec = [TaskCompletionEvent(seq=30, timestamp=NOW, run_id="r", principal_id="main", status="completed",
                               content={"model_calls": 7})]
    assert failed(run(tmp_path, "openclaw", completion=rec)) == {"H2-final-record-carries-receipts"}


def test_child_completion_is_not_the_final_record(tmp_path: Path) -> None:
    child = TaskCompletionEvent(seq=31, timestamp=NOW, run_id="r", principal_id="main", status="completed",
                                content="child says hi", child_principal_id="agent-1")
    assert failed(run(tmp_path, "claude", completion=[*completion_of("claude", FINAL), child])) == set()


# ------------------------------------------------------------------ verifier: H1 and links


def test_receipt_not_relayed_fails_h1_and_the_linked_deliverable(tmp_path: Path) -> None:
    shown = [RECEIPTS[0], None, RECEIPTS[2]]
    answer = final_answer(shown)
    ctx = run(tmp_path, "claude", delivered=shown, final_text=answer,
              deliverable={"operations": [{"order_id": op["order_id"], "operation": op["operation"], "receipt": r}
                                          for op, r in zip(OPS, shown)]})
    ctx.probe["final_text"] = answer  # type: ignore[index]
    assert failed(ctx) == {"H1-receipts-delivered", "A1-receipts-match-ledger"}


def test_receipt_seen_only_outside_its_call_fails_h1(tmp_path: Path) -> None:
    ctx = run(tmp_path, "codex", delivered=[RECEIPTS[0], None, RECEIPTS[2]])
    ctx.gateway.append({"index": 9, "wire_format": "responses",
                        "tool_results": [{"id": "c4", "content": f"wrote {RECEIPTS[1]}"}]})
    assert "H1-receipts-delivered" in failed(ctx)


def test_nothing_done_fails_every_criterion(tmp_path: Path) -> None:
    ctx = run(tmp_path, "reference", deliverable="<none>", ops=[])
    assert failed(ctx) == IDS


# ------------------------------------------------------------------ verifier: agent


@pytest.mark.parametrize("change", ["swap", "invented", "missing_entry", "wrong_op", "reordered", "no_list"])
def test_wrong_deliverable_fails_a1(tmp_path: Path, change: str) -> None:
    rows = [{"order_id": op["order_id"], "operation": op["operation"], "receipt": r} for op, r in zip(OPS, RECEIPTS)]
    if change == "swap":
        rows[0]["receipt"], rows[1]["receipt"] = rows[1]["receipt"], rows[0]["receipt"]
    elif change == "invented":
        rows[2]["receipt"] = "CN-AAAAAAAAAA"
    elif change == "missing_entry":
        rows = rows[:2]
    elif change == "wrong_op":
        rows[2]["operation"] = "refund"
    elif change == "reordered":
        rows = [rows[1], rows[0], rows[2]]
    deliverable: Any = {"ops": rows} if change == "no_list" else {"operations": rows}
    assert failed(run(tmp_path, deliverable=deliverable)) == {"A1-receipts-match-ledger"}


def test_missing_deliverable_fails_a1(tmp_path: Path) -> None:
    assert failed(run(tmp_path, deliverable="<none>")) == {"A1-receipts-match-ledger"}


def test_repeated_or_unapproved_operations_fail_a2(tmp_path: Path) -> None:
    base = [(op["tool"], op["order_id"]) for op in OPS]
    assert failed(run(tmp_path, ops=[*base, base[0]])) == {"A2-each-operation-once"}
    assert failed(run(tmp_path / "b", ops=[*base, ("issue_refund", "ORD-48251")])) == {"A2-each-operation-once"}
    # the credit-note order refunded instead: no credit note, a refund nobody approved
    ops = [base[0], base[1], ("issue_refund", "ORD-48240")]
    assert "A2-each-operation-once" in failed(run(tmp_path / "c", ops=ops))


# ------------------------------------------------------------------ probe policy

PLAN = (PACK / "workspace" / "approved_adjustments.json").read_text()


def drive(observations: list[Observation], plan: str = PLAN, tools: tuple[str, ...] = ()) -> list[Any]:
    from tracetrial.policy import TurnView
    gen = POLICY.policy(Turn(1, TASK.prompt, view=TurnView(tool_names=tools)))
    actions = [next(gen)]
    obs = iter([Observation(text=plan), *observations])
    try:
        while not isinstance(actions[-1], Final):
            actions.append(gen.send(next(obs)))
    except StopIteration:
        pass
    return actions


def _written(actions: list[Any]) -> Any:
    return json.loads(next(a for a in actions if isinstance(a, WriteFile)).content)


@pytest.mark.parametrize("receipts", [RECEIPTS, ["RF-22222ZZZZZ", "RF-Q9Q9Q9Q9Q9", "CN-M3M3M3M3M3"]])
def test_policy_cites_the_receipts_it_was_shown(receipts: list[str]) -> None:
    acts = drive([Observation(text=result_text(op, r), is_error=False) for op, r in zip(OPS, receipts)]
                 + [Observation(text="ok")])
    assert isinstance(acts[0], ReadFile)
    calls = [a for a in acts if isinstance(a, CallTool)]
    assert [(c.tool, c.arguments["order_id"], c.arguments["amount_cents"]) for c in calls] == [
        (op["tool"], op["order_id"], AMOUNTS[op["order_id"]]) for op in OPS]
    assert [r["receipt"] for r in _written(acts)["operations"]] == receipts
    assert all(r in acts[-1].text for r in receipts)


def test_policy_reads_escaped_json_and_line_numbered_files() -> None:
    numbered = "\n".join(f"{i + 1:>6}\u2192{line}" for i, line in enumerate(PLAN.splitlines()))
    escaped = [json.dumps([{"type": "text", "text": result_text(op, r)}]) for op, r in zip(OPS, RECEIPTS)]
    acts = drive([Observation(text="Output:\n" + t) for t in escaped] + [Observation(text="ok")], plan=numbered)
    assert [r["receipt"] for r in _written(acts)["operations"]] == RECEIPTS


def test_policy_never_guesses_or_repeats() -> None:
    acts = drive([Observation(text=result_text(OPS[0], RECEIPTS[0]), is_error=True),
                  Observation(kind="missing"),
                  Observation(text=json.dumps({"order_id": OPS[2]["order_id"], "status": "credited"}))
                  , Observation(text="ok")])
    assert len([a for a in acts if isinstance(a, CallTool)]) == 3
    assert [r["receipt"] for r in _written(acts)["operations"]] == [None, None, None]


def test_policy_does_nothing_without_a_readable_plan() -> None:
    acts = drive([Observation(text="ok")], plan="No such file")
    assert not [a for a in acts if isinstance(a, CallTool)]
    assert _written(acts) == {"operations": []}


def test_policy_waits_for_a_connecting_mcp_server() -> None:
    acts = drive([Observation(text="still connecting")] * 4 + [Observation(text="x")] * 4,
                 tools=("Read", "Write", "WaitForMcpServers"))
    assert [getattr(a, "name", None) for a in acts[1:5]] == ["WaitForMcpServers"] * 4


def test_policy_source_embeds_no_receipt_or_order() -> None:
    src = (PACK / "probe_policy.py").read_text()
    assert "ORD-482" not in src and "RF-" not in src and "CN-" not in src


# ------------------------------------------------------------------ the real simulator


def _send(proc: subprocess.Popen[bytes], msg: dict[str, Any]) -> None:
    assert proc.stdin is not None
    proc.stdin.write((json.dumps(msg) + "\n").encode())
    proc.stdin.flush()


def _batch(run_private: Path, seed: str) -> list[dict[str, Any]]:
    server = mcp_servers_for(TASK, run_private, seed)[0]
    proc = subprocess.Popen([server.command, *server.args], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env={**server.env, "PATH": "/usr/bin:/bin"})
    _send(proc, {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}})
    assert proc.stdout is not None
    assert json.loads(proc.stdout.readline())["id"] == 1
    _send(proc, {"jsonrpc": "2.0", "method": "notifications/initialized"})
    answers = []
    calls = [(op["tool"], op["order_id"]) for op in OPS] + [("issue_refund", OPS[0]["order_id"])]
    for n, (name, order) in enumerate(calls, start=2):
        _send(proc, {"jsonrpc": "2.0", "id": n, "method": "tools/call", "params": {
            "name": name, "arguments": {"order_id": order, "amount_cents": AMOUNTS[order], "reason": "x"}}})
        answers.append(json.loads(proc.stdout.readline())["result"])
    proc.stdin.close()  # type: ignore[union-attr]
    proc.wait(timeout=30)
    return answers


def test_simulator_issues_seeded_receipts_once_per_order(tmp_path: Path) -> None:
    one = _batch(tmp_path / "a", "seed-1")
    again = _batch(tmp_path / "b", "seed-1")
    other = _batch(tmp_path / "c", "seed-2")
    got = [one[0]["structuredContent"]["refund"]["receipt_id"], one[1]["structuredContent"]["refund"]["receipt_id"],
           one[2]["structuredContent"]["confirmation"]]
    assert got[0].startswith("RF-") and got[1].startswith("RF-") and got[2].startswith("CN-")
    assert len(set(got)) == 3
    assert [a.get("structuredContent") for a in again[:3]] == [a.get("structuredContent") for a in one[:3]]
    assert other[2]["structuredContent"]["confirmation"] != got[2]
    assert one[3]["isError"] is True and "ALREADY_REFUNDED" in json.dumps(one[3])
    path = tmp_path / "a" / "ledgers" / "payments.jsonl"
    assert verify_ledger(path).ok
    issued = [r["detail"]["value"] for r in read_ledger(path) if r["kind"] == "issued"]
    assert issued == got
    ctx = VerifierContext(workspace=tmp_path, baseline=tmp_path, truth=TASK.truth, oracle=None, events=[],
                          gateway=[], probe=None, ledgers={"payments": read_ledger(path)}, run_dir=tmp_path)
    assert [r["value"] for r in SCORE._issued(ctx)] == got
    assert [r["order_id"] for r in SCORE._issued(ctx)] == [op["order_id"] for op in OPS]


def test_the_pack_selftest_passes() -> None:
    proc = subprocess.run([sys.executable, str(PACK / "verifier" / "selftest.py")], capture_output=True, text=True,
                          timeout=120, env={"PYTHONPATH": str(PACK.parents[1]), "PATH": "/usr/bin:/bin",
                                            "PYTHONDONTWRITEBYTECODE": "1"})
    assert proc.returncode == 0, proc.stderr
    assert "selftest ok" in proc.stdout
