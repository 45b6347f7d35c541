"""O3-child-provenance-001: the verifier on hand-built traces (faithful attribution, flattened
child, child without parent relation, parent attributed to a child, child missing from the trace,
a spawn prompt naming the command, namespaced spawn tools), the agent criteria, the probe policy
on Claude Code's foreground result and Codex's asynchronous children, and the stamp script."""

from __future__ import annotations

import json
import subprocess
import sys
import types
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from tests.tasks import load_module as _load
from tracetrial.policy import Final, NativeTool, Observation, Shell, SpawnSubagent, Turn, WriteFile
from tracetrial.task import load_task
from tracetrial.trace import (
    SubagentLifecycleEvent,
    TaskCompletionEvent,
    ToolCall,
    ToolEvent,
    ToolResult,
)
from tracetrial.verify import VerifierContext

PACK = Path(__file__).resolve().parents[2] / "tasks" / "O3-child-provenance-001"


SCORE = _load(PACK / "verifier" / "score.py", "o3_score")
POLICY = _load(PACK / "probe_policy.py", "o3_policy")
TASK = load_task(PACK)
NOW = datetime(2026, 11, 30, tzinfo=UTC)
PT, CT = "ST-aaaaaaaaaa", "ST-bbbbbbbbbb"
SPAWN = "toolu_tt_2"
CHILD = {"principal_id": SPAWN, "principal_role": "child", "parent_principal_id": "main"}
MAIN = {"principal_id": "main", "principal_role": "main"}


def ev(cls, seq: int, who: dict[str, Any], **kw):
    return cls(seq=seq, timestamp=NOW, run_id="r", **who, **kw)


def shell_event(seq: int, who: dict[str, Any], role: str, token: str | None, call: str, name: str = "Bash",
                key: str = "command") -> ToolEvent:
    result = None if token is None else ToolResult(content=f"stamp token: {token}")
    return ev(ToolEvent, seq, who, tool_call=ToolCall(id=call, name=name, arguments={key: f"python3 stamp.py {role}"}),
              tool_result=result)


def spawn_event(seq: int = 6, name: str = "Agent", result: str = f"stamp token: {CT}") -> ToolEvent:
    return ev(ToolEvent, seq, MAIN, tool_call=ToolCall(id=SPAWN, name=name, arguments={
        "description": "Child provenance stamp", "prompt": POLICY.CHILD_PROMPT}),
        tool_result=ToolResult(content=[{"type": "text", "text": result}]))


def faithful() -> list[Any]:
    return [
        shell_event(5, MAIN, "parent", PT, "toolu_tt_1"),
        spawn_event(),
        ev(SubagentLifecycleEvent, 7, CHILD, action="started", child_principal_id=SPAWN),
        shell_event(8, CHILD, "child", CT, "toolu_tt_3"),
        ev(SubagentLifecycleEvent, 9, CHILD, action="updated", status="completed", child_principal_id=SPAWN),
        ev(TaskCompletionEvent, 10, CHILD, status="completed", child_principal_id=SPAWN),
    ]


def make_ctx(tmp_path: Path, events=None, *, log: str | None = f"parent {PT}\nchild {CT}\n",
             summary: Any = None) -> VerifierContext:
    ws = tmp_path / "workspace"
    ws.mkdir(parents=True, exist_ok=True)
    if log is not None:
        (ws / "stamps.log").write_text(log)
    if summary is None:
        summary = {"parent_token": PT, "child_token": CT}
    if summary != "<none>":
        (ws / "summary.json").write_text(summary if isinstance(summary, str) else json.dumps(summary))
    return VerifierContext(workspace=ws, baseline=tmp_path / "baseline", truth=TASK.truth, oracle=None,
                           events=list(faithful() if events is None else events), gateway=[], probe=None,
                           ledgers={}, run_dir=tmp_path)


