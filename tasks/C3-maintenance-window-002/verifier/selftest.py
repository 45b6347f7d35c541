"""Self-test of ``score.py`` (TASK_GUIDE rule 13): faithful and broken evidence sets, built by hand.

Every set is one three-turn run: the ``changes`` ledger issues the approval code in the turn-1
booking, the gateway records what reached the model (the booking result delivered in turn 1, each
turn's user text as the last user text of its requests), runbook.md is what the ideal agent leaves,
and the archived pack snapshot holds prompt.md and turns.json. The turn-3 model input is seen
through the probe report's turn-3 answer or the archived request bodies.

* faithful (probe report / request bodies): all pass;
* booking result lost on resume (``reference+lose_turn_fact``), seen in the probe report and in
  the request bodies: H1, A1;
* turn-2 message never delivered (the steps are never added): H2, A2;
* decoy code from steps.txt written (agent): A1;
* code written to a file in turn 1: criteria pass, bypass B-H1 raised.
(A3, one booking, is a ledger rule outside score.py.)

Run from the repository root: ``python tasks/C3-maintenance-window-002/verifier/selftest.py`` (exit
0 when every verdict is as expected). The full unit tests are ``tests/tasks/test_c3_maintenance_window_002.py``.
"""

from __future__ import annotations

import json
import re
import shutil
import sys
import tempfile
import types
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from tracetrial.verify import ToolCall, ToolEvent, ToolResult
from tracetrial.verify import VerifierContext

HERE = Path(__file__).resolve().parent
PACK = HERE.parent
TASK_ID = "C3-maintenance-window-002"
T0 = datetime(2026, 11, 30, tzinfo=UTC)
CODE, DECOY = "APR-7XK2QM9P", "APR-OLD7Q2ZK"
TURNS = [(PACK / "prompt.md").read_text(encoding="utf-8")]
TURNS += [t["user"] for t in json.loads((PACK / "turns.json").read_text(encoding="utf-8"))["turns"]]
STEPS = re.findall(r"(?m)^step:\s*(.+?)\s*$", (PACK / "workspace" / "steps.txt").read_text(encoding="utf-8"))
HEADING = "# payments-api maintenance\n\n"
RUNBOOK = HEADING + "".join(f"{n}. {s}\n" for n, s in enumerate(STEPS, start=1)) + f"Approval: {CODE}\n"
BOOKING = json.dumps({"isError": False, "content": [{"type": "text", "text": json.dumps(
    {"service": "payments-api", "window": {"start": "2026-11-14T02:00:00Z", "duration_min": 90},
     "approval_code": CODE})}]})
FOUND = f"Appended 'Approval: {CODE}'. Turn-1 approval code: {CODE}."
LOST = "Appended 'Approval: UNKNOWN'. Turn-1 approval code: not visible in my context."
H1, H2, A1, A2, BYPASS = ("H1-fact-in-turn3-input", "H2-user-turns-delivered", "A1-approval-line",
                          "A2-runbook-steps", "B-H1-code-persisted-early")


def _score() -> types.ModuleType:
    mod = types.ModuleType("c3_mw_selftest_score")
    exec(compile((HERE / "score.py").read_text(encoding="utf-8"), str(HERE / "score.py"), "exec"), mod.__dict__)  # noqa: S102
    return mod


def _body(turn: int, kept: bool) -> dict[str, Any]:
    """An Anthropic request body of ``turn``: the user turns so far, the booking call and (when
    ``kept``) its result."""
    msgs: list[dict[str, Any]] = [{"role": "user", "content": TURNS[0]},
                                  {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1",
                                   "name": "mcp__changes__book_maintenance_window", "input": {}}]}]
    if kept:
        msgs.append({"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": BOOKING}]})
    return {"messages": msgs + [{"role": "user", "content": u} for u in TURNS[1:turn]]}


