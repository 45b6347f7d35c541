"""DeepSeek Harness normalizer over real captured native records (golden/deepseek/*): the
runtime's JSON-RPC stdout per turn (with the requests we sent) and its zstd session archives.
Snapshots pin each trace; the other tests check the SPEC §7 rules on the real records and on
real records with one defect injected.

Re-capture (real ``deepseek-harness-runtime-bin==0.1.0rc6``, real gateway and probe)::

    python -m tests.harnesses.capture deepseek/tool_roundtrip deepseek/nonzero_exit \\
        deepseek/large_output deepseek/multi_turn_resume deepseek/api_error
    python -m pytest tests/harnesses/test_deepseek_normalize.py --snapshot-update

(no ``mcp_native`` case: rc6 cannot load MCP servers, see ``harnesses/deepseek/adapter.py``).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from syrupy.assertion import SnapshotAssertion

from harnesses.base import NormalizedTrace
from harnesses.deepseek.normalize import SRC_SESSION, SRC_STDERR, SRC_STDOUT, normalize
from harnesses.native import turn_files
from tests.harnesses.conftest import AT, Golden, dump, golden_cases, load_golden
from tracetrial.trace import (
    SUPPORT_EVENT_TYPES,
    AssistantDeltaEvent,
    AssistantMessageEvent,
    ModelInputEvent,
    NativeDiagnosticEvent,
    NativeEvent,
    NativeSessionArchiveEvent,
    RawStdoutEvent,
    TokenUsageEvent,
    ToolEvent,
)
from tracetrial.trace_io import dump_events, renumber

HARNESS = "deepseek"


def run(g: Golden) -> NormalizedTrace:
    return normalize(turn_files(g.native, g.turns, requests=True), g.native / "sessions", "run-golden", at=AT)


def tools(trace: NormalizedTrace) -> list[ToolEvent]:
    return [e for e in trace.events if isinstance(e, ToolEvent)]


def lines(g: Golden, turn: int = 1) -> list[str]:
    return (g.native / f"turn-{turn}.stdout").read_text(encoding="utf-8").splitlines()


def rewrite(g: Golden, new: list[str], turn: int = 1) -> None:
    (g.native / f"turn-{turn}.stdout").write_text("\n".join(new) + "\n", encoding="utf-8")


def event_type(line: str) -> str | None:
    return ((json.loads(line).get("params") or {}).get("event") or {}).get("type")


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
def test_rule1_raw_event_is_the_wire_message_verbatim(case: str) -> None:
    g = load_golden(HARNESS, case)
    for e in run(g).events:
        if e.source == SRC_STDOUT and not isinstance(e, RawStdoutEvent):
            assert e.raw_event == json.loads(lines(g, e.conversation_turn or 1)[e.source_event_seq - 1])  # type: ignore[operator]


@pytest.mark.parametrize("case", golden_cases(HARNESS))
def test_rule4_wire_order_is_kept(case: str) -> None:
    trace = run(load_golden(HARNESS, case))
    keys = [(e.conversation_turn, e.source_event_seq) for e in trace.events if e.source == SRC_STDOUT]
    assert keys == sorted(keys)


def test_tool_event_from_the_model_message_and_result_from_tool_result() -> None:
    trace = run(load_golden(HARNESS, "tool_roundtrip"))
    (call,) = tools(trace)
    assert (call.tool_call.name, call.tool_call.arguments) == (
        "bash",
        {"command": "cat notes.txt", "description": "Run: cat notes.txt"},
    )
    assert call.tool_result is not None
    assert (call.tool_result.content, call.tool_result.is_error, call.tool_result.exit_code) == ("alpha\nbeta\n", False, None)
    assert call.turn_id == 1 and call.step_id == 1 and call.session_id and call.session_id.startswith("session-tt-")
    # the harness's own request header (written when it changes, here once): declared tools and config
    headers = [e for e in trace.events if isinstance(e, ModelInputEvent)]
    assert len(headers) == 1 and headers[0].provider == "deepseek-official" and headers[0].model == "probe"
    assert [t["name"] for t in headers[0].tools or []] == ["bash", "job_kill", "job_list", "job_output", "skill"]
    assert [e.content for e in trace.events if isinstance(e, AssistantMessageEvent)] == [
        "notes.txt lists alpha and beta."
    ]
    finals = [e for e in trace.events if isinstance(e, AssistantMessageEvent)]
    assert finals[0].finish_reason == "stop"
    deltas = [e for e in trace.events if isinstance(e, AssistantDeltaEvent)]
    assert "".join(d.content_delta or "" for d in deltas) == "notes.txt lists alpha and beta."
    usage = [e for e in trace.events if isinstance(e, TokenUsageEvent)]
    assert [u.usage_scope for u in usage] == ["call", "call"] and all(u.usage and u.usage.input_tokens for u in usage)


def test_rule1_and_7_nonzero_exit_marker_stays_prose() -> None:
    (call,) = tools(run(load_golden(HARNESS, "nonzero_exit")))
    assert call.tool_result is not None
    assert call.tool_result.content.endswith("BUILD SUCCESS: dist/app.bin written\n[exit code: 3]")
    # rc6 states the status only as "[exit code: N]" text and does not flag the result as an error
    assert (call.tool_result.exit_code, call.tool_result.is_error) == (None, False)


def test_rule7_large_output_keeps_the_tail_and_names_the_full_output_file() -> None:
    ok, failed = tools(run(load_golden(HARNESS, "large_output")))
    for call in (ok, failed):
        assert call.tool_result is not None
        text = call.tool_result.content
        assert text.rstrip().split("\n")[-2 if call is failed else -1].startswith("[output truncated; full output: ")
        assert "\n20000\n" in text and not text.startswith("1\n")  # the tail is what the model saw
        assert call.tool_result.truncated is None and call.tool_result.omitted_bytes is None
    assert failed.tool_result.content.endswith("[exit code: 2]")  # type: ignore[union-attr]


def test_multi_turn_resume_uses_one_runtime_session_and_new_session_starts_one() -> None:
    g = load_golden(HARNESS, "multi_turn_resume")
    trace = run(g)
    calls = tools(trace)
    assert [c.conversation_turn for c in calls] == [1, 2, 3]
    assert calls[0].session_id == calls[1].session_id != calls[2].session_id
    assert calls[2].tool_result is not None and calls[2].tool_result.content == "one\ntwo\n"
    # one runtime process for the run: initialize only in turn 1, shutdown after the last turn
    methods = [[json.loads(x)["method"] for x in (g.native / f"turn-{i}.requests.jsonl").read_text().splitlines()]
               for i in (1, 2, 3)]
    assert methods == [["initialize", "session/prompt"], ["session/prompt"], ["session/prompt", "shutdown"]]
    # the resumed turn is turn 2 of the same native session; the new session starts at turn 1
    assert [c.turn_id for c in calls] == [1, 2, 1]
    archives = [e for e in trace.events if isinstance(e, NativeSessionArchiveEvent)]
    assert sorted(a.session_id for a in archives) == sorted({calls[0].session_id, calls[2].session_id})


def test_session_archive_is_recorded_with_its_digest() -> None:
    g = load_golden(HARNESS, "tool_roundtrip")
    (archive,) = [e for e in run(g).events if isinstance(e, NativeSessionArchiveEvent)]
    path = g.root / archive.artifact  # type: ignore[operator]
    assert archive.source == SRC_SESSION and archive.format == "jsonl+zstd" and archive.status == "archived"
    assert archive.sha256 == hashlib.sha256(path.read_bytes()).hexdigest() and archive.size_bytes == path.stat().st_size
    # the decompressed copy beside it holds the same session events as the wire
    logged = [json.loads(x) for x in (path.parent / "session.jsonl").read_text().splitlines()]
    wire = [json.loads(x)["params"]["event"] for x in lines(g) if event_type(x)]
    assert logged[0]["type"] == "session" and logged[1:] == wire


def test_api_error_retries_and_the_failed_turn_are_diagnostics() -> None:
    g = load_golden(HARNESS, "api_error")
    trace = run(g)
    diags = [e.diagnostic_type for e in trace.events if isinstance(e, NativeDiagnosticEvent)]
    assert diags == ["assistant/chunk/finish/error"] * 3 + ["turn/end/error"]
    retries = [e for e in trace.events if isinstance(e, NativeEvent) and e.native_event_type == "session.event/llm/retry"]
    assert len(retries) == 2 and not tools(trace)
    assert g.meta["turns"][0]["exit_code"] == 1 and g.meta["model_requests"] == 3
    assert trace.structured_trace_status == "complete" and trace.trace_complete


def test_rule2_call_without_result_stays_null(tmp_path: Path) -> None:
    g = load_golden(HARNESS, "tool_roundtrip").copy_to(tmp_path / "case")
    rewrite(g, [x for x in lines(g) if event_type(x) != "tool/result"])
    (call,) = tools(run(g))
    assert call.tool_result is None and call.model_dump(mode="json")["tool_result"] is None


def test_rule2_result_with_unknown_id_is_not_paired(tmp_path: Path) -> None:
    g = load_golden(HARNESS, "tool_roundtrip").copy_to(tmp_path / "case")
    out = []
    for x in lines(g):
        if event_type(x) == "tool/result":
            rec = json.loads(x)
            rec["params"]["event"]["data"]["message"]["content"][0]["toolCallId"] = "call_not_issued"
            x = json.dumps(rec)
        out.append(x)
    rewrite(g, out)
    trace = run(g)
    (call,) = tools(trace)
    assert call.tool_result is None
    (unmatched,) = [e for e in trace.events if isinstance(e, NativeEvent) and e.native_event_type == "tool_result_unmatched"]
    assert "call_not_issued" in (unmatched.status or "")


def test_rule3_ids_repeated_across_turns_are_turn_scoped(tmp_path: Path) -> None:
    """The probe never reuses ids; the real multi-turn wire is edited so turn 3 reuses turn 1's id."""
    g = load_golden(HARNESS, "multi_turn_resume").copy_to(tmp_path / "case")
    first = tools(run(g))[0].tool_call.id
    third = tools(run(g))[2].tool_call.id
    rewrite(g, [x.replace(third, first) for x in lines(g, 3)], turn=3)
    calls = tools(run(g))
    assert [(c.conversation_turn, c.tool_call.id, c.tool_call.native_tool_call_id) for c in calls] == [
        (1, f"{first}#t1", first),
        (2, calls[1].tool_call.id, None),
        (3, f"{first}#t3", first),
    ]
    assert calls[2].tool_result is not None and calls[2].tool_result.content == "one\ntwo\n"


