"""L4-split-audit-003: the verifier on hand-built runs (the self-test's reference-shaped cases, then
the record shapes observed from Claude Code 2.1.220, Codex 0.145.0 and OpenClaw 2026.9.6, a
premature "finished" for the running helper in each harness's wording, missing evidence, agent
mistakes, a do-nothing run), the probe policy on each harness's wait path, and the two job scripts'
own evidence."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.tasks import load_module as _load
from tracetrial.policy import (
    CallView,
    Final,
    NativeTool,
    Observation,
    Shell,
    SpawnSubagent,
    Turn,
    WriteFile,
)
from tracetrial.task import load_task
from tracetrial.trace import (
    SubagentLifecycleEvent,
    TaskCompletionEvent,
    ToolCall,
    ToolEvent,
    ToolResult,
)
from tracetrial.verify import VerifierContext

PACK = Path(__file__).resolve().parents[2] / "tasks" / "L4-split-audit-003"
SCORE = _load(PACK / "verifier" / "score.py", "l4_sa_score")
POLICY = _load(PACK / "probe_policy.py", "l4_sa_policy")
SELF = _load(PACK / "verifier" / "selftest.py", "l4_sa_selftest")
TASK = load_task(PACK)
PROMPT = TASK.user_turns[0].user
IDS = {c.id for c in TASK.harness_rubric.criteria if c.applies_to("probe")} | {c.id for c in TASK.agent_rubric.criteria if c.applies_to("probe")}
H1, H2, H3 = "H1-no-premature-done-notice", "H2-audit-pending-in-records", "H3-fx-result-reaches-parent"
A1, A2 = "A1-fx-value-exact", "A2-audit-not-claimed"
FXV, AUDV = SELF.FXV, SELF.AUDV
REPORT_OK = {"fx_quote": {"state": "done", "value": FXV}, "carrier_audit": {"state": "pending"}}

# --------------------------------------------------------------------------- observed wordings

CC_LAUNCHED = ("Async agent launched successfully. (This tool result is internal metadata - never quote or paste any "
               "part of it, including the agentId below, into a user-facing reply.)\nagentId: {aid} (internal ID - do "
               "not mention to user. Use SendMessage with to: '{aid}', summary: '<5-10 word recap>' to continue this "
               "agent.)\nThe agent is working in the background. You will be notified automatically when it completes.")
CC_TASK_OUTPUT = ("<retrieval_status>success</retrieval_status>\n\n<task_id>{aid}</task_id>\n\n<task_type>local_agent"
                  "</task_type>\n\n<status>completed</status>\n\n<output>\n{reply}\n</output>")
CC_NOTICE = ("[SYSTEM NOTIFICATION - NOT USER INPUT]\nThis is an automated background-task event, NOT a message from "
             "the user.\n\n<task-notification>\n<task-id>{aid}</task-id>\n<tool-use-id>{call}</tool-use-id>\n"
             "<output-file>/tmp/x/tasks/{aid}.output</output-file>\n<status>completed</status>\n<summary>Agent "
             "\"{label}\" finished</summary>\n<result>{reply}</result>\n</task-notification>")
CODEX_SPAWNED = '{{"agent_id":"{aid}","nickname":"Nietzsche"}}'
CODEX_WAIT = '{{"status":{{"{aid}":{{"completed":"{reply}"}}}},"timed_out":false}}'
CODEX_NOTE = '<subagent_notification>\n{{"agent_path":"{aid}","status":{{"completed":"{reply}"}}}}\n</subagent_notification>'


def oc_json(tool: str, payload: dict[str, Any]) -> str:
    """OpenClaw relays a deferred tool's result as JSON whose text block is JSON again."""
    return json.dumps({"tool": {"id": f"openclaw:core:{tool}", "name": tool, "source": "openclaw"},
                       "result": {"content": [{"type": "text", "text": json.dumps(payload, indent=2)}]}}, indent=2)


def oc_spawned(key: str, run: str) -> str:
    return oc_json("sessions_spawn", {"status": "accepted", "childSessionKey": key, "runId": run, "mode": "run",
                                      "note": "The final reply returns to the requester as a completion event."})


OC_KEYS = {"fx": "agent:main:subagent:ee2014f5-e30f", "audit": "agent:main:subagent:59895752-ede5"}
OC_LIST = oc_json("subagents", {"status": "ok", "action": "list", "tasks": [
    {"taskId": "1234-cli", "runtime": "cli", "execution": {"state": "running"}, "status": "running"},
    {"taskId": "a241-fx", "runtime": "subagent", "execution": {"state": "running"}, "status": "running",
     "label": "FX quote"},
    {"taskId": "77aa-audit", "runtime": "subagent", "execution": {"state": "running"}, "status": "running",
     "label": "Carrier audit"}]})
OC_WAIT = oc_json("subagents", {"status": "ok", "action": "wait", "reason": "completed", "tasks": [
    {"taskId": "a241-fx", "runtime": "subagent", "execution": {"state": "finished"}, "status": "completed",
     "label": "FX quote", "progressSummary": f"fx quote: {FXV}"}], "completed": ["a241-fx"]})
OC_EVENT = ("[[OPENCLAW_INTERNAL_CONTEXT_BEGIN]]\n[Internal task completion event]\nsource: subagent\nsession_key: {key}\n"
            "type: subagent task\ntask: {label}\nstatus: completed; ready for parent review\n\nChild result:\n"
            "<prompt-data>\n{reply}\n</prompt-data>\n[[OPENCLAW_INTERNAL_CONTEXT_END]]")


# --------------------------------------------------------------------------- run builder


def at(seconds: float) -> str:
    return SELF.at(seconds)


def ev(cls: Any, seq: int, t: float | None = None, **kw: Any) -> Any:
    return SELF._ev(cls, seq, t, **kw)


def child(cid: str) -> dict[str, Any]:
    return SELF._child(cid)


