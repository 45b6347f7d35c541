"""Action → tool mapping against real tool declarations (captured from Claude Code 2.1.220 and
Codex 0.145.0; documented shapes for OpenClaw and DeepSeek Harness), and the shell fallbacks."""

from __future__ import annotations

import json
import subprocess
from typing import Any

import pytest
from probe_http import FIXTURES, SimHarness, fixture_tools

from apparatus.probe.mapping import plan_action, shell_edit, shell_write
from apparatus.probe.tools import Inventory, parse_tools
from tracetrial.policy import (
    ask_user,
    call_tool,
    edit_file,
    native_tool,
    read_file,
    shell,
    spawn_subagent,
    wait,
    write_file,
)

FORMATS = {"claude_code-2.1.220.main.json": "anthropic", "claude_code-2.1.220.subagent.json": "anthropic",
           "codex-0.145.0.json": "responses", "openclaw-2026.6.9.documented.json": "chat",
           "openclaw-2026.6.9.direct-mcp.documented.json": "chat", "deepseek-0.1.0rc6.documented.json": "chat",
           "reference.json": "chat"}


def inventory(fixture: str) -> Inventory:
    return Inventory(parse_tools(FORMATS[fixture], fixture_tools(fixture)))


def mapped(fixture: str, action, cwd: str | None = None) -> list[tuple[str, object]]:
    plan = plan_action(action, inventory(fixture), cwd)
    return [(c.display, c.arguments) for c in plan.calls]


def test_fixtures_are_labelled():
    for name in FORMATS:
        doc = json.loads((FIXTURES / name).read_text())
        assert doc["shape"] in ("captured", "documented") and doc["tools"]
        assert (doc["shape"] == "documented") == ("documented" in name)
        assert "DOCUMENTED-SHAPE" in doc.get("note", "DOCUMENTED-SHAPE") or doc["shape"] == "captured"


CLAUDE = "claude_code-2.1.220.main.json"
CODEX = "codex-0.145.0.json"
OPENCLAW = "openclaw-2026.6.9.documented.json"
OPENCLAW_DIRECT = "openclaw-2026.6.9.direct-mcp.documented.json"
DEEPSEEK = "deepseek-0.1.0rc6.documented.json"
REFERENCE = "reference.json"


@pytest.mark.parametrize("fixture,action,expected", [
    # shell
    (CLAUDE, shell("make", timeout_s=2.5), [("Bash", {"command": "make", "timeout": 2500})]),
    (CODEX, shell("make"), [("exec_command", {"cmd": "make"})]),
    # a timeout beyond exec's default 10 s yield window keeps the command in the foreground (yieldMs)
    (OPENCLAW, shell("make", timeout_s=30), [("exec", {"command": "make", "timeout": 30, "yieldMs": 30000})]),
    (DEEPSEEK, shell("make"), [("bash", {"command": "make", "description": "Run: make"})]),
    # file tools
    (CLAUDE, read_file("/w/a.txt"), [("Read", {"file_path": "/w/a.txt"})]),
    (CLAUDE, write_file("/w/a.txt", "hi"), [("Write", {"file_path": "/w/a.txt", "content": "hi"})]),
    (CLAUDE, edit_file("/w/a.txt", "a", "b"), [("Edit", {"file_path": "/w/a.txt", "old_string": "a",
                                                         "new_string": "b"})]),
    (OPENCLAW, read_file("a.txt"), [("read", {"path": "a.txt"})]),
    (OPENCLAW, write_file("a.txt", "hi"), [("write", {"path": "a.txt", "content": "hi"})]),
    (OPENCLAW, edit_file("a.txt", "a", "b"), [("edit", {"path": "a.txt", "oldText": "a", "newText": "b"})]),
    (CODEX, read_file("a b.txt"), [("exec_command", {"cmd": "cat -- 'a b.txt'"})]),
    (DEEPSEEK, read_file("a.txt"), [("bash", {"command": "cat -- a.txt", "description": "Run: cat -- a.txt"})]),
    # MCP task tools
    (CLAUDE, call_tool("tickets", "get_ticket", {"ticket_id": "T-1"}),
     [("mcp__tickets__get_ticket", {"ticket_id": "T-1"})]),
    (CODEX, call_tool("tickets", "get_ticket", {"ticket_id": "T-1"}),
     [("mcp__tickets/get_ticket", {"ticket_id": "T-1"})]),
    (OPENCLAW_DIRECT, call_tool("tickets", "get_ticket", {"ticket_id": "T-1"}),
     [("tickets__get_ticket", {"ticket_id": "T-1"})]),
    (OPENCLAW, call_tool("tickets", "get_ticket", {"ticket_id": "T-1"}),
     [("tool_search", {"query": "get_ticket"}), ("tool_call:tickets__get_ticket", {"id": "tickets__get_ticket",
                                                              "args": {"ticket_id": "T-1"}})]),
    # sub-agents
    (CLAUDE, spawn_subagent("count", "Count files."),
     [("Agent", {"description": "count", "prompt": "Count files.", "run_in_background": False})]),
    (CODEX, spawn_subagent("count", "Count files."), [("multi_agent_v1/spawn_agent", {"message": "Count files."})]),
    # the reference harness (Chat Completions)
    (REFERENCE, shell("make", timeout_s=30), [("shell", {"command": "make", "timeout_s": 30})]),
    (REFERENCE, read_file("a.txt"), [("read_file", {"path": "a.txt"})]),
    (REFERENCE, write_file("a.txt", "hi"), [("write_file", {"path": "a.txt", "content": "hi"})]),
    (REFERENCE, edit_file("a.txt", "a", "b"), [("edit_file", {"path": "a.txt", "old_string": "a",
                                                              "new_string": "b"})]),
    (REFERENCE, call_tool("tickets", "get_ticket", {"ticket_id": "T-1"}),
     [("mcp__tickets__get_ticket", {"ticket_id": "T-1"})]),
    (REFERENCE, spawn_subagent("count", "Count files.", background=True),
     [("spawn_subagent", {"description": "count", "prompt": "Count files.", "background": True})]),
    (REFERENCE, ask_user("Which region?"), [("ask_user", {"question": "Which region?"})]),
    # wait and native escape hatch
    (CLAUDE, wait(2), [("Bash", {"command": "sleep 2"})]),
    (CODEX, native_tool("write_stdin", {"session_id": 7, "chars": ""}),
     [("write_stdin", {"session_id": 7, "chars": ""})]),
])
def test_action_maps_to_declared_tool(fixture, action, expected):
    assert mapped(fixture, action) == expected


