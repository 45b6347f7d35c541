"""O3-shard-seals-002: the verifier on hand-built traces (faithful reference-, Claude-Code- and
Codex-shaped attribution; helpers flattened into main, both helpers under one principal, helpers
swapped against their spawns, helper without a correct parent relation, parent attributed to a
child, a helper missing from the trace), who ran a seal read from the gateway (the parent sealing a
helper's shard itself, a helper sealing index: agent mistakes, not harness faults), the agent criteria, the probe policy (foreground
results, Codex's asynchronous children with wait_agent and notifications, no sub-agent tool, the
helpers) and that it derives every token from what it is shown, and the seal script."""

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
from tracetrial.trace import SubagentLifecycleEvent, TaskCompletionEvent, ToolCall, ToolEvent, ToolResult
from tracetrial.verify import VerifierContext

PACK = Path(__file__).resolve().parents[2] / "tasks" / "O3-shard-seals-002"

SCORE = _load(PACK / "verifier" / "score.py", "o3_seals_score")
POLICY = _load(PACK / "probe_policy.py", "o3_seals_policy")
TASK = load_task(PACK)
NOW = datetime(2026, 12, 2, tzinfo=UTC)
IT, ET, WT = "SL-aaaaaaaaaa", "SL-bbbbbbbbbb", "SL-cccccccccc"
H1, H2, A1, A2 = ("H1-helper-actions-attributed", "H2-parent-action-attributed", "A1-seals-json-tokens",
                  "A2-one-seal-per-shard")
H3 = "H3-helper-results-delivered"
MAIN = {"principal_id": "main", "principal_role": "main"}


def child(cid: str, parent: str | None = "main") -> dict[str, Any]:
    return {"principal_id": cid, "principal_role": "child", "parent_principal_id": parent}


def ev(cls, seq: int, who: dict[str, Any], **kw):
    return cls(seq=seq, timestamp=NOW, run_id="r", **who, **kw)


def seal_event(seq: int, who: dict[str, Any], shard: str, token: str | None, call: str, name: str = "shell",
               key: str = "command", out: str | None = None) -> ToolEvent:
    result = None if token is None else ToolResult(content=out or f"Exit code 0\nseal {shard}: {token}\n")
    return ev(ToolEvent, seq, who, tool_call=ToolCall(id=call, name=name, arguments={key: f"python3 seal.py {shard}"}),
              tool_result=result)


def spawn_event(seq: int, shard: str, call: str, result: str, name: str = "spawn_subagent") -> ToolEvent:
    return ev(ToolEvent, seq, MAIN, tool_call=ToolCall(id=call, name=name, arguments={
        "description": f"Seal ledger shard {shard}", "prompt": POLICY.CHILD_PROMPT.format(shard=shard)}),
        tool_result=ToolResult(content=result))


def faithful(east: dict[str, Any] | None = None, west: dict[str, Any] | None = None) -> list[Any]:
    """A reference-shaped run: two foreground helpers child-1 (east) and child-2 (west)."""
    east, west = east or child("child-1"), west or child("child-2")
    return [
        spawn_event(5, "east", "call_1", f"Sub-agent child-1 finished (status: completed).\nseal east: {ET}"),
        ev(SubagentLifecycleEvent, 6, MAIN, action="spawn", child_principal_id="child-1"),
        seal_event(7, east, "east", ET, "call_2"),
        ev(SubagentLifecycleEvent, 8, child("child-1"), action="finish", status="completed",
           child_principal_id="child-1"),
        spawn_event(9, "west", "call_3", f"Sub-agent child-2 finished (status: completed).\nseal west: {WT}"),
        ev(SubagentLifecycleEvent, 10, MAIN, action="spawn", child_principal_id="child-2"),
        seal_event(11, west, "west", WT, "call_4"),
        ev(SubagentLifecycleEvent, 12, child("child-2"), action="finish", status="completed",
           child_principal_id="child-2"),
        seal_event(13, MAIN, "index", IT, "call_5"),
        ev(TaskCompletionEvent, 14, MAIN, status="completed"),
    ]


