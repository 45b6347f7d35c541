"""OpenClaw normalizer over real captured native records (golden/openclaw/*): the per-turn JSON
result on stdout plus the session store tables the adapter dumps from SQLite. Snapshots pin
each trace; the other tests check the SPEC §7 rules on the real records and on real records
with one defect injected.

Re-capture (real ``openclaw`` on the pinned Node 24, real gateway and probe)::

    python -m tests.harnesses.capture openclaw/tool_roundtrip openclaw/nonzero_exit \\
        openclaw/large_output openclaw/multi_turn_resume openclaw/api_error openclaw/mcp_native
    python -c "import tests.harnesses.capture as c; base = c.cases; \\
        c.cases = lambda h: {**base(h), 'api_error_persistent': c.Case([('Say hello.', None)], via='probe', \\
        deadline_s=240)}; c.main(['openclaw/api_error_persistent'])"
    python -m pytest tests/harnesses/test_openclaw_normalize.py --snapshot-update
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from syrupy.assertion import SnapshotAssertion

from harnesses.base import NormalizedTrace
from harnesses.native import turn_files
from harnesses.openclaw.normalize import (
    SESSIONS_DIR,
    SRC_STDERR,
    SRC_STDOUT,
    SRC_TRAJECTORY,
    SRC_TRANSCRIPT,
    TRAJECTORY_SUFFIX,
    normalize,
    unwrap_dispatch,
)
from tests.harnesses.conftest import AT, Golden, dump, golden_cases, load_golden
from tracetrial.trace import (
    SUPPORT_EVENT_TYPES,
    AssistantMessageEvent,
    NativeDiagnosticEvent,
    NativeEvent,
    RawStdoutEvent,
    TaskCompletionEvent,
    TokenUsageEvent,
    ToolEvent,
)
from tracetrial.trace_io import dump_events, renumber

HARNESS = "openclaw"


def run(g: Golden, *, store: bool = True) -> NormalizedTrace:
    sessions = {t["index"]: t["session_id"] for t in g.meta["turns"] if t["session_id"]}
    root = g.native / "openclaw" if store else g.native / "no-store"
    return normalize(turn_files(g.native, g.turns), root, "run-golden", sessions=sessions, at=AT)


def tools(trace: NormalizedTrace) -> list[ToolEvent]:
    return [e for e in trace.events if isinstance(e, ToolEvent)]


def dump_path(g: Golden, table: str = "transcript_events") -> Path:
    return g.native / "openclaw" / "main" / f"{table}.jsonl"


def rows(g: Golden, table: str = "transcript_events") -> list[dict]:
    return [json.loads(line) for line in dump_path(g, table).read_text(encoding="utf-8").splitlines()]


def native_records(g: Golden, table: str) -> dict[tuple[str, int], dict]:
    """(session id, sequence) -> the native record, of the SQLite dump ``table`` or, for a
    2026.6.x capture, of the session files (the transcript ``<sid>.jsonl`` / the trajectory
    ``<sid>.trajectory.jsonl``; the sequence is the line)."""
    if dump_path(g, table).is_file():
        return {(r["session_id"], r["seq"]): r["event"] for r in rows(g, table)}
    out: dict[tuple[str, int], dict] = {}
    trajectory = table == "trajectory_runtime_events"
    for path in sorted((g.native / "openclaw").glob(f"*/{SESSIONS_DIR}/*.jsonl")):
        if path.name.endswith(TRAJECTORY_SUFFIX) != trajectory:
            continue
        session = path.name.removesuffix(TRAJECTORY_SUFFIX).removesuffix(".jsonl")
        for no, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            out[(session, no)] = json.loads(line)
    return out


def write_rows(g: Golden, data: list, table: str = "transcript_events") -> None:
    lines = [d if isinstance(d, str) else json.dumps(d) for d in data]
    dump_path(g, table).write_text("\n".join(lines) + "\n", encoding="utf-8")


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
    transcript = native_records(g, "transcript_events")
    runtime = native_records(g, "trajectory_runtime_events")
    for e in run(g).events:
        if e.source == SRC_TRANSCRIPT:
            assert e.raw_event == transcript[(e.session_id, e.source_event_seq)]
        elif e.source == SRC_TRAJECTORY:
            assert e.raw_event == runtime[(e.raw_event["sessionId"], e.source_event_seq)]
        elif e.source == SRC_STDOUT and not isinstance(e, RawStdoutEvent):
            assert e.raw_event == json.loads((g.native / f"turn-{e.conversation_turn}.stdout").read_text())


@pytest.mark.parametrize("case", golden_cases(HARNESS))
def test_rule4_each_native_stream_keeps_its_order(case: str) -> None:
    trace = run(load_golden(HARNESS, case))
    for source in (SRC_TRANSCRIPT, SRC_TRAJECTORY):
        keys = [(e.conversation_turn, e.session_id, e.source_event_seq) for e in trace.events if e.source == source]
        per_session: dict = {}
        for turn, session, seq in keys:
            per_session.setdefault(session, []).append((turn, seq))
        for seqs in per_session.values():
            assert [s for _, s in seqs] == sorted(s for _, s in seqs)
    turns = [e.conversation_turn for e in trace.events]
    assert turns == sorted(turns)


def test_tool_event_is_the_transcript_exchange_with_structured_exec_details() -> None:
    (call,) = tools(run(load_golden(HARNESS, "tool_roundtrip@2026.9.6")))
    assert call.source == SRC_TRANSCRIPT
    assert (call.tool_call.name, call.tool_call.arguments) == ("exec", {"command": "cat notes.txt"})
    # the model's id as the transcript stores it (on the wire OpenClaw sends it as "calltt…")
    assert call.tool_call.id.startswith("call_tt_") and call.tool_call.native_tool_call_id is None
    assert call.tool_result is not None
    assert (call.tool_result.content, call.tool_result.exit_code, call.tool_result.is_error) == ("alpha\nbeta", 0, False)
    assert call.tool_result.status == "completed" and isinstance(call.tool_result.duration, float)


def test_rule1_and_7_nonzero_exit_prose_verbatim_and_native_exit_code() -> None:
    (call,) = tools(run(load_golden(HARNESS, "nonzero_exit@2026.9.6")))
    assert call.tool_result is not None
    assert call.tool_result.content.endswith("BUILD SUCCESS: dist/app.bin written\n\n(Command exited with code 3)")
    # OpenClaw's exec details state the code (a structured native field); the error flag stays False
    assert (call.tool_result.exit_code, call.tool_result.is_error, call.tool_result.status) == (3, False, "completed")


def test_rule7_large_output_truncation_wording_kept_and_exit_line_lost() -> None:
    ok, failed = tools(run(load_golden(HARNESS, "large_output@2026.9.6")))
    for call, code in ((ok, 0), (failed, 2)):
        assert call.tool_result is not None
        text = call.tool_result.content
        assert text.startswith("1\n2\n3\n") and "more characters truncated; rerun with narrower args if needed]" in text
        assert len(text) < 70_000 and call.tool_result.exit_code == code  # head kept, tail (and checksum) cut
        assert call.tool_result.truncated is None and call.tool_result.omitted_bytes is None
    # A real finding the trace must keep: the model-visible text of the failing command no longer
    # says it failed (the "(Command exited with code 2)" line fell into the truncated tail).
    assert "exited with code" not in failed.tool_result.content  # type: ignore[union-attr]


def test_mcp_tools_go_through_tool_search_and_the_transcript_redacts_key_arguments() -> None:
    trace = run(load_golden(HARNESS, "mcp_native@2026.9.6"))
    calls = tools(trace)
    # OpenClaw calls the deferred MCP tool through its Tool Search dispatcher ``tool_call``; the
    # tool event is the call of the tool it reaches, with the inner arguments
    assert [c.tool_call.name for c in calls] == ["tool_search", "lookup__lookup", "tool_search", "lookup__lookup", "exec"]
    alpha, boom = calls[1], calls[3]
    # OpenClaw persists MCP arguments named "key" masked: the trace keeps what the harness recorded
    assert alpha.tool_call.arguments == {"key": "***"}
    # what the harness natively did stays in the event's native record
    (block,) = [b for b in alpha.raw_event["message"]["content"] if b.get("id") == alpha.tool_call.id]
    assert (block["name"], block["arguments"]) == ("tool_call", {"id": "lookup__lookup", "args": {"key": "***"}})
    assert alpha.tool_result is not None and boom.tool_result is not None
    assert "value-of-alpha" in alpha.tool_result.content and "EXTERNAL_UNTRUSTED_CONTENT" in alpha.tool_result.content
    assert (alpha.tool_result.is_error, boom.tool_result.is_error) == (False, True)
    assert "lookup failed: no key 'boom'" in boom.tool_result.content
    assert calls[4].tool_result is not None and calls[4].tool_result.exit_code == 0  # full exec policy: not denied


def test_a_dispatcher_call_with_json_string_arguments_is_unwrapped_the_same(tmp_path: Path) -> None:
    """The model may send the dispatcher's arguments as a JSON string: same tool event."""
    g = load_golden(HARNESS, "mcp_native@2026.9.6").copy_to(tmp_path / "case")
    data = rows(g)
    for r in data:
        for b in r["event"].get("message", {}).get("content") or []:
            if isinstance(b, dict) and b.get("name") == "tool_call":
                b["arguments"] = json.dumps(b["arguments"])
    write_rows(g, data)
    reached = [(c.tool_call.name, c.tool_call.arguments) for c in tools(run(g)) if c.tool_call.name.startswith("lookup")]
    assert reached == [("lookup__lookup", {"key": "***"}), ("lookup__lookup", {"key": "***"})]


