"""Pure readers of the three wire formats: tools, tool results, user text, usage, errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from apparatus.gateway import wire as W
from apparatus.gateway.fake_upstream import USAGE, _events, _json_answer

FIXTURES = Path(__file__).parent / "fixtures"


def _fixture(name: str) -> dict:
    return json.loads((FIXTURES / name).read_bytes())


# ---------------------------------------------------------------- paths

@pytest.mark.parametrize(("path", "wire"), [
    ("/v1/messages?beta=true", "anthropic"),
    ("/v1/messages/count_tokens", "anthropic"),
    ("/v1/responses", "responses"),
    ("/responses/compact", "responses"),
    ("/v1/chat/completions", "chat"),
    ("/chat/completions/", "chat"),
    ("/api/hello", None),
])
def test_wire_format_for_path(path: str, wire: str | None) -> None:
    assert W.wire_format_for_path(path) == wire


# ---------------------------------------------------------------- tool declarations

def test_claude_code_inventory_is_24_function_tools() -> None:
    tools, present, complete = W.extract_tools(_fixture("claude_0.json"), "anthropic")
    assert present and complete
    assert len(tools) == 24
    bash = next(t for t in tools if t["name"] == "Bash")
    assert bash["type"] == "function" and bash["namespace"] is None
    assert bash["input_schema"]["properties"]["command"]["type"] == "string"
    assert "Agent" in {t["name"] for t in tools}


def test_codex_namespace_group_is_flattened_with_its_namespace() -> None:
    body = _fixture("codex_0.json")
    tools, present, complete = W.extract_tools(body, "responses")
    assert present and complete
    groups = [t for t in body["tools"] if t.get("type") == "namespace"]
    assert groups, "the captured Codex body declares a namespace group"
    inner = {(groups[0]["name"], t["name"]) for t in groups[0]["tools"]}
    assert {(t["namespace"], t["name"]) for t in tools if t["namespace"]} == inner
    assert next(t for t in tools if t["name"] == "exec_command")["input_schema"]["type"] == "object"
    assert next(t for t in tools if t["name"] == "web_search")["type"] == "web_search"


def test_mcp_namespace_and_custom_tool() -> None:
    body = {"tools": [
        {"type": "namespace", "name": "mcp__ledger", "description": "ledger server", "tools": [
            {"type": "function", "name": "get_balance", "description": "Balance",
             "parameters": {"type": "object", "properties": {"account": {"type": "string"}}}}]},
        {"type": "custom", "name": "apply_patch", "description": "Patch files",
         "format": {"type": "grammar", "syntax": "lark", "definition": "start: x"}},
    ]}
    tools, present, complete = W.extract_tools(body, "responses")
    assert present and complete
    assert tools == [
        {"name": "get_balance", "type": "function", "description": "Balance",
         "input_schema": {"type": "object", "properties": {"account": {"type": "string"}}},
         "namespace": "mcp__ledger"},
        {"name": "apply_patch", "type": "custom", "description": "Patch files",
         "input_schema": {"type": "grammar", "syntax": "lark", "definition": "start: x"}, "namespace": None},
    ]


def test_chat_function_wrappers_and_legacy_functions() -> None:
    wrapped = {"tools": [{"type": "function", "function": {
        "name": "bash", "description": "Run", "parameters": {"type": "object", "required": ["command"]}}}]}
    tools, present, complete = W.extract_tools(wrapped, "chat")
    assert (present, complete) == (True, True)
    assert tools == [{"name": "bash", "type": "function", "description": "Run",
                      "input_schema": {"type": "object", "required": ["command"]}, "namespace": None}]
    legacy, present, complete = W.extract_tools({"functions": [{"name": "f", "parameters": {}}]}, "chat")
    assert present and complete and legacy[0]["name"] == "f"


def test_anthropic_server_tool_keeps_its_type() -> None:
    tools, _, complete = W.extract_tools(
        {"tools": [{"type": "web_search_20250305", "name": "web_search", "max_uses": 3}]}, "anthropic")
    assert complete and tools[0]["type"] == "web_search_20250305" and tools[0]["input_schema"] is None


def test_absent_empty_and_malformed_inventories() -> None:
    assert W.extract_tools({"messages": []}, "anthropic") == ([], False, False)
    assert W.extract_tools({"tools": []}, "responses") == ([], True, True)        # Codex compaction
    tools, present, complete = W.extract_tools(
        {"tools": [{"name": "ok", "input_schema": {}}, {"description": "no name"}]}, "anthropic")
    assert present and not complete and [t["name"] for t in tools] == ["ok"]
    assert W.extract_tools({"tools": "nope"}, "chat") == ([], True, False)


def test_fingerprint_is_order_sensitive_and_stable() -> None:
    a = [W._decl("a", "function", None, {}, None), W._decl("b", "function", None, {}, None)]
    assert W.inventory_fingerprint(a) == W.inventory_fingerprint([dict(t) for t in a])
    assert W.inventory_fingerprint(a) != W.inventory_fingerprint(a[::-1])


# ---------------------------------------------------------------- tool results

def test_claude_tool_result_with_is_error() -> None:
    results = W.extract_tool_results(_fixture("claude_1.json"), "anthropic")
    assert [(r["id"], r["is_error"], r["content"]) for r in results] == [("toolu_call1", True, "Exit code 3\nhi")]
    assert results[0]["size"] == len(b"Exit code 3\nhi") and not results[0]["content_truncated"]
    assert results[0]["sha256"] == W.sha256_hex(b"Exit code 3\nhi")


def test_codex_function_call_output_has_no_error_flag() -> None:
    (result,) = W.extract_tool_results(_fixture("codex_1.json"), "responses")
    assert result["id"] == "call_call1" and result["is_error"] is None
    assert "Process exited with code 3" in result["content"]


def test_only_results_after_the_last_model_turn_are_delivered() -> None:
    body = {"messages": [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "c1"}]},
        {"role": "tool", "tool_call_id": "c1", "content": "old"},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "c2"}, {"id": "c3"}]},
        {"role": "tool", "tool_call_id": "c2", "content": [{"type": "text", "text": "new"}]},
        {"role": "tool", "tool_call_id": "c3", "content": "newer"},
    ]}
    results = W.extract_tool_results(body, "chat")
    assert [(r["id"], r["is_error"], r["content"]) for r in results] == [("c2", None, "new"), ("c3", None, "newer")]


def test_anthropic_absent_is_error_is_false_and_list_content_is_joined() -> None:
    body = {"messages": [{"role": "assistant", "content": [{"type": "tool_use", "id": "t1"}]},
                         {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": [
                             {"type": "text", "text": "a"}, {"type": "image", "source": {}}]}]}]}
    (r,) = W.extract_tool_results(body, "anthropic")
    assert r["is_error"] is False and r["content"] == "a\n[image]"


def test_large_result_keeps_head_and_tail() -> None:
    big = "H" * 40_000 + "middle" + "T" * 40_000
    (r,) = W.extract_tool_results({"input": [{"type": "function_call", "call_id": "c"},
                                             {"type": "function_call_output", "call_id": "c", "output": big}]},
                                  "responses")
    assert r["content_truncated"] and r["size"] == len(big)
    assert r["sha256"] == W.sha256_hex(big.encode())
    assert r["content"] == "H" * 32768 + "T" * 32768
    assert "middle" not in r["content"]


# ---------------------------------------------------------------- last user text

def test_last_user_text_skips_a_trailing_system_message() -> None:
    body = _fixture("claude_0.json")
    assert body["messages"][-1]["role"] == "system"       # as Claude Code sends it
    assert W.last_user_text(body, "anthropic").endswith("\nhi")


def test_last_user_text_formats() -> None:
    assert W.last_user_text({"input": "plain"}, "responses") == "plain"
    assert W.last_user_text(_fixture("codex_1.json"), "responses") == "hi"
    chat = {"messages": [{"role": "user", "content": "first"}, {"role": "assistant", "content": "x"},
                         {"role": "tool", "tool_call_id": "a", "content": "r"}]}
    assert W.last_user_text(chat, "chat") == "first"
    assert W.last_user_text({"messages": []}, "chat") is None


# ---------------------------------------------------------------- usage and errors

EXPECTED_USAGE = {
    "anthropic": {"input_tokens": 23, "output_tokens": 3, "cache_read_tokens": 7, "cache_write_tokens": 5,
                  "reasoning_tokens": None},
    "responses": {"input_tokens": 20, "output_tokens": 6, "cache_read_tokens": 4, "cache_write_tokens": None,
                  "reasoning_tokens": 2},
    "chat": {"input_tokens": 30, "output_tokens": 5, "cache_read_tokens": 8, "cache_write_tokens": None,
             "reasoning_tokens": 1},
}


@pytest.mark.parametrize("wire", ["anthropic", "responses", "chat"])
def test_usage_from_a_stream_split_at_every_byte_boundary(wire: W.WireFormat) -> None:
    stream = b"".join(_events(wire, "m", fail=False))
    for step in (1, 7, 64, len(stream)):
        reader = W.ResponseReader(wire, sse=True)
        for i in range(0, len(stream), step):
            reader.feed(stream[i:i + step])
        assert reader.finish() == (EXPECTED_USAGE[wire], None)


@pytest.mark.parametrize("wire", ["anthropic", "responses", "chat"])
def test_usage_from_a_json_answer(wire: W.WireFormat) -> None:
    reader = W.ResponseReader(wire)
    reader.feed(json.dumps(_json_answer(wire, "m")).encode())
    assert reader.finish() == (EXPECTED_USAGE[wire], None)


@pytest.mark.parametrize(("wire", "needle"), [("anthropic", "overloaded"), ("responses", "fake failure"),
                                             ("chat", "fake failure")])
def test_in_band_stream_errors(wire: W.WireFormat, needle: str) -> None:
    reader = W.ResponseReader(wire, sse=True)
    for ev in _events(wire, "m", fail=True):
        reader.feed(ev)
    _usage, error = reader.finish()
    assert error is not None and needle in error


def test_deepseek_cache_hit_counts_as_cache_read() -> None:
    u = W.normalize_usage({"prompt_tokens": 100, "completion_tokens": 9, "prompt_cache_hit_tokens": 64,
                           "prompt_cache_miss_tokens": 36}, "chat")
    assert u is not None and (u["input_tokens"], u["cache_read_tokens"]) == (100, 64)


def test_error_bodies() -> None:
    anth = json.dumps({"type": "error", "error": {"type": "rate_limit_error", "message": "slow down"}})
    assert W.error_from_body(anth.encode()) == "rate_limit_error: slow down"
    assert W.error_from_body(b'{"error": {"message": "bad key", "type": "invalid_request_error"}}') == \
        "invalid_request_error: bad key"
    assert W.error_from_body(b"<html>502 Bad Gateway</html>") == "<html>502 Bad Gateway</html>"
    assert USAGE["anthropic"]["input_tokens"] == 11     # the fixture the expectations above rely on


def test_a_tool_reference_is_recorded_with_the_tool_it_names() -> None:
    """Claude Code 2.1.332 answers a ToolSearch with tool_reference blocks: the record says which
    tool each one loads (a bare ``[tool_reference]`` hid it); a malformed one keeps its type only."""
    content = [{"type": "tool_reference", "tool_name": "mcp__records__lookup_archived_matter"},
               {"type": "tool_reference"}, {"type": "text", "text": "ok"}]
    assert W.content_text(content) == "[tool_reference mcp__records__lookup_archived_matter]\n[tool_reference]\nok"