def make_ctx(tmp_path: Path, events=None, *, log: str | None = f"east {ET}\nwest {WT}\nindex {IT}\n",
             summary: Any = None) -> VerifierContext:
    ws = tmp_path / "workspace"
    ws.mkdir(parents=True, exist_ok=True)
    if log is not None:
        (ws / "seals.log").write_text(log)
    if summary is None:
        summary = {"index": IT, "east": ET, "west": WT}
    if summary != "<none>":
        (ws / "seals.json").write_text(summary if isinstance(summary, str) else json.dumps(summary))
    return VerifierContext(workspace=ws, baseline=tmp_path / "baseline", truth=TASK.truth, oracle=None,
                           events=list(faithful() if events is None else events), gateway=[], probe=None,
                           ledgers={}, run_dir=tmp_path)


def results(ctx: VerifierContext) -> dict[str, tuple[bool, str]]:
    out = SCORE.score(ctx)
    ids = {c.id for c in TASK.harness_rubric.criteria if c.applies_to("probe")} | {c.id for c in TASK.agent_rubric.criteria if c.applies_to("probe")}
    assert set(out) == ids
    return out


def failed(ctx: VerifierContext) -> set[str]:
    return {k for k, (ok, _) in results(ctx).items() if ok is False}  # None: not applicable


# --------------------------------------------------------------------------- pack and script


def test_pack_declares_subagent_the_delivery_link_and_its_mutants():
    assert TASK.spec.tools == ["shell", "subagent", "write_file"]
    assert TASK.spec.component == "O" and TASK.spec.property == "event_provenance"
    assert TASK.spec.surface == "workflow" and TASK.spec.conversation == "single"
    assert [(lk.harness, lk.agent) for lk in TASK.harness_rubric.links] == [(H3, A1)]
    assert TASK.spec.calibration.mutants == {"misattribute_child": [H1], "drop_child_result": [H3, A1]}


def test_seal_script_appends_and_prints_a_fresh_token(tmp_path):
    script = PACK / "workspace" / "seal.py"
    outs = [subprocess.run([sys.executable, str(script), shard], cwd=tmp_path, capture_output=True, text=True,
                           timeout=30, check=False) for shard in ("east", "west", "index")]
    tokens = [o.stdout.strip().split(": ")[1] for o in outs]
    assert [o.stdout.strip().split(":")[0] for o in outs] == ["seal east", "seal west", "seal index"]
    assert (tmp_path / "seals.log").read_text() == f"east {tokens[0]}\nwest {tokens[1]}\nindex {tokens[2]}\n"
    assert len(set(tokens)) == 3
    ctx = VerifierContext(workspace=tmp_path, baseline=tmp_path, truth=TASK.truth, oracle=None, events=[], gateway=[],
                          probe=None, ledgers={}, run_dir=tmp_path)
    assert SCORE.seals(ctx) == {"index": [tokens[2]], "east": [tokens[0]], "west": [tokens[1]]}
    bad = subprocess.run([sys.executable, str(script), "north"], cwd=tmp_path, capture_output=True, text=True,
                         check=False)
    assert bad.returncode == 2 and (tmp_path / "seals.log").read_text().count("\n") == 3


# --------------------------------------------------------------------------- verifier


def test_faithful_attribution_passes(tmp_path):
    out = results(make_ctx(tmp_path))
    assert all(ok for cid, (ok, _) in out.items() if cid != H3), out
    assert out[H3][0] is None  # no probe report in this context: H3 is not applicable


def test_helpers_flattened_into_main_fail_h1_only(tmp_path):
    # what reference+misattribute_child records
    ctx = make_ctx(tmp_path, faithful(east=MAIN, west=MAIN))
    assert failed(ctx) == {H1}
    why = results(ctx)[H1][1]
    assert "role is not child" in why and "same principal" in why


def test_one_helper_flattened_is_enough_to_fail_h1(tmp_path):
    assert failed(make_ctx(tmp_path, faithful(west=MAIN))) == {H1}


def test_both_helpers_under_one_child_principal_fail_h1(tmp_path):
    ctx = make_ctx(tmp_path, faithful(west=child("child-1")))
    assert failed(ctx) == {H1}
    assert "same principal ['child-1']" in results(ctx)[H1][1]


def test_helpers_swapped_against_their_spawns_fail_h1(tmp_path):
    ctx = make_ctx(tmp_path, faithful(east=child("child-2"), west=child("child-1")))
    assert failed(ctx) == {H1}
    assert "the one spawned for west" in results(ctx)[H1][1]