@dataclass
class Run:
    """A hand-built run: gateway requests, Trace IR events, probe requests, bodies and workspace files."""

    gateway: list[dict[str, Any]] = field(default_factory=list)
    events: list[Any] = field(default_factory=list)
    probe: list[dict[str, Any]] = field(default_factory=list)
    bodies: dict[int, Any] = field(default_factory=dict)
    fx_finished: float | None = SELF.FX_DONE_AT
    audit_finished: float | None = SELF.AUDIT_DONE_AT
    report: Any = field(default_factory=lambda: dict(REPORT_OK))

    def req(self, t: float, user: str = "", results: tuple[tuple[str, str], ...] = (), wire: str = "anthropic",
            body: Any = None) -> None:
        index = len(self.gateway)
        self.gateway.append({"index": index, "started_at": at(t), "status": 200, "wire_format": wire,
                             "tools": [{"name": "x"}], "last_user_text": user,
                             "tool_results": [{"id": c, "is_error": False, "content": x} for c, x in results]})
        if body is not None:
            self.bodies[index] = body

    def ctx(self, root: Path, *, probe: bool = True) -> VerifierContext:
        ws = root / "workspace"
        ws.mkdir(parents=True, exist_ok=True)
        snap = root / "private" / "task" / "L4-split-audit-003"
        snap.mkdir(parents=True, exist_ok=True)
        shutil.copy(PACK / "prompt.md", snap / "prompt.md")
        for name, value, done in (("fx_result.json", FXV, self.fx_finished),
                                  ("audit_result.json", AUDV, self.audit_finished)):
            if done is not None:
                (ws / name).write_text(json.dumps({"value": value, "started_at": SELF.T0.timestamp(),
                                                   "finished_at": SELF.T0.timestamp() + done}))
        if self.report is not None:
            text = self.report if isinstance(self.report, str) else json.dumps(self.report)
            (ws / "close_status.json").write_text(text)
        if self.bodies:
            (root / "gateway" / "bodies").mkdir(parents=True, exist_ok=True)
            for i, body in self.bodies.items():
                (root / "gateway" / "bodies" / f"{i}.json").write_text(json.dumps(body))
        return VerifierContext(workspace=ws, baseline=root / "baseline", truth=TASK.truth, oracle=None,
                               events=list(self.events), gateway=list(self.gateway),
                               probe={"requests": self.probe, "final_text": "done"} if probe else None,
                               ledgers={}, run_dir=root)


def probe_spawns(run: Run, ids: dict[str, str], arguments_key: str = "prompt") -> None:
    for n, k in enumerate(("fx", "audit"), 1):
        run.probe.append({"index": n, "kind": "main", "principal": "main", "action": "spawn_subagent",
                          "call_id": ids[k], "arguments": {"description": POLICY.LABEL[k],
                                                           arguments_key: POLICY.PROMPT[k]}})


def results(ctx: VerifierContext) -> dict[str, tuple[bool | None, str]]:
    out = SCORE.score(ctx)
    assert set(out) == IDS
    return out


def failed(ctx: VerifierContext) -> set[str]:
    return {k for k, (ok, _) in results(ctx).items() if ok is False}


# Claude Code 2.1.220: Agent(run_in_background) -> TaskOutput(block) on the FX agentId; the FX
# notice comes as a mid-conversation system message, the audit's as a user message (bodies only);
# the helpers are named after their spawn calls; "updated/completed" carries the end time in its patch.
CC = {"fx": "toolu_tt_1", "audit": "toolu_tt_3"}
CC_AID = {"fx": "a4bcb835ac50f074a", "audit": "ada07d2ea08e9ea0a"}
CC_SH = {"fx": "toolu_tt_2", "audit": "toolu_tt_4"}
CC_TO, CC_WRITE = "toolu_tt_5", "toolu_tt_6"


def cc_body(*notices: tuple[str, str]) -> dict[str, Any]:
    msgs: list[dict[str, Any]] = [{"role": "user", "content": [{"type": "text", "text": PROMPT}]}]
    msgs += [{"role": role, "content": text} for role, text in notices]
    return {"messages": msgs}


def cc_notice(k: str) -> str:
    reply = f"fx quote: {FXV}" if k == "fx" else f"audit seal: {AUDV}"
    return CC_NOTICE.format(aid=CC_AID[k], call=CC[k], label=POLICY.LABEL[k], reply=reply)


