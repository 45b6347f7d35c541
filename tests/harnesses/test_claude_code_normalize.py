"""Claude Code normalizer over real captured native records (golden/claude_code/*).

Snapshots pin the whole normalized trace per case; the other tests check each SPEC §7
rule on the real records and on real records with one deliberate defect injected.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from syrupy.assertion import SnapshotAssertion

from harnesses.base import NormalizedTrace
from harnesses.claude_code.normalize import SRC_STDOUT, normalize
from harnesses.native import turn_files
from tests.harnesses.conftest import AT, Golden, dump, golden_cases, load_golden
from tracetrial.trace import (
    SUPPORT_EVENT_TYPES,
    AssistantMessageEvent,
    ContextCompactionEvent,
    NativeDiagnosticEvent,
    NativeEvent,
    PolicyEvent,
    RawStdoutEvent,
    SubagentLifecycleEvent,
    TaskCompletionEvent,
    TokenUsageEvent,
    ToolEvent,
)
from tracetrial.trace_io import dump_events, renumber

HARNESS = "claude_code"


def run(g: Golden, *, transcripts: bool = True) -> NormalizedTrace:
    paths = sorted((g.native / "transcripts").glob("*.jsonl")) if transcripts else []
    return normalize(turn_files(g.native, g.turns), paths, "run-golden", at=AT)


def tools(trace: NormalizedTrace) -> list[ToolEvent]:
    return [e for e in trace.events if isinstance(e, ToolEvent)]


def stdout_lines(g: Golden, turn: int = 1) -> list[str]:
    return (g.native / f"turn-{turn}.stdout").read_text(encoding="utf-8").splitlines()


def rewrite(g: Golden, lines: list[str], turn: int = 1) -> None:
    (g.native / f"turn-{turn}.stdout").write_text("\n".join(lines) + "\n", encoding="utf-8")


@pytest.mark.parametrize("case", golden_cases(HARNESS))
def test_golden_trace_snapshot(case: str, snapshot_json: SnapshotAssertion) -> None:
    g = load_golden(HARNESS, case)
    trace = run(g)
    dump_events(renumber(trace.events))  # schema-valid as the archive writer will write it
    assert all(e.conversation_turn in g.turns for e in trace.events)
    assert {
        "status": trace.structured_trace_status,
        "complete": trace.trace_complete,
        "notes": trace.notes,
        "events": dump(trace.events),
    } == snapshot_json


@pytest.mark.parametrize("case", golden_cases(HARNESS))
def test_rule1_raw_event_is_the_native_line_verbatim(case: str) -> None:
    g = load_golden(HARNESS, case)
    trace = run(g)
    stdout_events = [e for e in trace.events if e.source == SRC_STDOUT and not isinstance(e, RawStdoutEvent)]
    assert stdout_events
    for e in stdout_events:
        line = stdout_lines(g, e.conversation_turn or 1)[e.source_event_seq - 1]  # type: ignore[operator]
        assert e.raw_event == json.loads(line)


@pytest.mark.parametrize("case", golden_cases(HARNESS))
def test_rule4_stream_order_is_kept(case: str) -> None:
    trace = run(load_golden(HARNESS, case))
    by_turn: dict[int, list[int]] = {}
    for e in trace.events:
        if e.source == SRC_STDOUT:
            by_turn.setdefault(e.conversation_turn or 0, []).append(e.source_event_seq or 0)
    for seqs in by_turn.values():
        assert seqs == sorted(seqs)


def test_rule1_and_7_nonzero_exit_kept_verbatim_without_parsing_prose() -> None:
    (call,) = tools(run(load_golden(HARNESS, "nonzero_exit")))
    assert call.tool_call.name == "Bash"
    assert call.tool_result is not None
    assert call.tool_result.content.startswith("Exit code 3\n") and "BUILD SUCCESS" in call.tool_result.content
    assert call.tool_result.is_error is True  # the native is_error flag
    assert call.tool_result.exit_code is None  # Claude Code states the code only in prose


def test_rule7_large_output_truncation_only_where_native_says_so() -> None:
    persisted, cut = tools(run(load_golden(HARNESS, "large_output")))
    assert persisted.tool_result is not None and cut.tool_result is not None
    # Success: the model got a preview and the native record names the persisted file.
    assert persisted.tool_result.content.startswith("<persisted-output>\nOutput too large")
    assert persisted.tool_result.truncated is True and persisted.tool_result.omitted_bytes is None
    # Failure: the only statement is prose in the middle of the content; it stays verbatim and is
    # not turned into structured fields (no structured native field states it).
    assert cut.tool_result.is_error is True and cut.tool_result.content.startswith("Exit code 2\n")
    assert "\n... [20012 characters truncated] ...\n" in cut.tool_result.content
    assert cut.tool_result.truncated is None and cut.tool_result.omitted_bytes is None


def test_rule2_call_without_result_stays_null(tmp_path: Path) -> None:
    g = load_golden(HARNESS, "tool_roundtrip").copy_to(tmp_path / "case")
    rewrite(g, [ln for ln in stdout_lines(g) if json.loads(ln).get("type") != "user"])
    (call,) = tools(run(g))
    assert call.tool_result is None
    assert call.model_dump(mode="json")["tool_result"] is None


def test_rule2_result_with_unknown_id_is_not_paired(tmp_path: Path) -> None:
    g = load_golden(HARNESS, "tool_roundtrip").copy_to(tmp_path / "case")
    lines = stdout_lines(g)
    for i, ln in enumerate(lines):
        rec = json.loads(ln)
        if rec.get("type") == "user":
            rec["message"]["content"][0]["tool_use_id"] = "toolu_not_issued"
            lines[i] = json.dumps(rec)
    rewrite(g, lines)
    trace = run(g)
    (call,) = tools(trace)
    assert call.tool_result is None  # no heuristic pairing by position
    unmatched = [
        e for e in trace.events if isinstance(e, NativeEvent) and e.native_event_type == "tool_result_unmatched"
    ]
    assert len(unmatched) == 1 and "toolu_not_issued" in (unmatched[0].status or "")


def test_rule3_ids_repeated_across_turns_are_turn_scoped() -> None:
    """Scripted capture: the model reuses a tool id in turn 3 (a new session)."""
    calls = tools(run(load_golden(HARNESS, "reused_call_ids")))
    assert [(c.conversation_turn, c.tool_call.id, c.tool_call.native_tool_call_id) for c in calls] == [
        (1, "call_mt_1#t1", "call_mt_1"),
        (2, "call_mt_2", None),
        (3, "call_mt_1#t3", "call_mt_1"),
    ]
    assert calls[2].tool_result is not None and calls[2].tool_result.content == "one\ntwo"


def test_multi_turn_resume_keeps_the_session_and_new_session_starts_one() -> None:
    trace = run(load_golden(HARNESS, "multi_turn_resume"))
    calls = tools(trace)
    assert [c.conversation_turn for c in calls] == [1, 2, 3]
    assert all(c.tool_call.native_tool_call_id is None for c in calls)  # unique ids stay native
    assert calls[2].tool_result is not None and calls[2].tool_result.content == "one\ntwo"  # workspace kept
    assert calls[0].session_id == calls[1].session_id != calls[2].session_id
    usage = [e for e in trace.events if e.event_type == "token_usage"]
    assert [u.conversation_turn for u in usage] == [1, 2, 3] and all(u.usage_scope == "turn" for u in usage)


def test_rule5_subagent_actions_keep_their_principal() -> None:
    trace = run(load_golden(HARNESS, "subagent"))
    agent, child_bash = tools(trace)
    assert agent.tool_call.name == "Agent" and agent.principal_id == "main" and agent.principal_role == "main"
    assert child_bash.tool_call.name == "Bash" and child_bash.tool_result is not None
    assert (child_bash.principal_id, child_bash.principal_role, child_bash.parent_principal_id) == (
        agent.tool_call.id,
        "child",
        "main",
    )
    assert agent.tool_result is not None and agent.tool_result.content[0] == {"type": "text", "text": "hi printed"}
    child_events = [e for e in trace.events if e.principal_role == "child"]
    assert child_events and all(e.principal_id == agent.tool_call.id for e in child_events)


def test_rule5_background_subagent_completion_and_notification() -> None:
    trace = run(load_golden(HARNESS, "subagent_background"))
    agent, child_bash = tools(trace)
    assert agent.tool_result is not None and agent.tool_result.status == "async_launched"
    assert child_bash.principal_id == agent.tool_call.id and child_bash.principal_role == "child"
    lifecycle = [e for e in trace.events if isinstance(e, SubagentLifecycleEvent)]
    assert [e.action for e in lifecycle if e.child_principal_id] == ["started", "progress", "updated"]
    assert [e.pending_child_ids for e in lifecycle if e.action == "pending_changed"] == [[agent.tool_call.id], []]
    (done,) = [e for e in trace.events if isinstance(e, TaskCompletionEvent)]
    assert done.child_principal_id == agent.tool_call.id and done.content == "hi printed"
    # The transcript adds what the parent model was shown, and that it was reactivated by it.
    assert "<result>hi printed</result>" in done.model_visible_content and done.parent_reactivated is True
    assert [e.content for e in trace.events if e.event_type == "assistant_message" and e.principal_role == "main"] == [
        "Waiting for the helper.",
        "The helper printed hi.",
    ]
    assert len([e for e in trace.events if isinstance(e, NativeEvent) and e.native_event_type == "result"]) == 2


def test_rule7_no_transcript_means_nothing_reconstructed() -> None:
    (done,) = [
        e
        for e in run(load_golden(HARNESS, "subagent_background"), transcripts=False).events
        if isinstance(e, TaskCompletionEvent)
    ]
    assert done.model_visible_content is None and done.parent_reactivated is None


def test_native_permission_denial_becomes_policy_event() -> None:
    trace = run(load_golden(HARNESS, "mcp_native"))
    alpha, boom, bash = tools(trace)
    assert alpha.tool_call.name == "mcp__lookup__lookup" and alpha.tool_result is not None
    assert alpha.tool_result.content == [{"type": "text", "text": "value-of-alpha"}]
    assert alpha.tool_result.is_error is None  # the native block carries no is_error key
    assert boom.tool_result is not None and boom.tool_result.is_error is True
    assert bash.tool_result is not None and bash.tool_result.status == "user-rejected"
    (policy,) = [e for e in trace.events if isinstance(e, PolicyEvent)]
    assert (policy.decision, policy.tool_call_id, policy.tool_name, policy.execution_started) == (
        "denied",
        bash.tool_call.id,
        "Bash",
        False,
    )


def test_api_error_is_a_diagnostic_not_a_model_message() -> None:
    trace = run(load_golden(HARNESS, "api_error"))
    diags = [e for e in trace.events if isinstance(e, NativeDiagnosticEvent)]
    assert [e.diagnostic_type for e in diags] == ["api_retry", "api_error_message", "result_error"]
    assert diags[1].detail["text"].startswith("API Error: 500 Internal server error (injected by the TraceTrial probe)")
    assert diags[2].detail["api_error_status"] == 500
    assert not [e for e in trace.events if e.event_type == "assistant_message"]
    assert trace.structured_trace_status == "complete" and trace.trace_complete


def first(lines: list[str], kind: str) -> int:
    return next(i for i, ln in enumerate(lines) if json.loads(ln).get("type") == kind)


def test_rule6_malformed_line_in_a_real_stream_degrades_to_partial(
    tmp_path: Path, snapshot_json: SnapshotAssertion
) -> None:
    g = load_golden(HARNESS, "tool_roundtrip").copy_to(tmp_path / "case")
    lines = stdout_lines(g)
    at = first(lines, "assistant")
    lines.insert(at, '{"type":"assistant","message":{"id":"msg_cut","content":[{"type":"te')
    lines.insert(at + 2, "\x00\x1b[31mnot json at all")
    rewrite(g, lines)
    trace = run(g)
    raws = [e for e in trace.events if isinstance(e, RawStdoutEvent)]
    assert [(r.source_event_seq, r.parseable) for r in raws] == [(at + 1, False), (at + 3, False)]
    assert all(r.parse_error for r in raws) and raws[0].text == lines[at]
    assert trace.structured_trace_status == "partial" and trace.trace_complete  # the stream still ended
    (call,) = tools(trace)
    assert call.tool_result is not None and call.tool_result.content == "alpha\nbeta"  # parsing went on
    assert {
        "status": trace.structured_trace_status,
        "notes": trace.notes,
        "events": dump(trace.events),
    } == snapshot_json


def test_rule6_unknown_record_type_stays_visible(tmp_path: Path) -> None:
    g = load_golden(HARNESS, "tool_roundtrip").copy_to(tmp_path / "case")
    lines = stdout_lines(g)
    lines.insert(1, json.dumps({"type": "rate_limit_event", "session_id": "s", "info": {"status": "allowed"}}))
    rewrite(g, lines)
    trace = run(g)
    (unknown,) = [e for e in trace.events if isinstance(e, NativeEvent) and e.native_event_type == "rate_limit_event"]
    assert unknown.raw_event["info"] == {"status": "allowed"}
    assert trace.structured_trace_status == "complete"


def test_killed_mid_stream_is_partial_and_incomplete(tmp_path: Path) -> None:
    g = load_golden(HARNESS, "tool_roundtrip").copy_to(tmp_path / "case")
    lines = stdout_lines(g)
    cut = first(lines, "user")
    rewrite(g, lines[:cut] + [lines[cut][:40]])  # the process died while writing the tool result
    trace = run(g)
    assert trace.structured_trace_status == "partial" and trace.trace_complete is False
    (call,) = tools(trace)
    assert call.tool_result is None
    assert any("no final 'result'" in n for n in trace.notes)


def test_no_output_at_all_is_unavailable(tmp_path: Path) -> None:
    g = load_golden(HARNESS, "tool_roundtrip").copy_to(tmp_path / "case")
    rewrite(g, [])
    trace = run(g, transcripts=False)
    assert trace.structured_trace_status == "unavailable" and trace.trace_complete is False
    assert [e.event_type for e in trace.events] == []


@pytest.mark.parametrize("case", golden_cases(HARNESS))
def test_rule8_only_native_sources_and_no_framing_events(case: str) -> None:
    trace = run(load_golden(HARNESS, case))
    # the sub-agent transcript is a native source too (records the stream lacks: issue 18)
    assert {e.source for e in trace.events} <= {"native:claude_code/stdout", "native:claude_code/stderr",
                                                "native:claude_code/subagent"}
    framing = {e.event_type for e in trace.events} & SUPPORT_EVENT_TYPES
    assert framing <= {"raw_stdout", "raw_stderr"}


def test_manual_compaction_boundary_with_summary_from_the_transcript() -> None:
    g = load_golden(HARNESS, "compaction")
    trace = run(g)
    (boundary,) = [e for e in trace.events if isinstance(e, ContextCompactionEvent)]
    assert (boundary.conversation_turn, boundary.native_event_type, boundary.trigger) == (2, "compact_boundary", "manual")
    assert boundary.native_event_id == boundary.raw_event["uuid"]
    assert boundary.summary is not None and "The user asked to write one to a.txt; it was written." in boundary.summary
    assert boundary.summary_present is True and boundary.notice_visible_to_model is None
    (after,) = [c for c in tools(trace) if c.conversation_turn == 3]
    assert after.tool_result is not None and after.tool_result.content == "one"
    (bare,) = [e for e in run(g, transcripts=False).events if isinstance(e, ContextCompactionEvent)]
    assert bare.summary is None and bare.summary_present is None  # not reconstructed without the transcript


# ------------------------------------------------------------------ issue 18, part 6


def test_a_subagents_text_only_reply_comes_from_its_transcript() -> None:
    g = load_golden(HARNESS, "subagent")
    on_stream = [json.loads(line) for line in stdout_lines(g)]
    assert not [d for d in on_stream if d.get("type") == "assistant"
                and {"type": "text", "text": "hi printed"} in (d.get("message") or {}).get("content", [])]
    trace = run(g)
    (reply,) = [e for e in trace.events if isinstance(e, AssistantMessageEvent) and e.content == "hi printed"]
    assert (reply.principal_id, reply.principal_role, reply.parent_principal_id) == ("toolu_tt_c9338a84_1", "child",
                                                                                     "main")
    assert reply.source == "native:claude_code/subagent" and reply.conversation_turn == 1
    # before the record that closes the child (its completion reaching the parent)
    (done,) = [e for e in trace.events if isinstance(e, TaskCompletionEvent)]
    assert trace.events.index(reply) < trace.events.index(done)
    # a reply the stream carries (a background sub-agent) is not repeated from the transcript
    background = run(load_golden(HARNESS, "subagent_background"))
    replies = [e for e in background.events if isinstance(e, AssistantMessageEvent) and e.content == "hi printed"]
    assert len(replies) == 1 and replies[0].source == SRC_STDOUT


def test_usage_is_the_complete_model_usage_when_subagents_ran() -> None:
    g = load_golden(HARNESS, "subagent")
    (result,) = [json.loads(line) for line in stdout_lines(g) if json.loads(line).get("type") == "result"]
    model_usage = result["modelUsage"]["probe"]
    assert model_usage["inputTokens"] > result["usage"]["input_tokens"]  # the sub-agent's calls
    (usage,) = [e for e in run(g).events if isinstance(e, TokenUsageEvent)]
    assert usage.usage is not None
    assert (usage.usage.input_tokens, usage.usage.output_tokens) == (model_usage["inputTokens"],
                                                                     model_usage["outputTokens"])


def test_a_background_shell_task_is_the_parents_process_not_a_child_principal(tmp_path: Path) -> None:
    g = load_golden(HARNESS, "subagent_background").copy_to(tmp_path / "g")
    lines = []
    for text in stdout_lines(g):
        data = json.loads(text)
        if data.get("parent_tool_use_id"):
            continue  # a shell task has no records of its own model
        for block in (data.get("message") or {}).get("content") or []:
            if isinstance(block, dict) and block.get("type") == "tool_use" and block.get("name") == "Agent":
                block["name"], block["input"] = "Bash", {"command": "sleep 1; echo hi", "run_in_background": True}
        if data.get("task_type") == "local_agent":
            data["task_type"] = "local_bash"
        for task in data.get("tasks") or []:
            task["task_type"] = "local_bash"
        lines.append(json.dumps(data))
    rewrite(g, lines)
    trace = run(g, transcripts=False)
    call = "toolu_tt_51e35b5d_1"
    assert all(e.principal_id in ("main", None) and e.principal_role in ("main", None) for e in trace.events)
    assert not [e for e in trace.events if isinstance(e, (SubagentLifecycleEvent, TaskCompletionEvent))
                and getattr(e, "child_principal_id", None) == call]
    pending = [e.pending_child_ids for e in trace.events if isinstance(e, SubagentLifecycleEvent)]
    assert pending and all(p == [] for p in pending)
    task_events = [e for e in trace.events if isinstance(e, NativeEvent)
                   and (e.native_event_type or "").startswith("system/task_")]
    assert {e.native_event_type for e in task_events} >= {"system/task_started/local_bash",
                                                          "system/task_notification/local_bash"}
