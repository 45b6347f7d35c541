"""Self-test of ``score.py`` (TASK_GUIDE rule 13): faithful and broken evidence sets, built by hand in
the reference harness's shapes (chat wire, ``child-N`` principals, native record times).

Run from the repository root: ``python tasks/L4-split-audit-003/verifier/selftest.py`` (exit 0 when
every verdict is as expected). The unit tests ``tests/tasks/test_l4_split_audit_003.py`` run the same
cases and the record shapes of the real harnesses.
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
import types
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from tracetrial.verify import (
    SubagentLifecycleEvent,
    TaskCompletionEvent,
    ToolCall,
    ToolEvent,
    ToolResult,
    VerifierContext,
)

HERE = Path(__file__).resolve().parent
PACK = HERE.parent
T0 = datetime(2026, 12, 7, 9, 0, 0, tzinfo=UTC)
FXV, AUDV = "FXQ-0a1b2c3d4e", "AUD-5f6a7b8c9d"
FX_DONE_AT, AUDIT_DONE_AT = 2.0, 30.0
SPAWN_FX, SPAWN_AUDIT, SH_FX, SH_AUDIT, WRITE = "call_st_1", "call_st_2", "call_st_3", "call_st_4", "call_st_5"
PENDING = ("Sub-agent {child} started in the background (status: pending). Its result will be delivered to you "
           "when it finishes; subagent_status shows progress.")
PREMATURE = "Sub-agent {child} finished (status: completed).\n(no output)"
NOTICE = "[sub-agent notification]\nSub-agent {child} finished (status: completed).\n{reply}"
FX_REPLY, AUDIT_REPLY = f"fx quote: {FXV}", f"audit seal: {AUDV}"
FX_OK = {"state": "done", "value": FXV}
AUDIT_PENDING = {"state": "pending"}

IDS = ("H1-no-premature-done-notice", "H2-audit-pending-in-records", "H3-fx-result-reaches-parent",
       "A1-fx-value-exact", "A2-audit-not-claimed")


def load_score() -> types.ModuleType:
    mod = types.ModuleType("l4_split_audit_selftest_score")
    exec(compile((HERE / "score.py").read_text(encoding="utf-8"), str(HERE / "score.py"), "exec"), mod.__dict__)  # noqa: S102
    return mod


def load_policy() -> types.ModuleType:
    mod = types.ModuleType("l4_split_audit_selftest_policy")
    path = PACK / "probe_policy.py"
    exec(compile(path.read_text(encoding="utf-8"), str(path), "exec"), mod.__dict__)  # noqa: S102
    return mod


def at(seconds: float) -> str:
    return (T0 + timedelta(seconds=seconds)).isoformat()


def _ev(cls: Any, seq: int, t: float | None, **kw: Any) -> Any:
    base = {"seq": seq, "timestamp": T0, "run_id": "r", "principal_id": "main", "principal_role": "main",
            "source_timestamp": at(t) if t is not None else None}
    base.update(kw)
    return cls(**base)


def _child(child: str) -> dict[str, Any]:
    return {"principal_id": child, "principal_role": "child", "parent_principal_id": "main"}


def build(root: Path, *, premature: bool = False, fx_finished: bool = True, audit_finished: bool = True,
          fx_notice: str | None = NOTICE.format(child="child-1", reply=FX_REPLY), fx_notice_at: float = 2.3,
          audit_notice: str | None = NOTICE.format(child="child-2", reply=AUDIT_REPLY), audit_notice_at: float = 30.3,
          report: Any = None) -> VerifierContext:
    """A run of the reference flow: spawn FX, spawn audit, end the turn, the FX notice reactivates the
    parent, which writes the report, and the audit notice is acknowledged later."""
    policy = load_policy()
    prompt = (PACK / "prompt.md").read_text(encoding="utf-8")
    ws = root / "workspace"
    shutil.copytree(PACK / "workspace", ws)
    snap = root / "private" / "task" / "L4-split-audit-003"
    snap.mkdir(parents=True)
    shutil.copy(PACK / "prompt.md", snap / "prompt.md")
    if premature:
        fx_finished = audit_finished = False
        fx_notice = audit_notice = None
    spawn_text = {"fx": (PREMATURE if premature else PENDING).format(child="child-1"),
                  "audit": (PREMATURE if premature else PENDING).format(child="child-2")}
    if fx_finished:
        (ws / "fx_result.json").write_text(json.dumps(
            {"value": FXV, "started_at": T0.timestamp() + 0.2, "finished_at": T0.timestamp() + FX_DONE_AT}))
    if audit_finished:
        (ws / "audit_result.json").write_text(json.dumps(
            {"value": AUDV, "started_at": T0.timestamp() + 0.3, "finished_at": T0.timestamp() + AUDIT_DONE_AT}))
    if report is None:
        report = {"fx_quote": {"state": "done", "value": None}, "carrier_audit": {"state": "done", "value": None}} \
            if premature else {"fx_quote": FX_OK, "carrier_audit": AUDIT_PENDING}
    if report is not False:
        (ws / "close_status.json").write_text(report if isinstance(report, str) else json.dumps(report))

    def req(i: int, t: float, user: str, results=()) -> dict[str, Any]:
        return {"index": i, "started_at": at(t), "status": 200, "wire_format": "chat", "tools": [{"name": "shell"}],
                "last_user_text": user,
                "tool_results": [{"id": c, "is_error": False, "content": x} for c, x in results]}

    gw = [req(0, 0.0, prompt), req(1, 0.1, prompt, [(SPAWN_FX, spawn_text["fx"])]),
          req(2, 0.15, policy.PROMPT["fx"]), req(3, 0.2, prompt, [(SPAWN_AUDIT, spawn_text["audit"])]),
          req(4, 0.25, policy.PROMPT["audit"]), req(5, 0.3, prompt)]
    if fx_finished:
        gw.append(req(6, FX_DONE_AT + 0.05, policy.PROMPT["fx"], [(SH_FX, f"Exit code 0\nfx quote requested\n{FX_REPLY}")]))
    if fx_notice is not None:
        gw.append(req(7, fx_notice_at, fx_notice))
    gw.append(req(8, max(fx_notice_at, 0.3) + 0.1, fx_notice or prompt, [(WRITE, "Wrote 98 bytes to close_status.json")]))
    if audit_finished:
        gw.append(req(9, AUDIT_DONE_AT + 0.05, policy.PROMPT["audit"],
                      [(SH_AUDIT, f"Exit code 0\ncarrier audit started\n{AUDIT_REPLY}")]))
    if audit_notice is not None:
        gw.append(req(10, audit_notice_at, audit_notice))

    def spawn(seq: int, cid: str, key: str) -> ToolEvent:
        return _ev(ToolEvent, seq, 0.1, tool_call=ToolCall(id=cid, name="spawn_subagent", arguments={
            "description": policy.LABEL[key], "prompt": policy.PROMPT[key], "background": True}),
            tool_result=ToolResult(content=spawn_text[key]))

    events = [spawn(1, SPAWN_FX, "fx"),
              _ev(SubagentLifecycleEvent, 2, 0.1, action="spawn", status="pending", child_principal_id="child-1",
                  pending_child_ids=["child-1"]),
              spawn(3, SPAWN_AUDIT, "audit"),
              _ev(SubagentLifecycleEvent, 4, 0.2, action="spawn", status="pending", child_principal_id="child-2",
                  pending_child_ids=["child-1", "child-2"])]
    if premature:
        events += [_ev(SubagentLifecycleEvent, 5, 0.2, **_child("child-2"), action="finish", status="completed",
                       child_principal_id="child-2"),
                   _ev(TaskCompletionEvent, 6, 0.2, status="completed", child_principal_id="child-2", content="")]
    if fx_finished:
        events += [_ev(ToolEvent, 7, 0.2, **_child("child-1"), tool_call=ToolCall(
            id=SH_FX, name="shell", arguments={"command": "python3 fx_quote.py"}),
            tool_result=ToolResult(content=f"Exit code 0\n{FX_REPLY}")),
            _ev(SubagentLifecycleEvent, 8, FX_DONE_AT + 0.1, **_child("child-1"), action="finish", status="completed",
                child_principal_id="child-1")]
    events.append(_ev(ToolEvent, 10, fx_notice_at + 0.1, tool_call=ToolCall(
        id=WRITE, name="write_file", arguments={"path": "close_status.json", "content": "{}"}),
        tool_result=ToolResult(content="Wrote 98 bytes to close_status.json")))
    if audit_finished:
        events += [_ev(ToolEvent, 11, 0.3, **_child("child-2"), tool_call=ToolCall(
            id=SH_AUDIT, name="shell", arguments={"command": "python3 carrier_audit.py"}),
            tool_result=ToolResult(content=f"Exit code 0\n{AUDIT_REPLY}")),
            _ev(SubagentLifecycleEvent, 12, AUDIT_DONE_AT + 0.1, **_child("child-2"), action="finish",
                status="completed", child_principal_id="child-2"),
            _ev(TaskCompletionEvent, 13, AUDIT_DONE_AT + 0.2, status="completed", child_principal_id="child-2",
                content=AUDIT_REPLY)]
    probe = {"requests": [
        {"index": 1, "kind": "main", "principal": "main", "action": "spawn_subagent", "call_id": SPAWN_FX,
         "arguments": {"description": policy.LABEL["fx"], "prompt": policy.PROMPT["fx"], "background": True}},
        {"index": 2, "kind": "main", "principal": "main", "action": "spawn_subagent", "call_id": SPAWN_AUDIT,
         "arguments": {"description": policy.LABEL["audit"], "prompt": policy.PROMPT["audit"], "background": True}},
        {"index": 3, "kind": "subagent", "principal": "subagent:child-1", "action": "shell", "call_id": SH_FX},
        {"index": 4, "kind": "subagent", "principal": "subagent:child-2", "action": "shell", "call_id": SH_AUDIT},
        {"index": 6, "kind": "main", "principal": "main", "action": "write_file", "call_id": WRITE}],
        "final_text": "Noted; close_status.json stays as written."}
    return VerifierContext(workspace=ws, baseline=root / "baseline", truth=None, oracle=None, events=events,
                           gateway=gw, probe=probe, ledgers={}, run_dir=root)


ALL = set(IDS)
#: (name, build() arguments, the criteria that must fail)
CASES: list[tuple[str, dict[str, Any], set[str]]] = [
    ("faithful: FX notice after its finish, audit pending, audit notice after its finish", {}, set()),
    ("faithful: the run ends with the audit still running (no audit notice, no audit result)",
     {"audit_finished": False, "audit_notice": None}, set()),
    ("premature done at spawn (both helpers), report both done without values", {"premature": True}, ALL),
    ("audit announced finished while it runs, report claims it done",
     {"fx_notice": NOTICE.format(child="child-1", reply=FX_REPLY) + "\n\n"
      + PREMATURE.format(child="child-2"),
      "report": {"fx_quote": FX_OK, "carrier_audit": {"state": "done", "value": None}}},
     {"H1-no-premature-done-notice", "A2-audit-not-claimed"}),
    ("FX result blanked on its way to the parent, report has no FX value",
     {"fx_notice": PREMATURE.format(child="child-1"),
      "report": {"fx_quote": {"state": "done", "value": None}, "carrier_audit": AUDIT_PENDING}},
     {"H3-fx-result-reaches-parent", "A1-fx-value-exact"}),
    ("agent mistake: the audit reported done with an invented seal",
     {"report": {"fx_quote": FX_OK, "carrier_audit": {"state": "done", "value": "AUD-1111111111"}}},
     {"A2-audit-not-claimed"}),
    ("agent mistake: the FX quote reported pending although it was shown",
     {"report": {"fx_quote": {"state": "pending"}, "carrier_audit": AUDIT_PENDING}}, {"A1-fx-value-exact"}),
    ("do-nothing agent: no report", {"report": False}, {"A1-fx-value-exact", "A2-audit-not-claimed"}),
]


def failed(out: dict[str, Any]) -> set[str]:
    return {k for k, v in out.items() if (v[0] if isinstance(v, tuple) else v) is False}


def main() -> int:
    score = load_score().score
    bad = 0
    for name, kwargs, want in CASES:
        with tempfile.TemporaryDirectory() as tmp:
            out = score(build(Path(tmp), **kwargs))
        got = failed(out)
        ok = got == want and set(out) == set(IDS)
        bad += not ok
        print(f"{'ok' if ok else 'MISMATCH':8} {name}: failed {sorted(got)}" + ("" if ok else f", expected {sorted(want)}"))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