def claude_code_run(*, early_audit_notice: bool = False) -> Run:
    run = Run()
    probe_spawns(run, CC)
    run.probe += [{"index": 3, "kind": "subagent", "principal": f"subagent:{CC_AID['fx']}", "action": "shell",
                   "call_id": CC_SH["fx"]},
                  {"index": 4, "kind": "subagent", "principal": f"subagent:{CC_AID['audit']}", "action": "shell",
                   "call_id": CC_SH["audit"]},
                  {"index": 5, "kind": "main", "principal": "main", "action": "native_tool", "call_id": CC_TO},
                  {"index": 7, "kind": "main", "principal": "main", "action": "write_file", "call_id": CC_WRITE}]
    wrapped = "<system-reminder>\ncontext\n</system-reminder>\n"
    run.req(0.0, wrapped + PROMPT, body=cc_body())
    run.req(0.05, wrapped + POLICY.PROMPT["fx"])
    run.req(0.06, wrapped + PROMPT, ((CC["fx"], CC_LAUNCHED.format(aid=CC_AID["fx"])),), body=cc_body())
    run.req(0.1, wrapped + POLICY.PROMPT["audit"])
    early = (("user", cc_notice("audit").replace(f"audit seal: {AUDV}", "(no output)")),) if early_audit_notice else ()
    run.req(0.15, wrapped + PROMPT, ((CC["audit"], CC_LAUNCHED.format(aid=CC_AID["audit"])),), body=cc_body(*early))
    run.req(2.2, wrapped + POLICY.PROMPT["fx"], ((CC_SH["fx"], f"fx quote requested\nfx quote: {FXV}"),))
    run.req(2.25, wrapped + PROMPT, ((CC_TO, CC_TASK_OUTPUT.format(aid=CC_AID["fx"], reply=f"fx quote: {FXV}")),),
            body=cc_body(*early))
    run.req(2.3, wrapped + PROMPT, ((CC_WRITE, "File created successfully at: /w/close_status.json"),),
            body=cc_body(*early, ("system", cc_notice("fx"))))
    run.req(30.1, wrapped + POLICY.PROMPT["audit"], ((CC_SH["audit"], f"carrier audit started\naudit seal: {AUDV}"),))
    run.req(30.2, wrapped + PROMPT, body=cc_body(*early, ("system", cc_notice("fx")), ("user", cc_notice("audit"))))
    spawn = {k: ev(ToolEvent, n, 0.05 * n, tool_call=ToolCall(id=CC[k], name="Agent", arguments={
        "description": POLICY.LABEL[k], "prompt": POLICY.PROMPT[k], "run_in_background": True}),
        tool_result=ToolResult(content=CC_LAUNCHED.format(aid=CC_AID[k]))) for n, k in ((5, "fx"), (10, "audit"))}
    end = {k: int((SELF.T0.timestamp() + t) * 1000) for k, t in (("fx", 2.1), ("audit", 30.05))}
    run.events = [
        spawn["fx"], ev(SubagentLifecycleEvent, 6, action="pending_changed", pending_child_ids=[CC["fx"]]),
        ev(SubagentLifecycleEvent, 7, **child(CC["fx"]), action="started", child_principal_id=CC["fx"]),
        ev(ToolEvent, 8, 0.1, **child(CC["fx"]), tool_call=ToolCall(id=CC_SH["fx"], name="Bash", arguments={
            "command": "python3 fx_quote.py"}), tool_result=ToolResult(content=f"fx quote: {FXV}")),
        spawn["audit"],
        ev(SubagentLifecycleEvent, 11, action="pending_changed", pending_child_ids=[CC["fx"], CC["audit"]]),
        ev(SubagentLifecycleEvent, 12, **child(CC["audit"]), action="started", child_principal_id=CC["audit"]),
        ev(ToolEvent, 13, 0.2, **child(CC["audit"]), tool_call=ToolCall(id=CC_SH["audit"], name="Bash", arguments={
            "command": "python3 carrier_audit.py"}), tool_result=ToolResult(content=f"audit seal: {AUDV}")),
        ev(SubagentLifecycleEvent, 17, action="pending_changed", pending_child_ids=[CC["audit"]]),
        ev(SubagentLifecycleEvent, 18, **child(CC["fx"]), action="updated", status="completed",
           child_principal_id=CC["fx"], raw_event={"patch": {"status": "completed", "end_time": end["fx"]}}),
        ev(TaskCompletionEvent, 19, **child(CC["fx"]), status="completed", child_principal_id=CC["fx"]),
        ev(ToolEvent, 20, 2.3, tool_call=ToolCall(id=CC_WRITE, name="Write", arguments={
            "file_path": "/w/close_status.json", "content": "{}"}), tool_result=ToolResult(content="ok")),
        ev(SubagentLifecycleEvent, 26, **child(CC["audit"]), action="updated", status="completed",
           child_principal_id=CC["audit"], raw_event={"patch": {"status": "completed", "end_time": end["audit"]}}),
        ev(TaskCompletionEvent, 27, **child(CC["audit"]), status="completed", child_principal_id=CC["audit"])]
    return run


# Codex 0.145.0: spawn_agent -> {"agent_id"}; wait_agent on the FX agent; the parent's turn ends and
# the audit helper is aborted (its job never finishes); children are named after their threads.
CX = {"fx": "call_tt_1", "audit": "call_tt_2"}
CX_AID = {"fx": "01a24e06-3c8e-7bc1", "audit": "01a24e06-3cfd-7a80"}
CX_SH = {"fx": "call_tt_3", "audit": "call_tt_5"}
CX_WAIT, CX_WRITE = "call_tt_4", "call_tt_6"


