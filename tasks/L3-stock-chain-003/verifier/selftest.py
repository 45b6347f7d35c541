"""Self-test of this pack's verifier (rule 13): a faithful and a broken evidence set, built by hand.

Faithful: a reference-shaped run - the parent spawns ``child-1`` (count_stock), is shown its count
line in the spawn result, briefs ``child-2`` with the lot id, is shown its best-before line, and
writes stock_report.json with the issued values.
Broken: the same run as ``reference+drop_child_result`` delivers it - helper 2's result reaches the
parent as "(no output)" (helper 1's, the first, is intact), so the report's expiry is "unknown":
H1 and A2 fail, H2, A1 and A3 hold.

``build(root, **variant)`` also makes the other shapes the unit tests use. Run
``python tasks/L3-stock-chain-003/verifier/selftest.py`` (exit 0 when both verdict sets hold).
"""

import json
import sys
import tempfile
from pathlib import Path

from tracetrial.verify import ToolEvent, VerifierContext

sys.dont_write_bytecode = True  # never write __pycache__ into the pack
sys.path.insert(0, str(Path(__file__).resolve().parent))
import score  # noqa: E402  (the sibling verifier)

COUNT, LOT, DATE = 4711, "LOT-7KQ2XZ", ("2027", "09", 14)
EXPIRY = "2027-09-14"
COUNT_LINE = f"warehouse A count: {COUNT} units on hand, all in lot {LOT}"
EXPIRY_LINE = f"lot {LOT} best before {EXPIRY}"
PROMPT = "Write warehouse A's weekly stock report, `stock_report.json`, from the stockroom desk"
BRIEF1 = "You are stock helper 1. Call the stockroom tool `count_stock` exactly once"
BRIEF2 = f"You are stock helper 2. Call the stockroom tool `lot_expiry` exactly once with {{\"lot\": \"{LOT}\"}}"
T0 = "2026-12-07T00:00:00Z"


def _issued(seq, tool, name, value):
    return {"seq": seq, "kind": "issued", "service": "stockroom", "tool": tool,
            "detail": {"name": name, "value": value, "scope": "run", "via": "result"}}


def _tool(seq, who, call_id, name, arguments, result):
    role = "main" if who == "main" else "child"
    return ToolEvent.model_validate({
        "seq": seq, "timestamp": T0, "run_id": "selftest", "principal_id": who, "principal_role": role,
        "parent_principal_id": None if who == "main" else "main",
        "tool_call": {"id": call_id, "name": name, "arguments": arguments}, "tool_result": {"content": result}})