def test_codex_namespaced_call_keeps_namespace_and_short_name():
    plan = plan_action(call_tool("tickets", "export_tickets", {"snapshot": "s1"}), inventory(CODEX))
    tool = plan.calls[0].tool
    assert (tool.namespace, tool.name) == ("mcp__tickets", "export_tickets")


def test_codex_ask_user_fills_the_nested_schema():
    [(name, args)] = mapped(CODEX, ask_user("Which region should I deploy to?"))
    assert name == "request_user_input"
    q = args["questions"][0]
    assert q["question"] == "Which region should I deploy to?"
    assert set(q) >= {"id", "header", "question", "options"} and len(q["header"]) <= 12
    assert set(q["options"][0]) == {"label", "description"}


def test_claude_relative_paths_become_absolute():
    plan = plan_action(read_file("notes/a.txt"), inventory(CLAUDE), cwd="/srv/ws")
    assert plan.calls[0].arguments == {"file_path": "/srv/ws/notes/a.txt"}
    assert "made absolute" in plan.notes[0]


def test_subagent_declarations_differ_from_the_parent():
    child = inventory("claude_code-2.1.220.subagent.json")
    assert len(child.tools) < len(inventory(CLAUDE).tools)
    assert [c.display for c in plan_action(shell("ls"), child).calls] == ["Bash"]


@pytest.mark.parametrize("fixture,action,needed", [
    (CLAUDE, ask_user("?"), "ask-user"),
    (DEEPSEEK, call_tool("tickets", "get_ticket", {}), "MCP tool 'get_ticket'"),
    (DEEPSEEK, spawn_subagent("d", "p"), "sub-agent tool"),
    # with tools.toolSearch off OpenClaw declares no dispatcher: sessions_spawn is out of reach
    (OPENCLAW_DIRECT, spawn_subagent("d", "p"), "sub-agent tool"),
    (OPENCLAW_DIRECT, ask_user("?"), "ask-user"),
])
def test_absent_capabilities(fixture, action, needed):
    plan = plan_action(action, inventory(fixture))
    assert plan.absent and needed in (plan.needed or "")


def test_absent_capability_is_recorded_not_a_crash(probe, write_policy, run_id):
    probe.register_run(run_id, write_policy("""
        from tracetrial.policy import call_tool, final

        def policy(turn):
            obs = yield call_tool("tickets", "get_ticket", {"ticket_id": "T-1"})
            yield final("absent" if obs.absent else "present: " + obs.text)
    """))
    sim = SimHarness("chat", probe.run_url(run_id), fixture_tools(DEEPSEEK))
    outs = sim.run("look up T-1", lambda o: ("", None))
    assert [o.text for o in outs] == ["absent"]  # no tool call was sent, the policy saw absent=True
    report = probe.finish_run(run_id)
    [absent] = report.absent_capabilities
    assert absent.action == "call_tool" and "get_ticket" in absent.needed
    assert absent.declared_tools == ["bash", "job_kill", "job_list", "job_output", "skill"]
    assert report.apparatus_errors == []


