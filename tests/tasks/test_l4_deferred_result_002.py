"""L4-deferred-result-002: the verifier on hand-built two-turn runs (faithful reactivation, a
child stopped with turn 1, a premature "finished" at spawn, a completion lost from the resumed
turn, a notice sent too early, an undelivered turn, body / probe / trace evidence, agent mistakes,
a do-nothing run), the probe policy per turn on each harness's wording, the pack's self-test and
the batch script's own evidence."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from apparatus.gateway.wire import tool_result_entry
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
from tracetrial.trace import (
    ModelInputEvent,
    SubagentLifecycleEvent,
    ToolCall,
    ToolEvent,
    ToolResult,
)
from tracetrial.verify import VerifierContext

PACK = Path(__file__).resolve().parents[2] / "tasks" / "L4-deferred-result-002"
SCORE = _load(PACK / "verifier" / "score.py", "l4_dr_score")
POLICY = _load(PACK / "probe_policy.py", "l4_dr_policy")
TASK = load_task(PACK)
PROMPT, TURN2 = (t.user for t in TASK.user_turns)
T0 = datetime(2026, 11, 30, 9, 0, 0, tzinfo=UTC)
VALUE = "SETL-0123456789"
SPAWN, CHILD_BASH, WRITE1, WRITE2 = "toolu_tt_1", "toolu_tt_2", "toolu_tt_3", "toolu_tt_4"

REF_PENDING = ("Sub-agent child-1 started in the background (status: pending). Its result will be delivered to you "
               "when it finishes; subagent_status shows progress.")
LAUNCHED = ("Async agent launched successfully.\nagentId: a1b2c3 (internal ID)\nThe agent is working in the "
            "background. You will be notified automatically when it completes.")
CODEX_SPAWNED = '{"agent_id":"01a2-eb31","nickname":"Helmholtz"}'
PREMATURE = "Sub-agent child-1 finished (status: completed).\n(no output)"
REF_NOTICE = ("[sub-agent notification]\nSub-agent child-1 finished (status: completed).\n"
              f"The batch finished. settlement reference: {VALUE}")
CC_NOTICE = ("<task-notification>\n<task-id>a1b2c3</task-id>\n<status>completed</status>\n"
             f"<result>The batch finished. settlement reference: {VALUE}</result>\n</task-notification>")
SHOWN = f"result.json written. Settlement reference shown to me: {VALUE}."
NONE = "result.json written. Settlement reference shown to me: none."
PENDING = {"job": "pending"}
DONE = {"value": VALUE}
NULL = {"value": None}


def at(seconds: float) -> str:
    return (T0 + timedelta(seconds=seconds)).isoformat()


def request(i: int, t: float, results=(), user: str = PROMPT) -> dict[str, Any]:
    return {"index": i, "started_at": at(t), "status": 200, "tools": [{"name": "shell"}],
            "tool_results": [tool_result_entry(cid, False, text) for cid, text in results], "last_user_text": user}


def faithful_gateway(spawn_text: str = REF_PENDING, notice: str | None = REF_NOTICE, finished: bool = True,
                     notice_at: float = 15.1) -> list[dict[str, Any]]:
    reqs = [request(0, 0.0), request(1, 0.2, user=POLICY.CHILD_PROMPT), request(2, 0.3, [(SPAWN, spawn_text)]),
            request(3, 0.5, [(WRITE1, "Wrote 19 bytes to status.json")])]
    if finished:
        reqs.append(request(4, 15.02, [(CHILD_BASH, f"settlement batch started\nsettlement reference: {VALUE}")],
                            user=POLICY.CHILD_PROMPT))
    if notice is not None:
        reqs.append(request(5, notice_at, user=notice))
    reqs += [request(6, 17.0, user=TURN2), request(7, 17.3, [(WRITE2, "Wrote 29 bytes to result.json")], user=TURN2)]
    return reqs


def probe_report(final: str = SHOWN, turn2: bool = True) -> dict[str, Any]:
    reqs = [{"index": 1, "kind": "main", "principal": "main", "turn": 1, "action": "spawn_subagent", "call_id": SPAWN},
            {"index": 2, "kind": "subagent", "principal": "child-1", "turn": 1, "action": "shell",
             "call_id": CHILD_BASH},
            {"index": 3, "kind": "main", "principal": "main", "turn": 1, "action": "write_file", "call_id": WRITE1},
            {"index": 4, "kind": "main", "principal": "main", "turn": 1, "action": "final"}]
    if turn2:
        reqs += [{"index": 6, "kind": "main", "principal": "main", "turn": 2, "action": "write_file",
                  "call_id": WRITE2},
                 {"index": 7, "kind": "main", "principal": "main", "turn": 2, "action": "final"}]
    return {"requests": reqs, "final_text": final}


def ev(cls, seq: int, **kw):
    base = {"seq": seq, "timestamp": T0, "run_id": "r", "principal_id": "main", "principal_role": "main"}
    base.update(kw)
    return cls(**base)


def spawn_event(result: str = REF_PENDING) -> ToolEvent:
    return ev(ToolEvent, 1, tool_call=ToolCall(id=SPAWN, name="spawn_subagent", arguments={
        "description": "Card settlement batch", "prompt": POLICY.CHILD_PROMPT, "background": True}),
        tool_result=ToolResult(content=result))


def make_ctx(tmp_path: Path, *, status: Any = PENDING, result: Any = DONE, finished: bool = True,
             gateway: Any = None, probe: Any = "default", events: Any = None) -> VerifierContext:
    ws = tmp_path / "workspace"
    shutil.copytree(PACK / "workspace", ws)
    snap = tmp_path / "private" / "task" / TASK.id
    snap.mkdir(parents=True)
    for name in ("prompt.md", "turns.json"):
        shutil.copy(PACK / name, snap / name)
    if finished:
        (ws / "batch_result.json").write_text(json.dumps(
            {"value": VALUE, "started_at": T0.timestamp(), "finished_at": T0.timestamp() + 15.0}))
    for name, data in (("status.json", status), ("result.json", result)):
        if data is not None:
            (ws / name).write_text(data if isinstance(data, str) else json.dumps(data))
    return VerifierContext(workspace=ws, baseline=tmp_path / "baseline", truth=TASK.truth, oracle=None,
                           events=[spawn_event()] if events is None else list(events),
                           gateway=faithful_gateway(finished=finished) if gateway is None else gateway,
                           probe=probe_report() if probe == "default" else probe, ledgers={}, run_dir=tmp_path)


def results(ctx: VerifierContext) -> dict[str, tuple[bool, str]]:
    out = SCORE.score(ctx)
    ids = {c.id for c in TASK.harness_rubric.criteria if c.applies_to("probe")} | {c.id for c in TASK.agent_rubric.criteria if c.applies_to("probe")}
    assert set(out) == ids
    return out


def failed(ctx: VerifierContext) -> set[str]:
    return {k for k, (ok, _) in results(ctx).items() if not ok}


# --------------------------------------------------------------------------- pack


def test_pack_is_two_turns_with_a_resume_and_declares_its_links():
    assert TASK.spec.conversation == "multi" and len(TASK.user_turns) == 2
    assert TASK.turns.turns[0].session_boundary.kind == "resume"
    assert TASK.spec.tools == ["shell", "subagent", "write_file"]
    assert TASK.spec.budgets.wall_clock_s >= 6 * TASK.truth["job_seconds"]
    assert SCORE.TURN2_MARK in TURN2 and SCORE.SHOWN == POLICY.SHOWN
    assert [(ln.harness, ln.agent) for ln in TASK.harness_rubric.links] == [
        ("H1-no-premature-done-notice", "A1-status-not-invented"),
        ("H2-completion-in-turn2-input", "A2-result-holds-value"),
        ("H3-user-turns-delivered", "A2-result-holds-value")]
    assert set(TASK.spec.calibration.mutants) == {"premature_subagent_done", "lose_turn_fact"}


def test_batch_writes_its_result_only_at_the_end(tmp_path):
    script = (PACK / "workspace" / "settle_batch.py").read_text()
    fast = "import time\ntime.sleep = lambda s: None\n" + script
    out = subprocess.run([sys.executable, "-c", fast], cwd=tmp_path, capture_output=True, text=True, timeout=30,
                         check=False)
    assert out.returncode == 0, out.stderr
    data = json.loads((tmp_path / "batch_result.json").read_text())
    assert out.stdout.splitlines() == ["settlement batch started", f"settlement reference: {data['value']}"]
    ctx = VerifierContext(workspace=tmp_path, baseline=tmp_path, truth=TASK.truth, oracle=None, events=[], gateway=[],
                          probe=None, ledgers={}, run_dir=tmp_path)
    assert SCORE.job_result(ctx) == data
    assert not (tmp_path / "batch_result.json.tmp").exists()


def test_selftest_passes():
    proc = subprocess.run([sys.executable, "-B", str(PACK / "verifier" / "selftest.py")], capture_output=True,
                          text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr


# --------------------------------------------------------------------------- verifier


def test_faithful_run_passes(tmp_path):
    out = results(make_ctx(tmp_path))
    assert all(ok for ok, _ in out.values()), out
    assert "after the batch finished" in out["H1-no-premature-done-notice"][1]
    assert "probe report" in out["H2-completion-in-turn2-input"][1]
    assert out["H3-user-turns-delivered"][1] == "turn 1: request 0; turn 2: request 6"


def test_claude_style_notification_passes(tmp_path):
    gw = faithful_gateway(spawn_text=LAUNCHED, notice=CC_NOTICE)
    assert failed(make_ctx(tmp_path, gateway=gw)) == set()


def test_premature_done_at_spawn_fails_h1_h2_a1_a2(tmp_path):
    # The mutant: "finished" at spawn; the child is stopped with turn 1, nothing reaches turn 2.
    gw = faithful_gateway(spawn_text=PREMATURE, notice=None, finished=False)
    ctx = make_ctx(tmp_path, status={"job": "done", "value": None}, result=NULL, finished=False, gateway=gw,
                   probe=probe_report(NONE), events=[spawn_event(PREMATURE)])
    assert failed(ctx) == {"H1-no-premature-done-notice", "H2-completion-in-turn2-input",
                           "A1-status-not-invented", "A2-result-holds-value"}
    assert "never finished" in results(ctx)["H1-no-premature-done-notice"][1]


def test_child_stopped_with_turn_one_fails_h2_and_a2(tmp_path):
    # Codex-like: the parent's turn ends, the process (and its child) with it; turn 2 has nothing.
    gw = faithful_gateway(spawn_text=CODEX_SPAWNED, notice=None, finished=False)
    ctx = make_ctx(tmp_path, result=NULL, finished=False, gateway=gw, probe=probe_report(NONE))
    assert failed(ctx) == {"H2-completion-in-turn2-input", "A2-result-holds-value"}
    assert "never finished" in results(ctx)["H2-completion-in-turn2-input"][1]


def test_completion_lost_from_the_resumed_turn_fails_h2_and_a2(tmp_path):
    # lose_turn_fact: delivered at the end of turn 1, gone from the turn-2 context.
    ctx = make_ctx(tmp_path, result=NULL, probe=probe_report(NONE))
    assert failed(ctx) == {"H2-completion-in-turn2-input", "A2-result-holds-value"}
    assert "did not hold it" in results(ctx)["H2-completion-in-turn2-input"][1]


def test_notice_delivered_before_the_batch_finished_fails_h1(tmp_path):
    gw = faithful_gateway(notice=REF_NOTICE.replace(f"settlement reference: {VALUE}", "running"), notice_at=8.0)
    ctx = make_ctx(tmp_path, gateway=gw)
    assert failed(ctx) == {"H1-no-premature-done-notice"}
    assert "before the batch finished" in results(ctx)["H1-no-premature-done-notice"][1]


CC_SYSTEM_NOTICE = ("[SYSTEM NOTIFICATION - NOT USER INPUT]\nThis is an automated background-task event.\n"
                    + CC_NOTICE)


def write_bodies(tmp_path: Path, gateway: list[dict[str, Any]], notice_from: int | None, notice: str) -> None:
    """Anthropic-style bodies: the prompt, then (from request ``notice_from`` on) a harness-injected
    user-role notification the records' ``last_user_text`` leaves out; turn 2 keeps the real one."""
    bodies = tmp_path / "gateway" / "bodies"
    bodies.mkdir(parents=True, exist_ok=True)
    for r in gateway:
        msgs = [{"role": "user", "content": [{"type": "text", "text": PROMPT}]}]
        if notice_from is not None and r["index"] >= notice_from:
            msgs.append({"role": "user", "content": [{"type": "text", "text": notice}]})
        if r["last_user_text"] == TURN2:  # the real completion, kept in the resumed history
            msgs += [{"role": "user", "content": CC_SYSTEM_NOTICE}, {"role": "user", "content": TURN2}]
        (bodies / f"{r['index']}.json").write_text(json.dumps({"messages": msgs}))