UNCHANGED = None


@pytest.mark.parametrize(
    ("name", "arguments", "reached"),
    [
        ("tool_call", {"id": "tickets__close_ticket", "args": {"ticket_id": "TCK-1"}},
         ("tickets__close_ticket", {"ticket_id": "TCK-1"})),
        ("call_tool", '{"id": "billing__create_invoice", "args": {"qty": 1}}', ("billing__create_invoice", {"qty": 1})),
        ("tool_call", {"id": "mcp:tickets:tickets__get_ticket", "args": {}}, ("mcp:tickets:tickets__get_ticket", {})),
        ("tool_call", {"id": "tickets__get_ticket", "input": {"ticket_id": "T"}}, ("tickets__get_ticket", {"ticket_id": "T"})),
        ("tool_call", {"id": "tickets__get_ticket", "ticket_id": "T"}, ("tickets__get_ticket", {"ticket_id": "T"})),
        ("tool_call", {"id": "tickets__get_ticket", "args": {}, "ticket_id": "T"}, ("tickets__get_ticket", {"ticket_id": "T"})),
        ("tool_call", {"id": "tickets__get_ticket", "args": "not an object"}, ("tickets__get_ticket", "not an object")),
        ("tool_call", {"args": {"ticket_id": "T"}}, UNCHANGED),  # no tool named
        ("tool_call", {"id": "", "args": {}}, UNCHANGED),
        ("tool_call", {"id": 7, "args": {}}, UNCHANGED),
        ("tool_call", "{not json", UNCHANGED),
        ("tool_call", ["tickets__get_ticket"], UNCHANGED),
        ("exec", {"id": "tickets__get_ticket", "args": {}}, UNCHANGED),  # not the dispatcher
        ("tool_search", {"query": "close_ticket"}, UNCHANGED),
    ],
)
def test_unwrap_dispatch(name: str, arguments: object, reached: tuple[str, object] | None) -> None:
    assert unwrap_dispatch(name, arguments) == (reached or (name, arguments))