# --------------------------------------------------------------------------- shell fallbacks, executed


TRICKY = "line 1 with 'quotes' and \"double\" $HOME `tick`\nTT_EOF_x\n\nünïcode ✓\nno newline at end"


def test_shell_write_fallback_keeps_bytes(tmp_path):
    cmd = shell_write("sub/dir/out.txt", TRICKY)
    subprocess.run(["bash", "-c", cmd], cwd=tmp_path, check=True)
    assert (tmp_path / "sub/dir/out.txt").read_text(encoding="utf-8") == TRICKY


def test_shell_edit_fallback_replaces_once_and_refuses_ambiguity(tmp_path):
    target = tmp_path / "f.txt"
    target.write_text("a\r\nOLD 'x'\nrest OLD2 OLD3", encoding="utf-8")
    subprocess.run(["bash", "-c", shell_edit("f.txt", "OLD 'x'\n", "NEW \"y\"\n")], cwd=tmp_path, check=True)
    assert target.read_bytes() == b"a\r\nNEW \"y\"\nrest OLD2 OLD3"
    res = subprocess.run(["bash", "-c", shell_edit("f.txt", "OLD", "z")], cwd=tmp_path, capture_output=True,
                         text=True, check=False)
    assert res.returncode != 0 and "expected exactly one occurrence" in res.stderr


@pytest.mark.parametrize("tool", ["dispatch.create", "dispatch_create"])
@pytest.mark.parametrize("order", ["dot first", "underscore first"])
def test_an_exact_name_wins_over_one_that_only_normalises_alike(tool: str, order: str) -> None:
    """Two MCP tools whose names differ only in punctuation (dispatch.create, dispatch_create):
    the call goes to the one named, whichever is declared first (T2-carrier-dispatch-002)."""
    decls = [{"name": f"mcp__dispatch__{n}", "description": n, "input_schema": {"type": "object", "properties": {}}}
             for n in ("dispatch.create", "dispatch_create")]
    if order == "underscore first":
        decls.reverse()
    plan = plan_action(call_tool("dispatch", tool, {}), Inventory(parse_tools("anthropic", decls)))
    assert plan.calls[0].tool.name == f"mcp__dispatch__{tool}"
    # a harness that rewrote the name (one declaration left): still found, normalised
    only = [d for d in decls if d["name"].endswith("dispatch_create")]
    plan = plan_action(call_tool("dispatch", "dispatch.create", {}), Inventory(parse_tools("anthropic", only)))
    assert plan.calls[0].tool.name == "mcp__dispatch__dispatch_create"


def test_a_terminal_is_asked_for_through_the_tools_own_option_or_noted_as_not_transportable() -> None:
    """``shell(tty=True)``: Codex ``exec_command {tty}``, OpenClaw ``exec {pty}``; Claude Code's
    Bash has no terminal option, so the command runs without one (and the plan says so)."""
    codex = plan_action(shell("./migrate.sh", tty=True), inventory(CODEX), None)
    assert [(c.display, c.arguments) for c in codex.calls] == [("exec_command", {"cmd": "./migrate.sh", "tty": True})]
    claude = plan_action(shell("./migrate.sh", tty=True), inventory(CLAUDE), None)
    assert [c.arguments for c in claude.calls] == [{"command": "./migrate.sh"}]
    assert any("tty=True not transportable" in n for n in claude.notes)
    oc_tools = json.loads((FIXTURES / "openclaw-2026.9.6.json").read_text())["tools"]
    oc = plan_action(shell("./migrate.sh", tty=True), Inventory(parse_tools("chat", oc_tools)), None)
    assert oc.calls[0].display == "exec" and oc.calls[0].arguments.get("pty") is True
    plain = plan_action(shell("./migrate.sh"), inventory(CODEX), None)
    assert "tty" not in plain.calls[0].arguments
    assert shell("x").describe() == {"kind": "shell", "command": "x", "timeout_s": None}
    assert shell("x", tty=True).describe()["tty"] is True


