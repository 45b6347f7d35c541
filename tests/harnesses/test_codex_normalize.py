"""Codex normalizer over real captured native records (golden/codex/*): ``exec --json``
stdout plus the thread rollouts. Snapshots pin each trace; the other tests check the
SPEC §7 rules on the real records and on real records with one defect injected."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from syrupy.assertion import SnapshotAssertion

from harnesses.base import NormalizedTrace
from harnesses.codex.normalize import SRC_ROLLOUT, SRC_STDOUT, normalize
from harnesses.native import turn_files
from tests.harnesses.conftest import AT, Golden, dump, golden_cases, load_golden
from tracetrial.trace import (
    SUPPORT_EVENT_TYPES,
    AssistantMessageEvent,
    NativeDiagnosticEvent,
    NativeEvent,
    RawStdoutEvent,
    SubagentLifecycleEvent,
    TaskCompletionEvent,
    TokenUsageEvent,
    ToolEvent,
)
from tracetrial.trace_io import dump_events, renumber

HARNESS = "codex"


def run(g: Golden, *, rollouts: bool = True) -> NormalizedTrace:
    files = sorted((g.native / "rollouts").glob("rollout-*.jsonl")) if rollouts else []
    threads = {t["index"]: t["session_id"] for t in g.meta["turns"] if t["session_id"]}
    return normalize(turn_files(g.native, g.turns), files, "run-golden", threads=threads, at=AT)


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
    dump_events(renumber(trace.events))
    assert all(e.conversation_turn in g.turns for e in trace.events)
    assert {
        "status": trace.structured_trace_status,
        "complete": trace.trace_complete,
        "notes": trace.notes,
        "events": dump(trace.events),
    } == snapshot_json


@pytest.mark.parametrize("case", golden_cases(HARNESS))
def test_rule1_raw_event_is_the_native_record_verbatim(case: str) -> None:
    g = load_golden(HARNESS, case)
    rollout_lines: dict[str, list[str]] = {}
    for path in (g.native / "rollouts").glob("rollout-*.jsonl"):
        rollout_lines[path.name] = path.read_text(encoding="utf-8").splitlines()
    for e in run(g).events:
        if e.source == SRC_STDOUT and not isinstance(e, RawStdoutEvent):
            assert e.raw_event == json.loads(stdout_lines(g, e.conversation_turn or 1)[e.source_event_seq - 1])  # type: ignore[operator]
        elif e.source == SRC_ROLLOUT:
            assert any(
                e.raw_event == json.loads(lines[e.source_event_seq - 1])  # type: ignore[operator]
                for lines in rollout_lines.values()
                if len(lines) >= (e.source_event_seq or 0)
            )


def test_tool_event_is_the_model_facing_exchange() -> None:
    g = load_golden(HARNESS, "tool_roundtrip")
    trace = run(g)
    (call,) = tools(trace)
    assert call.source == SRC_ROLLOUT
    assert (call.tool_call.name, call.tool_call.arguments) == ("exec_command", {"cmd": "cat notes.txt"})
    assert call.tool_call.id.startswith("call_tt_") and call.tool_call.native_tool_call_id is None
    assert call.tool_result is not None
    assert call.tool_result.content.endswith(
        "Process exited with code 0\nOriginal token count: 3\nOutput:\nalpha\nbeta\n"
    )
    # The stdout item stays visible as a native event carrying its own structured exit code.
    (item,) = [
        e
        for e in trace.events
        if isinstance(e, NativeEvent) and e.native_event_type == "item.completed/command_execution"
    ]
    assert item.status == "completed" and item.raw_event["item"]["exit_code"] == 0


def test_rule1_and_7_nonzero_exit_wording_verbatim_no_parsed_code() -> None:
    trace = run(load_golden(HARNESS, "nonzero_exit"))
    (call,) = tools(trace)
    assert call.tool_result is not None
    assert "\nProcess exited with code 3\n" in call.tool_result.content and "BUILD SUCCESS" in call.tool_result.content
    assert call.tool_result.exit_code is None and call.tool_result.is_error is None  # prose only in the rollout
    (item,) = [
        e
        for e in trace.events
        if isinstance(e, NativeEvent) and e.native_event_type == "item.completed/command_execution"
    ]
    assert (item.status, item.raw_event["item"]["exit_code"]) == ("failed", 3)


def test_rule7_large_output_keeps_codex_truncation_wording() -> None:
    trace = run(load_golden(HARNESS, "large_output"))
    ok, failed = tools(trace)
    for call, code in ((ok, 0), (failed, 2)):
        assert call.tool_result is not None
        text = call.tool_result.content
        assert f"Process exited with code {code}\n" in text and "Warning: truncated output" in text
        assert "tokens truncated…" in text and len(text) < 20_000  # what the model saw, not the 108 kB
        assert call.tool_result.truncated is None and call.tool_result.omitted_bytes is None
    items = [
        e
        for e in trace.events
        if isinstance(e, NativeEvent) and e.native_event_type == "item.completed/command_execution"
    ]
    assert [len(i.raw_event["item"]["aggregated_output"]) for i in items] == [108894, 108894]


def test_mcp_structured_error_and_duration_from_rollout() -> None:
    trace = run(load_golden(HARNESS, "mcp_native"))
    alpha, boom, shell = tools(trace)
    assert alpha.tool_call.name == "mcp__lookup__lookup" and alpha.tool_call.arguments == {"key": "alpha"}
    assert alpha.tool_result is not None and alpha.tool_result.is_error is False
    assert boom.tool_result is not None and boom.tool_result.is_error is True
    assert isinstance(alpha.tool_result.duration, float) and alpha.tool_result.duration < 5
    # native mode = Codex's exec default: its own exec policy rejected the command (prose only).
    assert shell.tool_result is not None and "rm -f style commands are not permitted" in shell.tool_result.content
    assert shell.tool_result.is_error is None and shell.tool_result.status is None


def test_rule3_ids_repeated_across_turns_are_turn_scoped() -> None:
    """Scripted capture: the model reuses a call id in turn 3 (a new thread)."""
    trace = run(load_golden(HARNESS, "reused_call_ids"))
    calls = tools(trace)
    assert [(c.conversation_turn, c.tool_call.id, c.tool_call.native_tool_call_id) for c in calls] == [
        (1, "call_mt_1#t1", "call_mt_1"),
        (2, "call_mt_2", None),
        (3, "call_mt_1#t3", "call_mt_1"),
    ]
    assert calls[2].tool_result is not None and calls[2].tool_result.content.endswith("Output:\none\ntwo\n")


def test_multi_turn_resume_keeps_the_thread_and_new_session_starts_one() -> None:
    trace = run(load_golden(HARNESS, "multi_turn_resume"))
    calls = tools(trace)
    assert [c.conversation_turn for c in calls] == [1, 2, 3]
    assert all(c.tool_call.native_tool_call_id is None for c in calls)
    assert calls[2].tool_result is not None and calls[2].tool_result.content.endswith("Output:\none\ntwo\n")
    assert calls[0].session_id == calls[1].session_id != calls[2].session_id
    # Codex reports the thread's cumulative usage at turn end (hence scope "run", aggregate):
    # it grows across the resumed turn and restarts with the new thread.
    usage = [e.usage.input_tokens for e in trace.events if isinstance(e, TokenUsageEvent) and e.usage]
    assert usage[1] > usage[0] and usage[2] < usage[1]


def test_api_error_is_diagnostic_with_native_wording() -> None:
    trace = run(load_golden(HARNESS, "api_error"))
    diags = [(e.diagnostic_type, e.detail) for e in trace.events if isinstance(e, NativeDiagnosticEvent)]
    assert [d[0] for d in diags] == ["item_error", "error", "turn.failed"]
    assert "high demand" in diags[1][1] and not tools(trace)
    assert trace.trace_complete and trace.structured_trace_status == "complete"


def test_without_rollout_stdout_items_are_the_tool_events_and_status_is_partial() -> None:
    trace = run(load_golden(HARNESS, "nonzero_exit"), rollouts=False)
    (call,) = tools(trace)
    assert call.source == SRC_STDOUT and call.tool_call.name == "command_execution"
    assert call.tool_result is not None and call.tool_result.exit_code == 3 and call.tool_result.status == "failed"
    assert "BUILD SUCCESS" in call.tool_result.content
    assert trace.structured_trace_status == "partial" and any("no rollout" in n for n in trace.notes)
    assert [e.content for e in trace.events if isinstance(e, AssistantMessageEvent)] == [
        "The build printed success but its exit status is what counts."
    ]


def test_rule6_malformed_line_in_a_real_stream_degrades_to_partial(
    tmp_path: Path, snapshot_json: SnapshotAssertion
) -> None:
    g = load_golden(HARNESS, "nonzero_exit").copy_to(tmp_path / "case")
    lines = stdout_lines(g)
    lines.insert(3, '{"type":"item.completed","item":{"id":"item_9","type":"command_exec')
    lines.insert(5, "[1, 2, 3]")
    rewrite(g, lines)
    trace = run(g)
    raws = [e for e in trace.events if isinstance(e, RawStdoutEvent)]
    assert [(r.source_event_seq, r.parseable) for r in raws] == [(4, False), (6, False)]
    assert raws[1].parse_error == "not a JSON object (list)"
    assert trace.structured_trace_status == "partial" and trace.trace_complete
    assert len(tools(trace)) == 1  # normalization went on after the bad lines
    assert {
        "status": trace.structured_trace_status,
        "notes": trace.notes,
        "events": dump(trace.events),
    } == snapshot_json


def test_rule6_unknown_records_stay_visible(tmp_path: Path) -> None:
    g = load_golden(HARNESS, "tool_roundtrip").copy_to(tmp_path / "case")
    lines = stdout_lines(g)
    lines.insert(3, json.dumps({"type": "item.completed", "item": {"id": "item_7", "type": "hologram", "x": 1}}))
    lines.insert(4, json.dumps({"type": "session.configured", "model": "probe"}))
    rewrite(g, lines)
    kinds = [e.native_event_type for e in run(g).events if isinstance(e, NativeEvent)]
    assert "item.completed/hologram" in kinds and "session.configured" in kinds


def test_killed_mid_stream_is_partial_and_incomplete(tmp_path: Path) -> None:
    g = load_golden(HARNESS, "tool_roundtrip").copy_to(tmp_path / "case")
    lines = stdout_lines(g)
    rewrite(g, lines[:4] + [lines[4][:30]])
    trace = run(g)
    assert trace.structured_trace_status == "partial" and trace.trace_complete is False
    assert any("no turn.completed" in n for n in trace.notes)


@pytest.mark.parametrize("case", golden_cases(HARNESS))
def test_rule8_only_native_sources_and_no_framing_events(case: str) -> None:
    trace = run(load_golden(HARNESS, case))
    assert {e.source for e in trace.events} <= {SRC_STDOUT, SRC_ROLLOUT, "native:codex/stderr"}
    assert {e.event_type for e in trace.events} & SUPPORT_EVENT_TYPES <= {"raw_stdout", "raw_stderr"}


# ------------------------------------------------------------------ sub-agents (multi_agent_v1)


def _child_rollout(g: Golden) -> Path:
    """The rollout of the (one) sub-agent thread: its session_meta names a parent thread."""
    (path,) = [
        p
        for p in (g.native / "rollouts").glob("rollout-*.jsonl")
        if "parent_thread_id" in json.loads(p.read_text(encoding="utf-8").splitlines()[0])["payload"]
    ]
    return path


def _child_id(trace: NormalizedTrace) -> str:
    (spawn,) = [c for c in tools(trace) if c.tool_call.name == "multi_agent_v1__spawn_agent"]
    assert spawn.tool_result is not None
    return json.loads(spawn.tool_result.content)["agent_id"]


def lifecycle(trace: NormalizedTrace) -> list[SubagentLifecycleEvent]:
    return [e for e in trace.events if isinstance(e, SubagentLifecycleEvent)]


def test_rule5_child_actions_keep_their_own_principal() -> None:
    g = load_golden(HARNESS, "subagent")
    trace = run(g)
    child, main_thread = _child_id(trace), g.meta["turns"][0]["session_id"]
    assert child == json.loads(_child_rollout(g).read_text(encoding="utf-8").splitlines()[0])["payload"]["id"]
    calls = [(c.tool_call.name, c.principal_id, c.principal_role, c.parent_principal_id) for c in tools(trace)]
    assert calls == [
        ("multi_agent_v1__spawn_agent", "main", "main", None),
        ("multi_agent_v1__wait_agent", "main", "main", None),
        ("exec_command", child, "child", "main"),
        ("multi_agent_v1__close_agent", "main", "main", None),
    ]
    (echo,) = [c for c in tools(trace) if c.principal_id == child]
    assert echo.tool_call.arguments == {"cmd": "echo hi"} and echo.tool_result is not None
    assert echo.tool_result.content.endswith("Process exited with code 0\nOriginal token count: 1\nOutput:\nhi\n")
    # Codex's child session_meta names the root thread as its session.
    assert echo.session_id == main_thread and echo.source == SRC_ROLLOUT
    child_events = [e for e in trace.events if e.principal_id == child]
    assert {e.principal_role for e in child_events} == {"child"} and {e.parent_principal_id for e in child_events} == {
        "main"
    }
    assert [e.content for e in trace.events if isinstance(e, AssistantMessageEvent) and e.principal_id == child] == [
        "hi printed"
    ]
    # The child's thread-cumulative usage (stdout turn.completed reports the main thread only).
    (usage,) = [e for e in trace.events if isinstance(e, TokenUsageEvent) and e.principal_id == child]
    assert usage.usage_scope == "run" and usage.usage is not None and usage.usage.input_tokens == 17583


def test_collab_records_are_subagent_lifecycle_of_the_sender() -> None:
    trace = run(load_golden(HARNESS, "subagent"))
    child = _child_id(trace)
    seen = [(e.principal_id, e.action, e.status, e.child_principal_id, e.pending_child_ids) for e in lifecycle(trace)]
    assert seen == [
        ("main", "spawn_agent", "pending_init", child, [child]),  # stdout collab_tool_call
        (child, "started", None, child, None),  # the child's own rollout: task_started
        (child, "finished", "completed", child, None),  # task_complete
        ("main", "wait", "completed", child, []),
        ("main", "close_agent", "completed", child, []),
    ]
    main_items = [e for e in lifecycle(trace) if e.principal_id == "main"]
    assert {e.source for e in main_items} == {SRC_STDOUT} and all(
        e.raw_event["item"]["type"] == "collab_tool_call" for e in main_items
    )
    # No collab record stays a plain native event.
    assert not [e for e in trace.events if isinstance(e, NativeEvent) and "collab" in (e.native_event_type or "")]


def test_collab_record_follows_its_call_and_threads_merge_by_native_time() -> None:
    events = renumber(run(load_golden(HARNESS, "subagent")).events)
    child = _child_id(NormalizedTrace(events=events, structured_trace_status="complete", trace_complete=True))
    seq = {id(e): e.seq for e in events}
    by_name = {c.tool_call.name.split("__")[-1]: c for c in events if isinstance(c, ToolEvent)}
    spawn_rec, wait_rec, close_rec = [e for e in events if isinstance(e, SubagentLifecycleEvent) and e.principal_id == "main"]
    first_child = min(e.seq for e in events if e.principal_id == child)
    # spawn record: right after the spawn call (whose output names the child), before the child runs
    assert seq[id(by_name["spawn_agent"])] + 1 == spawn_rec.seq < first_child
    finished = next(e for e in events if isinstance(e, SubagentLifecycleEvent) and e.action == "finished")
    assert by_name["wait_agent"].seq < by_name["exec_command"].seq < finished.seq < wait_rec.seq < close_rec.seq
    # each thread keeps its own rollout order; across threads the native timestamps never go back
    rollout = [e for e in events if e.source == SRC_ROLLOUT]
    for who in ("main", child):
        lines = [e.source_event_seq for e in rollout if e.principal_id == who]
        assert lines == sorted(lines) and len(set(lines)) == len(lines)
    stamps = [e.source_timestamp for e in rollout]
    assert stamps == sorted(stamps)  # type: ignore[type-var]


def test_completion_delivered_to_the_parent_is_task_completion() -> None:
    trace = run(load_golden(HARNESS, "subagent"))
    (done,) = [e for e in trace.events if isinstance(e, TaskCompletionEvent)]
    assert (done.principal_id, done.principal_role, done.child_principal_id) == ("main", "main", _child_id(trace))
    assert (done.status, done.content) == ("completed", "hi printed")
    assert done.model_visible_content.startswith("<subagent_notification>\n")  # the text put into the history
    assert done.parent_reactivated is None  # no native record says it (rule 7)


def test_pending_child_stays_pending_and_exec_end_aborts_it() -> None:
    """Real Codex behaviour: the parent answers while the child runs; `codex exec` ends the run
    and the child's turn is aborted ("interrupted") — no completion exists, none is invented."""
    trace = renumber(run(load_golden(HARNESS, "subagent_pending")).events)
    spawn = [c for c in trace if isinstance(c, ToolEvent)]
    assert [c.tool_call.name for c in spawn] == ["multi_agent_v1__spawn_agent"]
    child = json.loads(spawn[0].tool_result.content)["agent_id"]  # type: ignore[union-attr]
    records = [e for e in trace if isinstance(e, SubagentLifecycleEvent)]
    assert [(e.principal_id, e.action, e.status, e.stop_reason) for e in records] == [
        ("main", "spawn_agent", "pending_init", None),
        (child, "started", None, None),
        (child, "aborted", "aborted", "interrupted"),
    ]
    (answer,) = [e for e in trace if isinstance(e, AssistantMessageEvent)]
    assert answer.principal_id == "main" and records[0].seq < answer.seq < records[2].seq
    assert records[0].pending_child_ids == [child]
    assert not [e for e in trace if isinstance(e, TaskCompletionEvent)]
    assert not [e for e in records if e.status == "completed"]