def test_multi_turn_resume_keeps_the_session_and_new_session_starts_one() -> None:
    g = load_golden(HARNESS, "multi_turn_resume@2026.9.6")
    trace = run(g)
    calls = tools(trace)
    assert [c.conversation_turn for c in calls] == [1, 2, 3]
    assert calls[0].session_id == calls[1].session_id != calls[2].session_id
    assert calls[2].tool_result is not None and calls[2].tool_result.content == "one\ntwo"
    modes = [json.loads((g.native / f"turn-{i}.invocation.json").read_text())["mode"] for i in (1, 2, 3)]
    assert modes == ["exec", "resume", "exec"]
    started = [e for e in trace.events if isinstance(e, NativeEvent) and e.native_event_type == "trajectory/session.started"]
    assert [e.conversation_turn for e in started] == [1, 2, 3]  # each turn's run, by run id
    assert started[1].raw_event["runId"] != started[1].raw_event["sessionId"] == started[0].raw_event["sessionId"]
    results = [e.native_event_type for e in trace.events if e.source == SRC_STDOUT and isinstance(e, NativeEvent)]
    assert results == ["agent_exec/result", "agent_local/result", "agent_exec/result"]
    turn_usage = [e for e in trace.events if isinstance(e, TokenUsageEvent) and e.usage_scope == "turn"]
    assert [u.conversation_turn for u in turn_usage] == [1, 2, 3] and all(u.usage for u in turn_usage)
    # each turn's completion record, from the result's own fields (exec envelope / --local meta)
    done = [e for e in trace.events if isinstance(e, TaskCompletionEvent)]
    assert [(e.conversation_turn, e.status, e.principal_id) for e in done] == [(1, "ok", "main"), (2, "stop", "main"),
                                                                               (3, "ok", "main")]
    assert [(e.content["final_text"], e.content["model_calls"]) for e in done] == [
        ("Wrote one.", 2), ("Appended two.", 2), ("a.txt has one and two.", 2)
    ]