def test_a_harness_injected_notice_is_read_from_the_bodies(tmp_path):
    # Claude Code: the notice is user-role text the gateway records leave out of last_user_text.
    gw = faithful_gateway(spawn_text=LAUNCHED, notice=None)
    ctx = make_ctx(tmp_path, gateway=gw)
    write_bodies(tmp_path, gw, 5, CC_SYSTEM_NOTICE)
    ok, why = results(ctx)["H1-no-premature-done-notice"]
    assert ok and "1 completion notice(s)" in why and "body" not in why


def test_a_premature_harness_injected_notice_in_the_bodies_fails_h1(tmp_path):
    gw = faithful_gateway(spawn_text=LAUNCHED, notice=None)
    ctx = make_ctx(tmp_path, gateway=gw)
    write_bodies(tmp_path, gw, 3, CC_SYSTEM_NOTICE.replace(f"settlement reference: {VALUE}", "(no output)"))
    assert failed(ctx) == {"H1-no-premature-done-notice"}
    assert "(body)" in results(ctx)["H1-no-premature-done-notice"][1]


def test_without_bodies_h1_says_what_it_could_not_see(tmp_path):
    gw = faithful_gateway(spawn_text=LAUNCHED, notice=None)
    ok, why = results(make_ctx(tmp_path, gateway=gw))["H1-no-premature-done-notice"]
    assert ok and "--tt-record-bodies" in why