def test_rule2_child_results_join_only_within_their_thread(tmp_path: Path) -> None:
    g = load_golden(HARNESS, "subagent").copy_to(tmp_path / "case")
    path = _child_rollout(g)
    lines = path.read_text(encoding="utf-8").splitlines()
    out = [i for i, line in enumerate(lines) if json.loads(line)["payload"].get("type") == "function_call_output"]
    record = json.loads(lines[out[0]])
    record["payload"]["call_id"] = "call_tt_0d0cd97e_2"  # the parent's wait_agent call id
    lines[out[0]] = json.dumps(record)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    trace = run(g)
    child = _child_id(trace)
    (echo,) = [c for c in tools(trace) if c.principal_id == child]
    assert echo.tool_result is None  # its output is gone: nothing paired by position
    (wait,) = [c for c in tools(trace) if c.tool_call.name.endswith("wait_agent")]
    assert wait.tool_result is not None and '"completed":"hi printed"' in wait.tool_result.content
    (stray,) = [e for e in trace.events if isinstance(e, NativeEvent) and e.native_event_type == "tool_output_unmatched"]
    assert stray.principal_id == child


def test_rule6_missing_child_rollout_is_partial_and_nothing_is_invented(tmp_path: Path) -> None:
    g = load_golden(HARNESS, "subagent").copy_to(tmp_path / "case")
    child_path = _child_rollout(g)
    child = json.loads(child_path.read_text(encoding="utf-8").splitlines()[0])["payload"]["id"]
    child_path.unlink()
    trace = run(g)
    assert trace.structured_trace_status == "partial" and trace.trace_complete
    assert any(child in n and "no archived rollout" in n for n in trace.notes)
    assert not [e for e in trace.events if e.principal_id == child]  # no child actions reconstructed
    assert [e.child_principal_id for e in lifecycle(trace)] == [child, child, child]  # the parent's records stay


def test_without_native_time_a_child_is_not_placed_by_guess(tmp_path: Path) -> None:
    g = load_golden(HARNESS, "subagent").copy_to(tmp_path / "case")
    path = _child_rollout(g)
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    rows[9].pop("timestamp")  # one record in the middle: the threads are no longer merged
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    trace = run(g)
    child = _child_id(trace)
    assert any("no timestamp" in n for n in trace.notes)
    main_rollout = [e.seq for e in renumber(trace.events) if e.source == SRC_ROLLOUT and e.principal_id == "main"]
    child_rollout = [e.seq for e in renumber(trace.events) if e.principal_id == child]
    assert max(main_rollout) < min(child_rollout)  # a block after the parent's records, not interleaved
    for row in rows:
        row.pop("timestamp", None)  # no time at all: the child matches no turn
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    trace = run(g)
    assert any("matches no user turn" in n for n in trace.notes)
    assert {e.conversation_turn for e in trace.events if e.principal_id == child} == {None}