def test_api_error_retries_are_visible_only_in_the_runtime_trajectory() -> None:
    trace = run(load_golden(HARNESS, "api_error@2026.9.6"))
    diags = [e for e in trace.events if isinstance(e, NativeDiagnosticEvent)]
    assert [d.diagnostic_type for d in diags] == ["trajectory/model.completed/error"] * 5
    assert all("injected by the TraceTrial probe" in d.detail[0]["errorMessage"] for d in diags)
    assert all(d.source == SRC_TRAJECTORY for d in diags)
    # the sixth attempt succeeded: the transcript holds only the successful answer, while the
    # completion record counts all six provider round trips as model calls
    assert [e.content for e in trace.events if isinstance(e, AssistantMessageEvent)] == ["hello"]
    (done,) = [e for e in trace.events if isinstance(e, TaskCompletionEvent)]
    assert done.content == {"final_text": "hello", "model_calls": 6}
    assert trace.structured_trace_status == "complete" and trace.trace_complete


@pytest.mark.skipif(not (Path(__file__).parent / "golden/openclaw/api_error_persistent@2026.9.6").is_dir(),
                    reason="capture not present")
def test_api_error_that_never_recovers_fails_the_turn() -> None:
    g = load_golden(HARNESS, "api_error_persistent@2026.9.6")
    trace = run(g)
    assert g.meta["turns"][0]["exit_code"] == 1
    (result,) = [e for e in trace.events if e.source == SRC_STDOUT and isinstance(e, NativeEvent)]
    assert result.status == "error"
    failed = [e for e in trace.events if isinstance(e, NativeDiagnosticEvent) and e.source == SRC_STDOUT]
    assert failed and failed[0].diagnostic_type == "agent_exec_error"
    assert not [e for e in trace.events if isinstance(e, AssistantMessageEvent)]


def test_rule2_call_without_result_stays_null(tmp_path: Path) -> None:
    g = load_golden(HARNESS, "tool_roundtrip@2026.9.6").copy_to(tmp_path / "case")
    write_rows(g, [r for r in rows(g) if _obj_role(r) != "toolResult"])
    (call,) = tools(run(g))
    assert call.tool_result is None and call.model_dump(mode="json")["tool_result"] is None


def test_rule2_result_with_unknown_id_is_not_paired(tmp_path: Path) -> None:
    g = load_golden(HARNESS, "tool_roundtrip@2026.9.6").copy_to(tmp_path / "case")
    data = rows(g)
    for r in data:
        if _obj_role(r) == "toolResult":
            r["event"]["message"]["toolCallId"] = "call_not_issued"
    write_rows(g, data)
    trace = run(g)
    (call,) = tools(trace)
    assert call.tool_result is None
    (unmatched,) = [e for e in trace.events if isinstance(e, NativeEvent)
                    and e.native_event_type == "transcript/tool_result_unmatched"]
    assert "call_not_issued" in (unmatched.status or "")


def test_rule3_ids_repeated_across_turns_are_turn_scoped(tmp_path: Path) -> None:
    """The probe never reuses ids; the real multi-turn records are edited so turn 3's call
    (and its result) reuse turn 1's id."""
    g = load_golden(HARNESS, "multi_turn_resume@2026.9.6").copy_to(tmp_path / "case")
    data = rows(g)
    ids = [b["id"] for r in data if _obj_role(r) == "assistant"
           for b in r["event"]["message"]["content"] if b.get("type") == "toolCall"]
    text = "\n".join(json.dumps(r) for r in data).replace(ids[2], ids[0])
    write_rows(g, text.splitlines())
    calls = tools(run(g))
    assert [(c.conversation_turn, c.tool_call.id, c.tool_call.native_tool_call_id) for c in calls] == [
        (1, f"{ids[0]}#t1", ids[0]),
        (2, ids[1], None),
        (3, f"{ids[0]}#t3", ids[0]),
    ]
    assert calls[2].tool_result is not None and calls[2].tool_result.content == "one\ntwo"
    assert calls[0].tool_result is not None and calls[0].tool_result.content == "(no output)"


