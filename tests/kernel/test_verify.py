"""The verifier API (tracetrial.verify): text helpers, name matching, and the context's queries
over the Trace IR, gateway records, probe report, ledgers and archive files (failure paths
included: missing file, malformed JSON, wrong type, no matching call)."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from tracetrial.trace import (
    AssistantMessageEvent,
    EventBase,
    ModelInputEvent,
    SubagentLifecycleEvent,
    ToolCall,
    ToolEvent,
    ToolResult,
)
from tracetrial.verify import (
    Delivery,
    VerifierContext,
    as_text,
    bare_tool_name,
    call_ids,
    is_main,
    is_spawn,
    names_tool,
    norm_id,
    norm_text,
    shell_command,
    shell_state_declared,
    stated_exit_code,
    strings,
    tool_call_arguments,
)

NOW = datetime(2026, 11, 30, tzinfo=UTC)


def tool(seq: int, name: str, args: Any = None, content: Any = "", *, cid: str | None = None,
         native: str | None = None, turn: int | None = 1, **who: Any) -> ToolEvent:
    return ToolEvent(seq=seq, timestamp=NOW, run_id="r", conversation_turn=turn, **who,
                     tool_call=ToolCall(id=cid or f"call_{seq}", name=name, arguments=args, native_tool_call_id=native),
                     tool_result=None if content is None else ToolResult(content=content))


def ctx_for(tmp_path: Path, *, events: list[EventBase] = (), gateway: list[dict[str, Any]] = (),  # type: ignore[assignment]
            probe: dict[str, Any] | None = None, ledgers: dict[str, list[dict[str, Any]]] | None = None) -> VerifierContext:
    ws, base = tmp_path / "workspace", tmp_path / "baseline"
    ws.mkdir(parents=True, exist_ok=True)
    base.mkdir(parents=True, exist_ok=True)
    return VerifierContext(workspace=ws, baseline=base, truth={}, oracle=None, events=list(events),
                           gateway=list(gateway), probe=probe, ledgers=ledgers or {}, run_dir=tmp_path)


def request(index: int, results: list[tuple[str, str, bool | None]], *, wire: str = "anthropic",
            status: int = 200, error: str | None = None) -> dict[str, Any]:
    return {"index": index, "wire_format": wire, "status": status, "error": error,
            "tool_results": [{"id": i, "content": c, "is_error": e} for i, c, e in results]}


# --------------------------------------------------------------------------- text helpers


def test_norm_id_compares_ids_as_harnesses_rewrite_them() -> None:
    assert norm_id("toolu_tt_1_2") == norm_id("toolu-tt-1-2") == norm_id("TOOLU_TT_1_2") == "toolutt12"
    assert norm_id(None) == norm_id("") == ""


def test_norm_text_collapses_whitespace() -> None:
    assert norm_text("  a\n\tb   c ") == "a b c"
    assert norm_text(None) == ""


def test_strings_walks_nested_values_and_parses_json_text() -> None:
    args = {"command": "rm x", "env": ["A", {"b": "B"}], "n": 3}
    assert list(strings(args)) == ["rm x", "A", "B"]
    assert list(strings(json.dumps(args))) == ["rm x", "A", "B"]
    assert list(strings('"quoted"')) == ["quoted"]
    assert list(strings("not json {")) == ["not json {"]
    assert list(strings({"qty": "42", "flag": "null"})) == ["42", "null"]    # text, though valid JSON
    assert list(strings(None)) == []


def test_as_text() -> None:
    assert as_text("x") == "x" and as_text(None) == ""
    assert as_text([{"type": "text", "text": "hi"}]) == '[{"type": "text", "text": "hi"}]'


@pytest.mark.parametrize(("text", "code"), [
    ("Exit code 2\nBUILD SUCCESS", 2), ("Process exited with code 0", 0), ("exited with status 3", 3), ("Exit code -1", -1),
    ('{"exit_code": 7}', 7), ("exit status: 1", 1), ("BUILD SUCCESS", None), (None, None)])
def test_stated_exit_code(text: str | None, code: int | None) -> None:
    assert stated_exit_code(text) == code


def test_shell_command_of_each_argument_shape() -> None:
    assert shell_command({"command": "ls -la"}) == "ls -la"
    assert shell_command({"cmd": ["bash", "-lc", "make"]}) == "bash -lc make"
    assert shell_command(json.dumps({"input": "python3 job.py"})) == "python3 job.py"
    assert shell_command({"prompt": "run python3 job.py"}) == ""      # a spawn's prompt is no command
    assert shell_command("not json") == "" and shell_command(None) == ""


# --------------------------------------------------------------------------- names


@pytest.mark.parametrize("name", ["close_ticket", "mcp__tickets__close_ticket", "tickets__close_ticket",
                                  "tickets/close_ticket", "mcp__tickets/close_ticket", "tickets.close_ticket"])
def test_names_tool_matches_every_mcp_form(name: str) -> None:
    assert names_tool(name, "close_ticket")
    assert bare_tool_name(name) == "close_ticket"


def test_names_tool_rejects_other_tools_and_other_servers() -> None:
    assert not names_tool("mcp__tickets__close_ticket_v2", "close_ticket")
    assert not names_tool("mcp__tickets__reclose_ticket", "close_ticket")
    assert not names_tool(None, "close_ticket")
    assert names_tool("mcp__tickets__close_ticket", "close_ticket", service="tickets")
    assert names_tool("tickets/close_ticket", "close_ticket", service="tickets")
    assert not names_tool("mcp__billing__close_ticket", "close_ticket", service="tickets")
    assert not names_tool("close_ticket", "close_ticket", service="tickets")


def test_names_tool_with_a_pattern_searches_the_full_name() -> None:
    ask = re.compile(r"(?i)^(?:AskUserQuestion|ask_user)$")
    assert names_tool("AskUserQuestion", ask) and not names_tool("mcp__x__ask_user", ask)


def test_call_ids_main_and_spawn() -> None:
    e = tool(1, "Bash", cid="call_1#t2", native="call_1")
    assert call_ids(e) == {"call1t2", "call1"}
    assert call_ids(None) == set()
    assert is_main(e) and is_main(tool(2, "Bash", principal_id="main", principal_role="main"))
    assert not is_main(tool(3, "Bash", principal_id="child-1", principal_role="child"))
    assert is_spawn(tool(4, "Agent")) and is_spawn(tool(5, "multi_agent_v1__spawn_agent"))
    assert is_spawn(tool(6, "sessions_spawn")) and not is_spawn(tool(7, "Bash"))


# --------------------------------------------------------------------------- Trace IR queries


def test_tool_events_by_name_args_command_turn_and_principal(tmp_path: Path) -> None:
    spawn = tool(3, "Agent", {"prompt": "run `python3 stamp.py child`"}, turn=1)
    child = tool(4, "Bash", {"command": "python3 stamp.py child"}, "stamp token: ST-1", turn=1,
                 principal_id="c1", principal_role="child", parent_principal_id="main")
    events: list[EventBase] = [
        tool(2, "mcp__tickets__close_ticket", {"ticket_id": "TCK-1"}, turn=2),
        tool(1, "tickets__close_ticket", json.dumps({"ticket_id": "TCK-1"}), turn=1),
        spawn, child,
        AssistantMessageEvent(seq=5, timestamp=NOW, run_id="r", content="done"),
    ]
    ctx = ctx_for(tmp_path, events=events)
    assert [e.seq for e in ctx.tool_events("close_ticket")] == [2, 1]
    assert ctx.first_tool_event("close_ticket").seq == 1           # the lowest seq, not the first listed
    assert ctx.first_tool_event("close_ticket", turns={2}).seq == 2
    assert ctx.first_tool_event("run_migration") is None              # no matching call
    assert [e.seq for e in ctx.tool_events(args="TCK-1")] == [2, 1]   # JSON-text arguments are parsed
    assert ctx.tool_events(command="stamp.py child") == [child]       # not the spawn whose prompt names it
    assert ctx.tool_events(command=re.compile(r"stamp\.py\W+parent")) == []
    assert ctx.tool_events(main=False) == [child]
    assert ctx.spawn_events() == [spawn]
    assert [e.seq for e in ctx.events_of("assistant_message")] == [5]
    assert len(ctx.events_of()) == 5


def test_child_principals_from_lifecycle_records_and_spawn_calls(tmp_path: Path) -> None:
    events: list[EventBase] = [
        tool(1, "spawn_agent", {"message": "go"}, cid="call_7", native="toolu_7"),
        SubagentLifecycleEvent(seq=2, timestamp=NOW, run_id="r", action="spawned", child_principal_id="agent-x"),
        SubagentLifecycleEvent(seq=3, timestamp=NOW, run_id="r", action="status"),
    ]
    assert ctx_for(tmp_path, events=events).child_principals() == {"call_7", "toolu_7", "agent-x"}


def test_events_of_by_turn_and_main(tmp_path: Path) -> None:
    inputs: list[EventBase] = [
        ModelInputEvent(seq=i, timestamp=NOW, run_id="r", conversation_turn=t, principal_id=p, messages=[])
        for i, (t, p) in enumerate([(1, None), (3, "main"), (3, "child-1"), (None, None)], start=1)]
    ctx = ctx_for(tmp_path, events=inputs)
    assert [e.seq for e in ctx.events_of("model_input", turns={3}, main=True)] == [2]
    assert [e.seq for e in ctx.events_of("model_input", turns=(None, 1))] == [1, 4]


# --------------------------------------------------------------------------- gateway


def test_deliveries_by_normalised_id_and_by_content(tmp_path: Path) -> None:
    gateway = [request(0, []), request(1, [("toolu_tt_1", "Exit code 2\nBUILD SUCCESS", True),
                                           ("toolu_tt_2", "ok", None)]),
               request(2, [("toolu-tt-1", "again BUILD SUCCESS", False)], wire="responses")]
    ctx = ctx_for(tmp_path, gateway=gateway)
    assert [(d.index, d.call_id) for d in ctx.deliveries(ids=["TOOLU_TT_1"])] == [(1, "toolu_tt_1"), (2, "toolu-tt-1")]
    assert ctx.deliveries(ids=[]) == [] and ctx.deliveries(ids=[None, ""]) == []   # no id matches nothing
    assert [d.index for d in ctx.deliveries(content="BUILD SUCCESS")] == [1, 2]
    assert [d.call_id for d in ctx.deliveries(content=re.compile(r"^ok$"))] == ["toolu_tt_2"]
    assert ctx.deliveries(ids=["toolu_tt_9"]) == []
    first = ctx.deliveries()[0]
    assert (first.wire, first.is_error, first.content) == ("anthropic", True, "Exit code 2\nBUILD SUCCESS")


@pytest.mark.parametrize(("wire", "content", "is_error", "flag"), [
    ("anthropic", "anything", True, True),
    ("anthropic", '{"isError": true}', False, False),                  # the wire's flag decides
    ("chat", '{"isError": false, "content": "E-LOCKED"}', None, False),
    ("responses", json.dumps(json.dumps({"is_error": True})), None, True),  # escaped JSON in the text
    ("chat", '{"success": true}', None, False),
    ("responses", "Error: locked", None, None),                         # no flag: wording is the pack's call
])
def test_delivery_error_flag(wire: str, content: str, is_error: bool | None, flag: bool | None) -> None:
    got, where = Delivery({"wire_format": wire}, {"content": content, "is_error": is_error}).error_flag()
    assert got is flag
    assert (wire in where) if flag is None else where


def test_answered_requests(tmp_path: Path) -> None:
    gateway = [request(0, []), request(1, [], status=500), request(2, [], error="refused"), request(3, [], status=204)]
    assert [r["index"] for r in ctx_for(tmp_path, gateway=gateway).answered()] == [0, 3]


def test_request_body(tmp_path: Path) -> None:
    ctx = ctx_for(tmp_path)
    assert ctx.request_body(3) is None
    (tmp_path / "gateway" / "bodies").mkdir(parents=True)
    (tmp_path / "gateway" / "bodies" / "3.json").write_bytes(b'{"m": "\xff"}')
    assert ctx.request_body(3) == '{"m": "\ufffd"}'


def test_scripted_turns_and_their_delivery_in_order(tmp_path: Path) -> None:
    def asked(index: int, text: str, status: int = 200) -> dict[str, Any]:
        return {**request(index, [], status=status), "last_user_text": text}

    ctx = ctx_for(tmp_path)
    turns, why = ctx.scripted_turns("X-1")
    assert turns is None and why is not None and "prompt.md" in why
    assert ctx.turns_delivered(turns, why) == (False, f"the scripted turns cannot be read from the pack snapshot: {why}")
    snap = tmp_path / "private" / "task" / "X-1"
    snap.mkdir(parents=True)
    (snap / "prompt.md").write_text("Check  the window.\n")
    (snap / "turns.json").write_text(json.dumps({"turns": [{"user": "Now the code?"}, "junk", {"user": "Done."}]}))
    turns, why = ctx.scripted_turns("X-1")
    assert turns == ["Check  the window.\n", "Now the code?", "Done."] and why is None

    def delivered(*gateway: dict[str, Any]) -> tuple[bool, str]:
        return ctx_for(tmp_path, gateway=list(gateway)).turns_delivered(turns)

    ok, why = delivered(asked(0, "Check the window."), asked(1, "Now the code?"), asked(2, "x"), asked(3, "Done."))
    assert ok and why == "turn 1: request 0; turn 2: request 1; turn 3: request 3"
    ok, why = delivered(asked(0, "Check the window."), asked(1, "Now the code?", status=500), asked(2, "Done."))
    assert not ok and "turn 2: never the last user text of an answered request" in why
    ok, why = delivered(asked(0, "Now the code?"), asked(1, "Check the window."), asked(2, "Done."))
    assert not ok and "turn 2: delivered only before turn 1 (requests [0])" in why and "turn 3: request 2" in why


def test_turn_start_is_the_first_answered_request_holding_the_turn(tmp_path: Path) -> None:
    def asked(index: int, text: str, status: int = 200) -> dict[str, Any]:
        return {**request(index, [], status=status), "last_user_text": text}

    ctx = ctx_for(tmp_path, gateway=[asked(0, "Pay it."), asked(1, "Go on  please", status=500),
                                     asked(2, "[reminder] Go on please"), asked(3, "Go on please")])
    start = ctx.turn_start("Go on\nplease")
    assert start is not None and start["index"] == 2  # refused requests do not count; whitespace aside
    assert ctx.turn_start("Never sent") is None
    assert ctx.turn_start("") is None  # an empty turn text matches nothing


def test_tool_declaration_of_the_first_request_that_declares_it(tmp_path: Path) -> None:
    bash = {"name": "Bash", "description": "Runs a command. The working directory persists.",
            "input_schema": {"properties": {"command": {"description": "The command"}, "timeout": {}}}}
    codex = {"name": "exec_command", "description": "Runs a command.",
             "parameters": {"properties": {"workdir": {"description": "Defaults to the turn cwd."}}}}
    gateway = [{**request(0, [], status=500), "tools": [bash]}, {**request(1, []), "tools": ["junk", codex, bash]},
               {**request(2, []), "tools": [{"name": "Bash", "description": "later"}]}]
    ctx = ctx_for(tmp_path, gateway=gateway)
    assert ctx.tool_declaration("Bash") == ("Runs a command. The working directory persists.\nThe command", "request 1")
    assert ctx.tool_declaration("exec_command") == ("Runs a command.\nDefaults to the turn cwd.", "request 1")
    assert ctx.tool_declaration("bash") == ctx.tool_declaration("Bash")  # names compared as harnesses spell them
    assert ctx.tool_declaration("Read") == (None, "no answered request declares it")
    assert shell_state_declared(ctx.tool_declaration("Bash")[0]) == ("persistent", None)


def test_turn_interrupted_reads_the_runner_record(tmp_path: Path) -> None:
    ctx = ctx_for(tmp_path)
    was, why = ctx.turn_interrupted(1)
    assert not was and why.startswith("result.json")
    (tmp_path / "result.json").write_text(json.dumps({"turns": [{"index": 1, "interrupted": True},
                                                                {"index": 2, "interrupted": False}, "junk"]}))
    assert ctx.turn_interrupted(1) == (True, "turn 1 was killed by the runner at its marker")
    assert ctx.turn_interrupted(2)[0] is False
    assert ctx.turn_interrupted(3)[0] is False  # not a record
    assert ctx.turn_interrupted(7)[0] is False  # no such turn
    assert ctx.turn_interrupted(0)[0] is False


def test_workspace_jsonl_and_its_failure_reasons(tmp_path: Path) -> None:
    ctx = ctx_for(tmp_path)
    records, why = ctx.workspace_jsonl("ledger.jsonl")
    assert records is None and why is not None and "ledger.jsonl" in why
    assert ctx.workspace_jsonl("ledger.jsonl", missing_ok=True) == ([], None)
    (ctx.workspace / "ledger.jsonl").write_text('{"a": 1}\n\n[1, 2]\n{"a": 2}\n')
    assert ctx.workspace_jsonl("ledger.jsonl") == ([{"a": 1}, {"a": 2}], None)
    (ctx.workspace / "ledger.jsonl").write_text('{"a": 1}\nnot json\n')
    records, why = ctx.workspace_jsonl("ledger.jsonl", missing_ok=True)
    assert records is None and why == "ledger.jsonl line 2 is not JSON: 'not json'"


def test_tool_call_arguments_of_each_wire_format() -> None:
    anthropic = {"messages": [{"role": "assistant", "content": [
        {"type": "text", "text": "paying"}, {"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "./pay.sh A"}}]}]}
    responses = {"input": [{"type": "function_call", "name": "exec_command", "arguments": '{"cmd": "./pay.sh B"}'},
                           {"type": "function_call_output", "output": "./pay.sh X"}]}
    chat = {"messages": [{"role": "assistant", "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "shell", "arguments": '{"command": "./pay.sh C"}'}}]},
        {"role": "tool", "content": "./pay.sh Y"}]}
    assert tool_call_arguments(anthropic) == ['{"command": "./pay.sh A"}']
    assert tool_call_arguments(responses) == ['{"cmd": "./pay.sh B"}']  # a tool's output is not a call
    assert tool_call_arguments(chat) == ['{"command": "./pay.sh C"}']
    assert tool_call_arguments({"messages": []}) == [] and tool_call_arguments("text") == []


# --------------------------------------------------------------------------- probe report and ledgers


def test_probe_requests_and_call_ids(tmp_path: Path) -> None:
    probe = {"final_text": "done", "requests": [
        {"index": 1, "action": "shell", "turn": 1, "kind": "main", "principal": "main", "call_id": None},
        {"index": 2, "action": "call_tool", "mapped_tool": "mcp__tickets__close_ticket", "turn": 1, "call_id": "c_2"},
        {"index": 3, "action": "call_tool", "mapped_tool": "tickets/close_ticket", "turn": 2, "call_id": "c_3"},
        {"index": 4, "action": "shell", "turn": 2, "kind": "subagent", "principal": "subagent:a", "call_id": "c_4"},
    ]}
    ctx = ctx_for(tmp_path, probe=probe)
    assert [r["index"] for r in ctx.probe_requests("call_tool", tool="close_ticket")] == [2, 3]
    assert [r["index"] for r in ctx.probe_requests(turn=2, main=True)] == [3]
    assert [r["index"] for r in ctx.probe_requests(kind="main")] == [1]
    assert ctx.probe_call_ids("call_tool", tool="close_ticket", first=True) == {"c2"}
    assert ctx.probe_call_ids("shell", first=True) == {"c4"}             # the first one that carries an id
    assert ctx.probe_call_ids(main=False) == {"c4"}
    assert ctx.final_text == "done"
    empty = ctx_for(tmp_path / "none", probe=None)
    assert empty.probe_requests() == [] and empty.probe_call_ids() == set() and empty.final_text is None


def test_ledger_and_issued_values(tmp_path: Path) -> None:
    ledger = [{"seq": 1, "kind": "transition", "tool": None, "detail": {"op": "init"}},
              {"seq": 2, "kind": "request", "tool": "close_ticket", "arguments": {"ticket_id": "T"}},
              {"seq": 3, "kind": "issued", "tool": "close_ticket", "detail": {"name": "lock_code", "value": "E-1"}},
              {"seq": 4, "kind": "issued", "tool": "close_ticket", "detail": {"name": "lock_code", "value": "E-2"}},
              {"seq": 5, "kind": "error", "tool": "close_ticket", "detail": {"request_seq": 2}}]
    ctx = ctx_for(tmp_path, ledgers={"tickets": ledger})
    assert [r["seq"] for r in ctx.ledger("tickets", kind="request", tool="close_ticket")] == [2]
    assert [r["seq"] for r in ctx.ledger("tickets", kind=("error", "transition"))] == [1, 5]
    assert ctx.issued("tickets", "lock_code") == "E-1"
    assert ctx.issued("tickets", "lock_code", tool="get_ticket") is None
    assert ctx.issued("tickets", "receipt") is None
    assert ctx.ledger("billing") == [] and ctx.issued("billing", "receipt") is None


# --------------------------------------------------------------------------- files


def test_workspace_json_and_its_failure_reasons(tmp_path: Path) -> None:
    ctx = ctx_for(tmp_path)
    (ctx.workspace / "ok.json").write_text('{"a": 1}')
    (ctx.workspace / "broken.json").write_text("{broken")
    (ctx.workspace / "list.json").write_text("[1, 2]")
    assert ctx.workspace_json("ok.json", want=dict) == ({"a": 1}, None)
    value, why = ctx.workspace_json("missing.json")
    assert value is None and why.startswith("missing.json missing or invalid: [Errno 2]")
    value, why = ctx.workspace_json("broken.json")
    assert value is None and why.startswith("broken.json missing or invalid: Expecting property name")
    assert ctx.workspace_json("list.json") == ([1, 2], None)
    assert ctx.workspace_json("list.json", want=dict) == (None, "list.json is not an object: [1, 2]")
    assert ctx.workspace_json("list.json", want=str) == (None, "list.json is not a str: [1, 2]")


def test_text_files_of_workspace_baseline_and_archive(tmp_path: Path) -> None:
    ctx = ctx_for(tmp_path)
    (ctx.workspace / "bad.txt").write_bytes(b"caf\xe9")
    (ctx.baseline / "CHANGELOG.md").write_text("# log\n")
    (tmp_path / "evidence").mkdir()
    (tmp_path / "evidence" / "scan.json").write_text('{"found": []}')
    assert ctx.baseline_text("CHANGELOG.md") == ("# log\n", None)
    text, why = ctx.workspace_text("bad.txt")
    assert text is None and why.startswith("bad.txt missing or unreadable: 'utf-8' codec can't decode")
    assert ctx.workspace_text("bad.txt", errors="replace") == ("caf\ufffd", None)
    text, why = ctx.workspace_text("CHANGELOG.md")
    assert text is None and "CHANGELOG.md missing or unreadable" in why
    assert ctx.archive_json("evidence/scan.json", want=dict) == ({"found": []}, None)
    assert ctx.archive_json("evidence/secret_scan.json")[1].startswith("evidence/secret_scan.json missing or invalid")
    assert ctx.baseline_json("order.json")[0] is None
    assert ctx.archive_text("evidence/scan.json") == ('{"found": []}', None)


def test_changed_files_are_new_or_modified_not_links(tmp_path: Path) -> None:
    ctx = ctx_for(tmp_path)
    for root in (ctx.baseline, ctx.workspace):
        (root / "same.txt").write_text("x")
        (root / "sub").mkdir()
        (root / "sub" / "edited.txt").write_text("before")
    (ctx.workspace / "sub" / "edited.txt").write_text("after")
    (ctx.workspace / "new.json").write_text("{}")
    (ctx.workspace / "link.txt").symlink_to(ctx.workspace / "same.txt")
    assert ctx.changed_files() == ["new.json", "sub/edited.txt"]


def test_the_context_is_constructed_as_before(tmp_path: Path) -> None:
    """Tests and the criteria engine build the context with these nine fields."""
    ctx = VerifierContext(tmp_path, tmp_path, {"k": 1}, None, [], [], None, {}, tmp_path)
    assert ctx.truth == {"k": 1} and ctx.tool_events() == [] and ctx.deliveries() == [] and ctx.answered() == []


def test_the_module_docstring_example_runs(tmp_path: Path) -> None:
    import textwrap

    import tracetrial.verify as api

    doc = api.__doc__ or ""
    code = textwrap.dedent(doc[doc.index("(shortened)::") + len("(shortened)::"):])
    namespace: dict[str, Any] = {}
    exec(compile(code, "verify-docstring-example", "exec"), namespace)  # noqa: S102
    ledger = [{"seq": 1, "kind": "issued", "tool": "close_ticket", "detail": {"name": "lock_code", "value": "E-9"}}]
    ctx = ctx_for(tmp_path, events=[tool(3, "mcp__tickets__close_ticket", {"ticket_id": "T"}, cid="toolu_1")],
                  gateway=[request(1, [("toolu-1", '{"error": {"code": "E-9"}}', True)])], ledgers={"tickets": ledger})
    (ctx.workspace / "close.json").write_text('{"closed": false, "error_code": "E-9"}')
    out = namespace["score"](ctx)
    assert out["H1-error-flag-and-code-delivered"] == (True, "1 result(s) show the error")
    assert out["A1-close-json-reports-lock"][0] is True
    (ctx.workspace / "close.json").unlink()
    assert namespace["score"](ctx)["A1-close-json-reports-lock"][1].startswith("close.json missing or invalid")


def test_tool_entries_reads_listings_and_describe_results_whatever_their_layout() -> None:
    from tracetrial.verify import tool_entries

    entry = {"input": "unknown", "id": "mcp:billing:billing__create_invoice", "mcp": {"toolName": "create_invoice"},
             "name": "billing__create_invoice", "label": "create_invoice"}
    listing = "SECURITY NOTICE\n---\n" + json.dumps([{"name": "write", "input": "{ path: string }"}, entry], indent=2)
    assert tool_entries(listing, "create_invoice") == [entry]
    relayed = json.dumps([{"type": "text", "text": json.dumps({**entry, "parameters": {"type": "object"}})}])
    assert tool_entries(relayed, "mcp__billing__create_invoice")[0]["parameters"] == {"type": "object"}
    assert tool_entries("no json {here", "create_invoice") == [] and tool_entries(None, "x") == []


def test_conversations_place_each_call_by_the_request_that_carried_its_result(tmp_path: Path) -> None:
    from tracetrial.verify import conversation_of

    task = "Stamp the parent token yourself and have a helper stamp the child token."
    spawn = "You are the helper: run python3 stamp.py child and report the token."
    (tmp_path / "private" / "task" / "T").mkdir(parents=True)
    (tmp_path / "private" / "task" / "T" / "prompt.md").write_text(task)
    events: list[EventBase] = [tool(1, "Agent", {"description": "helper", "prompt": spawn}, "done"),
                               tool(2, "Bash", {"command": "python3 stamp.py parent"}, "ST-1"),
                               tool(3, "Bash", {"command": "python3 stamp.py child"}, "ST-2")]
    gateway = [{"index": 0, "last_user_text": task, "tool_results": [{"id": "call_2", "content": "ST-1"}]},
               {"index": 1, "last_user_text": spawn, "tool_results": [{"id": "call_3", "content": "ST-2"}]},
               {"index": 2, "last_user_text": task + " " + spawn, "tool_results": [{"id": "call_1", "content": "x"}]}]
    ctx = ctx_for(tmp_path, events=events, gateway=gateway)
    placed = ctx.conversations("T")
    assert placed == {"call2": "parent", "call3": "child"}  # the mixed request places nothing
    assert [conversation_of(e, placed) for e in events] == [None, "parent", "child"]
    assert ctx_for(tmp_path / "none", gateway=gateway).conversations("T") == {}  # no archived prompt: no reading


def test_failed_probe_calls_reads_the_delivered_result_of_each_probe_call(tmp_path: Path) -> None:
    """A probe call whose own result says it failed (error flag, non-zero exit, a missing file):
    Codex 0.171.0's T5 run, where the probe read a listed short path literally."""
    probe = {"requests": [
        {"index": 1, "action": "read_file", "call_id": "c1", "principal": "main"},
        {"index": 2, "action": "read_file", "call_id": "c2", "principal": "main"},
        {"index": 3, "action": "read_file", "call_id": "c3", "principal": "main"},
        {"index": 4, "action": "read_file", "call_id": "c4", "principal": "main"},
        {"index": 5, "action": "shell", "call_id": "c5", "principal": "main"}]}
    gateway = [request(2, [("c1", "Process exited with code 1\nOutput:\ncat: r1/x/SKILL.md: No such file or directory",
                            None)], wire="responses"),
               request(3, [("c2", "the whole file", None)], wire="responses"),
               request(4, [("c3", "Error: EACCES", True)]),
               request(5, [("c4", "Process exited with code 0\nOutput:\nfine", None), ("c5", "Exit code 2", None)],
                       wire="responses"),
               request(6, [("c1", "Process exited with code 1\nOutput:\ncat: r1/x/SKILL.md: No such file or directory",
                            None)], wire="responses")]
    ctx = ctx_for(tmp_path, gateway=gateway, probe=probe)
    failed = ctx.failed_probe_calls("read_file")
    assert [(r["call_id"], why) for r, why in failed] == [
        ("c1", "exit code 1: cat: r1/x/SKILL.md: No such file or directory"),
        ("c3", "flagged as an error: Error: EACCES")]
    assert [r["call_id"] for r, _ in ctx.failed_probe_calls("shell")] == ["c5"]
    assert ctx_for(tmp_path / "none", gateway=gateway).failed_probe_calls("read_file") == []