def test_rule6_malformed_line_in_a_real_stream_degrades_to_partial(
    tmp_path: Path, snapshot_json: SnapshotAssertion
) -> None:
    g = load_golden(HARNESS, "nonzero_exit").copy_to(tmp_path / "case")
    out = lines(g)
    out.insert(3, '{"jsonrpc":"2.0","method":"session.event","params":{"sessionId":"s","event":{"type":"tool/res')
    out.insert(5, "[1, 2, 3]")
    rewrite(g, out)
    trace = run(g)
    raws = [e for e in trace.events if isinstance(e, RawStdoutEvent)]
    assert [(r.source_event_seq, r.parseable) for r in raws] == [(4, False), (6, False)]
    assert raws[1].parse_error == "not a JSON object (list)"
    assert trace.structured_trace_status == "partial" and trace.trace_complete
    assert len(tools(trace)) == 1 and tools(trace)[0].tool_result is not None
    assert {"status": trace.structured_trace_status, "notes": trace.notes, "events": dump(trace.events)} == snapshot_json


def test_rule6_unknown_records_stay_visible(tmp_path: Path) -> None:
    g = load_golden(HARNESS, "tool_roundtrip").copy_to(tmp_path / "case")
    out = lines(g)
    out.insert(3, json.dumps({"jsonrpc": "2.0", "method": "session.event",
                              "params": {"sessionId": "s", "event": {"type": "hologram/beam", "seq": 99, "data": {}}}}))
    out.insert(4, json.dumps({"jsonrpc": "2.0", "method": "workspace.changed", "params": {}}))
    rewrite(g, out)
    kinds = [e.native_event_type for e in run(g).events if isinstance(e, NativeEvent)]
    assert "session.event/hologram/beam" in kinds and "workspace.changed" in kinds


def test_killed_mid_stream_is_partial_and_incomplete(tmp_path: Path) -> None:
    g = load_golden(HARNESS, "tool_roundtrip").copy_to(tmp_path / "case")
    out = lines(g)
    cut = next(i for i, x in enumerate(out) if event_type(x) == "tool/result")
    rewrite(g, out[:cut] + [out[cut][:40]])
    trace = run(g)
    assert trace.structured_trace_status == "partial" and trace.trace_complete is False
    assert any("no turn/end" in n for n in trace.notes)
    (call,) = tools(trace)
    assert call.tool_result is None  # nothing reconstructed (rule 7)


@pytest.mark.parametrize("case", golden_cases(HARNESS))
def test_rule8_only_native_sources_and_no_framing_events(case: str) -> None:
    trace = run(load_golden(HARNESS, case))
    assert {e.source for e in trace.events} <= {SRC_STDOUT, SRC_STDERR, SRC_SESSION}
    assert {e.event_type for e in trace.events} & SUPPORT_EVENT_TYPES <= {
        "raw_stdout", "raw_stderr", "native_session_archive"
    }