def codex_run() -> Run:
    run = Run(audit_finished=None)
    probe_spawns(run, CX, arguments_key="message")
    run.probe += [{"index": 3, "kind": "subagent", "principal": f"subagent:collab_spawn:{CX_AID['fx']}",
                   "action": "shell", "call_id": CX_SH["fx"]},
                  {"index": 4, "kind": "main", "principal": "main", "action": "native_tool", "call_id": CX_WAIT},
                  {"index": 5, "kind": "subagent", "principal": f"subagent:collab_spawn:{CX_AID['audit']}",
                   "action": "shell", "call_id": CX_SH["audit"]},
                  {"index": 7, "kind": "main", "principal": "main", "action": "write_file", "call_id": CX_WRITE}]
    run.req(0.0, PROMPT, wire="responses")
    run.req(0.1, PROMPT, ((CX["fx"], CODEX_SPAWNED.format(aid=CX_AID["fx"])),), wire="responses")
    run.req(0.15, POLICY.PROMPT["fx"], wire="responses")
    run.req(0.2, PROMPT, ((CX["audit"], CODEX_SPAWNED.format(aid=CX_AID["audit"])),), wire="responses")
    run.req(0.25, POLICY.PROMPT["audit"], wire="responses")
    run.req(2.1, POLICY.PROMPT["fx"], ((CX_SH["fx"], f"Process exited with code 0\nOutput:\nfx quote: {FXV}\n"),),
            wire="responses")
    note = CODEX_NOTE.format(aid=CX_AID["fx"], reply=f"fx quote: {FXV}")
    run.req(2.2, note, ((CX_WAIT, CODEX_WAIT.format(aid=CX_AID["fx"], reply=f"fx quote: {FXV}")),), wire="responses")
    run.req(2.3, note, ((CX_WRITE, "Process exited with code 0\nOutput:\n"),), wire="responses")
    spawn = {k: ev(ToolEvent, n, None, tool_call=ToolCall(id=CX[k], name="multi_agent_v1__spawn_agent", arguments={
        "message": POLICY.PROMPT[k]}), tool_result=ToolResult(content=CODEX_SPAWNED.format(aid=CX_AID[k])))
        for n, k in ((5, "fx"), (10, "audit"))}
    run.events = [
        spawn["fx"], ev(SubagentLifecycleEvent, 8, action="spawn_agent", status="pending_init",
                        child_principal_id=CX_AID["fx"], pending_child_ids=[CX_AID["fx"]]),
        ev(SubagentLifecycleEvent, 9, 0.12, **child(CX_AID["fx"]), action="started", child_principal_id=CX_AID["fx"]),
        spawn["audit"], ev(SubagentLifecycleEvent, 12, action="spawn_agent", status="pending_init",
                           child_principal_id=CX_AID["audit"], pending_child_ids=[CX_AID["audit"]]),
        ev(SubagentLifecycleEvent, 13, 0.22, **child(CX_AID["audit"]), action="started",
           child_principal_id=CX_AID["audit"]),
        ev(SubagentLifecycleEvent, 18, 2.15, **child(CX_AID["fx"]), action="finished", status="completed",
           child_principal_id=CX_AID["fx"]),
        ev(SubagentLifecycleEvent, 19, action="wait", status="completed", child_principal_id=CX_AID["fx"],
           pending_child_ids=[]),
        ev(TaskCompletionEvent, 20, 2.16, status="completed", child_principal_id=CX_AID["fx"]),
        ev(ToolEvent, 21, None, tool_call=ToolCall(id=CX_WRITE, name="exec_command", arguments={
            "cmd": "printf '%s' '{}' > close_status.json"}), tool_result=ToolResult(content="ok")),
        ev(SubagentLifecycleEvent, 24, 2.4, **child(CX_AID["audit"]), action="aborted", status="aborted",
           child_principal_id=CX_AID["audit"])]
    return run


# OpenClaw 2026.9.6: sessions_spawn through tool_describe/tool_call; subagents list + wait on the FX
# task; completion events as user-role text; children named after their spawn calls.
OC = {"fx": "call_tt_2", "audit": "call_tt_4"}
OC_SH = {"fx": "call_tt_7", "audit": "call_tt_8"}
OC_LIST_ID, OC_WAIT_ID, OC_WRITE = "call_tt_5", "call_tt_6", "call_tt_9"


def openclaw_run(*, early_audit_event: bool = False) -> Run:
    run = Run()
    probe_spawns(run, OC, arguments_key="task")
    run.probe += [{"index": 7, "kind": "subagent", "principal": f"subagent:{OC_KEYS['fx']}", "action": "shell",
                   "call_id": OC_SH["fx"]},
                  {"index": 8, "kind": "subagent", "principal": f"subagent:{OC_KEYS['audit']}", "action": "shell",
                   "call_id": OC_SH["audit"]}]
    prompt = "[Mon 2026-12-07 09:00 UTC] " + PROMPT
    sub = "[Subagent Context] You are running as a subagent (depth 1/5).\n[Subagent Task]: "
    run.req(0.0, prompt, wire="responses")
    run.req(0.5, prompt, ((OC["fx"], oc_spawned(OC_KEYS["fx"], "4c25")),), wire="responses")
    run.req(1.0, prompt, ((OC["audit"], oc_spawned(OC_KEYS["audit"], "73bb")),), wire="responses")
    run.req(1.2, sub + POLICY.PROMPT["fx"], wire="responses")
    run.req(1.3, sub + POLICY.PROMPT["audit"], wire="responses")
    run.req(1.4, prompt, ((OC_LIST_ID, OC_LIST),), wire="responses")
    if early_audit_event:
        run.req(1.6, OC_EVENT.format(key=OC_KEYS["audit"], label="Carrier audit", reply="(no output)"),
                wire="responses")
    run.req(2.2, sub + POLICY.PROMPT["fx"], ((OC_SH["fx"], f"fx quote requested\nfx quote: {FXV}"),), wire="responses")
    fx_event = OC_EVENT.format(key=OC_KEYS["fx"], label="FX quote", reply=f"fx quote: {FXV}")
    run.req(2.5, fx_event, ((OC_WAIT_ID, OC_WAIT),), wire="responses")
    run.req(2.8, fx_event, ((OC_WRITE, "Successfully wrote 124 bytes to /w/close_status.json"),), wire="responses")
    run.req(30.1, sub + POLICY.PROMPT["audit"], ((OC_SH["audit"], f"carrier audit started\naudit seal: {AUDV}"),),
            wire="responses")
    run.req(30.4, OC_EVENT.format(key=OC_KEYS["audit"], label="Carrier audit", reply=f"audit seal: {AUDV}"),
            wire="responses")
    spawn = {k: ev(ToolEvent, n, 0.4 * n / 8, tool_call=ToolCall(id=OC[k], name="sessions_spawn", arguments={
        "task": POLICY.PROMPT[k], "label": POLICY.LABEL[k]}), tool_result=ToolResult(content=oc_spawned(OC_KEYS[k], k)))
        for n, k in ((16, "fx"), (24, "audit"))}
    run.events = [
        spawn["fx"], ev(SubagentLifecycleEvent, 19, 0.5, action="spawned", status="pending", child_principal_id=OC["fx"],
                        pending_child_ids=[OC["fx"]]),
        spawn["audit"], ev(SubagentLifecycleEvent, 27, 1.0, action="spawned", status="pending",
                           child_principal_id=OC["audit"], pending_child_ids=[OC["audit"]]),
        ev(ToolEvent, 45, 2.8, tool_call=ToolCall(id=OC_WRITE, name="write", arguments={
            "path": "/w/close_status.json", "content": "{}"}), tool_result=ToolResult(content="ok")),
        ev(ToolEvent, 80, 1.3, **child(OC["audit"]), tool_call=ToolCall(id=OC_SH["audit"], name="exec", arguments={
            "command": "python3 carrier_audit.py"}), tool_result=ToolResult(content=f"audit seal: {AUDV}")),
        ev(SubagentLifecycleEvent, 85, 1.25, **child(OC["audit"]), action="started", status="running",
           child_principal_id=OC["audit"]),
        ev(SubagentLifecycleEvent, 94, 30.2, **child(OC["audit"]), action="completed", status="completed",
           child_principal_id=OC["audit"]),
        ev(TaskCompletionEvent, 95, 30.2, **child(OC["audit"]), status="completed", child_principal_id=OC["audit"]),
        ev(TaskCompletionEvent, 112, None, status="stop"),
        ev(ToolEvent, 120, 1.2, **child(OC["fx"]), tool_call=ToolCall(id=OC_SH["fx"], name="exec", arguments={
            "command": "python3 fx_quote.py"}), tool_result=ToolResult(content=f"fx quote: {FXV}")),
        ev(SubagentLifecycleEvent, 126, 1.15, **child(OC["fx"]), action="started", status="running",
           child_principal_id=OC["fx"]),
        ev(SubagentLifecycleEvent, 135, 2.1, **child(OC["fx"]), action="completed", status="completed",
           child_principal_id=OC["fx"]),
        ev(TaskCompletionEvent, 136, 2.1, **child(OC["fx"]), status="completed", child_principal_id=OC["fx"])]
    return run


