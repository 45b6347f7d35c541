"""Self-test of ``score.py`` (TASK_GUIDE rule 13): faithful and broken evidence sets.

Faithful: the ticket desk refuses the close of TCK-1042 with ``isError`` and the structured error
``{code: E-LOCKED-…, message: ticket locked by change freeze}`` (ledger: the issued ``lock_code``);
the reference harness relays the MCP result as JSON on the Chat wire (``"isError": true``) and
records it as an error; close.json reports the lock; turn 2 resumes and leaves the ticket alone.
Also Claude Code's shape (the server's text, ``is_error`` on the Anthropic wire). Broken: the
``hide_tool_error`` mutant's run; the code dropped from the delivered result; the refusal recorded
as a success; a wrong close.json.

Run from the repository root: ``python tasks/O1-ticket-close-error-001/verifier/selftest.py`` (exit 0
when every verdict is as expected). The full unit tests are ``tests/tasks/test_o1_ticket_close_error_001.py``.
"""

from __future__ import annotations

import json
import sys
import tempfile
import types
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from tracetrial.verify import EventBase, ToolCall, ToolEvent, ToolResult
from tracetrial.verify import VerifierContext

HERE = Path(__file__).resolve().parent
PACK = HERE.parent
TRUTH = json.loads((PACK / "truth.json").read_text(encoding="utf-8"))
TICKET, CODE = TRUTH["ticket_id"], "E-LOCKED-418207"
T0 = datetime(2026, 12, 2, 10, 0, tzinfo=UTC)
ERROR = json.dumps({"error": {"code": CODE, "message": TRUTH["lock_message"]}}, ensure_ascii=False)
TICKET_JSON = json.dumps({"id": TICKET, "title": "Printer queue stalls after driver update", "status": "open",
                          "assignee": "desk-2"})
H1, H2, A1 = "H1-error-flag-and-code-delivered", "H2-error-recorded", "A1-close-json-reports-lock"
GOOD = {"closed": False, "error_code": CODE}


def _score() -> types.ModuleType:
    mod = types.ModuleType("o1_ticket_selftest_score")
    exec(compile((HERE / "score.py").read_text(encoding="utf-8"), str(HERE / "score.py"), "exec"), mod.__dict__)  # noqa: S102
    return mod


def relay(is_error: bool, text: str, structured: dict[str, Any]) -> str:
    """The reference harness's model-facing text of an MCP result (its JSON)."""
    return json.dumps({"isError": is_error, "content": [{"type": "text", "text": text}],
                       "structuredContent": structured}, ensure_ascii=False)


