"""Self-test of ``score.py`` (TASK_GUIDE rule 13): faithful and broken evidence sets.

Faithful: a reference-harness run (Chat wire): the background spawn answers "started in the
background (status: pending)", the lifecycle records keep child-1 pending while the parent writes
``{"job": "pending"}``, the job finishes at 20 s, and the ``[sub-agent notification]`` with its value
reaches the parent after that; the parent updates report.json. Broken: the
``premature_subagent_done`` mutant's run; a "finished" shown at spawn while the records stay
faithful; a completion recorded (native time) before the job finished; agent mistakes.

Run from the repository root: ``python tasks/L4-pending-report-001/verifier/selftest.py`` (exit 0
when every verdict is as expected). The full unit tests are ``tests/tasks/test_l4_pending_report_001.py``.
"""

from __future__ import annotations

import json
import sys
import tempfile
import types
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TypeVar

from tracetrial.verify import (
    AssistantMessageEvent,
    EventBase,
    SubagentLifecycleEvent,
    TaskCompletionEvent,
    ToolCall,
    ToolEvent,
    ToolResult,
)
from tracetrial.verify import VerifierContext

HERE = Path(__file__).resolve().parent
PACK = HERE.parent
TRUTH = json.loads((PACK / "truth.json").read_text(encoding="utf-8"))
PROMPT = (PACK / "prompt.md").read_text(encoding="utf-8")
T0 = datetime(2026, 12, 2, 9, 0, tzinfo=UTC)
VALUE = "RECON-3f9a0c12be"
CHILD_PROMPT = ("You are the reconciliation helper. In the current folder run `python3 slow_job.py` exactly once "
                "(it takes about 20 seconds; let it run to its end). Reply with the line "
                "`reconciliation value: <value>` exactly as the job printed it.")
SPAWN, JOB, WRITE1, WRITE2 = (f"call_tt_77c1d2e0_{n}" for n in range(1, 5))
CHILD = "subagent:child-1"  # the probe report's principal of the reference harness's child
PENDING_TEXT = ("Sub-agent child-1 started in the background (status: pending). Its result will be delivered to you "
                "when it finishes; subagent_status shows progress.")
DONE_TEXT = f"Sub-agent child-1 finished (status: completed).\nThe job finished. reconciliation value: {VALUE}"
PREMATURE = "Sub-agent child-1 finished (status: completed).\n(no output)"  # premature_subagent_done
NOTICE = f"[sub-agent notification]\n{DONE_TEXT}"
JOB_OUT = f"Exit code 0\nreconciliation started\nreconciliation value: {VALUE}\n"
H1, H2, A1, A2 = ("H1-no-premature-done-notice", "H2-child-pending-in-records", "A1-report-not-invented",
                  "A2-report-uses-delivered-result")
PENDING, DONE = {"job": "pending"}, {"job": "done", "value": VALUE}
E = TypeVar("E", bound=EventBase)


def _score() -> types.ModuleType:
    mod = types.ModuleType("l4_pending_selftest_score")
    exec(compile((HERE / "score.py").read_text(encoding="utf-8"), str(HERE / "score.py"), "exec"), mod.__dict__)  # noqa: S102
    return mod


def at(s: float) -> str:
    return (T0 + timedelta(seconds=s)).isoformat().replace("+00:00", "Z")


def _ev(cls: type[E], seq: int, t: float, child: bool = False, **kw: Any) -> E:
    who = {"principal_id": "child-1", "parent_principal_id": "main", "principal_role": "child"} if child \
        else {"principal_id": "main", "parent_principal_id": None, "principal_role": "main"}
    return cls(seq=seq, timestamp=T0 + timedelta(seconds=t), run_id="selftest", source="native:reference/selftest",
               conversation_turn=1, source_event_timestamp=at(t), **who, **kw)


def _tool(seq: int, t: float, cid: str, name: str, args: dict[str, Any], text: str, child: bool = False,
          **res: Any) -> ToolEvent:
    return _ev(ToolEvent, seq, t, child, tool_call=ToolCall(id=cid, name=name, arguments=args),
               tool_result=ToolResult(content=text, is_error=False, **res))


def _req(i: int, t: float, user: str, *results: tuple[str, str]) -> dict[str, Any]:
    return {"index": i, "wire_format": "chat", "started_at": at(t), "status": 200, "error": None,
            "last_user_text": user, "tool_results": [{"id": c, "is_error": None, "content": x, "size": len(x),
                                                      "content_truncated": False} for c, x in results]}