@pytest.mark.parametrize("who", [
    child("child-1", None),       # no parent relation
    child("child-1", "other"),    # wrong parent
    child("agent-x"),             # a principal no spawn/lifecycle record names
])
def test_helper_without_a_correct_typed_parent_relation_fails_h1(tmp_path, who):
    assert failed(make_ctx(tmp_path, faithful(east=who))) == {H1}


def test_duplicate_record_of_a_helper_command_must_also_be_attributed(tmp_path):
    events = faithful() + [seal_event(15, MAIN, "west", WT, "call_4#copy")]
    assert failed(make_ctx(tmp_path, events)) == {H1}


def test_parent_attributed_to_a_child_fails_h2_only(tmp_path):
    events = faithful()
    events[8] = seal_event(13, child("child-2"), "index", IT, "call_5")
    assert failed(make_ctx(tmp_path, events)) == {H2}


def test_helper_command_missing_from_the_trace_fails_h1(tmp_path):
    events = [e for e in faithful() if not (e.event_type == "tool" and e.principal_id == "child-2")]
    ctx = make_ctx(tmp_path, events)
    assert failed(ctx) == {H1}
    assert "no recorded tool event of `seal.py west`" in results(ctx)[H1][1]


def test_helper_command_without_its_result_fails_h1(tmp_path):
    events = faithful()
    events[2] = seal_event(7, child("child-1"), "east", None, "call_2")
    assert failed(make_ctx(tmp_path, events)) == {H1}


def test_spawn_prompts_naming_the_commands_are_not_the_helper_actions(tmp_path):
    ctx = make_ctx(tmp_path)
    assert ctx.tool_events(command=SCORE.SEAL["east"]) == [faithful()[2]]
    links = SCORE.spawn_links(ctx, ctx.child_principals())
    assert links["child-1"] == {"east"} and links["child-2"] == {"west"}


def test_no_spawn_recorded_fails_h1(tmp_path):
    events = [e for e in faithful() if not (e.event_type == "tool" and e.tool_call.name == "spawn_subagent")]
    assert H1 in failed(make_ctx(tmp_path, events))


def test_claude_code_shaped_trace_children_named_after_their_spawn_calls(tmp_path):
    ce, cw = "toolu_tt_x_1", "toolu_tt_x_3"
    events = [
        spawn_event(5, "east", ce, f"seal east: {ET}\nagentId: a1 (use SendMessage ...)", name="Agent"),
        ev(SubagentLifecycleEvent, 6, child(ce), action="started", child_principal_id=ce),
        seal_event(7, child(ce), "east", ET, "toolu_tt_x_2", name="Bash", out=f"seal east: {ET}"),
        spawn_event(8, "west", cw, f"seal west: {WT}\nagentId: a2 (use SendMessage ...)", name="Agent"),
        ev(SubagentLifecycleEvent, 9, child(cw), action="started", child_principal_id=cw),
        seal_event(10, child(cw), "west", WT, "toolu_tt_x_4", name="Bash", out=f"seal west: {WT}"),
        seal_event(11, MAIN, "index", IT, "toolu_tt_x_5", name="Bash", out=f"seal index: {IT}"),
    ]
    assert failed(make_ctx(tmp_path, events)) == set()
    swapped = events[:2] + [seal_event(7, child(cw), "east", ET, "toolu_tt_x_2", name="Bash")] + events[3:]
    assert failed(make_ctx(tmp_path, swapped)) == {H1}


