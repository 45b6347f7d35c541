"""Trace IR v1: models, round trips, and the distinctions SPEC §7 insists on."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from tracetrial.errors import TraceFileError
from tracetrial.trace import (
    CORE_EVENT_TYPES,
    EVENT_CLASSES,
    SUPPORT_EVENT_TYPES,
    TokenUsage,
    TokenUsageEvent,
    ToolCall,
    ToolEvent,
    ToolResult,
)
from tracetrial.trace_io import dump_events, load_events, parse_event, renumber, write_events
from tracetrial_cli.main import SCHEMA_FILE, trace_schema

T0 = datetime(2026, 11, 30, 9, 0, tzinfo=timezone.utc)

SPEC_CORE = {"model_input", "tool_inventory", "assistant_delta", "assistant_message", "tool", "token_usage",
             "context_compaction", "subagent_lifecycle", "task_completion", "policy_event", "native_event",
             "native_diagnostic"}
SPEC_SUPPORT = {"run_started", "run_finished", "run_failed", "conversation_started", "conversation_turn_started",
                "conversation_turn_finished", "conversation_simulator_decision", "conversation_finished",
                "session_boundary", "context_handoff", "provider_request_count", "native_session_archive",
                "trace_export", "raw_stdout", "raw_stderr"}


def tool(seq: int, result: ToolResult | None) -> ToolEvent:
    return ToolEvent(seq=seq, timestamp=T0, run_id="r1", tool_call=ToolCall(id=f"c{seq}", name="Bash",
                     arguments={"command": "ls"}), tool_result=result)


def test_every_spec_event_type_has_a_model() -> None:
    assert CORE_EVENT_TYPES == SPEC_CORE
    assert SUPPORT_EVENT_TYPES == SPEC_SUPPORT
    assert set(EVENT_CLASSES) == SPEC_CORE | SPEC_SUPPORT


def test_round_trip_through_events_json(tmp_path: Path) -> None:
    events = [
        tool(1, ToolResult(content="", exit_code=0)),
        tool(2, None),
        TokenUsageEvent(seq=3, timestamp=T0, run_id="r1", usage=None, usage_available=False, usage_scope="call"),
        TokenUsageEvent(seq=4, timestamp=T0, run_id="r1", usage=TokenUsage(input_tokens=0, output_tokens=0),
                        usage_scope="call"),
    ]
    path = tmp_path / "events.json"
    write_events(path, events)
    raw = json.loads(path.read_text())
    # null result != empty output; both survive the round trip.
    assert raw[0]["tool_result"]["content"] == ""
    assert raw[1]["tool_result"] is None
    # unavailable usage != measured zero.
    assert raw[2]["usage"] is None and raw[2]["usage_available"] is False
    assert raw[3]["usage"]["input_tokens"] == 0
    # optional envelope fields appear only when set
    assert "principal_id" not in raw[0] and "source" not in raw[0]
    loaded = load_events(path)
    assert [e.model_dump() for e in loaded] == [e.model_dump() for e in events]


def test_usage_null_must_be_declared_unavailable() -> None:
    with pytest.raises(ValueError, match="unavailable usage"):
        TokenUsageEvent(seq=1, timestamp=T0, run_id="r", usage=None, usage_scope="call")


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"event_type": "shell_magic", "seq": 1, "timestamp": "2026-11-30T09:00:00Z", "run_id": "r"},
         "unknown event_type 'shell_magic'"),
        ({"event_type": "tool", "seq": 1, "timestamp": "2026-11-30T09:00:00Z", "run_id": "r",
          "tool_call": {"id": "a", "name": "Bash"}}, "field 'tool_result'"),
        ({"event_type": "run_failed", "seq": 1, "timestamp": "2026-11-30T09:00:00+02:00", "run_id": "r",
          "error_type": "x", "error_message": "y"}, "must be UTC"),
        ({"event_type": "run_failed", "seq": 1, "timestamp": "2026-11-30T09:00:00", "run_id": "r",
          "error_type": "x", "error_message": "y"}, "timestamp"),
        ({"event_type": "tool", "seq": 0, "timestamp": "2026-11-30T09:00:00Z", "run_id": "r",
          "tool_call": {"id": "a", "name": "Bash"}, "tool_result": None}, "field 'seq'"),
        ({"event_type": "tool", "seq": 1, "timestamp": "2026-11-30T09:00:00Z", "run_id": "r", "bogus": 1,
          "tool_call": {"id": "a", "name": "Bash"}, "tool_result": None}, "field 'bogus'"),
        (["not", "an", "object"], "expected a JSON object"),
    ],
)
def test_bad_events_get_precise_errors(data: object, message: str) -> None:
    with pytest.raises(TraceFileError, match=message):
        parse_event(data, where="events.json[0]")


def test_non_contiguous_seq_is_rejected(tmp_path: Path) -> None:
    path = tmp_path / "events.json"
    path.write_text(json.dumps([tool(1, None).model_dump(mode="json"), tool(3, None).model_dump(mode="json")]))
    with pytest.raises(TraceFileError, match=r"events.json\[1\]: seq is 3, expected 2"):
        load_events(path)
    # renumber() is the remedy the message names
    assert [e.seq for e in renumber([tool(5, None), tool(9, None)])] == [1, 2]


def test_malformed_json_names_line_and_column(tmp_path: Path) -> None:
    path = tmp_path / "events.json"
    path.write_text('[{"seq": 1,\n  oops}]')
    with pytest.raises(TraceFileError, match=r"line 2, column 3"):
        load_events(path)


def test_events_of_two_runs_are_rejected() -> None:
    a, b = tool(1, None), tool(2, None)
    b.run_id = "other"
    with pytest.raises(TraceFileError, match="several runs"):
        dump_events([a, b])


def test_committed_schema_is_current() -> None:
    expected = json.dumps(trace_schema(), indent=1, sort_keys=True) + "\n"
    assert SCHEMA_FILE.read_text(encoding="utf-8") == expected, "run: tracetrial schema"


def test_schema_validates_a_real_trace(tmp_path: Path) -> None:
    jsonschema = pytest.importorskip("jsonschema")
    data = dump_events([tool(1, ToolResult(content="x", exit_code=2, is_error=True)), tool(2, None)])
    jsonschema.validate(data, trace_schema())
    data[1]["event_type"] = "nope"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(data, trace_schema())


def test_timestamps_are_serialized_as_utc() -> None:
    ev = tool(1, None)
    ev.timestamp = datetime(2026, 1, 1, tzinfo=timezone(timedelta(0)))
    assert dump_events([ev])[0]["timestamp"].endswith("Z")