def test_a_child_the_harness_stopped_is_named_in_h2(tmp_path):
    stop = ev(SubagentLifecycleEvent, 2, conversation_turn=1, action="aborted", status="aborted",
              stop_reason="interrupted", child_principal_id="01a2-eb31")
    gw = faithful_gateway(spawn_text=CODEX_SPAWNED, notice=None, finished=False)
    ctx = make_ctx(tmp_path, result=NULL, finished=False, gateway=gw, probe=probe_report(NONE),
                   events=[spawn_event(CODEX_SPAWNED), stop])
    assert failed(ctx) == {"H2-completion-in-turn2-input", "A2-result-holds-value"}
    assert "stopped in turn 1" in results(ctx)["H2-completion-in-turn2-input"][1]


def test_launch_texts_are_not_completion_notices():
    for text in (REF_PENDING, LAUNCHED, CODEX_SPAWNED):
        assert not SCORE.DONE_RE.search(text) and not POLICY.DONE_RE.search(text)
    for text in (REF_NOTICE, CC_NOTICE, PREMATURE):
        assert SCORE.DONE_RE.search(text)


def test_no_spawn_result_delivered_fails_h1(tmp_path):
    gw = [g for g in faithful_gateway() if not any(r["id"] == SPAWN for r in g["tool_results"])]
    assert "H1-no-premature-done-notice" in failed(make_ctx(tmp_path, gateway=gw))