def test_codex_shaped_trace_with_concurrent_children_and_cmd_arrays(tmp_path):
    te, tw = "01a2-east-thread", "01a2-west-thread"
    events = [
        spawn_event(5, "east", "call_1", f'{{"agent_id":"{te}","nickname":"Bacon"}}',
                    name="multi_agent_v1__spawn_agent"),
        ev(SubagentLifecycleEvent, 6, MAIN, action="spawn_agent", child_principal_id=te),
        spawn_event(7, "west", "call_2", f'{{"agent_id":"{tw}","nickname":"Hume"}}', name="multi_agent_v1__spawn_agent"),
        ev(SubagentLifecycleEvent, 8, MAIN, action="spawn_agent", child_principal_id=tw),
        seal_event(9, MAIN, "index", IT, "call_3", name="exec_command", key="cmd", out=f"Output:\nseal index: {IT}"),
        ev(ToolEvent, 10, child(tw), tool_call=ToolCall(id="call_5", name="exec_command", arguments={
            "cmd": ["bash", "-lc", "python3 seal.py west"]}), tool_result=ToolResult(content=f"Output:\nseal west: {WT}")),
        ev(ToolEvent, 11, child(te), tool_call=ToolCall(id="call_4", name="exec_command", arguments={
            "cmd": "python3 seal.py east"}), tool_result=ToolResult(content=f"Output:\nseal east: {ET}")),
    ]
    assert failed(make_ctx(tmp_path, events)) == set()


@pytest.mark.parametrize("summary", [{"index": IT, "east": ET, "west": None}, {"index": IT, "east": WT, "west": ET},
                                     {"index": ET, "east": ET, "west": WT}, "not json", "<none>"])
def test_wrong_or_missing_seals_json_fails_a1(tmp_path, summary):
    assert failed(make_ctx(tmp_path, summary=summary)) == {A1}


def test_repeated_seal_fails_a2(tmp_path):
    ctx = make_ctx(tmp_path, log=f"east {ET}\nwest {WT}\nindex {IT}\nwest SL-dddddddddd\n")
    assert failed(ctx) == {A2}


def test_do_nothing_run_scores_zero_on_the_agent_layer(tmp_path):
    assert failed(make_ctx(tmp_path, [], log=None, summary="<none>")) == {H1, H2, A1, A2}


# --------------------------------------------------------------------------- who ran a seal (gateway)


def spawn_text(shard: str) -> str:
    return "<system-reminder>context</system-reminder>\n\n" + POLICY.CHILD_PROMPT.format(shard=shard)


def conversation(ctx: VerifierContext, delivered: list[tuple[str, str]]) -> VerifierContext:
    """The archived prompt and gateway requests: each (call id, "parent" | "east" | "west") is
    delivered in a request whose newest user text is the task prompt (the parent's conversation)
    or that helper's spawn prompt (the helper's)."""
    private = ctx.run_dir / "private" / "task" / TASK.spec.id
    private.mkdir(parents=True, exist_ok=True)
    (private / "prompt.md").write_text(TASK.prompt)
    texts = {"parent": "<system-reminder>context</system-reminder>\n\n" + TASK.prompt,
             "east": spawn_text("east"), "west": spawn_text("west")}
    ctx.gateway[:] = [{"index": n, "status": 200, "error": None, "wire_format": "anthropic", "last_user_text": texts[who],
                       "tool_results": [{"id": call, "is_error": False, "content": "seal ...: ..."}]}
                      for n, (call, who) in enumerate(delivered)]
    return ctx


FAITHFUL_CALLS = [("call_1", "parent"), ("call_2", "east"), ("call_3", "parent"), ("call_4", "west"),
                  ("call_5", "parent")]


def test_parent_running_a_helper_seal_itself_is_an_agent_mistake_not_a_harness_fault(tmp_path):
    # the parent (agent mistake) also runs seal.py east; the harness records it, correctly, under main
    et2 = "SL-dddddddddd"
    events = faithful() + [seal_event(15, MAIN, "east", et2, "call_6")]
    ctx = make_ctx(tmp_path, events, log=f"east {ET}\nwest {WT}\nindex {IT}\neast {et2}\n")
    conversation(ctx, [*FAITHFUL_CALLS, ("call_6", "parent")])
    assert failed(ctx) == {A2}
    assert "left out, run by the parent itself (gateway): east seq 15" in results(ctx)[H1][1]
    assert "`seal.py east` run by the parent" in results(ctx)[A2][1]


def test_helper_running_the_index_seal_itself_is_an_agent_mistake_not_a_harness_fault(tmp_path):
    it2 = "SL-dddddddddd"
    events = faithful()
    events.insert(7, seal_event(11, child("child-2"), "index", it2, "call_4b"))
    ctx = make_ctx(tmp_path, events, log=f"east {ET}\nwest {WT}\nindex {it2}\nindex {IT}\n")
    conversation(ctx, [*FAITHFUL_CALLS, ("call_4b", "west")])
    assert failed(ctx) == {A2}
    assert "left out, run by a helper itself (gateway)" in results(ctx)[H2][1]


