"""OpenClaw 2026.9.6 sub-agents through the probe (rule 12): ``sessions_spawn`` is deferred behind
Tool Search, so the probe reaches it with ``tool_describe`` → ``tool_call {id: "sessions_spawn"}``
(and, for a foreground spawn, ``sessions_yield`` → ``tool_call {id: "subagents"}``); a child's
requests are told apart by their first user message (the delegated task and the child's own
session key); a long shell command keeps OpenClaw's ``exec`` in the foreground (``yieldMs``).

The tools are those of a real 2026.9.6 request (fixtures/openclaw-2026.9.6.json); the message
texts are OpenClaw's own wording as recorded on the wire in a real run."""

from __future__ import annotations

import json

import pytest
from probe_http import Out, SimHarness, fixture_tools

from apparatus.probe.classify import principal_of
from apparatus.probe.conversation import parse
from apparatus.probe.mapping import plan_action
from apparatus.probe.tools import Inventory, parse_tools
from tracetrial.policy import shell, spawn_subagent

OC96 = "openclaw-2026.9.6.json"
OC_DIRECT = "openclaw-2026.6.9.direct-mcp.documented.json"
CHILD_KEY = "agent:main:subagent:5e16b792-83f1-4980-9b42-c011cb32df32"
PARENT_KEY = "agent:main:explicit:fea8a698-3f95-581f-8e46-f18ee40e9d63"


def inventory(fixture: str = OC96) -> Inventory:
    return Inventory(parse_tools("chat", fixture_tools(fixture)))


def calls(action, fixture: str = OC96) -> list[tuple[str, object]]:
    return [(c.display, c.arguments) for c in plan_action(action, inventory(fixture)).calls]


def child_task(task: str, key: str = CHILD_KEY) -> str:
    """A child's first user message as OpenClaw 2026.9.6 sends it (task, then the runtime line)."""
    return (f"[Wed 2026-12-02 17:57 UTC] [Subagent Context] You are running as a subagent (depth 1/5). Complete "
            "the current [Subagent Task]; inherited conversation is background context, not your assignment.\n\n"
            f"[Subagent Task]\n\n{task}\n\nBegin. Execute the assigned task to completion.\n\n"
            f"Runtime: agent=main | session={key} | sessionId=946fc1af | host=vm | model=tracetrial/probe")


def settle_notice(result: str) -> str:
    """OpenClaw's message resuming a parent that yielded, once its children settled."""
    return ("[Subagent Context] Every subagent spawned from this session has now settled — none are still running "
            "or awaiting completion delivery.\n\nChild completion results:\n\n1. Child task:\n<prompt-data>\n"
            f"Stamp\n</prompt-data>\nstatus: ok\nChild result:\n<prompt-data>\n{result}\n</prompt-data>\n"
            f"session_key: {CHILD_KEY}")


# ----------------------------------------------------------------------------- mapping


def test_foreground_spawn_loads_the_schema_spawns_yields_and_lists() -> None:
    got = calls(spawn_subagent("Stamp helper", "run stamp.py child"))
    assert got == [
        ("tool_describe", {"id": "sessions_spawn"}),
        ("tool_call:sessions_spawn", {"id": "sessions_spawn", "args": {"task": "run stamp.py child",
                                                                       "label": "Stamp helper"}}),
        ("sessions_yield", {}),
        ("tool_call:subagents", {"id": "subagents", "args": {"action": "list"}}),
    ]
    plan = plan_action(spawn_subagent("Stamp helper", "run stamp.py child"), inventory())
    assert plan.via == "tool_search" and not plan.absent
    # the tool the action reaches is recorded unwrapped (what a verifier sees as the spawn)
    assert plan.calls[1].action_arguments == {"task": "run stamp.py child", "label": "Stamp helper"}


def test_background_spawn_returns_at_the_spawn_result() -> None:
    got = calls(spawn_subagent("Nightly job", "run slow_job.py", background=True))
    assert [d for d, _ in got] == ["tool_describe", "tool_call:sessions_spawn"]


def test_without_a_dispatcher_sessions_spawn_is_out_of_reach() -> None:
    plan = plan_action(spawn_subagent("d", "p"), inventory(OC_DIRECT))
    assert plan.absent and "sub-agent tool" in (plan.needed or "")


def test_a_deferred_list_without_a_sub_agent_tool_is_absent() -> None:
    plan = plan_action(spawn_subagent("d", "p"), inventory(), deferred=("tickets__get_ticket",))
    assert plan.absent


