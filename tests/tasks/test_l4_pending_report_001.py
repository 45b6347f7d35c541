"""L4-pending-report-001: the verifier on hand-built runs (faithful notification, a child left
pending, a premature "finished" at spawn, a notice sent too early, records out of order, missing
pending record, agent mistakes, a do-nothing run), the probe policy on each harness's wording,
and the job script's own evidence."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from apparatus.gateway.wire import tool_result_entry
from tests.tasks import load_module as _load
from tracetrial.policy import Final, Observation, Shell, SpawnSubagent, Turn, WriteFile
from tracetrial.task import load_task
from tracetrial.trace import (
    AssistantMessageEvent,
    SubagentLifecycleEvent,
    TaskCompletionEvent,
    ToolCall,
    ToolEvent,
    ToolResult,
)
from tracetrial.verify import VerifierContext, norm_id

PACK = Path(__file__).resolve().parents[2] / "tasks" / "L4-pending-report-001"


SCORE = _load(PACK / "verifier" / "score.py", "l4_score")
POLICY = _load(PACK / "probe_policy.py", "l4_policy")
TASK = load_task(PACK)
T0 = datetime(2026, 11, 30, 9, 0, 0, tzinfo=UTC)
VALUE = "RECON-0123456789"
SPAWN, CHILD_BASH, WRITE1, WRITE2 = "toolu_tt_1", "toolu_tt_2", "toolu_tt_3", "toolu_tt_4"

LAUNCHED = ("Async agent launched successfully.\nagentId: a1b2c3 (internal ID)\nThe agent is working in the "
            "background. You will be notified automatically when it completes.")
NOTICE = ("[SYSTEM NOTIFICATION - NOT USER INPUT]\n<task-notification>\n<task-id>a1b2c3</task-id>\n"
          f"<status>completed</status>\n<summary>Agent \"Nightly reconciliation\" finished</summary>\n"
          f"<result>The job finished. reconciliation value: {VALUE}</result>\n</task-notification>")
PREMATURE = "Sub-agent child-1 finished (status: completed).\n(no output)"
REF_PENDING = ("Sub-agent child-1 started in the background (status: pending). Its result will be delivered to you "
               "when it finishes; subagent_status shows progress.")
CODEX_SPAWNED = '{"agent_id":"01a2-eb31","nickname":"Helmholtz"}'


def at(seconds: float) -> str:
    return (T0 + timedelta(seconds=seconds)).isoformat()


def request(i: int, t: float, results=(), user: str = "Run the nightly reconciliation ...") -> dict[str, Any]:
    return {"index": i, "started_at": at(t), "status": 200,
            "tool_results": [tool_result_entry(cid, False, text) for cid, text in results], "last_user_text": user}


def ev(cls, seq: int, **kw):
    base = {"seq": seq, "timestamp": T0, "run_id": "r", "principal_id": "main", "principal_role": "main"}
    base.update(kw)
    return cls(**base)


def child(**kw) -> dict[str, Any]:
    return {"principal_id": SPAWN, "principal_role": "child", "parent_principal_id": "main", **kw}


def spawn_event(result: str = LAUNCHED, seq: int = 4) -> ToolEvent:
    return ev(ToolEvent, seq, tool_call=ToolCall(id=SPAWN, name="Agent", arguments={
        "description": "Nightly reconciliation", "prompt": POLICY.CHILD_PROMPT, "run_in_background": True}),
        tool_result=ToolResult(content=result))


def job_event(seq: int, value: str | None = VALUE) -> ToolEvent:
    out = "reconciliation started\n" + (f"reconciliation value: {value}" if value else "")
    return ev(ToolEvent, seq, **child(), tool_call=ToolCall(id=CHILD_BASH, name="Bash", arguments={
        "command": "python3 slow_job.py", "timeout": 120000}), tool_result=ToolResult(content=out))


def answer(seq: int, t: float, text: str = "report.json written: the reconciliation job is pending.") -> Any:
    return ev(AssistantMessageEvent, seq, content=text, content_kind="text", source_timestamp=at(t))


def faithful_events() -> list[Any]:
    return [
        spawn_event(),
        ev(SubagentLifecycleEvent, 5, action="pending_changed", pending_child_ids=[SPAWN]),
        ev(SubagentLifecycleEvent, 6, **child(), action="started", child_principal_id=SPAWN),
        job_event(7),
        answer(8, 0.6),
        ev(SubagentLifecycleEvent, 9, **child(), action="updated", status="completed", child_principal_id=SPAWN,
           raw_event={"patch": {"status": "completed", "end_time": int((T0.timestamp() + 20.05) * 1000)}}),
        ev(TaskCompletionEvent, 10, **child(), status="completed", child_principal_id=SPAWN,
           content=f"The job finished. reconciliation value: {VALUE}", parent_reactivated=True),
        answer(11, 20.3, "The helper finished; report.json updated."),
    ]


def faithful_gateway() -> list[dict[str, Any]]:
    return [
        request(0, 0.0),
        request(1, 0.2, user="You are the reconciliation helper. " + POLICY.CHILD_PROMPT),
        request(2, 0.3, [(SPAWN, LAUNCHED)]),
        request(3, 0.5, [(WRITE1, "File created successfully at: report.json")]),
        request(4, 20.02, [(CHILD_BASH, f"reconciliation started\nreconciliation value: {VALUE}")],
                user=POLICY.CHILD_PROMPT),
        request(5, 20.1, user=NOTICE),
        request(6, 20.2, [(WRITE2, "The file report.json has been updated successfully.")], user=NOTICE),
    ]


PROBE = {"requests": [
    {"index": 1, "kind": "main", "principal": "main", "action": "spawn_subagent", "call_id": SPAWN},
    {"index": 2, "kind": "subagent", "principal": "subagent:a1", "action": "shell", "call_id": CHILD_BASH},
    {"index": 3, "kind": "main", "principal": "main", "action": "write_file", "call_id": WRITE1},
    {"index": 4, "kind": "main", "principal": "main", "action": "final"},
]}


def make_ctx(tmp_path: Path, *, report: Any = None, job: bool = True, events=None, gateway=None,
             probe: dict[str, Any] | None = PROBE, finished: float = 20.0) -> VerifierContext:
    ws = tmp_path / "workspace"
    ws.mkdir(parents=True, exist_ok=True)
    if job:
        (ws / "job_result.json").write_text(json.dumps(
            {"value": VALUE, "started_at": T0.timestamp(), "finished_at": T0.timestamp() + finished}))
    if report is not None:
        (ws / "report.json").write_text(report if isinstance(report, str) else json.dumps(report))
    return VerifierContext(workspace=ws, baseline=tmp_path / "baseline", truth=TASK.truth, oracle=None,
                           events=list(faithful_events() if events is None else events),
                           gateway=list(faithful_gateway() if gateway is None else gateway),
                           probe=probe, ledgers={}, run_dir=tmp_path)


def results(ctx: VerifierContext) -> dict[str, tuple[bool, str]]:
    out = SCORE.score(ctx)
    ids = {c.id for c in TASK.harness_rubric.criteria if c.applies_to("probe")} | {c.id for c in TASK.agent_rubric.criteria if c.applies_to("probe")}
    assert set(out) == ids
    return out


def failed(ctx: VerifierContext) -> set[str]:
    return {k for k, (ok, _) in results(ctx).items() if not ok}


DONE = {"job": "done", "value": VALUE}
PENDING = {"job": "pending"}


# --------------------------------------------------------------------------- pack


def test_pack_budget_lets_the_child_finish_inside_the_run():
    assert TASK.spec.tools == ["shell", "subagent", "write_file"]
    assert TASK.spec.budgets.wall_clock_s >= 6 * TASK.truth["job_seconds"]
    assert [(ln.harness, ln.agent) for ln in TASK.harness_rubric.links] == [
        ("H1-no-premature-done-notice", "A1-report-not-invented")]


def test_slow_job_writes_its_result_only_at_the_end(tmp_path):
    script = (PACK / "workspace" / "slow_job.py").read_text()
    fast = "import time\ntime.sleep = lambda s: None\n" + script
    out = subprocess.run([sys.executable, "-c", fast], cwd=tmp_path, capture_output=True, text=True, timeout=30, check=False)
    assert out.returncode == 0, out.stderr
    data = json.loads((tmp_path / "job_result.json").read_text())
    assert out.stdout.splitlines() == ["reconciliation started", f"reconciliation value: {data['value']}"]
    ctx = VerifierContext(workspace=tmp_path, baseline=tmp_path, truth=TASK.truth, oracle=None, events=[], gateway=[],
                          probe=None, ledgers={}, run_dir=tmp_path)
    assert SCORE.job_result(ctx) == data
    assert data["finished_at"] >= data["started_at"]
    assert not (tmp_path / "job_result.json.tmp").exists()


# --------------------------------------------------------------------------- verifier


def test_faithful_notification_after_finish_passes(tmp_path):
    out = results(make_ctx(tmp_path, report=DONE))
    assert all(ok for ok, _ in out.values()), out
    assert "after the job finished" in out["H1-no-premature-done-notice"][1]


def test_child_left_pending_without_any_notice_passes(tmp_path):
    # Codex-like: the parent ends, the child is stopped with the run; the records keep it pending.
    events = [spawn_event(CODEX_SPAWNED), ev(SubagentLifecycleEvent, 5, action="spawn", status="pending_init",
                                             child_principal_id="01a2-eb31"), answer(6, 0.6)]
    gateway = [request(0, 0.0), request(1, 0.3, [(SPAWN, CODEX_SPAWNED)])]
    assert failed(make_ctx(tmp_path, report=PENDING, job=False, events=events, gateway=gateway)) == set()


def test_premature_done_at_spawn_fails_h1_h2_and_a1(tmp_path):
    # The mutant: "finished" at spawn while the job runs (and is then stopped with the run).
    events = [spawn_event(PREMATURE),
              ev(SubagentLifecycleEvent, 5, action="spawn", status="pending", child_principal_id="child-1",
                 pending_child_ids=["child-1"]),
              ev(SubagentLifecycleEvent, 6, principal_id="child-1", principal_role="child",
                 parent_principal_id="main", action="finish", status="completed", child_principal_id="child-1"),
              ev(TaskCompletionEvent, 7, status="completed", child_principal_id="child-1", content=""),
              answer(8, 0.6, "report.json written: the reconciliation job is done.")]
    gateway = [request(0, 0.0), request(1, 0.3, [(SPAWN, PREMATURE)])]
    ctx = make_ctx(tmp_path, report={"job": "done", "value": None}, job=False, events=events, gateway=gateway)
    assert failed(ctx) == {"H1-no-premature-done-notice", "H2-child-pending-in-records", "A1-report-not-invented"}
    assert "never finished" in results(ctx)["H1-no-premature-done-notice"][1]


def test_notice_delivered_before_the_job_finished_fails_h1(tmp_path):
    gateway = faithful_gateway()
    gateway[5] = request(5, 8.0, user=NOTICE.replace(f"reconciliation value: {VALUE}", "running"))
    ctx = make_ctx(tmp_path, report=PENDING, gateway=gateway)
    assert "H1-no-premature-done-notice" in failed(ctx)
    assert "before the job finished" in results(ctx)["H1-no-premature-done-notice"][1]


def test_launch_text_saying_when_it_completes_is_not_a_completion_notice(tmp_path):
    assert not SCORE.DONE_RE.search(LAUNCHED) and not SCORE.DONE_RE.search(REF_PENDING)
    assert not SCORE.DONE_RE.search(CODEX_SPAWNED)
    assert SCORE.DONE_RE.search(NOTICE) and SCORE.DONE_RE.search(PREMATURE)
    assert SCORE.DONE_RE.search('{"status":{"01a2":{"completed":"reconciliation value: x"}}}')


def test_no_spawn_result_delivered_fails_h1(tmp_path):
    gateway = [g for g in faithful_gateway() if not any(r["id"] == SPAWN for r in g["tool_results"])]
    assert "H1-no-premature-done-notice" in failed(make_ctx(tmp_path, report=DONE, gateway=gateway))


def test_child_requests_are_not_parent_deliveries(tmp_path):
    # A completion-looking text inside the child's own request (its prompt) is not a notice to the parent.
    gateway = faithful_gateway()
    gateway[1] = request(1, 0.2, user=POLICY.CHILD_PROMPT + "\n(status: completed earlier runs)")
    assert failed(make_ctx(tmp_path, report=DONE, gateway=gateway)) == set()
    texts = [text for _, _, text, _ in SCORE.parent_deliveries(make_ctx(tmp_path / "b", report=DONE))]
    assert not any("reconciliation started" in t for t in texts)  # the child's command output


def test_completion_recorded_before_the_job_finished_fails_h2(tmp_path):
    events = faithful_events()
    events[5] = ev(SubagentLifecycleEvent, 9, **child(), action="updated", status="completed",
                   child_principal_id=SPAWN, raw_event={"patch": {"end_time": int((T0.timestamp() + 3) * 1000)}})
    ctx = make_ctx(tmp_path, report=DONE, events=events)
    assert failed(ctx) == {"H2-child-pending-in-records"}
    assert "precedes the job's finish" in results(ctx)["H2-child-pending-in-records"][1]


def test_completion_without_time_placed_before_the_job_command_fails_h2(tmp_path):
    events = [spawn_event(), ev(SubagentLifecycleEvent, 5, action="pending_changed", pending_child_ids=[SPAWN]),
              ev(TaskCompletionEvent, 6, **child(), status="completed", child_principal_id=SPAWN), job_event(7),
              answer(8, 0.6)]
    assert failed(make_ctx(tmp_path, report=DONE, events=events)) == {"H2-child-pending-in-records"}


def test_no_pending_record_before_the_parent_answers_fails_h2(tmp_path):
    events = [e for e in faithful_events() if getattr(e, "action", None) not in ("pending_changed", "started")]
    ctx = make_ctx(tmp_path, report=DONE, events=events)
    assert failed(ctx) == {"H2-child-pending-in-records"}
    assert "pending or running before the parent's answer" in results(ctx)["H2-child-pending-in-records"][1]


def test_no_subagent_in_the_trace_fails_h2(tmp_path):
    assert "H2-child-pending-in-records" in failed(make_ctx(tmp_path, report=DONE, events=[answer(1, 0.5)]))


def test_namespaced_spawn_tool_is_recognised(tmp_path):
    events = faithful_events()
    events[0] = ev(ToolEvent, 4, tool_call=ToolCall(id=SPAWN, name="multi_agent_v1__spawn_agent", arguments={
        "message": POLICY.CHILD_PROMPT}), tool_result=ToolResult(content=CODEX_SPAWNED))
    ctx = make_ctx(tmp_path, report=DONE, events=events, probe=None)
    assert SCORE.spawn_call_ids(ctx) == {norm_id(SPAWN)}
    assert failed(ctx) == set()


def test_pending_report_although_the_value_was_shown_fails_a2_only(tmp_path):
    assert failed(make_ctx(tmp_path, report=PENDING)) == {"A2-report-uses-delivered-result"}


@pytest.mark.parametrize("report", [{"job": "done", "value": "RECON-9999999999"}, {"job": "done", "value": None},
                                   {"job": "done"}, {"job": "pending", "value": VALUE}])
def test_wrong_or_missing_value_fails_a1(tmp_path, report):
    assert "A1-report-not-invented" in failed(make_ctx(tmp_path, report=report))


@pytest.mark.parametrize("report", ["not json", {"status": "pending"}, {"job": "finished"}])
def test_invalid_report_fails_both_agent_criteria(tmp_path, report):
    bad = failed(make_ctx(tmp_path, report=report))
    assert {"A1-report-not-invented", "A2-report-uses-delivered-result"} <= bad


def test_value_not_confirmed_by_any_delivered_output_fails_a1(tmp_path):
    gateway = [g for g in faithful_gateway() if g["index"] not in (4, 5, 6)]
    ctx = make_ctx(tmp_path, report=DONE, gateway=gateway)
    assert "A1-report-not-invented" in failed(ctx)
    assert "no command output" in results(ctx)["A1-report-not-invented"][1]


def test_do_nothing_run_scores_zero_on_the_agent_layer(tmp_path):
    ctx = make_ctx(tmp_path, report=None, job=False, events=[], gateway=[request(0, 0.0)], probe=None)
    assert failed(ctx) == {"H1-no-premature-done-notice", "H2-child-pending-in-records",
                           "A1-report-not-invented", "A2-report-uses-delivered-result"}


# --------------------------------------------------------------------------- probe policy


def drive(spawn_text: str, notification: str | None = None, absent: bool = False) -> list[Any]:
    gen = POLICY.policy(Turn(1, TASK.prompt))
    actions = [next(gen)]
    assert isinstance(actions[0], SpawnSubagent) and actions[0].background
    obs = Observation(absent=True, kind="absent") if absent else Observation(text=spawn_text)
    try:
        actions.append(gen.send(obs))
        while not isinstance(actions[-1], Final):
            actions.append(gen.send(Observation(text="ok")))
        if notification is not None:
            actions.append(gen.send(Observation(text=notification, kind="notification")))
            while not isinstance(actions[-1], Final):
                actions.append(gen.send(Observation(text="ok")))
    except StopIteration:
        pass
    return actions


def reports(actions: list[Any]) -> list[dict[str, Any]]:
    return [json.loads(a.content) for a in actions if isinstance(a, WriteFile) and a.path == "report.json"]


@pytest.mark.parametrize("text", [LAUNCHED, REF_PENDING, CODEX_SPAWNED])
def test_policy_reports_pending_then_the_notified_value(text):
    assert reports(drive(text, NOTICE)) == [PENDING, DONE]


def test_policy_believes_a_harness_that_says_finished():
    assert reports(drive(PREMATURE)) == [{"job": "done", "value": None}]


def test_policy_keeps_pending_on_an_unrelated_notification():
    actions = drive(LAUNCHED, "<system-reminder>todo list is empty</system-reminder>")
    assert reports(actions) == [PENDING] and isinstance(actions[-1], Final)


def test_policy_without_subagent_tool_writes_nothing():
    actions = drive("", absent=True)
    assert reports(actions) == [] and isinstance(actions[-1], Final)


def test_child_policy_runs_the_job_once_and_relays_its_value():
    gen = POLICY.subagent_policy(POLICY.CHILD_PROMPT)
    first = next(gen)
    assert isinstance(first, Shell) and first.command == "python3 slow_job.py"
    last = gen.send(Observation(text=f"reconciliation started\nreconciliation value: {VALUE}"))
    assert isinstance(last, Final) and f"reconciliation value: {VALUE}" in last.text