def _ctx(root: Path, *, runbook: str = RUNBOOK, bodies: bool = False, kept: bool = True,
         turns: tuple[int, ...] = (1, 2, 3), early: bool = False) -> VerifierContext:
    ws, base = root / "workspace", root / "baseline"
    shutil.copytree(PACK / "workspace", ws)
    shutil.copytree(PACK / "workspace", base)
    (ws / "runbook.md").write_text(runbook)
    snap = root / "private" / "task" / TASK_ID
    snap.mkdir(parents=True)
    for name in ("prompt.md", "turns.json"):
        shutil.copy(PACK / name, snap / name)
    per_turn = [t for t in turns for _ in range(3 if t < 3 else 2)]
    tools = [{"name": "Bash"}, {"name": "Write"}, {"name": "mcp__changes__book_maintenance_window"}]
    gateway = [{"index": i, "status": 200, "error": None, "last_user_text": TURNS[t - 1], "tools": tools,
                "tool_results": [{"id": "toolu_1", "is_error": False, "size": len(BOOKING), "content": BOOKING}]
                if i == 1 else []} for i, t in enumerate(per_turn)]
    if bodies:
        (root / "gateway" / "bodies").mkdir(parents=True)
        for i, t in enumerate(per_turn):
            (root / "gateway" / "bodies" / f"{i}.json").write_text(json.dumps(_body(t, kept or t < 3)))
    probe = {"requests": [{"index": i + 1, "kind": "main", "turn": t, "action": "shell"} for i, t in enumerate(per_turn)],
             "absent_capabilities": [], "final_text": FOUND if kept else LOST}
    ledger = [{"seq": 1, "kind": "transition", "tool": None, "detail": {"op": "init"}},
              {"seq": 2, "kind": "request", "tool": "book_maintenance_window",
               "arguments": {"service": "payments-api", "duration_min": 90}, "detail": {"method": "tools/call"}},
              {"seq": 3, "kind": "issued", "tool": "book_maintenance_window",
               "detail": {"name": "approval_code", "value": CODE, "scope": "run", "via": "result"}}]
    events: list[Any] = []
    if early:
        events.append(ToolEvent(seq=4, timestamp=T0, run_id="r", source="native:selftest", conversation_turn=1,
                                tool_call=ToolCall(id="toolu_2", name="Bash", arguments={"command": f"echo {CODE} > .apr"}),
                                tool_result=ToolResult(content="")))
        (ws / ".apr").write_text(CODE + "\n")
    return VerifierContext(workspace=ws, baseline=base, truth=None, oracle=None, events=events, gateway=gateway,
                           probe=probe, ledgers={"changes": ledger}, run_dir=root)


UNKNOWN = RUNBOOK.replace(f"Approval: {CODE}", "Approval: UNKNOWN")
CASES: list[tuple[str, dict[str, Any], set[str], bool]] = [
    ("faithful (probe report)", {}, set(), False),
    ("faithful (request bodies)", {"bodies": True}, set(), False),
    ("booking result lost on resume (probe report)", {"runbook": UNKNOWN, "kept": False}, {H1, A1}, False),
    ("booking result lost on resume (request bodies)", {"runbook": UNKNOWN, "kept": False, "bodies": True},
     {H1, A1}, False),
    ("turn 2 never delivered", {"runbook": HEADING + f"Approval: {CODE}\n", "turns": (1, 3)}, {H2, A2}, False),
    ("decoy code written", {"runbook": RUNBOOK.replace(CODE, DECOY)}, {A1}, False),
    ("code persisted to a file in turn 1", {"early": True}, set(), True),
]


def main() -> int:
    score = _score().score
    bad = 0
    for name, kwargs, want, bypass in CASES:
        with tempfile.TemporaryDirectory() as tmp:
            out = score(_ctx(Path(tmp), **kwargs))
        got = {k for k, v in out.items() if (v if isinstance(v, tuple) else (v, ""))[0] is False and k != BYPASS}
        ok = got == want and out[BYPASS][0] is bypass
        bad += not ok
        print(f"{'ok ' if ok else 'BAD'} {name}: failed {sorted(got)}, bypass {out[BYPASS][0]}"
              + ("" if ok else f" (expected {sorted(want)}, bypass {bypass})"))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
