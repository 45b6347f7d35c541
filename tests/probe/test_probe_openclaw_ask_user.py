"""OpenClaw 2026.9.6's ask-user tool through the probe: ``ask_user`` is deferred behind Tool Search
(listed under "Available deferred-schema tools" in the system prompt, not declared), so the generic
``ask_user`` action reaches it with ``tool_describe`` → ``tool_call {id: "ask_user", args:
{questions: [...]}}`` — only when the request's deferred list names it. A free-text question offers
OpenClaw's required 2+ options as open placeholders (every ``ask_user`` question also takes the
user's own words). The tools are those of a real 2026.9.6 request (fixtures/openclaw-2026.9.6.json);
the system-prompt excerpt is OpenClaw's own wording from a real request."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from probe_http import Out, SimHarness, fixture_tools

from apparatus.probe.conversation import parse
from apparatus.probe.mapping import OPEN_CHOICES, OPENCLAW_ASK_USER_SCHEMA, plan_action
from apparatus.probe.tools import Inventory, parse_tools
from tracetrial.policy import ask_user

OC96 = "openclaw-2026.9.6.json"
#: The deferred-tool section of a real 2026.9.6 system prompt (descriptions shortened).
DEFERRED_SECTION = (
    "- tool_call\n- tool_describe\n- tool_search\n### Deferred Tool Schemas\nAvailable deferred-schema tools:\n"
    "- agents_wait (core): Wait for collector subagents started by sessions_spawn collect=true. Accepts many run "
    "ids; returns once any completes (completed results incl. structured output, plus pending id...\n"
    "- ask_user (core): Ask the human user 1-3 structured questions and wait for their answer; `multiSelect` "
    "allows picking several options and `timeoutSeconds` bounds the wait. Use only when blocked o...\n"
    "- intent (memory-core): Create, list, or explicitly cancel event-conditioned standing intents.\n"
    "- sessions_spawn (core): Spawn child session; default `runtime=\"subagent\"`.\n"
    "- web_search (core): Search current web; normalized provider results.\n\n"
    "Policy-approved MCP and client tools may also be discoverable through search.\n")
QUESTION = "Which region should billing-api be deployed to?"


def inventory() -> Inventory:
    return Inventory(parse_tools("chat", fixture_tools(OC96)))


def test_the_deferred_list_of_the_system_prompt_is_read() -> None:
    conv = parse("chat", {"model": "m", "messages": [{"role": "system", "content": "You are OpenClaw.\n" + DEFERRED_SECTION},
                                                      {"role": "user", "content": "go"}],
                          "tools": fixture_tools(OC96)})
    assert conv.deferred_tool_names() == ("agents_wait", "ask_user", "intent", "sessions_spawn", "web_search")


def test_a_free_text_question_reaches_the_deferred_ask_user_through_tool_call() -> None:
    plan = plan_action(ask_user(QUESTION), inventory(), deferred=("agents_wait", "ask_user", "sessions_spawn"))
    assert [c.display for c in plan.calls] == ["tool_describe", "tool_call:ask_user"]
    assert plan.calls[0].arguments == {"id": "ask_user"}
    call = plan.calls[1]
    assert call.arguments == {"id": "ask_user", "args": call.target_arguments}
    (q,) = call.target_arguments["questions"]
    assert q["question"] == QUESTION and q["id"] == "q1" and q["header"] == "Question" and q["multiSelect"] is False
    assert [o["label"] for o in q["options"]] == [label for label, _ in OPEN_CHOICES]
    assert "timeoutSeconds" not in call.target_arguments  # OpenClaw's own default wait
    assert plan.via == "tool_search" and "deferred behind tool_call" in plan.notes[0]
    assert any("open placeholders" in n for n in plan.notes)


def test_the_arguments_fit_openclaws_ask_user_contract() -> None:
    jsonschema = pytest.importorskip("jsonschema")
    plan = plan_action(ask_user(QUESTION), inventory(), deferred=("ask_user",))
    jsonschema.validate(plan.calls[-1].target_arguments, {**OPENCLAW_ASK_USER_SCHEMA, "additionalProperties": False})


def test_without_ask_user_in_the_deferred_list_it_is_absent() -> None:
    for deferred in ((), ("sessions_spawn", "web_search")):
        plan = plan_action(ask_user(QUESTION), inventory(), deferred=deferred)
        assert plan.absent and "ask-user tool" in (plan.needed or "")


def test_without_a_dispatcher_it_is_absent() -> None:
    tools = Inventory([t for t in inventory().tools if t.name not in ("tool_call", "call_tool")])
    assert plan_action(ask_user(QUESTION), tools, deferred=("ask_user",)).absent


# ----------------------------------------------------------------------------- end to end

PACK_POLICY = Path(__file__).resolve().parents[2] / "tasks" / "T7-region-clarify-001" / "probe_policy.py"


def _answered(header: str, qid: str, text: str) -> str:
    """OpenClaw 2026.9.6's ``tool_call`` result for an answered ``ask_user`` (as recorded on the wire)."""
    payload = {"status": "answered", "answers": {"answers": {qid: [text]}}}
    return json.dumps({"tool": {"id": "openclaw:core:ask_user", "name": "ask_user", "source": "openclaw"},
                       "result": {"content": [{"type": "text", "text": f"{header}: {text}\n\n"
                                               + json.dumps(payload, indent=2)}], "details": payload}})


def test_the_region_pack_asks_through_the_deferred_tool(probe: Any, run_id: str) -> None:
    """T7-region-clarify-001's own policy on an OpenClaw 2026.9.6 request: the generic ask reaches
    the deferred ``ask_user`` (describe, then ``tool_call``) and the region comes from its result."""
    probe.register_run(run_id, PACK_POLICY)
    oc = SimHarness("chat", probe.run_url(run_id), fixture_tools(OC96), system="You are OpenClaw.\n" + DEFERRED_SECTION)

    def execute(out: Out) -> tuple[str, bool | None]:
        if out.name == "tool_describe":
            return json.dumps({"id": "openclaw:core:ask_user", "name": "ask_user"}), False
        if out.name == "tool_call":
            (q,) = out.arguments["args"]["questions"]
            return _answered(q["header"], q["id"], "eu-north-7"), False
        return "Wrote deploy.json", False

    outs = oc.run("Write deploy.json with the region.", execute)
    assert [o.name for o in outs][:3] == ["tool_describe", "tool_call", "write"]
    assert json.loads(outs[2].arguments["content"]) == {"region": "eu-north-7"}
    report = probe.finish_run(run_id)
    assert report.absent_capabilities == [] and report.apparatus_errors == []
    assert [r.mapped_tool for r in report.requests][:2] == ["tool_describe", "tool_call:ask_user"]