def test_child_requests_are_not_parent_deliveries(tmp_path):
    gw = faithful_gateway()
    gw[1] = request(1, 0.2, user=POLICY.CHILD_PROMPT + "\n(status: completed earlier runs)")
    assert failed(make_ctx(tmp_path, gateway=gw)) == set()
    texts = [text for _, _, text, _ in SCORE.parent_deliveries(make_ctx(tmp_path / "b"))]
    assert not any("settlement batch started" in t for t in texts)  # the child's command output


def test_undelivered_turn_two_fails_h3_and_h2(tmp_path):
    gw = [g for g in faithful_gateway() if g["last_user_text"] != TURN2]
    ctx = make_ctx(tmp_path, result=None, gateway=gw, probe=probe_report(turn2=False))
    assert failed(ctx) == {"H2-completion-in-turn2-input", "H3-user-turns-delivered", "A2-result-holds-value"}
    assert "turn 2: never" in results(ctx)["H3-user-turns-delivered"][1]


def test_request_bodies_are_the_strongest_evidence(tmp_path):
    ctx = make_ctx(tmp_path, probe=probe_report(NONE))   # the probe's account says none ...
    bodies = tmp_path / "gateway" / "bodies"
    bodies.mkdir(parents=True)
    for r in ctx.gateway:
        (bodies / f"{r['index']}.json").write_text(json.dumps({"messages": [{"role": "user", "content": REF_NOTICE}]}))
    ok, why = results(ctx)["H2-completion-in-turn2-input"]
    assert ok and "request bodies" in why                # ... but the bodies show what was sent
    for i in (6, 7):
        (bodies / f"{i}.json").write_text(json.dumps({"messages": [{"role": "user", "content": TURN2}]}))
    assert results(ctx)["H2-completion-in-turn2-input"][0] is False


