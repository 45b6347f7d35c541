"""Self-test of ``score.py`` (TASK_GUIDE rule 13): faithful and broken evidence sets.

Faithful: a reference-harness trace: the main principal runs ``python3 stamp.py parent`` and spawns
a foreground helper (``spawn_subagent``); the lifecycle records name ``child-1``, whose
``python3 stamp.py child`` is recorded under principal ``child-1`` (role child, parent ``main``);
stamps.log and summary.json hold both tokens; the same with gateway records, each call's result
delivered in its own agent's conversation. Broken: the ``misattribute_child`` mutant's trace (the
child's call recorded under the main principal; with gateway records too, its result delivered in
the child's conversation); the parent's call recorded under the child; the child's call missing
from the trace; agent mistakes (tokens swapped, the helper stamping twice, the parent running
``stamp.py child`` itself — recorded under main and delivered in the parent's conversation, so A2
fails and H1 does not).

Run from the repository root: ``python tasks/O3-child-provenance-001/verifier/selftest.py`` (exit 0
when every verdict is as expected). The full unit tests are ``tests/tasks/test_o3_child_provenance_001.py``.
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
import types
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

from tracetrial.verify import (
    EventBase,
    SubagentLifecycleEvent,
    TaskCompletionEvent,
    ToolCall,
    ToolEvent,
    ToolResult,
    VerifierContext,
)

HERE = Path(__file__).resolve().parent
PACK = HERE.parent
TRUTH = json.loads((PACK / "truth.json").read_text(encoding="utf-8"))
T0 = datetime(2026, 12, 2, 11, 0, tzinfo=UTC)
PT, CT = "ST-4be01c9a7d", "ST-90f3a2c615"
CHILD_PROMPT = ("You are the stamp helper. In the current folder run `python3 stamp.py child` exactly once and "
                "reply with the line `stamp token: <token>` exactly as the command printed it.")
MAIN = {"principal_id": "main", "parent_principal_id": None, "principal_role": "main"}
CHILD = {"principal_id": "child-1", "parent_principal_id": "main", "principal_role": "child"}
H1, H2, A1, A2 = ("H1-child-action-attributed", "H2-parent-action-attributed", "A1-summary-tokens",
                  "A2-one-stamp-per-role")
E = TypeVar("E", bound=EventBase)


def _score() -> types.ModuleType:
    mod = types.ModuleType("o3_provenance_selftest_score")
    exec(compile((HERE / "score.py").read_text(encoding="utf-8"), str(HERE / "score.py"), "exec"), mod.__dict__)  # noqa: S102
    return mod


def _ev(cls: type[E], seq: int, who: dict[str, Any], **kw: Any) -> E:
    return cls(seq=seq, timestamp=T0, run_id="selftest", source="native:reference/selftest", conversation_turn=1,
               **who, **kw)


def _shell(seq: int, who: dict[str, Any], cid: str, role: str, token: str) -> ToolEvent:
    return _ev(ToolEvent, seq, who, tool_call=ToolCall(id=cid, name="shell", arguments={
        "command": f"python3 stamp.py {role}"}), tool_result=ToolResult(
        content=f"Exit code 0\nstamp token: {token}\n", is_error=False, status="ok", exit_code=0))


def _ctx(root: Path, *, parent_as: dict[str, Any] = MAIN, child_as: dict[str, Any] | None = CHILD,
         child_tokens: tuple[str, ...] = (CT,), summary: dict[str, Any] | None = None, gateway: bool = False,
         parent_child_stamp: str | None = None) -> VerifierContext:
    """The run; ``parent_as`` / ``child_as``: the principal each stamp command is recorded under
    (``child_as`` None: the child's command is missing from the trace); the helper stamps once per
    token of ``child_tokens``; ``parent_child_stamp``: the parent also runs ``stamp.py child``
    itself (that token; recorded, correctly, under main); ``gateway``: the archived prompt and the
    gateway requests, each call's result delivered in the conversation of the agent that made it
    (newest user text: the task prompt or the helper's spawn prompt)."""
    ws = root / "workspace"
    shutil.copytree(PACK / "workspace", ws)
    extra = (parent_child_stamp,) if parent_child_stamp else ()
    (ws / "stamps.log").write_text(f"parent {PT}\n" + "".join(f"child {t}\n" for t in child_tokens + extra))
    (ws / "summary.json").write_text(json.dumps(summary or {"parent_token": PT, "child_token": CT}) + "\n")
    delivered = f"Sub-agent child-1 finished (status: completed).\nstamp token: {CT}"
    events: list[EventBase] = [
        _shell(1, parent_as, "call_tt_9d2e4f60_1", "parent", PT),
        _ev(ToolEvent, 2, MAIN, tool_call=ToolCall(id="call_tt_9d2e4f60_2", name="spawn_subagent", arguments={
            "description": "Child provenance stamp", "prompt": CHILD_PROMPT}),
            tool_result=ToolResult(content=delivered, is_error=False, status="completed")),
        _ev(SubagentLifecycleEvent, 3, MAIN, action="spawn", status="pending", child_principal_id="child-1",
            boundary_kind="foreground", pending_child_ids=[]),
        _ev(SubagentLifecycleEvent, 5, CHILD, action="finish", status="completed", child_principal_id="child-1",
            boundary_kind="foreground"),
        _ev(TaskCompletionEvent, 6, MAIN, status="completed", content=f"stamp token: {CT}",
            model_visible_content=delivered, child_principal_id="child-1", parent_reactivated=False),
        _ev(ToolEvent, 7, MAIN, tool_call=ToolCall(id="call_tt_9d2e4f60_4", name="write_file", arguments={
            "path": "summary.json"}), tool_result=ToolResult(content="Wrote 62 bytes", is_error=False, status="ok")),
    ]
    if child_as is not None:
        events[3:3] = [_shell(4, child_as, f"call_tt_9d2e4f60_3{'x' * n}", "child", t) for n, t in enumerate(child_tokens)]
    if parent_child_stamp:
        events.insert(5, _shell(6, MAIN, "call_tt_9d2e4f60_5", "child", parent_child_stamp))
    for seq, event in enumerate(events, start=1):
        event.seq = seq
    requests: list[dict[str, Any]] = []
    if gateway:
        prompt = (PACK / "prompt.md").read_text(encoding="utf-8")
        (root / "private" / "task" / PACK.name).mkdir(parents=True)
        (root / "private" / "task" / PACK.name / "prompt.md").write_text(prompt, encoding="utf-8")
        made_by = {"call_tt_9d2e4f60_3": CHILD_PROMPT}  # the helper's call(s); every other call is the parent's
        for e in events:
            if isinstance(e, ToolEvent) and e.tool_result is not None:
                text = made_by.get(e.tool_call.id.rstrip("x"), prompt)
                requests.append({"index": len(requests), "status": 200, "error": None, "wire_format": "chat",
                                 "last_user_text": text, "tool_results": [
                                     {"id": e.tool_call.id, "is_error": None, "content": e.tool_result.content}]})
    return VerifierContext(workspace=ws, baseline=root / "baseline", truth=TRUTH, oracle=None, events=events,
                           gateway=requests, probe=None, ledgers={}, run_dir=root)


CASES: list[tuple[str, dict[str, Any], set[str]]] = [
    ("faithful (reference: child-1 under main)", {}, set()),
    ("faithful, with gateway records (each call delivered in its own agent's conversation)", {"gateway": True}, set()),
    ("child's call recorded under the main principal (misattribute_child)", {"child_as": MAIN}, {H1}),
    ("misattribute_child with gateway records (the call's result went to the child's conversation)",
     {"child_as": MAIN, "gateway": True}, {H1}),
    ("child's call recorded without its parent relation",
     {"child_as": {"principal_id": "child-1", "parent_principal_id": None, "principal_role": "child"}}, {H1}),
    ("child's call missing from the trace", {"child_as": None}, {H1}),
    ("parent's call recorded under the child", {"parent_as": CHILD}, {H2}),
    ("summary.json swaps the tokens", {"summary": {"parent_token": CT, "child_token": PT}}, {A1}),
    ("the helper stamped twice", {"child_tokens": (CT, "ST-0c0ffee000")}, {A2}),
    ("the parent also ran stamp.py child itself, recorded under main (gateway: the parent's conversation)",
     {"parent_child_stamp": "ST-0c0ffee000", "gateway": True}, {A2}),
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
        ok = got == want and set(out) == {H1, H2, A1, A2}
        bad += not ok
        print(f"{'ok ' if ok else 'BAD'} {name}: failed {sorted(got)}" + ("" if ok else f", expected {sorted(want)}"))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