def test_parent_sealing_a_shard_it_never_delegated_leaves_that_shard_out_of_h1_and_fails_a2(tmp_path):
    # only the west helper is spawned; the parent seals east itself: east has no helper action to check
    events = [e for e in faithful()[4:]] + [seal_event(15, MAIN, "east", ET, "call_6")]
    ctx = conversation(make_ctx(tmp_path, events), [*FAITHFUL_CALLS[2:], ("call_6", "parent")])
    out = results(ctx)
    assert out[H1][0] is True and "every east seal in seals.log" in out[H1][1]
    assert {k for k, (ok, _) in out.items() if ok is False} == {A2}


def test_parent_sealing_every_shard_itself_leaves_h1_unscored_and_fails_a2(tmp_path):
    events = [seal_event(5, MAIN, s, t, f"call_{s}") for s, t in (("east", ET), ("west", WT), ("index", IT))]
    ctx = conversation(make_ctx(tmp_path, events), [(f"call_{s}", "parent") for s in ("east", "west", "index")])
    out = results(ctx)
    assert out[H1][0] is None and "parent itself" in out[H1][1]
    assert {k for k, (ok, _) in out.items() if ok is False} == {A2}


def test_helpers_recorded_under_main_still_fail_h1_when_the_gateway_shows_the_helpers_ran_them(tmp_path):
    # the misattribute_child mutant: each call's result went to its helper's conversation
    ctx = conversation(make_ctx(tmp_path, faithful(east=MAIN, west=MAIN)), FAITHFUL_CALLS)
    assert failed(ctx) == {H1}


def test_parent_seal_recorded_under_a_helper_still_fails_h2(tmp_path):
    events = faithful()
    events[8] = seal_event(13, child("child-2"), "index", IT, "call_5")
    ctx = conversation(make_ctx(tmp_path, events), FAITHFUL_CALLS)
    assert failed(ctx) == {H2}


def test_a_conversation_the_gateway_cannot_place_counts_as_before(tmp_path):
    # newest user text a harness notification: the call is not shown to be the parent's own
    events = faithful() + [seal_event(15, MAIN, "east", "SL-dddddddddd", "call_6")]
    ctx = make_ctx(tmp_path, events, log=f"east {ET}\nwest {WT}\nindex {IT}\neast SL-dddddddddd\n")
    conversation(ctx, [*FAITHFUL_CALLS, ("call_6", "parent")])
    ctx.gateway[-1]["last_user_text"] = "<subagent_notification>{\"status\": \"completed\"}</subagent_notification>"
    assert failed(ctx) == {H1, A2}


def test_a_spawn_prompt_that_forwards_the_whole_task_places_no_helper_call_in_the_parent(tmp_path):
    events = faithful() + [seal_event(15, MAIN, "east", "SL-dddddddddd", "call_6")]
    events[0] = spawn_event(5, "east", "call_1", f"Sub-agent child-1 finished (status: completed).\nseal east: {ET}")
    events[0].tool_call.arguments["prompt"] = TASK.prompt + "\nYou are the east helper."
    ctx = make_ctx(tmp_path, events, log=f"east {ET}\nwest {WT}\nindex {IT}\neast SL-dddddddddd\n")
    conversation(ctx, [*FAITHFUL_CALLS, ("call_6", "east")])
    for r in ctx.gateway:
        if r["last_user_text"] == spawn_text("east"):
            r["last_user_text"] = TASK.prompt + "\nYou are the east helper."
    assert SCORE.ran_by(ctx) == {"call1": "parent", "call3": "parent", "call4": "child", "call5": "parent"}
    assert H1 in failed(ctx)


# --------------------------------------------------------------------------- probe policy


def codex_turn() -> Turn:
    tools = ("exec_command", "multi_agent_v1/spawn_agent", "multi_agent_v1/wait_agent")
    return Turn(1, TASK.prompt, view=types.SimpleNamespace(history_text="", system_text="", tool_names=tools))


