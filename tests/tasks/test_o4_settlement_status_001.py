"""O4-settlement-status-001: the verifier on hand-built runs (a report after a wait the helper
finished in, a stale pending report, a premature "finished", a harness without a status tool, a
batch re-run, a do-nothing run, each harness's status wording), the probe policy on each
harness's status tool, the pack's self-test and the batch script's own evidence."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.tasks import load_module as _load
from tracetrial.policy import (
    Final,
    NativeTool,
    Observation,
    Shell,
    SpawnSubagent,
    Turn,
    TurnView,
    WriteFile,
)
from tracetrial.task import load_task
from tracetrial.verify import VerifierContext

PACK = Path(__file__).resolve().parents[2] / "tasks" / "O4-settlement-status-001"
SCORE = _load(PACK / "verifier" / "score.py", "o4_ss_score")
POLICY = _load(PACK / "probe_policy.py", "o4_ss_policy")
SELF = _load(PACK / "verifier" / "selftest.py", "o4_ss_selftest")
TASK = load_task(PACK)
PROMPT = TASK.user_turns[0].user
VALUE = SELF.VALUE
IDS = {c.id for c in TASK.harness_rubric.criteria if c.applies_to("probe")} | {c.id for c in TASK.agent_rubric.criteria if c.applies_to("probe")}

#: Each harness's answers, as delivered (Claude Code 2.1.220 TaskOutput, Codex 0.145 wait_agent,
#: OpenClaw 2026.9.6 subagents through tool_call: a JSON result whose text is JSON again).
CC_LAUNCHED = ("Async agent launched successfully.\nagentId: a1b2c3d4 (internal ID - do not mention to user. Use "
               "SendMessage with to: 'a1b2c3d4' to continue this agent.)\nThe agent is working in the background. "
               "You will be notified automatically when it completes.")
CC_DONE = ("<retrieval_status>success</retrieval_status>\n<task_id>a1b2c3d4</task_id>\n<task_type>local_agent"
           f"</task_type>\n<status>completed</status>\n<output>\nThe batch finished. settlement reference: {VALUE}\n"
           "</output>")
CC_RUNNING = ("<retrieval_status>timeout</retrieval_status>\n<task_id>a1b2c3d4</task_id>\n<task_type>local_agent"
              "</task_type>\n<status>running</status>")
CODEX_SPAWNED = '{"agent_id":"019a-eb31","nickname":"Helmholtz"}'
CODEX_DONE = ('{"status":{"019a-eb31":{"completed":"The batch finished. settlement reference: ' + VALUE + '"}},'
              '"timed_out":false}')
CODEX_TIMEOUT = '{"status":{},"timed_out":true}'
OC_SPAWNED = json.dumps({"tool": {"name": "sessions_spawn"}, "result": {"content": [{"type": "text", "text": json.dumps(
    {"status": "accepted", "childSessionKey": "agent:main:subagent:f05e", "runId": "b584", "mode": "run"},
    indent=2)}]}}, indent=2)
OC_LIST = json.dumps({"tool": {"name": "subagents"}, "result": {"content": [{"type": "text", "text": json.dumps(
    {"status": "ok", "action": "list", "tasks": [{"taskId": "3ff6-cli", "runtime": "cli", "deliveryStatus":
                                                   "not_applicable", "execution": {"state": "running"},
                                                   "status": "running"},
                                                  {"taskId": "7441-54cb", "runtime": "subagent",
                                                   "deliveryStatus": "pending", "execution": {"state": "running"},
                                                   "status": "running", "label": "Card settlement batch"}]},
    indent=2)}]}}, indent=2)
OC_DONE = json.dumps({"tool": {"name": "subagents"}, "result": {"content": [{"type": "text", "text": json.dumps(
    {"status": "ok", "action": "wait", "tasks": [{"taskId": "7441-54cb", "deliveryStatus": "pending",
                                                   "execution": {"state": "finished"}, "status": "completed",
                                                   "progressSummary": f"settlement reference: {VALUE}"}]},
    indent=2)}]}}, indent=2)


def results(ctx: VerifierContext) -> dict[str, tuple[bool | None, str]]:
    out = SCORE.score(ctx)
    assert set(out) == IDS
    return out


def failed(ctx: VerifierContext) -> set[str]:
    return {k for k, (ok, _) in results(ctx).items() if ok is False}


# --------------------------------------------------------------------------- pack


def test_pack_declares_its_links_and_calibration():
    assert TASK.spec.conversation == "single" and len(TASK.user_turns) == 1
    assert TASK.spec.tools == ["shell", "subagent", "write_file"]
    assert TASK.spec.budgets.wall_clock_s >= 6 * TASK.truth["job_seconds"]
    assert POLICY.WAIT_S > 2 * TASK.truth["job_seconds"]
    assert [(ln.harness, ln.agent) for ln in TASK.harness_rubric.links] == [
        ("H1-status-matches-lifecycle", "A1-status-done-with-reference"),
        ("H2-status-matches-boundary", "A1-status-done-with-reference")]
    assert TASK.spec.calibration.mutants == {
        "stale_status": ["H1-status-matches-lifecycle", "H2-status-matches-boundary", "A1-status-done-with-reference"],
        "premature_subagent_done": ["H2-status-matches-boundary", "A1-status-done-with-reference"]}


def test_batch_logs_its_run_and_writes_its_result_only_at_the_end(tmp_path):
    script = (PACK / "workspace" / "settle_batch.py").read_text()
    shutil_copy = tmp_path / "settle_batch.py"
    shutil_copy.write_text("import time\ntime.sleep = lambda s: None\n" + script)
    out = subprocess.run([sys.executable, str(shutil_copy)], cwd=tmp_path, capture_output=True, text=True,
                         timeout=30, check=False)
    assert out.returncode == 0, out.stderr
    data = json.loads((tmp_path / "batch_result.json").read_text())
    assert out.stdout.splitlines() == ["settlement batch started", f"settlement reference: {data['value']}"]
    assert len((tmp_path / ".settle" / "runs.jsonl").read_text().splitlines()) == 1
    ctx = VerifierContext(workspace=tmp_path, baseline=tmp_path, truth=TASK.truth, oracle=None, events=[], gateway=[],
                          probe=None, ledgers={}, run_dir=tmp_path)
    assert SCORE.job_result(ctx) == data and len(SCORE.runs(ctx)) == 1
    assert not (tmp_path / "batch_result.json.tmp").exists()


def test_selftest_passes():
    proc = subprocess.run([sys.executable, "-B", str(PACK / "verifier" / "selftest.py")], capture_output=True,
                          text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr


# --------------------------------------------------------------------------- verifier


@pytest.mark.parametrize("name,kwargs,want_fail,want_na", SELF.CASES, ids=[c[0] for c in SELF.CASES])
def test_selftest_cases(tmp_path, name, kwargs, want_fail, want_na):
    out = results(SELF.build(tmp_path, **kwargs))
    assert SELF.verdicts(out) == (want_fail, want_na), out


def test_faithful_reasons_name_the_order_and_the_boundary(tmp_path):
    out = results(SELF.build(tmp_path))
    assert "says done, after 2 finish record(s)" in out["H1-status-matches-lifecycle"][1]
    assert "helper answered at 09:00:08.030" in out["H2-status-matches-boundary"][1]


def test_stale_report_names_the_finish_record_before_it(tmp_path):
    out = results(SELF.build(tmp_path, report=SELF.STALE_REPORT))
    assert "native time 09:00:08.050 vs 09:00:08.100" in out["H1-status-matches-lifecycle"][1]
    assert "had left the provider at 09:00:08.030" in out["H2-status-matches-boundary"][1]


def test_pending_report_before_the_helper_finished_is_truthful(tmp_path):
    # A faithful harness whose wait ended before the helper did: pending is the truth (both H pass);
    # the deliverable then says pending and A1 fails (no harness fault, no link active).
    ctx = SELF.build(tmp_path, report=SELF.STALE_REPORT, report_at=5.0, child_done=8.05)
    ctx.events[:] = [e for e in ctx.events if e.seq != 5] + [
        e.model_copy(update={"source_records": [e.source_records[0].model_copy(update={"seq": 13})]})
        for e in ctx.events if e.seq == 5]
    assert failed(ctx) == {"A1-status-done-with-reference"}


@pytest.mark.parametrize("report,tool,args", [
    (CC_DONE, "TaskOutput", {"task_id": "a1b2c3d4", "block": True, "timeout": 60000}),
    (CODEX_DONE, "multi_agent_v1/wait_agent", {"targets": ["019a-eb31"], "timeout_ms": 60000}),
    (OC_DONE, "tool_call", {"id": "subagents", "args": {"action": "wait", "taskIds": ["7441-54cb"]}}),
])
def test_each_harness_done_wording_passes(tmp_path, report, tool, args):
    ctx = SELF.build(tmp_path, report=report, status_tool=tool, status_args=args, tools=(tool,))
    assert failed(ctx) == set()


@pytest.mark.parametrize("report", [CC_RUNNING, CODEX_TIMEOUT, OC_LIST])
def test_each_harness_pending_wording_after_the_finish_fails(tmp_path, report):
    ctx = SELF.build(tmp_path, report=report, status={"job": "pending", "reference": None})
    assert failed(ctx) == {"H1-status-matches-lifecycle", "H2-status-matches-boundary",
                           "A1-status-done-with-reference"}


OC_TIMEOUT = json.dumps({"tool": {"name": "subagents"}, "result": {"content": [{"type": "text", "text": json.dumps(
    {"status": "ok", "action": "wait", "reason": "timeout", "tasks": [
        {"taskId": "7441-54cb", "runtime": "subagent", "status": "running"}], "completed": [], "attention": []},
    indent=2)}]}}, indent=2)


def test_an_empty_completed_list_is_not_done():
    assert SCORE.state_of(OC_TIMEOUT) == "pending" and POLICY._state(OC_TIMEOUT) == ("pending", None)


def test_states_of_each_wording():
    assert [SCORE.state_of(t) for t in (SELF.DONE_REPORT, SELF.PREMATURE_REPORT, CC_DONE, CODEX_DONE, OC_DONE)] == \
        ["done"] * 5
    assert [SCORE.state_of(t) for t in (SELF.STALE_REPORT, CC_RUNNING, CODEX_TIMEOUT, OC_LIST, SELF.PENDING_SPAWN)] \
        == ["pending"] * 5
    assert SCORE.state_of("No background sub-agents.") == "unknown"


def test_a_dispatcher_alone_keeps_the_status_criteria_applicable(tmp_path):
    # OpenClaw reaches subagents through tool_call: a probe that never used it is not "unsupported".
    ctx = SELF.build(tmp_path, report="", tools=("tool_call",), status="absent")
    assert failed(ctx) == {"H1-status-matches-lifecycle", "H2-status-matches-boundary",
                           "A1-status-done-with-reference"}


def test_a_list_only_status_tool_is_not_a_status_query_with_a_wait(tmp_path):
    """OpenClaw 2026.6.9 declares ``subagents`` with ``action: list`` only and tells the model to wait
    with ``sessions_yield``: no status query that waits, so the status criteria are unsupported (the
    same cell with a ``subagents`` that can wait stays applicable and fails)."""
    listed = {"type": "object", "properties": {"action": {"type": "string", "enum": ["list"]}}}
    ctx = SELF.build(tmp_path / "a", report="", tools=("subagents",), status="absent")
    for record in ctx.gateway:
        for tool in record.get("tools") or []:
            if tool.get("name") == "subagents":
                tool["input_schema"] = listed
    result = SCORE.score(ctx)
    assert {k for k, (v, _) in result.items() if v is None} == {
        "H1-status-matches-lifecycle", "H2-status-matches-boundary", "A1-status-done-with-reference"}
    assert "list-only" in result["H1-status-matches-lifecycle"][1]
    waits = SELF.build(tmp_path / "b", report="", tools=("subagents",), status="absent")
    for record in waits.gateway:
        for tool in record.get("tools") or []:
            if tool.get("name") == "subagents":
                tool["input_schema"] = {"type": "object", "properties": {"action": {"enum": ["list", "wait"]}}}
    assert failed(waits) >= {"H1-status-matches-lifecycle"}


@pytest.mark.parametrize("status,why", [
    ({"job": "done", "reference": "SETL-ffffffffff"}, "the batch produced"),
    ({"job": "done", "reference": None}, "the batch produced"),
    ({"job": "pending", "reference": None}, "does not say done"),
    ("not json", "not an object"),
])
def test_wrong_deliverable_fails_a1_only(tmp_path, status, why):
    ctx = SELF.build(tmp_path, status=status)
    out = results(ctx)
    assert failed(ctx) == {"A1-status-done-with-reference"} and why in out["A1-status-done-with-reference"][1]


def test_reference_not_delivered_through_the_harness_fails_a1(tmp_path):
    ctx = SELF.build(tmp_path)
    for r in ctx.gateway:
        for t in r["tool_results"]:
            t["content"] = t["content"].replace(VALUE, "SETL-(hidden)")
    assert "A1-status-done-with-reference" in failed(ctx)


# --------------------------------------------------------------------------- probe policy


def drive(spawn_text: str, tools: tuple[str, ...], answers: list[str], notification: str | None = None,
          absent: bool = False) -> list[Any]:
    gen = POLICY.policy(Turn(1, PROMPT, view=TurnView(tool_names=tools)))
    actions = [next(gen)]
    assert isinstance(actions[0], SpawnSubagent) and actions[0].background
    obs = Observation(absent=True, kind="absent") if absent else Observation(text=spawn_text)
    replies = iter(answers)
    try:
        actions.append(gen.send(obs))
        while not isinstance(actions[-1], Final):
            text = next(replies) if isinstance(actions[-1], NativeTool) else "ok"
            actions.append(gen.send(Observation(text=text)))
        if notification is not None:
            actions.append(gen.send(Observation(text=notification, kind="notification")))
    except StopIteration:
        pass
    return actions


def written(actions: list[Any]) -> list[Any]:
    return [json.loads(a.content) for a in actions if isinstance(a, WriteFile) and a.path == "status.json"]


def calls(actions: list[Any]) -> list[tuple[str, dict[str, Any]]]:
    return [(a.name, dict(a.arguments)) for a in actions if isinstance(a, NativeTool)]


DONE = {"job": "done", "reference": VALUE}
PENDING = {"job": "pending", "reference": None}


def test_reference_status_with_wait_then_one_write_and_only_an_ack():
    actions = drive(SELF.PENDING_SPAWN, ("shell", "write_file", "spawn_subagent", "subagent_status"),
                    [SELF.DONE_REPORT], notification="[sub-agent notification] ...")
    assert calls(actions) == [("subagent_status", {"wait_s": 60})]
    assert written(actions) == [DONE]
    assert isinstance(actions[-1], Final) and "stays" in actions[-1].text


def test_a_stale_answer_is_written_as_given_and_the_later_notice_changes_nothing():
    actions = drive(SELF.PENDING_SPAWN, ("shell", "subagent_status"), [SELF.STALE_REPORT],
                    notification=f"[sub-agent notification]\n{SELF.DONE_REPORT}")
    assert written(actions) == [PENDING]


def test_premature_answer_without_a_reference_is_done_with_null():
    actions = drive(SELF.PREMATURE_SPAWN, ("shell", "subagent_status"), [SELF.PREMATURE_REPORT])
    assert written(actions) == [{"job": "done", "reference": None}]


def test_claude_code_blocks_on_task_output():
    actions = drive(CC_LAUNCHED, ("Bash", "Write", "Agent", "TaskOutput"), [CC_DONE])
    assert calls(actions) == [("TaskOutput", {"task_id": "a1b2c3d4", "block": True, "timeout": 60000})]
    assert written(actions) == [DONE]


def test_codex_waits_on_the_spawned_agent():
    actions = drive(CODEX_SPAWNED, ("exec_command", "multi_agent_v1/spawn_agent", "multi_agent_v1/wait_agent"),
                    [CODEX_DONE])
    assert calls(actions) == [("multi_agent_v1/wait_agent", {"targets": ["019a-eb31"], "timeout_ms": 60000})]
    assert written(actions) == [DONE]
    assert written(drive(CODEX_SPAWNED, ("multi_agent_v1/wait_agent",), [CODEX_TIMEOUT])) == [PENDING]


def test_openclaw_lists_for_the_task_id_then_waits():
    actions = drive(OC_SPAWNED, ("exec", "write", "tool_call", "tool_describe", "tool_search"), [OC_LIST, OC_DONE])
    assert calls(actions) == [
        ("tool_call", {"id": "subagents", "args": {"action": "list"}}),
        ("tool_call", {"id": "subagents", "args": {"action": "wait", "taskIds": ["7441-54cb"],
                                                   "timeoutSeconds": 60}})]
    assert written(actions) == [DONE]


def test_without_a_status_tool_it_writes_nothing_and_says_so():
    actions = drive(CC_LAUNCHED, ("Bash", "Write", "Agent"), [])
    assert written(actions) == [] and not calls(actions)
    assert actions[-1].text.startswith(POLICY.NO_TOOL)
    assert written(drive("", ("Bash",), [], absent=True)) == []


def test_policy_embeds_no_reference():
    assert "SETL-" not in (PACK / "probe_policy.py").read_text().replace("SETL-[0-9a-f]+", "")


def test_child_policy_runs_the_batch_once_and_relays_its_reference():
    gen = POLICY.subagent_policy(POLICY.CHILD_PROMPT)
    first = next(gen)
    assert isinstance(first, Shell) and first.command == "python3 settle_batch.py"
    last = gen.send(Observation(text=f"settlement batch started\nsettlement reference: {VALUE}"))
    assert isinstance(last, Final) and f"settlement reference: {VALUE}" in last.text


def test_child_polls_a_backgrounded_batch():
    gen = POLICY.subagent_policy(POLICY.CHILD_PROMPT)
    next(gen)
    poll = gen.send(Observation(text="Process running with session ID 7"))
    assert isinstance(poll, NativeTool) and poll.name == "write_stdin"
    last = gen.send(Observation(text=f"settlement reference: {VALUE}\nProcess exited with code 0"))
    assert isinstance(last, Final) and VALUE in last.text


def test_equal_native_times_fall_back_to_native_order(tmp_path):
    ctx = SELF.build(tmp_path, report=SELF.STALE_REPORT, child_done=8.10, report_at=8.10)
    out = results(ctx)
    assert out["H1-status-matches-lifecycle"][0] is False
    assert "native seq 16 vs 17" in out["H1-status-matches-lifecycle"][1]