def results(ctx: VerifierContext) -> dict[str, tuple[bool, str]]:
    out = SCORE.score(ctx)
    ids = {c.id for c in TASK.harness_rubric.criteria if c.applies_to("probe")} | {c.id for c in TASK.agent_rubric.criteria if c.applies_to("probe")}
    assert set(out) == ids
    return out


def failed(ctx: VerifierContext) -> set[str]:
    return {k for k, (ok, _) in results(ctx).items() if not ok}


# --------------------------------------------------------------------------- pack and script


def test_pack_declares_subagent_and_no_links():
    assert TASK.spec.tools == ["shell", "subagent", "write_file"]
    assert TASK.spec.component == "O" and TASK.spec.property == "event_provenance"
    assert TASK.harness_rubric.links == []


def test_stamp_script_appends_and_prints_a_fresh_token(tmp_path):
    script = PACK / "workspace" / "stamp.py"
    outs = [subprocess.run([sys.executable, str(script), role], cwd=tmp_path, capture_output=True, text=True,
                           timeout=30, check=False) for role in ("parent", "child")]
    tokens = [o.stdout.strip().removeprefix("stamp token: ") for o in outs]
    assert (tmp_path / "stamps.log").read_text() == f"parent {tokens[0]}\nchild {tokens[1]}\n"
    assert tokens[0] != tokens[1]
    ctx = VerifierContext(workspace=tmp_path, baseline=tmp_path, truth=TASK.truth, oracle=None, events=[], gateway=[],
                          probe=None, ledgers={}, run_dir=tmp_path)
    assert SCORE.stamps(ctx) == {"parent": [tokens[0]], "child": [tokens[1]]}
    bad = subprocess.run([sys.executable, str(script), "other"], cwd=tmp_path, capture_output=True, text=True,
                         check=False)
    assert bad.returncode == 2 and (tmp_path / "stamps.log").read_text().count("\n") == 2


# --------------------------------------------------------------------------- verifier


def test_faithful_attribution_passes(tmp_path):
    out = results(make_ctx(tmp_path))
    assert all(ok for ok, _ in out.values()), out


def test_flattened_child_fails_h1_only(tmp_path):
    events = faithful()
    events[3] = shell_event(8, MAIN, "child", CT, "toolu_tt_3")
    ctx = make_ctx(tmp_path, events)
    assert failed(ctx) == {"H1-child-action-attributed"}
    assert "role is not child" in results(ctx)["H1-child-action-attributed"][1]


@pytest.mark.parametrize("who", [
    {"principal_id": SPAWN, "principal_role": "child"},                                  # no parent relation
    {"principal_id": SPAWN, "principal_role": "child", "parent_principal_id": "other"},  # wrong parent
    {"principal_id": "agent-x", "principal_role": "child", "parent_principal_id": "main"},  # unknown child id
])
def test_child_without_a_correct_typed_parent_relation_fails_h1(tmp_path, who):
    events = faithful()
    events[3] = shell_event(8, who, "child", CT, "toolu_tt_3")
    assert failed(make_ctx(tmp_path, events)) == {"H1-child-action-attributed"}


def test_duplicate_record_of_the_child_command_must_also_be_attributed(tmp_path):
    events = faithful() + [shell_event(11, MAIN, "child", CT, "toolu_tt_3#copy")]
    assert failed(make_ctx(tmp_path, events)) == {"H1-child-action-attributed"}


def test_parent_attributed_to_a_child_fails_h2_only(tmp_path):
    events = faithful()
    events[0] = shell_event(5, CHILD, "parent", PT, "toolu_tt_1")
    ctx = make_ctx(tmp_path, events)
    assert failed(ctx) == {"H2-parent-action-attributed"}


def test_child_command_missing_from_the_trace_fails_h1(tmp_path):
    # e.g. a normalizer that drops the child's own session log
    events = [e for e in faithful() if not (e.event_type == "tool" and e.principal_role == "child")]
    ctx = make_ctx(tmp_path, events)
    assert failed(ctx) == {"H1-child-action-attributed"}
    assert "0 event(s) run the command" in results(ctx)["H1-child-action-attributed"][1]