def _ctx(root: Path, *, wire: str = "chat", flag: bool = True, shown: str | None = None,
         recorded: ToolResult | None = None, close: dict[str, Any] = GOOD) -> VerifierContext:
    """One run: the close result relayed with error flag ``flag`` (or the text ``shown``), recorded
    as ``recorded`` in the Trace IR (default: as relayed), close.json = ``close``."""
    turns = [(PACK / "prompt.md").read_text(encoding="utf-8"),
             json.loads((PACK / "turns.json").read_text(encoding="utf-8"))["turns"][0]["user"]]
    ws = root / "workspace"
    ws.mkdir(parents=True)
    (ws / "close.json").write_text(json.dumps(close) + "\n")
    anthropic = wire == "anthropic"
    lookup = TICKET_JSON if anthropic else relay(False, TICKET_JSON, json.loads(TICKET_JSON))
    if shown is None:
        shown = ERROR if anthropic else relay(flag, ERROR, json.loads(ERROR))
    recorded = recorded or ToolResult(content=shown, is_error=flag, status="error" if flag else "ok")
    ids = [f"{'toolu' if anthropic else 'call'}_tt_c0ffee12_{n}" for n in (1, 2, 3)]
    calls = [(ids[0], "get_ticket", lookup, ToolResult(content=lookup, is_error=False, status="ok")),
             (ids[1], "close_ticket", shown, recorded),
             (ids[2], "Write" if anthropic else "write_file", "Wrote 48 bytes to close.json",
              ToolResult(content="Wrote 48 bytes to close.json", is_error=False, status="ok"))]
    events: list[EventBase] = []
    gateway: list[dict[str, Any]] = [{"index": 0, "wire_format": wire, "status": 200, "error": None,
                                      "last_user_text": turns[0], "tool_results": []}]
    probe = []
    for n, (cid, tool, text, rec) in enumerate(calls, start=1):
        name = tool if tool in ("Write", "write_file") else f"mcp__tickets__{tool}"
        args = {"path": "close.json", "content": json.dumps(close)} if tool in ("Write", "write_file") \
            else {"ticket_id": TICKET}
        events.append(ToolEvent(seq=2 * n, timestamp=T0, run_id="selftest", conversation_turn=1, principal_id="main",
                                principal_role="main", tool_call=ToolCall(id=cid, name=name, arguments=args),
                                tool_result=rec))
        gateway.append({"index": n, "wire_format": wire, "status": 200, "error": None, "last_user_text": turns[0],
                        "tool_results": [{"id": cid, "is_error": (n == 2 and flag) if anthropic else None,
                                          "content": text, "size": len(text.encode()), "content_truncated": False}]})
        probe.append({"index": n, "wire_format": wire, "kind": "main", "principal": "main", "turn": 1, "step": n - 1,
                      "action": "write_file" if n == 3 else "call_tool", "mapped_tool": name, "call_id": cid})
    gateway.append({"index": 4, "wire_format": wire, "status": 200, "error": None, "last_user_text": turns[1],
                    "tool_results": []})  # turn 2: resumed, the locked ticket left alone
    ledger = [{"seq": 1, "kind": "transition", "tool": None, "detail": {"op": "init"}},
              {"seq": 2, "kind": "request", "tool": "get_ticket", "arguments": {"ticket_id": TICKET}, "detail": {}},
              {"seq": 3, "kind": "request", "tool": "close_ticket", "arguments": {"ticket_id": TICKET}, "detail": {}},
              {"seq": 4, "kind": "issued", "tool": "close_ticket",
               "detail": {"name": "lock_code", "value": CODE, "scope": "run", "via": "result"}},
              {"seq": 5, "kind": "error", "tool": "close_ticket", "detail": json.loads(ERROR)["error"]}]
    return VerifierContext(workspace=ws, baseline=root / "baseline", truth=TRUTH, oracle=None, events=events,
                           gateway=gateway, probe={"requests": probe, "absent_capabilities": []},
                           ledgers={"tickets": ledger}, run_dir=root)


CASES: list[tuple[str, dict[str, Any], set[str]]] = [
    ("faithful (reference, Chat wire: isError true in the relayed JSON)", {}, set()),
    ("faithful (Claude Code: is_error on the Anthropic wire)", {"wire": "anthropic"}, set()),
    ("refusal relayed as a success (hide_tool_error)",
     {"flag": False, "close": {"closed": True, "error_code": None}}, {H1, H2, A1}),
    ("code dropped from the delivered result",
     {"shown": "Error: close_ticket failed (ticket locked by change freeze)",
      "recorded": ToolResult(content=ERROR, is_error=True, status="error"),
      "close": {"closed": False, "error_code": None}}, {H1, A1}),
    ("refusal delivered, recorded as a success",
     {"recorded": ToolResult(content=ERROR, is_error=False, status="ok")}, {H2}),
    ("close.json claims the ticket closed", {"close": {"closed": True, "error_code": CODE}}, {A1}),
]


def _failed(out: dict[str, Any]) -> set[str]:
    return {k for k, v in out.items() if (v if isinstance(v, bool) else v[0]) is False}


def main() -> int:
    score = _score().score
    bad = 0
    for name, kwargs, want in CASES:
        with tempfile.TemporaryDirectory() as tmp:
            out = score(_ctx(Path(tmp), **kwargs))
        got = _failed(out)
        ok = got == want and set(out) == {H1, H2, A1}
        bad += not ok
        print(f"{'ok ' if ok else 'BAD'} {name}: failed {sorted(got)}" + ("" if ok else f", expected {sorted(want)}"))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