def test_rule6_malformed_records_stay_visible_and_degrade_to_partial(
    tmp_path: Path, snapshot_json: SnapshotAssertion
) -> None:
    g = load_golden(HARNESS, "nonzero_exit@2026.9.6").copy_to(tmp_path / "case")
    data: list = rows(g)
    data.insert(5, '{"session_id": "x", "seq": 99, "event": {"type": "mess')
    data.insert(6, "[1, 2, 3]")
    write_rows(g, data)
    trace = run(g)
    bad = [e for e in trace.events if isinstance(e, NativeEvent) and e.native_event_type == "malformed_record"]
    assert [(b.source_event_seq, b.status) for b in bad] == [
        (6, "invalid JSON: Unterminated string starting at at column 50"),
        (7, "not a JSON object (list)"),
    ]
    assert trace.structured_trace_status == "partial" and trace.trace_complete
    assert len(tools(trace)) == 1 and tools(trace)[0].tool_result is not None  # normalization went on
    assert {"status": trace.structured_trace_status, "notes": trace.notes, "events": dump(trace.events)} == snapshot_json


def test_rule6_unparseable_stdout_is_raw_and_the_turn_incomplete(tmp_path: Path) -> None:
    g = load_golden(HARNESS, "tool_roundtrip@2026.9.6").copy_to(tmp_path / "case")
    stdout = g.native / "turn-1.stdout"
    stdout.write_text(stdout.read_text()[:120], encoding="utf-8")  # killed mid-write
    trace = run(g)
    (raw,) = [e for e in trace.events if isinstance(e, RawStdoutEvent)]
    assert raw.parseable is False and raw.parse_error and raw.text.startswith("{")
    assert trace.structured_trace_status == "partial" and trace.trace_complete is False
    (call,) = tools(trace)  # the session store still shows the exchange (by order of runs)
    assert call.tool_result is not None and call.conversation_turn == 1
    assert any("no run id on stdout" in n for n in trace.notes)


def test_rule6_unknown_records_stay_visible(tmp_path: Path) -> None:
    g = load_golden(HARNESS, "tool_roundtrip@2026.9.6").copy_to(tmp_path / "case")
    data = rows(g)
    extra = dict(data[-1], seq=500, event={"type": "hologram", "id": "h1", "x": 1})
    write_rows(g, [*data, extra])
    kinds = [e.native_event_type for e in run(g).events if isinstance(e, NativeEvent)]
    assert "transcript/hologram" in kinds


def test_without_the_session_store_status_is_partial_and_nothing_is_invented() -> None:
    trace = run(load_golden(HARNESS, "nonzero_exit@2026.9.6"), store=False)
    assert not tools(trace) and not [e for e in trace.events if isinstance(e, AssistantMessageEvent)]
    assert trace.structured_trace_status == "partial" and trace.trace_complete
    assert any("no transcript rows" in n for n in trace.notes)


@pytest.mark.parametrize("case", golden_cases(HARNESS))
def test_rule8_only_native_sources_and_no_framing_events(case: str) -> None:
    trace = run(load_golden(HARNESS, case))
    assert {e.source for e in trace.events} <= {SRC_STDOUT, SRC_STDERR, SRC_TRANSCRIPT, SRC_TRAJECTORY}
    assert {e.event_type for e in trace.events} & SUPPORT_EVENT_TYPES <= {"raw_stdout", "raw_stderr"}


def _obj_role(row: dict) -> str | None:
    message = row.get("event", {}).get("message")
    return message.get("role") if isinstance(message, dict) else None



def test_a_turn_the_runner_killed_normalizes_and_its_repair_is_visible() -> None:
    """Real records of a turn killed mid-call by a task's interrupt (SIGKILL; no stdout result),
    then resumed: the killed turn's rows stay in the trace (this raised KeyError on a transcript
    row no turn claims before), and the resumed turn's model input shows OpenClaw's own repair of
    the call left without a result."""
    g = load_golden(HARNESS, "interrupted_turn@2026.9.6")
    assert [(t["exit_code"], t["interrupted"]) for t in g.meta["turns"]] == [(None, True), (0, False)]
    modes = [json.loads((g.native / f"turn-{i}.invocation.json").read_text())["mode"] for i in (1, 2)]
    assert modes == ["exec", "resume"]
    trace = run(g)
    assert any("turn 1: stdout has no JSON result" in n for n in trace.notes)
    killed = [c for c in tools(trace) if "touch .tt-kill" in json.dumps(c.tool_call.arguments if c.tool_call else {})]
    assert killed, "the killed call is in the trace"
    text = json.dumps([r for r in rows(g)], ensure_ascii=False)
    assert "missing tool result in session history; inserted synthetic error result" in text