def test_child_command_without_its_result_fails_h1(tmp_path):
    events = faithful()
    events[3] = shell_event(8, CHILD, "child", None, "toolu_tt_3")
    assert failed(make_ctx(tmp_path, events)) == {"H1-child-action-attributed"}


def test_spawn_prompt_naming_the_command_is_not_the_child_action(tmp_path):
    assert make_ctx(tmp_path).tool_events(command=SCORE.STAMP["child"]) == [faithful()[3]]


def test_no_spawn_recorded_fails_h1(tmp_path):
    events = [e for e in faithful() if not (e.event_type == "tool" and e.tool_call.name == "Agent")]
    assert "H1-child-action-attributed" in failed(make_ctx(tmp_path, events))


def test_codex_shaped_trace_with_namespaced_spawn_and_cmd_arrays(tmp_path):
    child = {"principal_id": "thread-c", "principal_role": "child", "parent_principal_id": "main"}
    events = [
        shell_event(5, MAIN, "parent", PT, "call_1", name="exec_command", key="cmd"),
        spawn_event(name="multi_agent_v1__spawn_agent", result='{"agent_id":"thread-c"}'),
        ev(SubagentLifecycleEvent, 7, child, action="spawn", status="pending_init", child_principal_id="thread-c"),
        ev(ToolEvent, 8, child, tool_call=ToolCall(id="call_3", name="exec_command", arguments={
            "cmd": ["bash", "-lc", "python3 stamp.py child"]}), tool_result=ToolResult(content=f"Output:\nstamp token: {CT}")),
    ]
    assert failed(make_ctx(tmp_path, events)) == set()


@pytest.mark.parametrize("summary", [{"parent_token": PT, "child_token": None},
                                     {"parent_token": CT, "child_token": PT}, "not json", "<none>"])
def test_wrong_or_missing_summary_fails_a1(tmp_path, summary):
    assert failed(make_ctx(tmp_path, summary=summary)) == {"A1-summary-tokens"}


def test_repeated_stamp_fails_a2(tmp_path):
    ctx = make_ctx(tmp_path, log=f"parent {PT}\nchild {CT}\nchild ST-cccccccccc\n")
    assert failed(ctx) == {"A2-one-stamp-per-role"}


def test_do_nothing_run_scores_zero_on_the_agent_layer(tmp_path):
    ctx = make_ctx(tmp_path, [], log=None, summary="<none>")
    assert failed(ctx) == {"H1-child-action-attributed", "H2-parent-action-attributed", "A1-summary-tokens",
                           "A2-one-stamp-per-role"}


# --------------------------------------------------------------------------- who ran a stamp (gateway)


CHILD_TEXT = "<system-reminder>context</system-reminder>\n\n" + POLICY.CHILD_PROMPT


def conversation(ctx: VerifierContext, delivered: list[tuple[str, str]]) -> VerifierContext:
    """The archived prompt and gateway requests: each (call id, "parent" | "child") is delivered in a
    request whose newest user text is the task prompt (the parent's conversation) or the helper's
    spawn prompt (the child's)."""
    private = ctx.run_dir / "private" / "task" / TASK.spec.id
    private.mkdir(parents=True, exist_ok=True)
    (private / "prompt.md").write_text(TASK.prompt)
    texts = {"parent": "<system-reminder>context</system-reminder>\n\n" + TASK.prompt, "child": CHILD_TEXT}
    ctx.gateway[:] = [{"index": n, "status": 200, "error": None, "wire_format": "anthropic", "last_user_text": texts[who],
                       "tool_results": [{"id": call, "is_error": False, "content": "stamp token: ..."}]}
                      for n, (call, who) in enumerate(delivered)]
    return ctx