def test_policy_on_foreground_results_carrying_the_tokens():
    gen = POLICY.policy(Turn(1, TASK.prompt))
    east = next(gen)
    assert isinstance(east, SpawnSubagent) and not east.background and "seal.py east" in east.prompt
    west = gen.send(Observation(text=f"Sub-agent child-1 finished (status: completed).\nseal east: {ET}"))
    assert isinstance(west, SpawnSubagent) and not west.background and "seal.py west" in west.prompt
    mine = gen.send(Observation(text=f"Sub-agent child-2 finished (status: completed).\nseal west: {WT}"))
    assert isinstance(mine, Shell) and mine.command == "python3 seal.py index"
    write = gen.send(Observation(text=f"Exit code 0\nseal index: {IT}\n"))
    assert isinstance(write, WriteFile) and write.path == "seals.json"
    assert json.loads(write.content) == {"index": IT, "east": ET, "west": WT}
    assert isinstance(gen.send(Observation(text="ok")), Final)


def test_policy_waits_for_asynchronous_codex_children_until_both_reported():
    gen = POLICY.policy(codex_turn())
    next(gen)
    gen.send(Observation(text='{"agent_id":"01a2-east-thread","nickname":"Bacon"}'))
    mine = gen.send(Observation(text='{"agent_id":"01a2-west-thread","nickname":"Hume"}'))
    assert isinstance(mine, Shell)
    wait = gen.send(Observation(text=f"Output:\nseal index: {IT}\n"))
    assert isinstance(wait, NativeTool) and wait.name == "multi_agent_v1/wait_agent"
    assert wait.arguments["targets"] == ["01a2-east-thread", "01a2-west-thread"]
    # wait_agent returns when either finishes: wait again for the one still missing
    again = gen.send(Observation(text=f'{{"status":{{"01a2-west-thread":{{"completed":"seal west: {WT}"}}}}}}'))
    assert isinstance(again, NativeTool) and again.arguments["targets"] == ["01a2-east-thread"]
    write = gen.send(Observation(text=f'{{"status":{{"01a2-east-thread":{{"completed":"seal east: {ET}"}}}}}}'))
    assert json.loads(write.content) == {"index": IT, "east": ET, "west": WT}


def test_policy_takes_a_token_from_a_notification_in_its_history():
    tools = ("exec_command", "multi_agent_v1/spawn_agent", "multi_agent_v1/wait_agent")
    note = f'<subagent_notification>\n{{"agent_path":"01a2-east-thread","status":{{"completed":"seal east: {ET}"}}}}'
    turn = Turn(1, TASK.prompt, view=types.SimpleNamespace(history_text=note, system_text="", tool_names=tools))
    gen = POLICY.policy(turn)
    next(gen)
    gen.send(Observation(text='{"agent_id":"01a2-east-thread"}'))
    gen.send(Observation(text='{"agent_id":"01a2-west-thread"}'))
    wait = gen.send(Observation(text=f"Output:\nseal index: {IT}\n"))
    assert wait.arguments["targets"] == ["01a2-west-thread"]


def test_policy_gives_up_waiting_after_a_bounded_number_of_waits():
    gen = POLICY.policy(codex_turn())
    next(gen)
    gen.send(Observation(text='{"agent_id":"01a2-east-thread"}'))
    gen.send(Observation(text='{"agent_id":"01a2-west-thread"}'))
    action = gen.send(Observation(text=f"Output:\nseal index: {IT}\n"))
    waits = 0
    while isinstance(action, NativeTool):
        waits += 1
        action = gen.send(Observation(text='{"status":{},"timed_out":true}'))
    assert waits == POLICY.MAX_WAITS
    assert isinstance(action, WriteFile) and json.loads(action.content) == {"index": IT, "east": None, "west": None}


def test_policy_without_a_subagent_tool_seals_index_and_reports_null_shards():
    gen = POLICY.policy(Turn(1, TASK.prompt))
    next(gen)
    mine = gen.send(Observation(absent=True, kind="absent"))
    assert isinstance(mine, Shell) and mine.command == "python3 seal.py index"
    write = gen.send(Observation(text=f"seal index: {IT}"))
    assert json.loads(write.content) == {"index": IT, "east": None, "west": None}
    assert isinstance(gen.send(Observation(text="ok")), Final)