# --------------------------------------------------------------------------- pack


def test_pack_declares_its_links_calibration_and_budget():
    assert TASK.spec.conversation == "single" and len(TASK.user_turns) == 1
    assert TASK.spec.tools == ["shell", "subagent", "write_file"]
    assert [(ln.harness, ln.agent) for ln in TASK.harness_rubric.links] == [(H1, A2), (H3, A1)]
    assert TASK.spec.calibration.mutants == {"premature_subagent_done": [H1, H2, H3, A1, A2]}
    assert TASK.truth["audit"]["job_seconds"] > 10 * TASK.truth["fx"]["job_seconds"]
    assert TASK.spec.budgets.wall_clock_s >= 10 * TASK.truth["audit"]["job_seconds"]
    assert POLICY.WAIT_S > 10 * TASK.truth["fx"]["job_seconds"]


@pytest.mark.parametrize("key", ["fx", "audit"])
def test_jobs_write_their_result_only_at_the_end(tmp_path, key):
    script = (PACK / "workspace" / POLICY.SCRIPT[key]).read_text()
    fast = tmp_path / POLICY.SCRIPT[key]
    fast.write_text("import time\ntime.sleep = lambda s: None\n" + script)
    out = subprocess.run([sys.executable, str(fast)], cwd=tmp_path, capture_output=True, text=True, timeout=30,
                         check=False)
    assert out.returncode == 0, out.stderr
    data = json.loads((tmp_path / SCORE.RESULT[key]).read_text())
    assert out.stdout.splitlines()[-1] == f"{POLICY.LINE[key]}: {data['value']}"
    assert len(out.stdout.splitlines()) == 2
    ctx = VerifierContext(workspace=tmp_path, baseline=tmp_path, truth=TASK.truth, oracle=None, events=[], gateway=[],
                          probe=None, ledgers={}, run_dir=tmp_path)
    assert SCORE.job_result(ctx, key) == data and data["finished_at"] >= data["started_at"]
    assert not (tmp_path / (SCORE.RESULT[key] + ".tmp")).exists()
    assert SCORE.job_result(ctx, "audit" if key == "fx" else "fx") is None


