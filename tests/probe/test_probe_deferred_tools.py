"""Deferred MCP tools (Claude Code 2.1.332+): the harness names an MCP tool in a system message and
declares only ``ToolSearch``; the probe loads the tool through that search tool, then calls it.

The declarations, the announcement and the search round trip are the ones captured from the real
CLI (``fixtures/claude_code-2.1.332.main.json``, a T3-invoice-args-001 cell with bodies recorded).
The pinned harnesses' declarations map exactly as before (``test_probe_mapping.py``; here: no
search tool is ever planned for them).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from probe_http import FIXTURES, Out, SimHarness, fixture_tools

from apparatus.probe.conversation import parse
from apparatus.probe.mapping import DEFERRED_SEARCH_TOOLS, plan_action
from apparatus.probe.tools import Inventory, parse_tools
from tracetrial.policy import call_tool

CC_NEW = "claude_code-2.1.332.main.json"
DOC: dict[str, Any] = json.loads((FIXTURES / CC_NEW).read_text(encoding="utf-8"))
TOOL = "mcp__billing__create_invoice"
ARGS = {"customer": {"id": "C-1", "name": "Zoë"}, "lines": [{"sku": "S", "qty": 1, "unit_price_cents": 5}],
        "note": None}
INVOICE = call_tool("billing", "create_invoice", ARGS)


def _body(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> dict[str, Any]:
    return {"model": "probe", "stream": True, "max_tokens": 1000, "system": "You are Claude Code.",
            "messages": messages, "tools": tools}


def _announce() -> dict[str, Any]:
    return {"role": DOC["deferred_announcement_role"], "content": DOC["deferred_announcement"] + "\n\n"}


def _plan(body: dict[str, Any], action=INVOICE):
    conv = parse("anthropic", body)
    return plan_action(action, Inventory(conv.tools), conv.cwd(), deferred=conv.deferred_tool_names(),
                       revealed=conv.revealed_tools(DEFERRED_SEARCH_TOOLS))


def test_fixture_is_the_captured_shape():
    names = [t["name"] for t in DOC["tools"]]
    assert "ToolSearch" in names and "DeferredToolPlaceholder" in names
    assert not any(n.startswith("mcp__") for n in names)
    after = {t["name"]: t for t in DOC["tools_after_search"]}
    assert after[TOOL]["defer_loading"] is True and after[TOOL]["input_schema"]["required"]
    assert DOC["search_result"]["content"] == [{"type": "tool_reference", "tool_name": TOOL}]


def test_announced_deferred_names_are_read():
    conv = parse("anthropic", _body([{"role": "user", "content": "bill it"}, _announce()], DOC["tools"]))
    names = conv.deferred_tool_names()
    assert names[-1] == TOOL and "WebFetch" in names and "DeferredToolPlaceholder" not in names
    assert not any(" " in n for n in names)


def test_undeclared_deferred_tool_is_searched_then_called():
    plan = _plan(_body([{"role": "user", "content": "bill it"}, _announce()], DOC["tools"]))
    assert [(c.display, c.arguments) for c in plan.calls] == [
        ("ToolSearch", {"query": f"select:{TOOL}"}), (TOOL, ARGS)]
    assert plan.via == "tool_search" and not plan.absent
    assert "announced as deferred" in plan.notes[0]
    assert plan.mapped_tool == TOOL


def test_search_result_reference_loads_the_tool_for_later_calls():
    """After the captured round trip the next request declares the tool (defer_loading) and the
    history holds the tool_reference: a later call goes straight to the tool."""
    messages = [{"role": "user", "content": "bill it"}, _announce(),
                {"role": "assistant", "content": [DOC["search_call"]]},
                {"role": "user", "content": [DOC["search_result"]]}]
    plan = _plan(_body(messages, DOC["tools_after_search"]))
    assert [(c.display, c.arguments) for c in plan.calls] == [(TOOL, ARGS)]
    assert plan.calls[0].tool.deferred and plan.calls[0].tool.schema["required"]
    # referenced but not (yet) declared: still called directly, by the referenced name
    plan = _plan(_body(messages, DOC["tools"]))
    assert [c.display for c in plan.calls] == [TOOL]


def test_functions_block_result_also_loads_the_tool():
    """The search tool's documented result form: ``<function>{…}</function>`` lines."""
    spec = {"description": "Create an invoice.", "name": TOOL, "parameters": {"type": "object"}}
    result = {"type": "tool_result", "tool_use_id": "toolu_9",
              "content": f"<functions>\n<function>{json.dumps(spec)}</function>\n</functions>"}
    messages = [{"role": "user", "content": "bill it"}, _announce(),
                {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_9", "name": "ToolSearch",
                                                   "input": {"query": f"select:{TOOL}"}}]},
                {"role": "user", "content": [result]}]
    conv = parse("anthropic", _body(messages, DOC["tools"]))
    [tool] = conv.revealed_tools(DEFERRED_SEARCH_TOOLS)
    assert (tool.name, tool.description) == (TOOL, "Create an invoice.")
    assert [c.display for c in _plan(_body(messages, DOC["tools"])).calls] == [TOOL]


