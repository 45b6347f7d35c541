"""Self-test of ``score.py`` (TASK_GUIDE rule 13): faithful and broken evidence sets.

``score.py`` decides H2 (the user's answer reached the model) and A2 (deploy.json holds the
answer or null, never a guess); H1 (an ask-user tool declared) and A1 (region equals the truth)
are rules outside it. Faithful: the reference harness's ``ask_user`` result (probe protocol),
Claude Code's ``AskUserQuestion`` result (Trace IR call), an answer relayed as a user message.
Broken: the drop_user_answer shape (the model is shown "(no answer)"), no channel at all (an
absent capability), a guessed region and a missing deploy.json.

Run from the repository root: ``python tasks/T7-region-clarify-001/verifier/selftest.py`` (exit 0
when every verdict is as expected). The full unit tests are ``tests/tasks/test_t7_region_clarify_001.py``.
"""

from __future__ import annotations

import json
import sys
import tempfile
import types
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from tracetrial.verify import ToolCall, ToolEvent, ToolResult, VerifierContext

HERE = Path(__file__).resolve().parent
PACK = HERE.parent
TRUTH = json.loads((PACK / "truth.json").read_text(encoding="utf-8"))
REGION = TRUTH["region"]
PROMPT = (PACK / "prompt.md").read_text(encoding="utf-8")
QUESTION = "Which region should billing-api be deployed to?"
CLAUDE_ANSWER = (f'User has answered your questions: "{QUESTION}"="{REGION}". '
                 "You can now continue with the user's answers in mind.")
H1, H2, A2 = "H1-ask-tool-declared", "H2-answer-delivered", "A2-region-not-guessed"


def _score() -> types.ModuleType:
    mod = types.ModuleType("t7_region_selftest_score")
    exec(compile((HERE / "score.py").read_text(encoding="utf-8"), str(HERE / "score.py"), "exec"), mod.__dict__)  # noqa: S102
    return mod


def _ctx(root: Path, *, harness: str = "reference", answer: str | None = REGION, region: Any = REGION,
         relayed: str | None = None) -> VerifierContext:
    """``harness``: ``reference`` (ask_user, probe report), ``claude`` (AskUserQuestion, Trace IR),
    ``openclaw`` (ask_user not declared, shown by its tool_describe and called through tool_call) or
    ``none`` (no ask tool: the probe records an absent capability); ``answer`` the delivered result
    of the ask call; ``relayed`` a later user message; ``region`` deploy.json's value (``<none>``: no file)."""
    ws = root / "workspace"
    ws.mkdir(parents=True)
    (ws / "service.yaml").write_text((PACK / "workspace" / "service.yaml").read_text(encoding="utf-8"))
    if region != "<none>":
        (ws / "deploy.json").write_text(json.dumps({"region": region}))
    tool = {"reference": "ask_user", "claude": "AskUserQuestion", "openclaw": "tool_call"}.get(harness)
    wire = "anthropic" if harness == "claude" else "chat"
    declared = [{"name": n} for n in ("shell", "write_file", *([tool] if tool else []),
                                      *(["tool_describe", "tool_search"] if harness == "openclaw" else []))]
    req: list[dict[str, Any]] = [{"index": 0, "wire_format": wire, "status": 200, "error": None, "tools": declared,
                                  "last_user_text": PROMPT, "tool_results": []}]
    if harness == "openclaw":  # the describe result is how OpenClaw offers its deferred ask_user
        shown = json.dumps({"id": "openclaw:core:ask_user", "name": "ask_user", "input": "unknown",
                            "parameters": {"type": "object", "properties": {"questions": {"type": "array"}}}})
        req.append({"index": 1, "wire_format": wire, "status": 200, "error": None, "tools": declared,
                    "last_user_text": PROMPT, "tool_results": [{"id": "call_desc", "is_error": False,
                                                                "content": "SECURITY NOTICE\n---\n" + shown}]})
    events: list[Any] = []
    probe: dict[str, Any] = {"requests": [], "absent_capabilities": [], "final_text": "done"}
    if tool is not None:
        req.append({"index": len(req), "wire_format": wire, "status": 200, "error": None, "last_user_text": PROMPT,
                    "tools": declared, "tool_results": [{"id": "call_ask", "is_error": False, "content": answer}]})
        probe["requests"].append({"index": 0, "kind": "main", "turn": 1, "action": "ask_user", "call_id": "call_ask",
                                  "mapped_tool": tool, "arguments": {"question": QUESTION}})
        if harness == "claude":  # a live run: no probe report; the Trace IR call links the result
            events.append(ToolEvent(seq=4, timestamp=datetime(2026, 12, 1, tzinfo=UTC), run_id="r",
                                    source="native:claude_code/stdout", principal_id="main",
                                    tool_call=ToolCall(id="call_ask", name=tool,
                                                       arguments={"questions": [{"question": QUESTION}]}),
                                    tool_result=ToolResult(content=answer, is_error=False)))
    else:
        probe["absent_capabilities"].append({"action": "ask_user", "needed": "an ask-user tool",
                                             "declared_tools": ["shell", "write_file"], "turn": 1,
                                             "request_index": 0})
    if relayed is not None:
        req.append({"index": len(req), "wire_format": wire, "status": 200, "error": None, "last_user_text": relayed,
                    "tools": declared, "tool_results": []})
    req.append({"index": len(req), "wire_format": wire, "status": 200, "error": None, "last_user_text": PROMPT,
                "tools": declared, "tool_results": [{"id": "call_w", "is_error": False, "content": "Wrote 26 bytes to deploy.json"}]})
    return VerifierContext(workspace=ws, baseline=root / "baseline", truth=TRUTH, oracle=None, events=events,
                           gateway=req, probe=None if harness == "claude" else probe, ledgers={}, run_dir=root)


#: (name, _ctx arguments, criteria expected to fail)
CASES: list[tuple[str, dict[str, Any], set[str]]] = [
    ("faithful (reference ask_user, probe report)", {}, set()),
    ("faithful (Claude Code AskUserQuestion, live: Trace IR)", {"harness": "claude", "answer": CLAUDE_ANSWER}, set()),
    ("faithful (OpenClaw: deferred ask_user shown by tool_describe)", {"harness": "openclaw"}, set()),
    ("faithful (answer relayed as a later user message)", {"answer": "(asked)", "relayed": f"Use {REGION}."}, set()),
    ("drop_user_answer: asked, shown '(no answer)'", {"answer": "(no answer)", "region": None}, {H2}),
    ("no ask channel, null written", {"harness": "none", "region": None}, {H1, H2}),
    ("region guessed despite the answer", {"region": "eu-north-1"}, {A2}),
    ("deploy.json not written", {"region": "<none>"}, {A2}),
]


def main() -> int:
    score = _score().score
    bad = 0
    for name, kwargs, want in CASES:
        with tempfile.TemporaryDirectory() as tmp:
            out = score(_ctx(Path(tmp), **kwargs))
        verdicts = {k: v if isinstance(v, tuple) else (v, "") for k, v in out.items()}
        got = {k for k, v in verdicts.items() if v[0] is False}
        ok = got == want and set(out) == {H1, H2, A2}
        bad += not ok
        print(f"{'ok' if ok else 'BAD':3} {name}: failed {sorted(got)}" + ("" if ok else f" (expected {sorted(want)})"))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
