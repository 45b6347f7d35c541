"""DeepSeek Harness 0.2.x (the ``sdk`` profile, ``deepseek@0.2.1rc2``): the adapter's per-version
surface (capabilities and wire format per install, the pin never probed), the launch overlay and
environment, and the normalizer's mapping of every 0.2.x record type on hand-built records (the
real records are pinned by the ``<case>@0.2.1rc2`` golden snapshots)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from harnesses.base import McpServer
from harnesses.deepseek import profile as sdk_profile
from harnesses.deepseek.adapter import PINNED_CAPABILITIES, DeepSeekAdapter, RuntimeSurface
from harnesses.deepseek.normalize import normalize
from harnesses.native import turn_files
from tests.harnesses.capture import run_context
from tests.harnesses.conftest import AT
from tracetrial.trace import (
    ModelInputEvent,
    NativeDiagnosticEvent,
    NativeEvent,
    PolicyEvent,
    SubagentLifecycleEvent,
    ToolEvent,
)

SESSION = "session-tt-a"


@pytest.fixture
def profile_adapter(monkeypatch: pytest.MonkeyPatch) -> DeepSeekAdapter:
    adapter = DeepSeekAdapter()
    adapter.release = "9.9.9-profile"
    monkeypatch.setitem(DeepSeekAdapter._surfaces, "9.9.9-profile", RuntimeSurface("profile", Path("/bin/true")))
    return adapter


def test_the_pin_and_the_class_keep_the_rc6_surface_without_probing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(DeepSeekAdapter, "_surfaces", {})
    assert DeepSeekAdapter.capabilities == PINNED_CAPABILITIES and DeepSeekAdapter.wire_format == "chat"
    pinned = DeepSeekAdapter()
    assert pinned.capabilities == PINNED_CAPABILITIES and pinned.wire_format == "chat"
    assert pinned.surface().kind == "cordis" and DeepSeekAdapter._surfaces == {}  # nothing probed


def test_a_profile_install_reports_its_own_capabilities_and_wire(profile_adapter: DeepSeekAdapter) -> None:
    caps = profile_adapter.capabilities
    assert profile_adapter.wire_format == "anthropic"  # dsh-llm-deepseek-api-key speaks Messages
    assert caps.mcp and caps.multi_turn and caps.new_session and caps.ask_user
    assert not caps.subagents and "subagents" in caps.apparatus_gaps  # declared, the probe cannot drive them
    assert not (caps.native_permissions or caps.model_call_budget or caps.history_replay or caps.turn_interrupt)


def test_an_unreadable_named_install_keeps_the_pins_capabilities(monkeypatch: pytest.MonkeyPatch,
                                                                   tmp_path: Path) -> None:
    monkeypatch.setenv("TT_TOOLS_DIR", str(tmp_path))  # nothing installed there
    monkeypatch.setattr(DeepSeekAdapter, "_surfaces", {})
    adapter = DeepSeekAdapter()
    adapter.release = "9.9.8"
    assert adapter.surface().kind is None and adapter.capabilities == PINNED_CAPABILITIES


def test_profile_environment_bypass_is_the_runtimes_full_access_preset(profile_adapter: DeepSeekAdapter,
                                                                        tmp_path: Path) -> None:
    ctx = run_context(tmp_path, url="http://127.0.0.1:9/tt/probe/r1")
    env = profile_adapter.profile_environment(ctx)
    assert env["DSH_HOME"] == str(ctx.home / "dsh-home") and env["DEEPSEEK_BASE_URL"] == ctx.gateway_base_url
    assert env["DSH_PERMISSION_MODE"] == "danger-full-access" and env["DSH_TELEMETRY_MODE"] == "DISABLED"
    assert "DSH_CORDIS_CONFIG" not in env
    native = run_context(tmp_path / "n", url="http://127.0.0.1:9/tt/probe/r1", mode="native")
    assert "DSH_PERMISSION_MODE" not in profile_adapter.profile_environment(native)  # the harness default


def test_launch_is_the_sdks_and_the_overlay_inserts_one_mcp_client_per_server(tmp_path: Path) -> None:
    assert sdk_profile.launch_argv(Path("/rt"), [Path("/p.yml")]) == ["/rt", "--profile", "sdk", "--patch", "/p.yml"]
    assert sdk_profile.write_overlay(tmp_path, [], ask_user=False) is None
    servers = [McpServer("lookup", "/usr/bin/python3", ("srv.py",), {"MODE": "x y"}), McpServer("b", "/bin/b")]
    path = sdk_profile.write_overlay(tmp_path, servers, ask_user=True)
    assert path is not None and (tmp_path / "tt-ask-answerer.mjs").is_file()
    import yaml

    (patch,) = yaml.safe_load(path.read_text(encoding="utf-8"))
    names = [(e["id"], e["name"]) for e in patch["insert"]]
    assert names == [("tt-mcp-lookup", "@deepseek-ai/dsh-mcp-client"), ("tt-mcp-b", "@deepseek-ai/dsh-mcp-client"),
                     ("tool-ask-user", "@deepseek-ai/dsh-tool-ask-user"), ("tt-ask-answerer", "./tt-ask-answerer.mjs")]
    assert patch["insert"][0]["config"] == {"transport": "stdio", "serverName": "lookup", "command": "/usr/bin/python3",
                                            "args": ["srv.py"], "env": {"MODE": "x y"}, "failOnStartupError": True}


# ------------------------------------------------------------------------------ normalizer

def ev(etype: str, data: dict[str, Any], session: str = SESSION) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "method": "session.event",
            "params": {"sessionId": session, "event": {"type": etype, "seq": 0, "time": 1, "data": data}}}


def assistant(step: int, blocks: list[dict[str, Any]], finish: str, session: str = SESSION) -> dict[str, Any]:
    stream = [{"type": "chunk", "time": 1, "chunk": {"type": "finish", "reason": {"kind": finish}}}]
    return ev("assistant/message", {"turn": 1, "step": step, "message": {"role": "assistant", "content": blocks,
                                                                          "id": f"m{step}"}, "stream": stream},
              session)


def tool_result(call: str, text: str, session: str = SESSION) -> dict[str, Any]:
    return ev("tool/result", {"turn": 1, "step": 1, "message": {"role": "tool", "toolCallId": call,
                                                               "content": [{"type": "text", "text": text}],
                                                               "isError": False}}, session)


def job(call: str, status: str, detail: str) -> dict[str, Any]:
    return ev("job/settled", {"jobId": "bash-1", "kind": "bash", "toolCall": {"callId": call}, "status": status,
                              "detail": detail})


def run(tmp_path: Path, records: list[dict[str, Any]]) -> Any:
    native = tmp_path / "native"
    native.mkdir()
    (native / "turn-1.stdout").write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    (native / "turn-1.requests.jsonl").write_text(
        json.dumps({"jsonrpc": "2.0", "id": "tt-2", "method": "session/prompt"}) + "\n", encoding="utf-8")
    return normalize(turn_files(native, [1], requests=True), native / "sessions", "r", at=AT)


def call(cid: str, command: str) -> dict[str, Any]:
    return {"type": "tool-call", "id": cid, "name": "bash", "arguments": json.dumps({"command": command})}


def test_0_2_records_map_to_events(tmp_path: Path) -> None:
    trace = run(tmp_path, [
        ev("permission/preset", {"preset": "danger-full-access"}),
        ev("sandbox/mode", {"mode": "danger-full-access"}),
        ev("approval/policy", {"policy": "never"}),
        ev("system/message", {"turn": 1, "step": 1, "message": {"role": "system", "content": [{"type": "text",
                                                                                                "text": "S"}]}}),
        ev("request/header", {"header": {"config": {"provider": "deepseek-official", "model": "probe"},
                                         "tools": [{"name": "bash"}]}}),
        ev("assistant/attempt", {"turn": 1, "step": 1, "stream": [
            {"type": "chunk", "chunk": {"type": "finish", "reason": {"kind": "error", "failure": {"status": 500}}}}]}),
        assistant(1, [call("c1", "false"), call("c2", "sleep 9 &")], "tool-calls"),
        ev("job/registered", {"jobId": "bash-1", "kind": "bash", "toolCall": {"callId": "c1"}}),
        job("c1", "completed", "exit code: 1"),
        tool_result("c1", "[exit code: 1]"),
        tool_result("c2", "started job bash-2"),
        job("c2", "completed", "exit code: 0"),  # a background job settling after its call was answered
        ev("session-log-deepseek/delivery-accepted", {"sessionId": SESSION, "throughSeq": 3}),
        assistant(2, [{"type": "text", "text": "done"}], "stop"),
        ev("turn/end", {"turn": 1, "reason": {"kind": "completed"}}),
    ])
    assert trace.structured_trace_status == "complete" and trace.trace_complete, trace.notes
    policies = [(e.policy_kind, e.decision) for e in trace.events if isinstance(e, PolicyEvent)]
    assert policies == [("permission_preset", "danger-full-access"), ("sandbox_mode", "danger-full-access"),
                        ("approval_policy", "never")]
    (header,) = [e for e in trace.events if isinstance(e, ModelInputEvent)]
    assert header.messages == [{"role": "system", "content": [{"type": "text", "text": "S"}]}]
    assert header.source_records and header.source_records[0].seq == 4  # the system/message line, folded
    c1, c2 = [e for e in trace.events if isinstance(e, ToolEvent)]
    assert c1.tool_result is not None and (c1.tool_result.exit_code, c1.tool_result.status) == (1, "completed")
    assert c1.tool_result.content == "[exit code: 1]"  # the model-facing text stays verbatim
    assert c2.tool_result is not None and c2.tool_result.exit_code is None  # its job settled later
    natives = [e.native_event_type for e in trace.events if isinstance(e, NativeEvent)]
    assert "session.event/job/settled" in natives and "session.event/job/registered" in natives
    assert "session.event/session-log-deepseek/delivery-accepted" in natives
    diags = [e.diagnostic_type for e in trace.events if isinstance(e, NativeDiagnosticEvent)]
    assert diags == ["assistant/attempt/finish/error"]
    finals = [e for e in trace.events if e.event_type == "assistant_message"]
    assert [getattr(e, "finish_reason", None) for e in finals] == ["stop"]  # from the message's own stream


def test_a_job_exit_is_read_only_from_the_job_records_own_form(tmp_path: Path) -> None:
    trace = run(tmp_path, [
        assistant(1, [call("c1", "x")], "tool-calls"),
        job("c1", "failed", "killed by signal"),
        tool_result("c1", "exit code: 3"),
        ev("turn/end", {"turn": 1, "reason": {"kind": "completed"}}),
    ])
    (c1,) = [e for e in trace.events if isinstance(e, ToolEvent)]
    assert c1.tool_result is not None and (c1.tool_result.exit_code, c1.tool_result.status) == (None, "failed")


def test_subagent_notifications_and_child_session_events(tmp_path: Path) -> None:
    child = "session-tt-child"
    trace = run(tmp_path, [
        assistant(1, [{"type": "tool-call", "id": "s1", "name": "subagent", "arguments": "{}"}], "tool-calls"),
        {"jsonrpc": "2.0", "method": "subagent.started", "params": {"parentSessionId": SESSION, "childSessionId": child}},
        assistant(1, [call("k1", "echo hi")], "tool-calls", session=child),
        tool_result("k1", "hi\n", session=child),
        {"jsonrpc": "2.0", "method": "subagent.finished",
         "params": {"parentSessionId": SESSION, "childSessionId": child, "status": "ok", "stopReason": "completed"}},
        tool_result("s1", "hi printed"),
        ev("turn/end", {"turn": 1, "reason": {"kind": "completed"}}),
    ])
    life = [(e.action, e.child_principal_id, e.status) for e in trace.events if isinstance(e, SubagentLifecycleEvent)]
    assert life == [("started", child, None), ("finished", child, "ok")]
    kid = next(e for e in trace.events if isinstance(e, ToolEvent) and e.tool_call.name == "bash")
    assert (kid.principal_id, kid.principal_role, kid.parent_principal_id) == (child, "child", "main")
    # the child's result joins the child's call, not a call of the parent
    assert kid.tool_result is not None and kid.tool_result.content == "hi\n"


def test_an_unknown_0_2_record_type_is_partial_with_a_diagnostic(tmp_path: Path) -> None:
    trace = run(tmp_path, [ev("job/teleported", {}), ev("turn/end", {"turn": 1, "reason": {"kind": "completed"}})])
    assert trace.structured_trace_status == "partial"
    assert any(isinstance(e, NativeDiagnosticEvent) and "job/teleported" in json.dumps(e.detail)
               for e in trace.events)


def test_a_system_message_no_header_follows_is_unaccounted(tmp_path: Path) -> None:
    trace = run(tmp_path, [ev("system/message", {"message": {"role": "system", "content": []}}),
                           ev("turn/end", {"turn": 1, "reason": {"kind": "completed"}})])
    assert trace.structured_trace_status == "partial"