@pytest.mark.parametrize(("timeout_s", "extra"), [
    (120, {"timeoutSeconds": 120, "yieldMs": 120000}),  # beyond the 10 s default window: foreground
    (30.5, {"timeoutSeconds": 30.5, "yieldMs": 30500}),
    (5, {"timeoutSeconds": 5}),  # ends before the default window: nothing to change
    (None, {}),
])
def test_long_shell_command_stays_in_the_foreground(timeout_s: float | None, extra: dict[str, object]) -> None:
    assert calls(shell("python3 slow_job.py", timeout_s=timeout_s)) == [
        ("exec", {"command": "python3 slow_job.py", **extra})]


def test_codex_poll_window_is_not_a_backgrounding_window() -> None:
    tools = Inventory(parse_tools("responses", fixture_tools("codex-0.145.0.json")))
    plan = plan_action(shell("make", timeout_s=120), tools)
    assert all("yield_time_ms" not in (c.arguments or {}) for c in plan.calls)


# ----------------------------------------------------------------------------- principals


def body(*messages: dict[str, object]) -> dict[str, object]:
    return {"model": "probe", "stream": True, "tools": fixture_tools(OC96),
            "messages": [{"role": "system", "content": "You are a personal assistant running inside OpenClaw."},
                         *messages]}


def test_a_child_request_is_its_own_principal() -> None:
    conv = parse("chat", body({"role": "user", "content": child_task("run stamp.py child")}))
    assert conv.openclaw_subagent_key() == CHILD_KEY
    assert principal_of(conv, {}) == f"subagent:{CHILD_KEY}"


def test_the_parent_resumed_with_a_child_completion_stays_main() -> None:
    first = ("Stamp once, then delegate the child stamp.\n\nRuntime: agent=main | "
             f"session={PARENT_KEY} | model=tracetrial/probe")
    conv = parse("chat", body({"role": "user", "content": first},
                              {"role": "user", "content": settle_notice("stamp token: ST-0123456789")}))
    assert conv.openclaw_subagent_key() is None
    assert principal_of(conv, {}) == "main"


def test_a_task_that_only_mentions_a_subagent_session_is_not_a_child() -> None:
    text = f"Look up session={CHILD_KEY} in the logs."  # no OpenClaw sub-agent envelope
    conv = parse("chat", body({"role": "user", "content": text}))
    assert conv.openclaw_subagent_key() is None and principal_of(conv, {}) == "main"


# ----------------------------------------------------------------------------- end to end

POLICY = """
    from tracetrial.policy import final, shell, spawn_subagent

    TOKEN = r"stamp token:\\s*(ST-[0-9a-f]+)"

    def policy(turn):
        sub = yield spawn_subagent("Stamp", "run `python3 stamp.py child` and reply with its line")
        if sub.absent:
            yield final("no sub-agents")
            return
        yield final(f"child token {sub.find(TOKEN)}")

    def subagent_policy(prompt_text):
        res = yield shell("python3 stamp.py child")
        yield final(f"stamp token: {res.find(TOKEN)}")
"""


def test_foreground_spawn_through_yield_and_the_settle_notice(probe, write_policy, run_id) -> None:  # type: ignore[no-untyped-def]
    """The parent's spawn steps run across OpenClaw's yield: its model turn ends at
    ``sessions_yield``, the child runs as its own principal, OpenClaw resumes the parent with the
    settle notice, and the step's observation is the ``subagents list`` result."""
    probe.register_run(run_id, write_policy(POLICY))
    url, tools = probe.run_url(run_id), fixture_tools(OC96)
    parent = SimHarness("chat", url, tools)
    parent.user("Stamp once and delegate the child stamp.")
    steps: list[Out] = []
    for _ in range(3):  # describe, spawn, yield
        out = parent.send()
        steps.append(out)
        parent.assistant(out)
        reply = {"tool_describe": json.dumps({"id": "openclaw:core:sessions_spawn", "name": "sessions_spawn"}),
                 "tool_call": json.dumps({"status": "accepted", "childSessionKey": CHILD_KEY, "runId": "r1"}),
                 "sessions_yield": json.dumps({"status": "yielded"})}[out.name or ""]
        parent.result(out.call_id or "", reply)
    assert [o.name for o in steps] == ["tool_describe", "tool_call", "sessions_yield"]
    assert steps[1].arguments["id"] == "sessions_spawn"

    child = SimHarness("chat", url, tools)
    outs = child.run(child_task("run `python3 stamp.py child` and reply with its line"),
                     lambda o: ("stamp token: ST-00c0ffee11", False))
    assert outs[0].name == "exec" and outs[-1].text == "stamp token: ST-00c0ffee11"

    parent.user(settle_notice("stamp token: ST-00c0ffee11"))  # OpenClaw's announce run
    listing = parent.send()
    assert listing.name == "tool_call" and listing.arguments == {"id": "subagents", "args": {"action": "list"}}
    parent.assistant(listing)
    parent.result(listing.call_id or "", json.dumps({"active": [], "recent": [
        {"sessionKey": CHILD_KEY, "status": "done", "result": "stamp token: ST-00c0ffee11"}]}))
    assert parent.send().text == "child token ST-00c0ffee11"

    report = probe.finish_run(run_id)
    assert report.apparatus_errors == [] and report.absent_capabilities == []
    principals = {r.principal for r in report.requests}
    assert principals == {"main", f"subagent:{CHILD_KEY}"}
    assert [r.mapped_tool for r in report.requests if r.principal == "main"] == [
        "tool_describe", "tool_call:sessions_spawn", "sessions_yield", "tool_call:subagents", None]
    assert {r.kind for r in report.requests if r.principal != "main"} == {"subagent"}


