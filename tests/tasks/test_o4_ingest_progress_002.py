"""O4-ingest-progress-002: the verifier on hand-built runs (an immediate pending report while the
helper runs, a premature "finished" at spawn, a pending report after the helper finished, a
harness without a status tool, an ingest re-run, a rewritten deliverable, a do-nothing run, each
harness's status wording), the probe policy on each harness's status tool, the pack's self-test
and the ingest script's own evidence."""

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

PACK = Path(__file__).resolve().parents[2] / "tasks" / "O4-ingest-progress-002"
SCORE = _load(PACK / "verifier" / "score.py", "o4_ip_score")
POLICY = _load(PACK / "probe_policy.py", "o4_ip_policy")
SELF = _load(PACK / "verifier" / "selftest.py", "o4_ip_selftest")
TASK = load_task(PACK)
PROMPT = TASK.user_turns[0].user
VALUE = SELF.VALUE
IDS = {c.id for c in TASK.harness_rubric.criteria if c.applies_to("probe")} | {c.id for c in TASK.agent_rubric.criteria if c.applies_to("probe")}
H1, H2, A1, A2 = ("H1-status-matches-lifecycle", "H2-status-matches-boundary", "A1-progress-matches-state",
                  "A2-single-run")

#: Each harness's answers, as delivered (Claude Code 2.1.220 TaskOutput, Codex 0.145 wait_agent,
#: OpenClaw 2026.9.6 subagents through tool_call: a JSON result whose text is JSON again).
CC_LAUNCHED = ("Async agent launched successfully.\nagentId: a1b2c3d4 (internal ID - do not mention to user. Use "
               "SendMessage with to: 'a1b2c3d4' to continue this agent.)\nThe agent is working in the background. "
               "You will be notified automatically when it completes.")
CC_RUNNING = ("<retrieval_status>not_ready</retrieval_status>\n<task_id>a1b2c3d4</task_id>\n<task_type>local_agent"
              "</task_type>\n<status>running</status>")
CC_DONE = ("<retrieval_status>success</retrieval_status>\n<task_id>a1b2c3d4</task_id>\n<task_type>local_agent"
           f"</task_type>\n<status>completed</status>\n<output>\nThe ingest finished. ingest reference: {VALUE}\n"
           "</output>")
CODEX_SPAWNED = '{"agent_id":"019a-eb31","nickname":"Helmholtz"}'
CODEX_TIMEOUT = '{"status":{},"timed_out":true}'
CODEX_DONE = ('{"status":{"019a-eb31":{"completed":"The ingest finished. ingest reference: ' + VALUE + '"}},'
              '"timed_out":false}')
OC_SPAWNED = json.dumps({"tool": {"name": "sessions_spawn"}, "result": {"content": [{"type": "text", "text": json.dumps(
    {"status": "accepted", "childSessionKey": "agent:main:subagent:f05e", "runId": "b584", "mode": "run"},
    indent=2)}]}}, indent=2)


def oc_list(helper_status: str, progress: str = "") -> str:
    helper = {"taskId": "7441-54cb", "runtime": "subagent", "deliveryStatus": "pending",
              "execution": {"state": helper_status}, "status": helper_status, "label": "Event ingest"}
    if progress:
        helper["progressSummary"] = progress
    return json.dumps({"tool": {"name": "subagents"}, "result": {"content": [{"type": "text", "text": json.dumps(
        {"status": "ok", "action": "list", "tasks": [
            {"taskId": "3ff6-cli", "runtime": "cli", "deliveryStatus": "not_applicable",
             "execution": {"state": "running"}, "status": "running"}, helper]}, indent=2)}]}}, indent=2)


OC_LIST = oc_list("running")


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
    # Codex's shortest status query (a 10 s wait) must still end well before the ingest does.
    assert POLICY.CODEX_MIN_WAIT_MS / 1000 < TASK.truth["job_seconds"] / 2
    assert [(ln.harness, ln.agent) for ln in TASK.harness_rubric.links] == [(H1, A1), (H2, A1)]
    # stale_status must flip nothing here: without a wait nothing changes during the query.
    assert TASK.spec.calibration.mutants == {"premature_subagent_done": [H1, H2, A1]}


def test_ingest_logs_its_run_and_writes_its_result_only_at_the_end(tmp_path):
    script = (PACK / "workspace" / "ingest.py").read_text()
    copy = tmp_path / "ingest.py"
    copy.write_text("import time\ntime.sleep = lambda s: None\n" + script)
    out = subprocess.run([sys.executable, str(copy)], cwd=tmp_path, capture_output=True, text=True,
                         timeout=30, check=False)
    assert out.returncode == 0, out.stderr
    data = json.loads((tmp_path / "ingest_result.json").read_text())
    assert out.stdout.splitlines() == ["event ingest started", f"ingest reference: {data['value']}"]
    assert len((tmp_path / ".ingest" / "runs.jsonl").read_text().splitlines()) == 1
    ctx = VerifierContext(workspace=tmp_path, baseline=tmp_path, truth=TASK.truth, oracle=None, events=[], gateway=[],
                          probe=None, ledgers={}, run_dir=tmp_path)
    assert SCORE.job_result(ctx) == data and len(SCORE.runs(ctx)) == 1
    assert not (tmp_path / "ingest_result.json.tmp").exists()