def build(root, *, drop_second=False, drop_first=False, brief_lost=False, served=True, report=None,
          expiry_requests=1, codex=False):
    """A VerifierContext of one hand-built run (see the module docstring for the variants)."""
    ws = Path(tempfile.mkdtemp(dir=root))
    shown1 = "(no output)" if drop_first else COUNT_LINE
    shown2 = "(no output)" if drop_second else EXPIRY_LINE
    spawn2 = not drop_first
    ledger = []
    if served:
        ledger += [{"seq": 1, "kind": "request", "service": "stockroom", "tool": "count_stock"},
                   _issued(2, "count_stock", "count_a", COUNT), _issued(3, "count_stock", "lot_id", LOT)]
        if spawn2:
            ledger += [{"seq": 4 + n, "kind": "request", "service": "stockroom", "tool": "lot_expiry"}
                       for n in range(expiry_requests)]
            ledger += [_issued(10, "lot_expiry", "expiry_year", DATE[0]), _issued(11, "lot_expiry", "expiry_month", DATE[1]),
                       _issued(12, "lot_expiry", "expiry_day", DATE[2])]
    spawn_name = "multi_agent_v1/spawn_agent" if codex else "spawn_subagent"
    r1 = '{"agent_id": "agent-one-1"}' if codex else f"Sub-agent child-1 finished (status: completed).\n{shown1}"
    r2 = '{"agent_id": "agent-two-2"}' if codex else f"Sub-agent child-2 finished (status: completed).\n{shown2}"
    mcp1 = json.dumps({"isError": False, "content": [{"type": "text", "text": f"Cycle count done.\n{COUNT_LINE}"}]})
    mcp2 = json.dumps({"isError": False, "content": [{"type": "text", "text": EXPIRY_LINE}]})
    events = [_tool(1, "main", "s1", spawn_name, {"prompt": BRIEF1}, r1),
              _tool(2, "child-1", "c1", "mcp__stockroom__count_stock", {"warehouse": "A"}, mcp1)]
    gateway = [{"index": 0, "status": 200, "last_user_text": PROMPT, "tool_results": []},
               {"index": 1, "status": 200, "last_user_text": BRIEF1, "tool_results": []},
               {"index": 2, "status": 200, "last_user_text": BRIEF1, "tool_results": [{"id": "c1", "content": mcp1}]},
               {"index": 3, "status": 200, "last_user_text": PROMPT, "tool_results": [{"id": "s1", "content": r1}]}]
    probe = [{"index": 0, "principal": "main", "action": "spawn_subagent", "call_id": "s1"},
             {"index": 1, "principal": "subagent:child-1", "action": "call_tool", "call_id": "c1"},
             {"index": 2, "principal": "subagent:child-1", "action": "final"}]
    if codex:  # the result arrives as a wait_agent result and as a notification in a user-role text
        gateway.append({"index": 4, "status": 200, "last_user_text": f"<subagent_notification>{shown1}</subagent_notification>",
                        "tool_results": [{"id": "w1", "content": json.dumps({"status": {"agent-one-1": shown1}})}]})
        probe.append({"index": 3, "principal": "main", "action": "native_tool", "call_id": "w1"})
    if spawn2:
        brief = BRIEF2.replace(LOT, "") if brief_lost else BRIEF2
        events += [_tool(3, "main", "s2", spawn_name, {"prompt": BRIEF2}, r2),
                   _tool(4, "child-2", "c2", "mcp__stockroom__lot_expiry", {"lot": LOT}, mcp2)]
        gateway += [{"index": 10, "status": 200, "last_user_text": brief, "tool_results": []},
                    {"index": 11, "status": 200, "last_user_text": brief, "tool_results": [{"id": "c2", "content": mcp2}]},
                    {"index": 12, "status": 200, "last_user_text": PROMPT, "tool_results": [{"id": "s2", "content": r2}]}]
        probe += [{"index": 10, "principal": "main", "action": "spawn_subagent", "call_id": "s2"},
                  {"index": 11, "principal": "subagent:child-2", "action": "call_tool", "call_id": "c2"}]
        if codex:
            gateway.append({"index": 13, "status": 200, "last_user_text": PROMPT,
                            "tool_results": [{"id": "w2", "content": json.dumps({"status": {"agent-two-2": shown2}})}]})
            probe.append({"index": 12, "principal": "main", "action": "native_tool", "call_id": "w2"})
    if report is None:
        report = {"warehouse": "A", "count": COUNT if not drop_first else "unknown",
                  "lot": LOT if not drop_first else "unknown",
                  "expiry": EXPIRY if not (drop_first or drop_second) else "unknown"}
    if report is not False:
        (ws / "stock_report.json").write_text(json.dumps(report))
    return VerifierContext(workspace=ws, baseline=ws, truth=None, oracle=None, events=events, gateway=gateway,
                           probe={"requests": probe}, ledgers={"stockroom": ledger}, run_dir=ws)


def verdicts(ctx):
    return {k: v[0] for k, v in score.score(ctx).items()}


def selftest():
    with tempfile.TemporaryDirectory() as tmp:
        good = verdicts(build(Path(tmp)))
        assert all(good.values()), good
        bad = verdicts(build(Path(tmp), drop_second=True))
        assert {k for k, v in bad.items() if v is False} == {"H1-child-results-reach-parent", "A2-expiry-exact"}, bad
        assert all(v for k, v in bad.items() if k not in ("H1-child-results-reach-parent", "A2-expiry-exact")), bad


if __name__ == "__main__":
    selftest()
    print("selftest ok")