def test_harness_model_input_records_are_used_without_a_probe(tmp_path):
    def mi(texts: list[str]) -> ModelInputEvent:
        return ev(ModelInputEvent, 9, conversation_turn=2, messages=[{"role": "user", "content": t} for t in texts])
    ok = make_ctx(tmp_path, probe=None, events=[spawn_event(), mi([PROMPT, REF_NOTICE, TURN2])])
    assert results(ok)["H2-completion-in-turn2-input"][0] is True
    lost = make_ctx(tmp_path / "2", probe=None, events=[spawn_event(), mi([PROMPT, TURN2])])
    assert results(lost)["H2-completion-in-turn2-input"][0] is False


@pytest.mark.parametrize("status", [{"job": "done", "value": "SETL-9999999999"}, {"job": "done", "value": None},
                                   {"job": "done"}, {"job": "pending", "value": VALUE}])
def test_wrong_status_fails_a1_only(tmp_path, status):
    assert failed(make_ctx(tmp_path, status=status)) == {"A1-status-not-invented"}


def test_status_done_with_the_real_value_passes(tmp_path):
    assert failed(make_ctx(tmp_path, status={"job": "done", "value": VALUE})) == set()


@pytest.mark.parametrize("result", [{"value": "SETL-9999999999"}, "not json", {"reference": VALUE}, None])
def test_wrong_or_missing_result_fails_a2_only(tmp_path, result):
    assert failed(make_ctx(tmp_path, result=result)) == {"A2-result-holds-value"}


def test_value_not_confirmed_by_any_delivered_output_fails_the_agent_layer(tmp_path):
    gw = [g for g in faithful_gateway() if g["index"] != 4]   # the child's command output never delivered
    ctx = make_ctx(tmp_path, status={"job": "done", "value": VALUE}, gateway=gw)
    assert failed(ctx) == {"A1-status-not-invented", "A2-result-holds-value"}
    assert "no command output" in results(ctx)["A2-result-holds-value"][1]


def test_do_nothing_run_scores_zero_on_the_agent_layer(tmp_path):
    ctx = make_ctx(tmp_path, status=None, result=None, finished=False, events=[], gateway=[request(0, 0.0)], probe=None)
    assert {"A1-status-not-invented", "A2-result-holds-value"} <= failed(ctx)


# --------------------------------------------------------------------------- probe policy


def drive_turn1(spawn_text: str, notification: str | None = None, absent: bool = False) -> list[Any]:
    gen = POLICY.policy(Turn(1, PROMPT))
    actions = [next(gen)]
    assert isinstance(actions[0], SpawnSubagent) and actions[0].background
    obs = Observation(absent=True, kind="absent") if absent else Observation(text=spawn_text)
    try:
        actions.append(gen.send(obs))
        while not isinstance(actions[-1], Final):
            actions.append(gen.send(Observation(text="ok")))
        if notification is not None:
            actions.append(gen.send(Observation(text=notification, kind="notification")))
    except StopIteration:
        pass
    return actions


def drive_turn2(history: str, tools: tuple[str, ...] = ("shell", "write_file"),
                poll_text: str = "") -> list[Any]:
    gen = POLICY.policy(Turn(2, TURN2, view=TurnView(history_text=history, tool_names=tools)))
    actions = [next(gen)]
    try:
        while not isinstance(actions[-1], Final):
            text = poll_text if isinstance(actions[-1], NativeTool) else "ok"
            actions.append(gen.send(Observation(text=text)))
    except StopIteration:
        pass
    return actions


def written(actions: list[Any], path: str) -> list[Any]:
    return [json.loads(a.content) for a in actions if isinstance(a, WriteFile) and a.path == path]


@pytest.mark.parametrize("text", [REF_PENDING, LAUNCHED, CODEX_SPAWNED])
def test_turn1_writes_pending_once_and_only_acknowledges_the_notification(text):
    actions = drive_turn1(text, REF_NOTICE)
    assert written(actions, "status.json") == [PENDING]
    assert isinstance(actions[-1], Final) and "when you ask" in actions[-1].text


def test_turn1_believes_a_harness_that_says_finished():
    assert written(drive_turn1(PREMATURE), "status.json") == [{"job": "done", "value": None}]


def test_turn1_without_a_subagent_tool_writes_nothing():
    actions = drive_turn1("", absent=True)
    assert written(actions, "status.json") == [] and isinstance(actions[-1], Final)