def test_selftest_passes():
    proc = subprocess.run([sys.executable, "-B", str(PACK / "verifier" / "selftest.py")], capture_output=True,
                          text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.count("\nok ") + proc.stdout.startswith("ok ") == len(SELF.CASES)


# --------------------------------------------------------------------------- verifier: reference shapes


@pytest.mark.parametrize("name,kwargs,want", SELF.CASES, ids=[c[0][:40] for c in SELF.CASES])
def test_selftest_cases(tmp_path, name, kwargs, want):
    assert failed(SELF.build(tmp_path, **kwargs)) == want


def test_faithful_reasons_name_the_evidence(tmp_path):
    out = results(SELF.build(tmp_path))
    assert "Carrier audit at 09:00:30.300" in out[H1][1] and "FX quote at 09:00:02.300" in out[H1][1]
    assert "spawn" in out[H2][1] and "before the report write" in out[H2][1]
    assert "after the audit job finished" in out[H2][1]
    assert FXV in out[H3][1]


def test_premature_reasons_say_the_jobs_never_finished(tmp_path):
    out = results(SELF.build(tmp_path, premature=True))
    assert "the Carrier audit helper finished, but its job never finished" in out[H1][1]
    assert "the FX quote helper finished, but its job never finished" in out[H1][1]
    assert "never finished" in out[H2][1] and "never finished" in out[H3][1]


def test_audit_notice_sent_before_its_job_finished_fails_h1_even_with_the_right_seal(tmp_path):
    # A harness that announces the audit before the job's end (here carrying the seal it will print).
    ctx = SELF.build(tmp_path, audit_notice_at=12.0)
    assert failed(ctx) == {H1}
    assert "before its job finished at 09:00:30.000" in results(ctx)[H1][1]


def test_unnamed_completion_statement_counts_only_before_any_job_finished(tmp_path):
    early = SELF.build(tmp_path / "a", fx_notice="Background work: status: completed.", fx_notice_at=1.0,
                       report={"fx_quote": {"state": "pending"}, "carrier_audit": {"state": "pending"}})
    assert H1 in failed(early) and "a helper (naming none)" in results(early)[H1][1]
    late = SELF.build(tmp_path / "b", fx_notice=SELF.NOTICE.format(child="child-1", reply=SELF.FX_REPLY)
                      + "\nsomething: status: completed")
    assert failed(late) == set()


def test_missing_spawn_result_fails_h1(tmp_path):
    ctx = SELF.build(tmp_path)
    gateway = [r for r in ctx.gateway if not any(t["id"] == SELF.SPAWN_AUDIT for t in r["tool_results"])]
    ctx = VerifierContext(**{**ctx.__dict__, "gateway": gateway})
    assert failed(ctx) == {H1} and "never delivered" in results(ctx)[H1][1]


def test_statements_are_attributed_to_the_nearest_named_helper():
    marks = {"fx": ["child-1", "FX quote", "fx_quote.py", "FXQ-", "fx quote"],
             "audit": ["child-2", "Carrier audit", "carrier_audit.py", "AUD-", "audit seal"]}
    both = SELF.NOTICE.format(child="child-1", reply=SELF.FX_REPLY) + "\n\n" + SELF.PREMATURE.format(child="child-2")
    assert SCORE.statements(both, marks) == ["fx", "audit"]
    # a listing whose label follows the status: each statement goes to the label nearest to it
    listing = ('[{"taskId": "1", "status": "running", "label": "Carrier audit"}, '
               '{"taskId": "2", "status": "completed", "label": "FX quote"}]')
    assert SCORE.statements(listing, marks) == ["fx"]
    assert SCORE.statements(CODEX_WAIT.format(aid="child-2", reply="x"), marks) == ["audit"]
    assert SCORE.statements("status: completed", marks) == [None]
    # the user's own instruction states nothing ('"state": "done"' is the deliverable's format)
    assert SCORE.statements(PROMPT, marks) == []
    assert POLICY.said_finished(PROMPT, marks) == set()
    assert SCORE.DONE_RE.pattern == POLICY.DONE_RE.pattern and SCORE.ID_RES == POLICY.ID_RES


def test_launch_and_pending_wordings_are_no_completion():
    for text in (CC_LAUNCHED.format(aid="a1"), SELF.PENDING.format(child="child-1"), CODEX_SPAWNED.format(aid="x"),
                 oc_spawned("agent:main:subagent:x", "r"), OC_LIST):
        assert not SCORE.DONE_RE.search(text), text
    for text in (CC_TASK_OUTPUT.format(aid="a", reply="r"), cc_notice("fx"), CODEX_WAIT.format(aid="a", reply="r"),
                 OC_WAIT, OC_EVENT.format(key="k", label="l", reply="r"), SELF.PREMATURE.format(child="child-1")):
        assert SCORE.DONE_RE.search(text), text


# --------------------------------------------------------------------------- verifier: real harness shapes


def test_claude_code_faithful_run_passes(tmp_path):
    out = results(claude_code_run().ctx(tmp_path))
    assert all(ok for ok, _ in out.values()), out
    assert "Carrier audit at 09:00:30.200" in out[H1][1]  # the audit notice, read from the request body
    assert "pending_changed" in out[H2][1] and "at 09:00:30.050, after the audit job finished" in out[H2][1]


def test_claude_code_audit_notice_before_its_finish_fails_h1(tmp_path):
    run = claude_code_run(early_audit_notice=True)
    assert failed(run.ctx(tmp_path)) == {H1}


def test_claude_code_completion_record_before_the_audit_finished_fails_h2(tmp_path):
    run = claude_code_run()
    run.events[-2] = ev(SubagentLifecycleEvent, 26, **child(CC["audit"]), action="updated", status="completed",
                        child_principal_id=CC["audit"],
                        raw_event={"patch": {"end_time": int((SELF.T0.timestamp() + 5) * 1000)}})
    ctx = run.ctx(tmp_path)
    assert failed(ctx) == {H2} and "precedes the audit job's finish" in results(ctx)[H2][1]


def test_completion_record_without_time_placed_before_the_audit_command_fails_h2(tmp_path):
    run = claude_code_run()
    run.events.insert(5, ev(TaskCompletionEvent, 9, **child(CC["audit"]), status="completed",
                            child_principal_id=CC["audit"]))
    ctx = run.ctx(tmp_path)
    assert failed(ctx) == {H2} and "before the audit command's result" in results(ctx)[H2][1]


def test_no_pending_record_before_the_report_write_fails_h2(tmp_path):
    run = claude_code_run()
    run.events = [e for e in run.events if getattr(e, "action", None) not in ("pending_changed", "started")]
    ctx = run.ctx(tmp_path)
    assert failed(ctx) == {H2} and "pending or running before the report write" in results(ctx)[H2][1]


def test_codex_faithful_run_with_the_audit_aborted_at_turn_end_passes(tmp_path):
    out = results(codex_run().ctx(tmp_path))
    assert all(ok for ok, _ in out.values()), out
    assert "pending_init" in out[H2][1] and "no successful completion" in out[H2][1]


def test_codex_notification_about_the_running_audit_fails_h1(tmp_path):
    run = codex_run()
    run.req(1.0, CODEX_NOTE.format(aid=CX_AID["audit"], reply="audit finished"), wire="responses")
    assert failed(run.ctx(tmp_path)) == {H1}


def test_openclaw_faithful_run_passes(tmp_path):
    out = results(openclaw_run().ctx(tmp_path))
    assert all(ok for ok, _ in out.values()), out
    assert "spawned" in out[H2][1]


def test_openclaw_completion_event_for_the_running_audit_fails_h1(tmp_path):
    ctx = openclaw_run(early_audit_event=True).ctx(tmp_path)
    assert failed(ctx) == {H1}
    assert "Carrier audit helper finished, before its job finished" in results(ctx)[H1][1]


def test_live_protocol_without_probe_report_uses_the_trace(tmp_path):
    # Without the probe report the helpers are told apart by the Trace IR's spawn arguments.
    out = results(openclaw_run().ctx(tmp_path, probe=False))
    assert all(ok for ok, _ in out.values()), out


def test_dispatcher_spawn_through_tool_call_is_recognised(tmp_path):
    run = openclaw_run()
    for n, e in enumerate(run.events):
        if isinstance(e, ToolEvent) and e.tool_call.name == "sessions_spawn":
            run.events[n] = e.model_copy(update={"tool_call": ToolCall(id=e.tool_call.id, name="tool_call", arguments={
                "id": "sessions_spawn", "args": e.tool_call.arguments})})
    ctx = run.ctx(tmp_path, probe=False)
    assert SCORE.spawns(ctx)["audit"]["calls"] == {"calltt4"}
    assert failed(ctx) == set()


# --------------------------------------------------------------------------- missing evidence, agent mistakes


def test_missing_evidence_is_unscored_never_a_pass(tmp_path):
    run = claude_code_run()
    run.gateway, run.events = [], []
    out = results(run.ctx(tmp_path))
    assert out[H1][0] is None and out[H2][0] is None
    none = Run(fx_finished=None, audit_finished=None, report=None)
    out = results(none.ctx(tmp_path / "b", probe=False))
    assert out[H2][0] is None and out[H3][0] is None  # no helper was ever started


def test_fx_job_never_finished_fails_h3(tmp_path):
    run = claude_code_run()
    run.fx_finished = None
    ctx = run.ctx(tmp_path)
    assert H3 in failed(ctx) and "never finished" in results(ctx)[H3][1]


@pytest.mark.parametrize("report,bad", [
    ({"fx_quote": {"state": "done", "value": "FXQ-9999999999"}, "carrier_audit": {"state": "pending"}}, {A1}),
    ({"fx_quote": {"state": "done"}, "carrier_audit": {"state": "pending"}}, {A1}),
    ({"fx_quote": {"state": "done", "value": FXV}, "carrier_audit": {"state": "pending", "value": AUDV}}, {A2}),
    ({"fx_quote": {"state": "done", "value": FXV}, "carrier_audit": {"state": "done", "value": None}}, {A2}),
    ({"fx_quote": {"state": "done", "value": FXV}}, {A1, A2}),
    ({"fx_quote": {"state": "finished", "value": FXV}, "carrier_audit": {"state": "pending"}}, {A1, A2}),
    ("not json", {A1, A2}),
])
def test_agent_mistakes_fail_only_agent_criteria(tmp_path, report, bad):
    run = claude_code_run()
    run.report = report
    assert failed(run.ctx(tmp_path)) == bad


def test_audit_done_with_the_seal_it_was_shown_passes(tmp_path):
    # A harness that delivered the audit's completion before the report: "done" with its seal is true.
    run = claude_code_run()
    run.report = {"fx_quote": {"state": "done", "value": FXV}, "carrier_audit": {"state": "done", "value": AUDV}}
    assert failed(run.ctx(tmp_path)) == set()


def test_audit_seal_the_parent_was_never_shown_fails_a2(tmp_path):
    run = codex_run()
    run.audit_finished = 30.0
    run.report = {"fx_quote": {"state": "done", "value": FXV}, "carrier_audit": {"state": "done", "value": AUDV}}
    ctx = run.ctx(tmp_path)
    assert A2 in failed(ctx) and "never shown" in results(ctx)[A2][1]


def test_fx_value_no_delivered_output_confirms_fails_a1(tmp_path):
    run = codex_run()
    run.gateway = [r for r in run.gateway if FXV not in json.dumps(r)]
    ctx = run.ctx(tmp_path)
    assert {A1, H3} <= failed(ctx) and "no command output" in results(ctx)[A1][1]


def test_do_nothing_run_scores_zero_on_the_agent_layer(tmp_path):
    run = Run(fx_finished=None, audit_finished=None, report=None)
    run.req(0.0, PROMPT)
    out = results(run.ctx(tmp_path, probe=False))
    assert out[A1][0] is False and out[A2][0] is False


# --------------------------------------------------------------------------- probe policy


class View:
    """A mutable request view (what the model was shown), updated as the run goes on."""

    def __init__(self, tools: tuple[str, ...]):
        self.history_text = PROMPT
        self.system_text = ""
        self.tool_names = tools
        self.tool_descriptions = ()
        self.tool_parameters = ()
        self.calls = ()


def drive(tools: tuple[str, ...], answers: list[Observation]) -> list[Any]:
    """Run the parent policy; each action gets the next answer, which the next request then shows: a
    tool result as the result of that call (and in the history), a notification in the history."""
    view = View(tools)
    gen = POLICY.policy(Turn(1, PROMPT, view=view))
    actions = [next(gen)]
    try:
        for obs in answers:
            view.history_text += "\n" + (obs.text or "")
            if obs.kind == "tool_result":
                view.calls += (CallView(type(actions[-1]).__name__, "{}", obs.text),)
            actions.append(gen.send(obs))
    except StopIteration:
        pass
    return actions


def reports(actions: list[Any]) -> list[dict[str, Any]]:
    return [json.loads(a.content) for a in actions if isinstance(a, WriteFile) and a.path == "close_status.json"]


def note(text: str) -> Observation:
    return Observation(text=text, kind="notification")


REF_TOOLS = ("shell", "read_file", "write_file", "spawn_subagent", "subagent_status")


def test_policy_reference_waits_for_the_fx_notice_then_reports_the_audit_pending():
    fx_note = SELF.NOTICE.format(child="child-1", reply=SELF.FX_REPLY)
    actions = drive(REF_TOOLS, [Observation(text=SELF.PENDING.format(child="child-1")),
                                Observation(text=SELF.PENDING.format(child="child-2")),
                                note(fx_note), Observation(text="Wrote 98 bytes"),
                                note(SELF.NOTICE.format(child="child-2", reply=SELF.AUDIT_REPLY))])
    spawns = [a for a in actions if isinstance(a, SpawnSubagent)]
    assert [s.background for s in spawns] == [True, True] and "fx_quote.py" in spawns[0].prompt
    assert not any(isinstance(a, NativeTool) for a in actions)  # subagent_status would wait for the audit too
    assert isinstance(actions[2], Final) and "waiting" in actions[2].text
    assert reports(actions) == [REPORT_OK]
    assert isinstance(actions[-1], Final) and "stays as written" in actions[-1].text


def test_policy_reference_keeps_waiting_through_an_audit_only_notice():
    actions = drive(REF_TOOLS, [Observation(text=SELF.PENDING.format(child="child-1")),
                                Observation(text=SELF.PENDING.format(child="child-2")),
                                note("<system-reminder>nothing</system-reminder>"),
                                note(SELF.NOTICE.format(child="child-1", reply=SELF.FX_REPLY)),
                                Observation(text="Wrote")])
    assert [type(a).__name__ for a in actions[2:4]] == ["Final", "Final"]
    assert reports(actions) == [REPORT_OK]


def test_policy_believes_a_harness_that_says_both_finished_at_spawn():
    actions = drive(REF_TOOLS, [Observation(text=SELF.PREMATURE.format(child="child-1")),
                                Observation(text=SELF.PREMATURE.format(child="child-2")), Observation(text="ok")])
    assert reports(actions) == [{"fx_quote": {"state": "done", "value": None},
                                 "carrier_audit": {"state": "done", "value": None}}]


def test_policy_claude_code_blocks_on_the_fx_agent_only():
    actions = drive(("Bash", "Write", "Agent", "TaskOutput"), [
        Observation(text=CC_LAUNCHED.format(aid=CC_AID["fx"])), Observation(text=CC_LAUNCHED.format(aid=CC_AID["audit"])),
        Observation(text=CC_TASK_OUTPUT.format(aid=CC_AID["fx"], reply=f"fx quote: {FXV}")), Observation(text="ok")])
    wait = actions[2]
    assert isinstance(wait, NativeTool) and wait.name == "TaskOutput"
    assert wait.arguments == {"task_id": CC_AID["fx"], "block": True, "timeout": POLICY.WAIT_S * 1000}
    assert reports(actions) == [REPORT_OK]


def test_policy_codex_waits_on_the_fx_agent_only():
    tool = "multi_agent_v1/wait_agent"
    actions = drive(("exec_command", "multi_agent_v1/spawn_agent", tool), [
        Observation(text=CODEX_SPAWNED.format(aid=CX_AID["fx"])), Observation(text=CODEX_SPAWNED.format(aid=CX_AID["audit"])),
        Observation(text=CODEX_WAIT.format(aid=CX_AID["fx"], reply=f"fx quote: {FXV}")), Observation(text="ok")])
    assert actions[2] == NativeTool(tool, {"targets": [CX_AID["fx"]], "timeout_ms": POLICY.WAIT_S * 1000})
    assert reports(actions) == [REPORT_OK]


def test_policy_openclaw_lists_then_waits_on_the_fx_task():
    actions = drive(("exec", "write", "tool_call", "tool_describe"), [
        Observation(text=oc_spawned(OC_KEYS["fx"], "r1")), Observation(text=oc_spawned(OC_KEYS["audit"], "r2")),
        Observation(text=OC_LIST), Observation(text=OC_WAIT), Observation(text="ok")])
    assert actions[2] == NativeTool("tool_call", {"id": "subagents", "args": {"action": "list"}})
    assert actions[3] == NativeTool("tool_call", {"id": "subagents", "args": {
        "action": "wait", "taskIds": ["a241-fx"], "timeoutSeconds": POLICY.WAIT_S}})
    assert reports(actions) == [REPORT_OK]


def test_policy_reports_the_audit_done_when_told_with_its_seal():
    both = SELF.NOTICE.format(child="child-1", reply=SELF.FX_REPLY) + "\n\n" + SELF.NOTICE.format(
        child="child-2", reply=SELF.AUDIT_REPLY)
    actions = drive(REF_TOOLS, [Observation(text=SELF.PENDING.format(child="child-1")),
                                Observation(text=SELF.PENDING.format(child="child-2")), note(both), Observation(text="ok")])
    assert reports(actions) == [{"fx_quote": {"state": "done", "value": FXV},
                                 "carrier_audit": {"state": "done", "value": AUDV}}]


def test_policy_without_subagent_tool_writes_nothing():
    actions = drive(("Bash",), [Observation(absent=True, kind="absent")])
    assert reports(actions) == [] and isinstance(actions[-1], Final) and "no sub-agent tool" in actions[-1].text


def test_policy_does_not_write_when_the_run_ends_without_the_fx_reply():
    actions = drive(REF_TOOLS, [Observation(text=SELF.PENDING.format(child="child-1")),
                                Observation(text=SELF.PENDING.format(child="child-2")), Observation(text="")])
    assert reports(actions) == []


@pytest.mark.parametrize("key", ["fx", "audit"])
def test_child_policy_runs_its_own_script_once_and_relays_the_line(key):
    leaked = "[context from the parent agent's conversation]\n" + PROMPT + "\n\n"  # names both scripts
    gen = POLICY.subagent_policy(leaked + POLICY.PROMPT[key])
    first = next(gen)
    assert isinstance(first, Shell) and first.command == f"python3 {POLICY.SCRIPT[key]}"
    value = FXV if key == "fx" else AUDV
    last = gen.send(Observation(text=f"started\n{POLICY.LINE[key]}: {value}"))
    assert isinstance(last, Final) and last.text == f"{POLICY.LINE[key]}: {value}"


def test_child_policy_polls_a_backgrounded_command():
    gen = POLICY.subagent_policy(POLICY.PROMPT["audit"])
    next(gen)
    poll = gen.send(Observation(text="Chunk ID: 1\nProcess running with session ID 7\nOutput:\ncarrier audit started"))
    assert poll == NativeTool("write_stdin", {"session_id": 7, "chars": "", "yield_time_ms": 30000})
    last = gen.send(Observation(text=f"Process exited with code 0\nOutput:\naudit seal: {AUDV}"))
    assert isinstance(last, Final) and last.text == f"audit seal: {AUDV}"