def test_declared_with_defer_loading_but_never_loaded_is_searched_first():
    plan = _plan(_body([{"role": "user", "content": "bill it"}], DOC["tools_after_search"]))
    assert [c.display for c in plan.calls] == ["ToolSearch", TOOL]
    assert plan.calls[1].tool.deferred and "defer_loading" in plan.notes[0]


def test_unannounced_tool_is_still_searched_by_its_wire_name():
    plan = _plan(_body([{"role": "user", "content": "bill it"}], DOC["tools"]),
                 call_tool("tickets", "get_ticket", {"ticket_id": "T-1"}))
    assert [(c.display, c.arguments) for c in plan.calls] == [
        ("ToolSearch", {"query": "select:mcp__tickets__get_ticket"}), ("mcp__tickets__get_ticket", {"ticket_id": "T-1"})]
    assert "not announced" in plan.notes[0]


@pytest.mark.parametrize("fixture,fmt", [
    ("claude_code-2.1.220.main.json", "anthropic"), ("claude_code-2.1.220.subagent.json", "anthropic"),
    ("codex-0.145.0.json", "responses"), ("openclaw-2026.6.9.documented.json", "chat"),
    ("openclaw-2026.6.9.direct-mcp.documented.json", "chat"), ("reference.json", "chat"),
])
def test_pinned_declarations_never_plan_a_deferred_search(fixture, fmt):
    tools = parse_tools(fmt, fixture_tools(fixture))
    assert not any(t.deferred for t in tools)
    plan = plan_action(call_tool("tickets", "get_ticket", {"ticket_id": "T-1"}), Inventory(tools),
                       deferred=(TOOL,), revealed=())
    assert "ToolSearch" not in [c.display for c in plan.calls]
    # the hints change nothing for them
    assert plan == plan_action(call_tool("tickets", "get_ticket", {"ticket_id": "T-1"}), Inventory(tools))


POLICY = """
    from tracetrial.policy import call_tool, final

    def policy(turn):
        first = yield call_tool("billing", "create_invoice", {"note": None, "n": 1})
        receipt = first.find(r"(INV-\\w+)", default="none")
        second = yield call_tool("billing", "create_invoice", {"note": None, "n": 2})
        again = second.find(r"(INV-\\w+)", default="none")
        yield final(f"{receipt} {again}")
"""


class DeferringHarness(SimHarness):
    """Claude Code 2.1.332's shape: MCP tools named in a system message, loaded by ToolSearch
    (a ``tool_reference`` result), declared with ``defer_loading`` once loaded."""

    def __init__(self, base_url: str):
        super().__init__("anthropic", base_url, [dict(t) for t in DOC["tools"]])
        self.loaded = False

    def user(self, text: str) -> None:
        super().user(text)
        self.messages.append(_announce())