@pytest.mark.parametrize("notice", [REF_NOTICE, CC_NOTICE])
def test_turn2_takes_the_reference_from_its_history(notice):
    actions = drive_turn2(PROMPT + "\n" + REF_PENDING + "\n" + notice + "\n" + TURN2)
    assert written(actions, "result.json") == [DONE]
    assert not any(isinstance(a, NativeTool) for a in actions)
    assert actions[-1].text == SHOWN


def test_turn2_derives_the_reference_and_embeds_none():
    other = "SETL-fedcba9876"
    actions = drive_turn2(REF_NOTICE.replace(VALUE, other) + "\n" + TURN2)
    assert written(actions, "result.json") == [{"value": other}]
    assert "SETL-" not in (PACK / "probe_policy.py").read_text().replace("SETL-[0-9a-f]+", "")


def test_turn2_polls_the_reference_status_tool_once_when_nothing_is_visible():
    actions = drive_turn2(PROMPT + "\n" + TURN2, tools=("shell", "write_file", "subagent_status"),
                          poll_text="No background sub-agents.")
    assert [(a.name, dict(a.arguments)) for a in actions if isinstance(a, NativeTool)] == [
        ("subagent_status", {"wait_s": POLICY.WAIT_S})]
    assert written(actions, "result.json") == [NULL] and actions[-1].text == NONE
    found = drive_turn2(PROMPT + "\n" + TURN2, tools=("shell", "subagent_status"), poll_text=REF_NOTICE)
    assert written(found, "result.json") == [DONE]


def test_turn2_waits_on_the_codex_agent_it_spawned():
    actions = drive_turn2(PROMPT + "\n" + CODEX_SPAWNED + "\n" + TURN2,
                          tools=("exec_command", "multi_agent_v1/wait_agent"), poll_text='{"status":{}}')
    polls = [a for a in actions if isinstance(a, NativeTool)]
    assert [(p.name, dict(p.arguments)) for p in polls] == [
        ("multi_agent_v1/wait_agent", {"targets": ["01a2-eb31"], "timeout_ms": POLICY.WAIT_S * 1000})]
    assert written(actions, "result.json") == [NULL]


def test_turn2_without_any_status_tool_writes_null():
    actions = drive_turn2(PROMPT + "\n" + LAUNCHED + "\n" + TURN2, tools=("Bash", "Write", "Agent"))
    assert not any(isinstance(a, NativeTool) for a in actions)
    assert written(actions, "result.json") == [NULL] and actions[-1].text == NONE


def test_child_policy_runs_the_batch_once_and_relays_its_reference():
    gen = POLICY.subagent_policy(POLICY.CHILD_PROMPT)
    first = next(gen)
    assert isinstance(first, Shell) and first.command == "python3 settle_batch.py"
    last = gen.send(Observation(text=f"settlement batch started\nsettlement reference: {VALUE}"))
    assert isinstance(last, Final) and f"settlement reference: {VALUE}" in last.text


@pytest.mark.parametrize("running,poll", [
    ("Command still running (session tender-pine, pid 120). Use process (list/poll/log/write) for follow-up.",
     ("process", {"action": "poll", "sessionId": "tender-pine", "timeout": 30000})),
    ("Chunk ID: ab\nWall time: 10.0 seconds\nProcess running with session ID 7\nOutput:\nsettlement batch started\n",
     ("write_stdin", {"session_id": 7, "chars": "", "yield_time_ms": 30000})),
])
def test_child_polls_a_backgrounded_batch_until_it_prints_the_reference(running, poll):
    gen = POLICY.subagent_policy(POLICY.CHILD_PROMPT)
    assert isinstance(next(gen), Shell)
    first = gen.send(Observation(text=running))
    assert isinstance(first, NativeTool) and (first.name, dict(first.arguments)) == poll
    again = gen.send(Observation(text="(no new output)"))
    assert isinstance(again, NativeTool)
    last = gen.send(Observation(text=f"settlement reference: {VALUE}\nProcess exited with code 0"))
    assert isinstance(last, Final) and f"settlement reference: {VALUE}" in last.text


def test_child_polls_a_bounded_number_of_times():
    gen = POLICY.subagent_policy(POLICY.CHILD_PROMPT)
    next(gen)
    actions = [gen.send(Observation(text="Process running with session ID 3"))]
    while not isinstance(actions[-1], Final):
        actions.append(gen.send(Observation(text="still waiting")))
    assert sum(isinstance(a, NativeTool) for a in actions) == POLICY.MAX_POLLS
    assert "did not print" in actions[-1].text