def test_a_free_text_question_through_a_multiple_choice_ask_tool() -> None:
    # Claude Code 2.1.220's AskUserQuestion requires 2-4 options per question (its own validation
    # rejected a single-option call in a real cell): the probe offers two open placeholders and
    # the user answers in their own words ("Other").
    from apparatus.probe.mapping import OPEN_CHOICES, ask_arguments
    from apparatus.probe.tools import ToolDecl

    option = {"type": "object", "properties": {"label": {"type": "string"}, "description": {"type": "string"}}}
    decl = ToolDecl("AskUserQuestion", schema={"type": "object", "properties": {"questions": {
        "type": "array", "items": {"type": "object", "required": ["question", "header", "options", "multiSelect"],
                                   "properties": {"question": {"type": "string"},
                                                  "header": {"type": "string", "maxLength": 12},
                                                  "options": {"type": "array", "minItems": 2, "maxItems": 4,
                                                              "items": option},
                                                  "multiSelect": {"type": "boolean"}}}}}})
    args, notes = ask_arguments(decl, "Which region?")
    q = args["questions"][0]
    assert q["question"] == "Which region?" and len(q["header"]) <= 12 and q["multiSelect"] is False
    assert [o["label"] for o in q["options"]] == [label for label, _ in OPEN_CHOICES]
    assert notes and "open placeholders" in notes[0]
    # the reference's plain ask_user {question, options?} keeps the generic form
    plain = ToolDecl("ask_user", schema={"type": "object", "properties": {
        "question": {"type": "string"}, "options": {"type": "array", "items": {"type": "string"}}},
        "required": ["question"]})
    assert ask_arguments(plain, "Which region?")[0] == {"question": "Which region?"}


def _deepseek_ask_tool() -> Any:
    # DeepSeek Harness 0.1.0rc6 ask_user_question as it reaches the model (its dsh-tool-ask-user
    # schema): id and question required, options optional objects {label, description?}, and
    # multi_select (snake case).
    from apparatus.probe.tools import ToolDecl

    option = {"type": "object", "additionalProperties": True, "required": ["label"],
              "properties": {"label": {"type": "string"}, "description": {"type": "string"}}}
    return ToolDecl("ask_user_question", schema={"type": "object", "required": ["questions"], "properties": {
        "questions": {"type": "array", "items": {
            "type": "object", "additionalProperties": True, "required": ["id", "question"],
            "properties": {"id": {"type": "string"}, "question": {"type": "string"}, "header": {"type": "string"},
                           "options": {"type": "array", "items": option},
                           "multi_select": {"type": "boolean"}}}}}})


def test_a_free_text_question_through_deepseeks_ask_user_question() -> None:
    from apparatus.probe.mapping import ask_arguments

    args, notes = ask_arguments(_deepseek_ask_tool(), "Which region?")
    # options are optional there: a free-text question offers none (no placeholders), and no
    # camel-case multiSelect is sent to a tool whose flag is multi_select
    assert args == {"questions": [{"question": "Which region?", "id": "q1", "header": "Question"}]} and notes == []


def test_an_asks_options_become_the_tools_options() -> None:
    from apparatus.probe.mapping import ask_arguments
    from apparatus.probe.tools import ToolDecl

    question, options = "Which window?", ["RW-TUE-0200 (Tuesday 02:00 UTC)", "RW-THU-2200 (Thursday 22:00 UTC)"]
    listed = f"{question} Options: {'; '.join(options)}"
    args, notes = ask_arguments(_deepseek_ask_tool(), question, options)
    assert args == {"questions": [{"question": "Which window?", "id": "q1", "header": "Question",
                                   "options": [{"label": "RW-TUE-0200 (Tuesday 02:00 UTC)"},
                                               {"label": "RW-THU-2200 (Thursday 22:00 UTC)"}],
                                   "multi_select": False}]}
    assert notes and "2 options" in notes[0]
    # a schema the options do not fit (too many for maxItems) gets them listed in the question
    tight = ToolDecl("AskUserQuestion", schema={"type": "object", "properties": {"questions": {
        "type": "array", "items": {"type": "object", "required": ["question"], "properties": {
            "question": {"type": "string"}, "options": {"type": "array", "maxItems": 1, "items": {"type": "string"}}}}}}})
    assert ask_arguments(tight, question, options)[0] == {"questions": [{"question": listed}]}
    # the reference's plain ask_user {question, options?} keeps the generic form, options in the text
    plain = ToolDecl("ask_user", schema={"type": "object", "properties": {
        "question": {"type": "string"}, "options": {"type": "array", "items": {"type": "string"}}},
        "required": ["question"]})
    assert ask_arguments(plain, question, options)[0] == {"question": listed}
    assert ask_arguments(plain, question)[0] == {"question": question}