def test_probe_drives_the_search_round_trip(probe, write_policy, run_id):
    probe.register_run(run_id, write_policy(POLICY))
    sim = DeferringHarness(probe.run_url(run_id))
    receipts = iter(["INV-1", "INV-2"])

    def execute(out: Out) -> tuple[Any, bool | None]:
        if out.name == "ToolSearch":
            sim.loaded = True
            sim.tools = [dict(t) for t in DOC["tools_after_search"]]
            return "", None  # replaced below by the real block shape
        assert out.name == TOOL and sim.loaded, f"{out.name} called before it was loaded"
        return json.dumps({"receipt": next(receipts)}), False

    sim.user("bill it twice")
    names: list[str | None] = []
    for _ in range(8):
        out = sim.send()
        names.append(out.name)
        sim.assistant(out)
        if out.name is None:
            break
        text, is_error = execute(out)
        sim.result(out.call_id or "", text, is_error)
        if out.name == "ToolSearch":  # the real result is a tool_reference block, not text
            sim.messages[-1]["content"][0]["content"] = [{"type": "tool_reference", "tool_name": TOOL}]
    assert names == ["ToolSearch", TOOL, TOOL, None]
    assert out.text == "INV-1 INV-2"
    report = probe.finish_run(run_id)
    assert report.apparatus_errors == [] and report.absent_capabilities == []
    assert [r.mapped_tool for r in report.requests] == ["ToolSearch", TOOL, TOOL, None]
    assert report.requests[0].arguments == {"query": f"select:{TOOL}"}
    assert report.requests[1].arguments == {"note": None, "n": 1}


def test_policies_see_each_declared_tools_description():
    """A policy tells apart tools whose names a harness rewrote (cut, hashed) by the descriptions the
    model was shown (T2-lane-reservation-001), live and in a stored view replayed later."""
    from apparatus.probe.engine import StoredView
    from tracetrial.policy import Turn, TurnView

    tools = DOC["tools_after_search"]
    conv = parse("anthropic", _body([{"role": "user", "content": "bill it"}], tools))
    pairs = conv.tool_descriptions
    assert [name for name, _ in pairs] == list(conv.tool_names)
    declared = {t["name"]: t.get("description", "") for t in tools}
    assert dict(pairs)[TOOL] == declared[TOOL] and declared[TOOL]
    view = TurnView(conv.history_text(), conv.system_text, conv.tool_names, conv.tool_descriptions)
    for seen in (view, StoredView(view)):
        turn = Turn(1, "bill it", view=seen)
        assert turn.tool_descriptions[TOOL] == declared[TOOL]
    assert Turn(1, "x").tool_descriptions == {}


def test_policies_see_each_declared_tools_parameter_descriptions():
    """A harness may state a tool's semantics in a parameter only (Codex's ``workdir``:
    "Defaults to the turn cwd"): policies see each parameter's description, live and replayed."""
    from apparatus.probe.engine import StoredView
    from tracetrial.policy import Turn

    tools = [{"name": "exec_command", "description": "Runs a command.",
              "input_schema": {"type": "object", "properties": {
                  "cmd": {"type": "string", "description": "The command to run."},
                  "workdir": {"type": "string", "description": "Defaults to the turn cwd."},
                  "tty": {"type": "boolean"}}}},
             {"name": "noop", "description": "Nothing.", "input_schema": {"type": "object"}}]
    conv = parse("anthropic", _body([{"role": "user", "content": "build"}], tools))
    view = conv.view()
    assert [name for name, _ in view.tool_parameters] == list(conv.tool_names)
    for seen in (view, StoredView(view)):
        turn = Turn(1, "build", view=seen)
        assert turn.tool_parameters["exec_command"] == {"cmd": "The command to run.",
                                                       "workdir": "Defaults to the turn cwd.", "tty": ""}
        assert turn.tool_parameters["noop"] == {}
    assert Turn(1, "x").tool_parameters == {}


# ------------------------------------------------------------------ the policy API (load_deferred)


def test_policies_see_the_announced_deferred_names_live_and_replayed():
    """Claude Code 2.1.332 names MCP tools in a system message and declares none of them: a policy
    sees those names (``turn.deferred_tool_names``), live and in a stored view replayed later."""
    from apparatus.probe.engine import StoredView
    from tracetrial.policy import Turn

    conv = parse("anthropic", _body([{"role": "user", "content": "bill it"}, _announce()], DOC["tools"]))
    view = conv.view()
    assert view.deferred_tool_names == conv.deferred_tool_names() and TOOL in view.deferred_tool_names
    for seen in (view, StoredView(view)):
        assert Turn(1, "bill it", view=seen).deferred_tool_names == conv.deferred_tool_names()
    assert Turn(1, "x").deferred_tool_names == ()