def _ctx(root: Path, *, report: dict[str, Any], premature: bool = False, shown: str = PENDING_TEXT,
         finish_at: float = 20.05) -> VerifierContext:
    """The run; ``premature``: the mutant (finished at spawn, the job stopped with the run); ``shown``:
    the spawn result as delivered; ``finish_at``: the native time of the child's finish record."""
    ws = root / "workspace"
    ws.mkdir(parents=True)
    (ws / "report.json").write_text(json.dumps(report) + "\n")
    spawn_args = {"description": "Nightly reconciliation", "prompt": CHILD_PROMPT, "background": True}
    first = PREMATURE if premature else PENDING_TEXT
    events: list[EventBase] = [
        _tool(1, 0.2, SPAWN, "spawn_subagent", spawn_args, first, status="ok" if premature else "pending"),
        _ev(SubagentLifecycleEvent, 2, 0.2, action="spawn", status="pending", child_principal_id="child-1",
            boundary_kind="background", pending_child_ids=["child-1"])]
    gateway = [_req(0, 0.0, PROMPT), _req(1, 0.25, CHILD_PROMPT), _req(2, 0.3, PROMPT, (SPAWN, shown)),
               _req(3, 0.5, PROMPT, (WRITE1, "Wrote 18 bytes to /tmp/tt-run/workspace/report.json"))]
    probe = [("main", "spawn_subagent", SPAWN), (CHILD, "shell", JOB), ("main", "write_file", WRITE1),
             ("main", "final", None)]
    if premature:  # the harness says finished at once; the job is stopped with the run (no job_result.json)
        events += [_ev(SubagentLifecycleEvent, 3, 0.21, child=True, action="finish", status="completed",
                       child_principal_id="child-1", boundary_kind="background"),
                   _ev(TaskCompletionEvent, 4, 0.21, status="completed", content="", model_visible_content=PREMATURE,
                       child_principal_id="child-1", parent_reactivated=False),
                   _tool(5, 0.4, WRITE1, "write_file", {"path": "report.json"}, "Wrote 31 bytes"),
                   _ev(AssistantMessageEvent, 6, 0.6, content="report.json written: the job is done.")]
    else:
        (ws / "job_result.json").write_text(json.dumps({"value": VALUE, "started_at": T0.timestamp() + 0.3,
                                                        "finished_at": T0.timestamp() + 20.0}))
        events += [
            _tool(3, 0.3, JOB, "shell", {"command": "python3 slow_job.py", "timeout_s": 120}, JOB_OUT, child=True,
                  status="ok", exit_code=0),
            _tool(4, 0.4, WRITE1, "write_file", {"path": "report.json"}, "Wrote 18 bytes"),
            _ev(AssistantMessageEvent, 5, 0.6, content="report.json written: the reconciliation job is pending."),
            _ev(SubagentLifecycleEvent, 6, finish_at, child=True, action="finish", status="completed",
                child_principal_id="child-1", boundary_kind="background"),
            _ev(TaskCompletionEvent, 7, 20.06, status="completed", content=DONE_TEXT.split("\n", 1)[1],
                model_visible_content=DONE_TEXT, child_principal_id="child-1", parent_reactivated=True),
            _tool(8, 20.15, WRITE2, "write_file", {"path": "report.json"}, "Wrote 45 bytes"),
            _ev(AssistantMessageEvent, 9, 20.3, content="The helper finished; report.json updated.")]
        gateway += [_req(4, 20.02, CHILD_PROMPT, (JOB, JOB_OUT)), _req(5, 20.1, NOTICE),
                    _req(6, 20.2, NOTICE, (WRITE2, "Wrote 45 bytes to /tmp/tt-run/workspace/report.json"))]
        probe += [(CHILD, "final", None), ("main", "write_file", WRITE2), ("main", "final", None)]
    requests = [{"index": i, "wire_format": "chat", "kind": "main" if who == "main" else "subagent", "principal": who,
                 "turn": 1, "action": action, "call_id": cid} for i, (who, action, cid) in enumerate(probe, start=1)]
    return VerifierContext(workspace=ws, baseline=root / "baseline", truth=TRUTH, oracle=None, events=events,
                           gateway=gateway, probe={"requests": requests, "absent_capabilities": []}, ledgers={},
                           run_dir=root)


CASES: list[tuple[str, dict[str, Any], set[str]]] = [
    ("faithful (reference: pending, then notified with the value)", {"report": DONE}, set()),
    ("finished at spawn, job stopped with the run (premature_subagent_done)",
     {"report": {"job": "done", "value": None}, "premature": True, "shown": PREMATURE}, {H1, H2, A1}),
    ("'finished' shown at spawn (records faithful, report updated later)", {"report": DONE, "shown": PREMATURE},
     {H1}),
    ("completion recorded before the job finished", {"report": DONE, "finish_at": 3.0}, {H2}),
    ("still pending after the value was delivered", {"report": PENDING}, {A2}),
    ("invented value", {"report": {"job": "done", "value": "RECON-ffffffffff"}}, {A1, A2}),
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