def test_selftest_passes():
    proc = subprocess.run([sys.executable, "-B", str(PACK / "verifier" / "selftest.py")], capture_output=True,
                          text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr


# --------------------------------------------------------------------------- verifier


@pytest.mark.parametrize("name,kwargs,want_fail,want_na", SELF.CASES, ids=[c[0] for c in SELF.CASES])
def test_selftest_cases(tmp_path, name, kwargs, want_fail, want_na):
    out = results(SELF.build(tmp_path, **kwargs))
    assert SELF.verdicts(out) == (want_fail, want_na), out


def test_faithful_reasons_name_the_state_and_the_boundary(tmp_path):
    out = results(SELF.build(tmp_path))
    assert "says pending, no finish record before it" in out[H1][1]
    assert "helper answered at 09:00:25.530" in out[H2][1]
    assert "finished only at 09:00:25.500" in out[A1][1]


def test_premature_report_names_the_child_still_at_work(tmp_path):
    out = results(SELF.build(tmp_path, report=SELF.PREMATURE_REPORT, spawn_text=SELF.PREMATURE_SPAWN,
                             premature=True, finished=False))
    assert "still at work" in out[H1][1] and "has no recorded result" in out[H1][1]
    assert "never left the provider" in out[H2][1]


def test_done_report_before_the_childs_later_result_fails_h1(tmp_path):
    # The child's shell result is recorded (native seq 20) after a report that says done (seq 9).
    ctx = SELF.build(tmp_path, report=SELF.PREMATURE_REPORT, status=SELF.RUNNING)
    out = results(ctx)
    assert out[H1][0] is False and "native seq 20 vs 9" in out[H1][1]
    assert out[H2][0] is False and out[A1][0] is True


def test_done_report_after_the_helper_finished_passes(tmp_path):
    # A harness that was slow to ask: the helper had finished and answered; done is the truth.
    ctx = SELF.build(tmp_path, report=SELF.DONE_REPORT, report_at=25.7, report_seq=23)
    assert failed(ctx) == set()
    ctx = SELF.build(tmp_path / "b", report=SELF.DONE_REPORT, report_at=25.7, report_seq=23, status=SELF.RUNNING)
    assert failed(ctx) == {A1}


@pytest.mark.parametrize("report,tool,args", [
    (CC_RUNNING, "TaskOutput", {"task_id": "a1b2c3d4", "block": False}),
    (CODEX_TIMEOUT, "multi_agent_v1/wait_agent", {"targets": ["019a-eb31"], "timeout_ms": 10000}),
    (OC_LIST, "tool_call", {"id": "subagents", "args": {"action": "list"}}),
])
def test_each_harness_running_wording_passes(tmp_path, report, tool, args):
    ctx = SELF.build(tmp_path, report=report, status_tool=tool, status_args=args, tools=(tool,))
    assert failed(ctx) == set()


@pytest.mark.parametrize("report", [CC_DONE, CODEX_DONE, oc_list("completed")])
def test_each_harness_done_wording_while_the_helper_runs_fails(tmp_path, report):
    ctx = SELF.build(tmp_path, report=report, status={"job": "done", "reference": None})
    assert failed(ctx) == {H1, H2, A1}


def test_states_of_each_wording():
    assert [SCORE.state_of(t) for t in (SELF.DONE_REPORT, SELF.PREMATURE_REPORT, CC_DONE, CODEX_DONE)] == ["done"] * 4
    assert [SCORE.state_of(t) for t in (SELF.PENDING_REPORT, CC_RUNNING, CODEX_TIMEOUT, OC_LIST, SELF.PENDING_SPAWN)] \
        == ["pending"] * 5
    assert SCORE.state_of("No background sub-agents.") == "unknown"


def test_a_dispatcher_alone_keeps_the_status_criteria_applicable(tmp_path):
    ctx = SELF.build(tmp_path, report="", tools=("tool_call",), status="absent")
    assert failed(ctx) == {H1, H2, A1}


@pytest.mark.parametrize("status,why", [
    ({"job": "running", "reference": VALUE}, "must say running with no reference"),
    ({"job": "done", "reference": None}, "must say running"),
    ({"job": "pending", "reference": None}, "must say running"),
    ("not json", "invalid"),
])
def test_wrong_deliverable_fails_a1_only(tmp_path, status, why):
    ctx = SELF.build(tmp_path, status=status)
    out = results(ctx)
    assert failed(ctx) == {A1} and why in out[A1][1]


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
    return [json.loads(a.content) for a in actions if isinstance(a, WriteFile) and a.path == "progress.json"]


def calls(actions: list[Any]) -> list[tuple[str, dict[str, Any]]]:
    return [(a.name, dict(a.arguments)) for a in actions if isinstance(a, NativeTool)]


RUNNING = {"job": "running", "reference": None}


def test_reference_status_without_wait_then_one_write_and_only_an_ack():
    actions = drive(SELF.PENDING_SPAWN, ("shell", "write_file", "spawn_subagent", "subagent_status"),
                    [SELF.PENDING_REPORT], notification=f"[sub-agent notification]\n{SELF.DONE_REPORT}")
    assert calls(actions) == [("subagent_status", {"wait_s": 0})]
    assert written(actions) == [RUNNING]
    assert isinstance(actions[-1], Final) and "stays" in actions[-1].text


def test_premature_answer_without_a_reference_is_done_with_null():
    actions = drive(SELF.PREMATURE_SPAWN, ("shell", "subagent_status"), [SELF.PREMATURE_REPORT])
    assert written(actions) == [{"job": "done", "reference": None}]


def test_claude_code_reads_task_output_without_blocking():
    actions = drive(CC_LAUNCHED, ("Bash", "Write", "Agent", "TaskOutput"), [CC_RUNNING])
    assert calls(actions) == [("TaskOutput", {"task_id": "a1b2c3d4", "block": False})]
    assert written(actions) == [RUNNING]


def test_codex_uses_the_shortest_wait_it_accepts():
    actions = drive(CODEX_SPAWNED, ("exec_command", "multi_agent_v1/spawn_agent", "multi_agent_v1/wait_agent"),
                    [CODEX_TIMEOUT])
    assert calls(actions) == [("multi_agent_v1/wait_agent", {"targets": ["019a-eb31"], "timeout_ms": 10000})]
    assert written(actions) == [RUNNING]
    assert written(drive(CODEX_SPAWNED, ("multi_agent_v1/wait_agent",), [CODEX_DONE])) == [
        {"job": "done", "reference": VALUE}]


def test_openclaw_lists_once_and_reads_the_helpers_entry():
    actions = drive(OC_SPAWNED, ("exec", "write", "tool_call", "tool_describe", "tool_search"), [OC_LIST])
    assert calls(actions) == [("tool_call", {"id": "subagents", "args": {"action": "list"}})]
    assert written(actions) == [RUNNING]
    done = oc_list("completed", f"ingest reference: {VALUE}")
    assert written(drive(OC_SPAWNED, ("tool_call",), [done])) == [{"job": "done", "reference": VALUE}]


def test_without_a_status_tool_it_writes_nothing_and_says_so():
    actions = drive(CC_LAUNCHED, ("Bash", "Write", "Agent"), [])
    assert written(actions) == [] and not calls(actions)
    assert actions[-1].text.startswith(POLICY.NO_TOOL)
    assert written(drive("", ("Bash",), [], absent=True)) == []


def test_policy_embeds_no_reference():
    assert "INGS-" not in (PACK / "probe_policy.py").read_text().replace("INGS-[0-9a-f]+", "")


def test_child_policy_runs_the_ingest_once_and_relays_its_reference():
    gen = POLICY.subagent_policy(POLICY.CHILD_PROMPT)
    first = next(gen)
    assert isinstance(first, Shell) and first.command == "python3 ingest.py"
    last = gen.send(Observation(text=f"event ingest started\ningest reference: {VALUE}"))
    assert isinstance(last, Final) and f"ingest reference: {VALUE}" in last.text


def test_child_polls_a_backgrounded_ingest():
    gen = POLICY.subagent_policy(POLICY.CHILD_PROMPT)
    next(gen)
    poll = gen.send(Observation(text="Process running with session ID 7"))
    assert isinstance(poll, NativeTool) and poll.name == "write_stdin"
    last = gen.send(Observation(text=f"ingest reference: {VALUE}\nProcess exited with code 0"))
    assert isinstance(last, Final) and VALUE in last.text


def test_openclaw_2026_6_9_lists_once_through_its_directly_declared_subagents():
    """2026.6.9 (the pin) declares ``subagents`` (``list`` only) directly, with no dispatcher."""
    actions = drive(OC_SPAWNED, ("exec", "write", "sessions_spawn", "sessions_yield", "subagents"), [OC_LIST])
    assert calls(actions) == [("subagents", {"action": "list"})]
    assert written(actions) == [RUNNING]