def _turns_around_search(messages_after: list[dict[str, Any]], tools_after: list[dict[str, Any]]):
    from tracetrial.policy import Turn

    before = parse("anthropic", _body([{"role": "user", "content": "bill it"}, _announce()], DOC["tools"])).view()
    after = parse("anthropic", _body([{"role": "user", "content": "bill it"}, _announce(), *messages_after],
                                     tools_after)).view()

    class Shown(Turn):
        def __init__(self) -> None:
            super().__init__(1, "bill it", view=before)

        def show(self, view: Any) -> None:
            self._view = view

    return Shown(), after


def test_load_deferred_fetches_the_announced_tools_of_the_server_and_reads_their_descriptions():
    from tracetrial.policy import NativeTool, Observation, load_deferred

    turn, after = _turns_around_search([{"role": "assistant", "content": [DOC["search_call"]]},
                                        {"role": "user", "content": [DOC["search_result"]]}],
                                       DOC["tools_after_search"])
    gen = load_deferred(turn, "billing")
    action = next(gen)
    assert isinstance(action, NativeTool) and action.name == "ToolSearch"
    assert action.arguments == {"query": f"select:{TOOL}"}  # the announced name, in the documented form
    turn.show(after)  # the next step is decided in the request that carries the result
    with pytest.raises(StopIteration) as stop:
        gen.send(Observation(text="[tool_reference]", call_id="toolu_1"))
    declared = {t["name"]: t["description"] for t in DOC["tools_after_search"]}
    assert stop.value.value == {TOOL: declared[TOOL]}


def test_load_deferred_reads_a_functions_block_result():
    from tracetrial.policy import Observation, load_deferred

    turn, after = _turns_around_search([], DOC["tools"])
    gen = load_deferred(turn, "billing")
    next(gen)
    spec = {"description": "Create an invoice.", "name": TOOL, "parameters": {"type": "object"}}
    other = {"description": "Not ours.", "name": "mcp__tickets__get_ticket", "parameters": {}}
    turn.show(after)
    with pytest.raises(StopIteration) as stop:
        gen.send(Observation(text=f"<functions>\n<function>{json.dumps(spec)}</function>\n"
                                  f"<function>{json.dumps(other)}</function>\n</functions>"))
    assert stop.value.value == {TOOL: "Create an invoice."}


def test_load_deferred_searches_the_server_name_when_nothing_of_it_is_announced():
    from tracetrial.policy import NativeTool, load_deferred

    turn, _ = _turns_around_search([], DOC["tools"])
    action = next(load_deferred(turn, "warehouse"))
    assert isinstance(action, NativeTool) and action.arguments == {"query": "warehouse"}


@pytest.mark.parametrize("fixture,fmt", [
    ("claude_code-2.1.220.main.json", "anthropic"), ("codex-0.145.0.json", "responses"),
    ("openclaw-2026.6.9.direct-mcp.documented.json", "chat"), ("reference.json", "chat"),
])
def test_load_deferred_does_nothing_without_a_search_tool(fixture, fmt):
    from tracetrial.policy import Turn, TurnView, load_deferred

    names = tuple(t.display for t in parse_tools(fmt, fixture_tools(fixture)))
    assert not set(names) & set(DEFERRED_SEARCH_TOOLS)
    with pytest.raises(StopIteration) as stop:
        next(load_deferred(Turn(1, "x", view=TurnView(tool_names=names, deferred_tool_names=(TOOL,))), "billing"))
    assert stop.value.value == {}


def test_load_deferred_does_nothing_when_a_tool_of_the_server_is_declared():
    from tracetrial.policy import Turn, TurnView, load_deferred

    turn = Turn(1, "x", view=TurnView(tool_names=("ToolSearch", TOOL), deferred_tool_names=(TOOL,)))
    with pytest.raises(StopIteration) as stop:
        next(load_deferred(turn, "billing"))
    assert stop.value.value == {}