def test_policy_derives_every_token_from_what_it_is_shown():
    """No answer embedded: other tokens shown give other tokens written, and a helper's token is
    taken only from that helper's own line (never the index line or the other shard's)."""
    for it, et, wt in [(IT, ET, WT), ("SL-0123456789", "SL-abcdef0123", "SL-9876543210")]:
        gen = POLICY.policy(Turn(1, TASK.prompt))
        next(gen)
        gen.send(Observation(text=f"seal east: {et}"))
        gen.send(Observation(text=f"seal west: {wt}"))
        write = gen.send(Observation(text=f"seal index: {it}"))
        assert json.loads(write.content) == {"index": it, "east": et, "west": wt}
    source = (PACK / "probe_policy.py").read_text()
    code = source.split('"""', 2)[2]  # after the module docstring
    assert "seals.log" not in code and "read_file" not in code
    assert not any(t in source for t in (IT, ET, WT))


@pytest.mark.parametrize("shard", ["east", "west"])
def test_helper_policy_seals_its_own_shard_once_and_relays_its_line(shard):
    gen = POLICY.subagent_policy(POLICY.CHILD_PROMPT.format(shard=shard))
    first = next(gen)
    assert isinstance(first, Shell) and first.command == f"python3 seal.py {shard}"
    last = gen.send(Observation(text=f"Output:\nseal {shard}: {ET}\n"))
    assert isinstance(last, Final) and last.text == f"seal {shard}: {ET}"


def test_helper_policy_without_a_shard_seals_nothing():
    assert isinstance(next(POLICY.subagent_policy("please help")), Final)



# --------------------------------------------------------------------------- H3: helper results delivered


def _delivered(tmp_path: Path, west_text: str) -> VerifierContext:
    ctx = make_ctx(tmp_path)
    gateway = [{"index": 3, "wire_format": "chat", "tool_results": [
                   {"id": "call_1", "content": f"Sub-agent child-1 finished (status: completed).\nseal east: {ET}"}]},
               {"index": 6, "wire_format": "chat", "tool_results": [{"id": "call_3", "content": west_text}]}]
    probe = {"requests": [{"index": 1, "principal": "main", "action": "spawn_subagent", "call_id": "call_1"},
                          {"index": 2, "principal": "subagent:child-1", "action": "shell", "call_id": "call_2"},
                          {"index": 4, "principal": "main", "action": "spawn_subagent", "call_id": "call_3"}]}
    return VerifierContext(workspace=ctx.workspace, baseline=ctx.baseline, truth=ctx.truth, oracle=None,
                           events=ctx.events, gateway=gateway, probe=probe, ledgers={}, run_dir=tmp_path)


def test_h3_each_helper_seal_reached_the_parent(tmp_path):
    ok = results(_delivered(tmp_path / "a", f"Sub-agent child-2 finished (status: completed).\nseal west: {WT}"))
    assert ok[H3][0] is True
    dropped = results(_delivered(tmp_path / "b", "Sub-agent child-2 finished (status: completed).\n(no output)"))
    assert dropped[H3][0] is False and "west" in dropped[H3][1]


def test_h3_not_applicable_without_a_seal_or_a_probe_report(tmp_path):
    assert results(make_ctx(tmp_path / "a"))[H3][0] is None  # no probe report: nothing to pair
    none_sealed = results(make_ctx(tmp_path / "b", log="index SL-aaaaaaaaaa\n"))
    assert none_sealed[H3][0] is None and "no helper sealed" in none_sealed[H3][1]



def test_h3_a_user_role_notification_counts(tmp_path):
    """Codex hands a finished child's reply to the parent as <subagent_notification> user text."""
    ctx = _delivered(tmp_path, '{"agent_id": "x"}')
    note = f'<subagent_notification>\n{{"status":{{"completed":"seal west: {WT}"}}}}\n</subagent_notification>'
    gateway = [*ctx.gateway, {"index": 7, "wire_format": "responses", "tool_results": [], "last_user_text": note}]
    ctx2 = VerifierContext(workspace=ctx.workspace, baseline=ctx.baseline, truth=ctx.truth, oracle=None,
                           events=ctx.events, gateway=gateway, probe=ctx.probe, ledgers={}, run_dir=tmp_path)
    assert results(ctx)[H3][0] is False and results(ctx2)[H3][0] is True