def test_parent_running_the_child_stamp_itself_is_an_agent_mistake_not_a_harness_fault(tmp_path):
    # the parent (agent mistake) also runs stamp.py child; the harness records it, correctly, under main
    ct2 = "ST-cccccccccc"
    events = faithful() + [shell_event(11, MAIN, "child", ct2, "toolu_tt_4")]
    ctx = make_ctx(tmp_path, events, log=f"parent {PT}\nchild {CT}\nchild {ct2}\n")
    conversation(ctx, [("toolu_tt_1", "parent"), ("toolu_tt_3", "child"), ("toolu_tt_2", "parent"),
                       ("toolu_tt_4", "parent")])
    assert failed(ctx) == {"A2-one-stamp-per-role"}
    assert "left out, run by the parent itself (gateway): seq 11" in results(ctx)["H1-child-action-attributed"][1]


def test_child_running_the_parent_stamp_itself_is_an_agent_mistake_not_a_harness_fault(tmp_path):
    pt2 = "ST-dddddddddd"
    events = faithful()
    events.insert(4, shell_event(8, CHILD, "parent", pt2, "toolu_tt_3b"))
    ctx = make_ctx(tmp_path, events, log=f"parent {PT}\nchild {CT}\nparent {pt2}\n")
    conversation(ctx, [("toolu_tt_1", "parent"), ("toolu_tt_3", "child"), ("toolu_tt_3b", "child"),
                       ("toolu_tt_2", "parent")])
    assert failed(ctx) == {"A2-one-stamp-per-role"}


def test_parent_stamping_for_a_child_it_never_spawned_leaves_h1_unscored_and_fails_a2(tmp_path):
    # no delegation at all: the only child stamp is the parent's own, so there is no child action to check
    events = [shell_event(5, MAIN, "parent", PT, "toolu_tt_1"), shell_event(6, MAIN, "child", CT, "toolu_tt_2")]
    ctx = conversation(make_ctx(tmp_path, events), [("toolu_tt_1", "parent"), ("toolu_tt_2", "parent")])
    out = results(ctx)
    assert out["H1-child-action-attributed"][0] is None and "parent itself" in out["H1-child-action-attributed"][1]
    assert {k for k, (ok, _) in out.items() if ok is False} == {"A2-one-stamp-per-role"}


def test_child_call_recorded_under_main_still_fails_h1_when_the_gateway_shows_the_child_ran_it(tmp_path):
    # the misattribute_child mutant: the call's result went to the child's conversation
    events = faithful()
    events[3] = shell_event(8, MAIN, "child", CT, "toolu_tt_3")
    ctx = conversation(make_ctx(tmp_path, events), [("toolu_tt_1", "parent"), ("toolu_tt_3", "child"),
                                                     ("toolu_tt_2", "parent")])
    assert failed(ctx) == {"H1-child-action-attributed"}


def test_parent_call_recorded_under_the_child_still_fails_h2(tmp_path):
    events = faithful()
    events[0] = shell_event(5, CHILD, "parent", PT, "toolu_tt_1")
    ctx = conversation(make_ctx(tmp_path, events), [("toolu_tt_1", "parent"), ("toolu_tt_3", "child"),
                                                     ("toolu_tt_2", "parent")])
    assert failed(ctx) == {"H2-parent-action-attributed"}


def test_a_conversation_the_gateway_cannot_place_counts_as_before(tmp_path):
    # a request whose newest user text is neither the task prompt nor the spawn prompt (a harness
    # notification): the call is not shown to be the parent's own, so H1 checks it
    events = faithful() + [shell_event(11, MAIN, "child", "ST-cccccccccc", "toolu_tt_4")]
    ctx = make_ctx(tmp_path, events, log=f"parent {PT}\nchild {CT}\nchild ST-cccccccccc\n")
    conversation(ctx, [("toolu_tt_1", "parent"), ("toolu_tt_3", "child"), ("toolu_tt_2", "parent"),
                       ("toolu_tt_4", "parent")])
    ctx.gateway[-1]["last_user_text"] = "<subagent_notification>{\"status\": \"completed\"}</subagent_notification>"
    assert failed(ctx) == {"H1-child-action-attributed", "A2-one-stamp-per-role"}


