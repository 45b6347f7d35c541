"""Codex normalizer over real captured native records (golden/codex/*): ``exec --json``
stdout plus the thread rollouts. Snapshots pin each trace; the other tests check the
SPEC §7 rules on the real records and on real records with one defect injected."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from syrupy.assertion import SnapshotAssertion

from harnesses.base import NormalizedTrace
from harnesses.codex.adapter import turn_files
from harnesses.codex.normalize import SRC_ROLLOUT, SRC_STDOUT, normalize
from tests.harnesses.conftest import AT, Golden, dump, golden_cases, load_golden
from tracetrial.trace import (
    SUPPORT_EVENT_TYPES,
    AssistantMessageEvent,
    NativeDiagnosticEvent,
    NativeEvent,
    RawStdoutEvent,
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