# ----------------------------------------------------------------- the pin, OpenClaw 2026.6.9
#: Tools of a real 2026.6.9 request (fixtures/openclaw-2026.6.9.json): sessions_spawn,
#: sessions_yield and subagents (``action: list`` only) are declared directly.
OC69 = "openclaw-2026.6.9.json"
CHILD_69 = "agent:main:subagent:6abbdc0a-ba94-44fd-b660-30e936389a07"


def test_2026_6_9_foreground_spawn_spawns_yields_and_lists_directly() -> None:
    got = calls(spawn_subagent("Label helper", "make the label"), OC69)
    assert [d for d, _ in got] == ["sessions_spawn", "sessions_yield", "subagents"]
    assert got[0][1]["task"] == "make the label" and got[2][1] == {"action": "list"}
    # a background spawn returns at the spawn's acceptance, as on 2026.9.6
    assert [d for d, _ in calls(spawn_subagent("Nightly", "run slow_job.py", background=True), OC69)] == [
        "sessions_spawn"]


def test_2026_6_9_child_is_named_in_the_system_prompt_only() -> None:
    """2026.6.9's child: the first user message is the task without a runtime line; the session is in
    the system prompt's runtime section (as recorded on the wire)."""
    task = ("[Mon 2026-12-07 09:51 UTC] [Subagent Context] You are running as a subagent (depth 1/1). Results "
            "auto-announce to your requester; do not busy-poll for status.\n\n[Subagent Task]\n\nYou are the label "
            "helper.")
    system = f"You are a personal assistant running inside OpenClaw.\n## Runtime\n- Your session: {CHILD_69}.\n"
    conv = parse("chat", body({"role": "system", "content": system}, {"role": "user", "content": task}))
    assert conv.openclaw_subagent_key() == CHILD_69
    assert principal_of(conv, {}) == f"subagent:{CHILD_69}"
    # a child whose session is named nowhere is still a child (keyed by its task), never the parent
    unnamed = parse("chat", body({"role": "user", "content": task}))
    assert (unnamed.openclaw_subagent_key() or "").startswith("unnamed:")
    assert principal_of(unnamed, {}).startswith("subagent:unnamed:")


def test_2026_6_9_the_child_reply_comes_from_the_completion_event_after_the_yield(  # type: ignore[no-untyped-def]
        probe, write_policy, run_id) -> None:
    """2026.6.9's ``subagents list`` names the child's status but not its reply; the reply reaches the
    parent in the completion event OpenClaw resumes it with (as recorded on the wire): the spawn step's
    observation carries it, so the parent reads the child's token."""
    probe.register_run(run_id, write_policy(POLICY))
    url, tools = probe.run_url(run_id), fixture_tools(OC69)
    parent = SimHarness("chat", url, tools)
    parent.user("Stamp once and delegate the child stamp.")
    for reply in (json.dumps({"status": "accepted", "childSessionKey": CHILD_69, "runId": "r1"}),
                  json.dumps({"status": "yielded", "message": "Turn yielded."})):
        out = parent.send()
        parent.assistant(out)
        parent.result(out.call_id or "", reply)
    parent.user("[Inter-session message] sourceSession=" + CHILD_69 + " sourceTool=subagent_announce isUser=false\n"
                "[Internal task completion event]\nsource: subagent\nresult:\nstamp token: ST-00c0ffee11")
    listing = parent.send()
    assert listing.name == "subagents" and listing.arguments == {"action": "list"}
    parent.assistant(listing)
    parent.result(listing.call_id or "", json.dumps({"status": "ok", "action": "list", "recent": [
        {"sessionKey": CHILD_69, "label": "Stamp", "status": "done"}]}))  # no reply in 2026.6.9's list
    assert parent.send().text == "child token ST-00c0ffee11"
    probe.finish_run(run_id)