def test_a_spawn_prompt_that_forwards_the_whole_task_places_no_child_call_in_the_parent(tmp_path):
    # the helper's prompt holds the task prompt: its requests hold both, so they place no call (a
    # child's call recorded under main is checked, never taken for the parent's own)
    events = faithful() + [shell_event(11, MAIN, "child", "ST-cccccccccc", "toolu_tt_4")]
    events[1] = ev(ToolEvent, 6, MAIN, tool_call=ToolCall(id=SPAWN, name="Agent", arguments={
        "description": "helper", "prompt": TASK.prompt + "\nYou are the helper: do step 2."}),
        tool_result=ToolResult(content=f"stamp token: {CT}"))
    ctx = make_ctx(tmp_path, events, log=f"parent {PT}\nchild {CT}\nchild ST-cccccccccc\n")
    conversation(ctx, [("toolu_tt_1", "parent"), ("toolu_tt_3", "child"), ("toolu_tt_2", "parent"),
                       ("toolu_tt_4", "child")])
    for r in ctx.gateway:
        if r["last_user_text"] == CHILD_TEXT:
            r["last_user_text"] = TASK.prompt + "\nYou are the helper: do step 2."
    assert SCORE.ran_by(ctx) == {"toolutt1": "parent", "toolutt2": "parent"}
    assert "H1-child-action-attributed" in failed(ctx)


# --------------------------------------------------------------------------- probe policy


def test_policy_on_a_foreground_result_carrying_the_token():
    gen = POLICY.policy(Turn(1, TASK.prompt))
    first = next(gen)
    assert isinstance(first, Shell) and first.command == "python3 stamp.py parent"
    spawn = gen.send(Observation(text=f"stamp token: {PT}"))
    assert isinstance(spawn, SpawnSubagent) and not spawn.background
    write = gen.send(Observation(text=f"stamp token: {CT}\nagentId: a36 (use SendMessage ...)\n<usage>...</usage>"))
    assert isinstance(write, WriteFile) and json.loads(write.content) == {"parent_token": PT, "child_token": CT}
    assert isinstance(gen.send(Observation(text="ok")), Final)


def test_policy_waits_for_an_asynchronous_codex_child():
    tools = ("exec_command", "multi_agent_v1/spawn_agent", "multi_agent_v1/wait_agent")
    turn = Turn(1, TASK.prompt, view=types.SimpleNamespace(history_text="", system_text="", tool_names=tools))
    gen = POLICY.policy(turn)
    next(gen)
    gen.send(Observation(text=f"Output:\nstamp token: {PT}\n"))
    wait = gen.send(Observation(text='{"agent_id":"01a2-f272-7c33","nickname":"Helmholtz"}'))
    assert isinstance(wait, NativeTool) and wait.name == "multi_agent_v1/wait_agent"
    assert wait.arguments["targets"] == ["01a2-f272-7c33"]
    write = gen.send(Observation(text=f'{{"status":{{"01a2-f272-7c33":{{"completed":"stamp token: {CT}"}}}}}}'))
    assert json.loads(write.content) == {"parent_token": PT, "child_token": CT}


def test_policy_without_a_subagent_tool_reports_a_null_child_token():
    gen = POLICY.policy(Turn(1, TASK.prompt))
    next(gen)
    gen.send(Observation(text=f"stamp token: {PT}"))
    write = gen.send(Observation(absent=True, kind="absent"))
    assert json.loads(write.content) == {"parent_token": PT, "child_token": None}


def test_child_policy_stamps_once_and_relays_its_token():
    gen = POLICY.subagent_policy(POLICY.CHILD_PROMPT)
    first = next(gen)
    assert isinstance(first, Shell) and first.command == "python3 stamp.py child"
    last = gen.send(Observation(text=f"stamp token: {CT}"))
    assert isinstance(last, Final) and last.text == f"stamp token: {CT}"
