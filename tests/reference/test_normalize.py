"""The reference normalizer over native logs of real runs (``fixtures/``, see ``regenerate.py``):
one test per SPEC §7 rule, plus the event mapping and the run-level evidence status."""

from __future__ import annotations

import json
from pathlib import Path

from harnesses.base import TurnOutcome
from harnesses.reference.normalize import SOURCE, normalize_records, normalize_run
from tracetrial.archive import RunPaths
from tracetrial.trace import (
    ModelInputEvent,
    NativeEvent,
    PolicyEvent,
    RawStderrEvent,
    RawStdoutEvent,
    SubagentLifecycleEvent,
    TaskCompletionEvent,
    ToolEvent,
)
from tracetrial.trace_io import load_events, renumber, write_events

FIX = Path(__file__).resolve().parent / "fixtures"


def lines(name: str) -> list[str]:
    return (FIX / f"{name}.jsonl").read_text(encoding="utf-8").splitlines()


def native(name: str) -> list[dict]:
    return [json.loads(x) for x in lines(name)]


def tools(events: list) -> list[ToolEvent]:
    return [e for e in events if isinstance(e, ToolEvent)]


def test_faithful_run_maps_every_record_and_is_complete(tmp_path: Path) -> None:
    trace = normalize_records(lines("faithful_two_turns"), run_id="r1")
    assert (trace.structured_trace_status, trace.trace_complete) == ("complete", True)
    kinds = [e.event_type for e in trace.events]
    assert kinds.count("model_input") == sum(r["type"] == "request" for r in native("faithful_two_turns"))
    assert kinds.count("tool") == 8 and kinds.count("policy_event") == 1
    assert all(e.source == SOURCE and e.run_id == "r1" for e in trace.events)
    # The events validate and survive the kernel's writer and reader.
    out = tmp_path / "events.json"
    write_events(out, renumber(trace.events))
    assert len(load_events(out)) == len(trace.events)


def test_rule1_content_verbatim() -> None:
    trace = normalize_records(lines("faithful_two_turns"), run_id="r1")
    by_id = {r["data"]["call_id"]: r["data"] for r in native("faithful_two_turns") if r["type"] == "tool_result"
             and r["turn"] == 1}
    build = next(e for e in tools(trace.events) if e.tool_call.id == "c1")
    assert build.tool_result.content == by_id["c1"]["content"] == "Exit code 3\nBUILD SUCCESS\n[stderr]\nlink failed\n"
    assert (build.tool_result.exit_code, build.tool_result.is_error, build.tool_result.status) == (3, True, "error")
    first = next(e for e in trace.events if isinstance(e, ModelInputEvent))
    assert first.messages == native("faithful_two_turns")[1]["data"]["messages"]
    assert [t["function"]["name"] for t in first.tools][:4] == ["shell", "read_file", "write_file", "edit_file"]


def test_rule2_pairing_by_native_id_and_call_without_result() -> None:
    trace = normalize_records(lines("killed_turn"), run_id="r2")
    (ev,) = tools(trace.events)
    assert ev.tool_call.name == "shell" and ev.tool_result is None
    assert ev.model_dump(mode="json", exclude_none=True)["tool_result"] is None  # null survives dumps
    assert (trace.structured_trace_status, trace.trace_complete) == ("partial", False)
    assert any("has no native result" in n for n in trace.notes)
    assert any("no completion record for turn(s) [1]" in n for n in trace.notes)
    # A result whose call is not in the log stays visible as incomplete evidence, unpaired.
    orphan = json.loads(lines("killed_turn")[3])
    orphan.update(seq=50, type="tool_result", data={"call_id": "zz9", "content": "late"})
    t2 = normalize_records([*lines("killed_turn"), json.dumps(orphan)], run_id="r2")
    assert tools(t2.events)[0].tool_result is None
    unmatched = [e for e in t2.events if isinstance(e, NativeEvent) and e.status == "unmatched_result"]
    assert len(unmatched) == 1 and unmatched[0].raw_event["data"]["call_id"] == "zz9"


def test_rule3_reused_native_id_gets_a_turn_scoped_id() -> None:
    trace = normalize_records(lines("faithful_two_turns"), run_id="r1")
    c1 = [e for e in tools(trace.events) if "c1" in (e.tool_call.id, e.tool_call.native_tool_call_id)]
    assert [(e.conversation_turn, e.tool_call.id, e.tool_call.native_tool_call_id) for e in c1] == [
        (1, "c1", None), (2, "t2:c1", "c1")]
    assert c1[0].tool_call.name == "shell" and c1[1].tool_call.name == "spawn_subagent"
    assert "pending" in c1[1].tool_result.content  # each result went to its own call
    assert len({e.tool_call.id for e in tools(trace.events)}) == len(tools(trace.events))


def test_rule4_native_log_order() -> None:
    trace = normalize_records(lines("faithful_two_turns"), run_id="r1")
    seqs = [e.source_event_seq for e in trace.events]
    assert seqs == sorted(seqs)
    # The background child ran while the parent waited: the principals interleave as logged.
    who = [e.principal_id for e in trace.events if e.conversation_turn == 2]
    first_child, last_child = who.index("child-2"), len(who) - 1 - who[::-1].index("child-2")
    assert who.index("main") < first_child < last_child < len(who) - 1 - who[::-1].index("main")


def test_rule5_principals_keep_identity_and_parent() -> None:
    trace = normalize_records(lines("faithful_two_turns"), run_id="r1")
    child_tools = [e for e in tools(trace.events) if e.principal_id != "main"]
    assert {(e.principal_id, e.parent_principal_id, e.principal_role) for e in child_tools} == {
        ("child-1", "main", "child"), ("child-2", "main", "child")}
    life = [(e.principal_id, e.action, e.child_principal_id, e.boundary_kind)
            for e in trace.events if isinstance(e, SubagentLifecycleEvent)]
    assert life == [("main", "spawn", "child-1", "foreground"), ("child-1", "finish", "child-1", "foreground"),
                    ("main", "spawn", "child-2", "background"), ("child-2", "finish", "child-2", "background")]
    delivered = [e for e in trace.events if isinstance(e, TaskCompletionEvent) and e.child_principal_id]
    assert [(e.child_principal_id, e.content, e.parent_reactivated) for e in delivered] == [
        ("child-1", "3 files", False), ("child-2", "count 5", True)]
    assert "count 5" in delivered[1].model_visible_content


def test_rule6_unknown_and_malformed_records_stay_visible() -> None:
    trace = normalize_records(lines("malformed"), run_id="r3")
    unknown = [e for e in trace.events if isinstance(e, NativeEvent) and e.native_event_type == "checkpoint"]
    assert len(unknown) == 1 and unknown[0].status == "unknown_record_type"
    assert unknown[0].raw_event["data"] == {"note": "a record type from a newer writer"}
    raw = [e for e in trace.events if isinstance(e, RawStdoutEvent)]
    assert len(raw) == 1 and raw[0].parseable is False and raw[0].parse_error and raw[0].stream_seq == 6
    assert raw[0].text == lines("malformed")[5]
    assert trace.structured_trace_status == "partial"
    assert sum(1 for n in trace.notes if n.startswith("reference-events.jsonl line")) == 2


def test_rule7_nothing_missing_is_reconstructed() -> None:
    trace = normalize_records(lines("killed_turn"), run_id="r2")
    assert not [e for e in trace.events if isinstance(e, TaskCompletionEvent)]
    assert [e.event_type for e in trace.events] == ["native_event", "model_input", "token_usage", "tool"]
    empty = normalize_records([], run_id="r0")
    assert (empty.events, empty.structured_trace_status, empty.trace_complete) == ([], "unavailable", False)


def test_rule8_process_streams_keep_their_own_source(tmp_path: Path) -> None:
    paths = RunPaths(tmp_path)
    paths.native.mkdir(parents=True)
    (paths.native / "reference-events.jsonl").write_text((FIX / "killed_turn.jsonl").read_text())
    out, err = paths.native / "turn-1.stdout", paths.native / "turn-1.stderr"
    out.write_text("not json at all\n")
    err.write_text("tt-reference: something on stderr\n")
    outcome = TurnOutcome(index=1, exit_code=None, timed_out=True, duration_s=3.0, stdout=out, stderr=err)
    trace = normalize_run(paths, [outcome], "r4")
    so = [e for e in trace.events if isinstance(e, RawStdoutEvent)]
    se = [e for e in trace.events if isinstance(e, RawStderrEvent)]
    assert [e.source for e in so] == ["native:reference/turn-1.stdout"]
    assert [(e.source, e.text, e.conversation_turn) for e in se] == [
        ("native:reference/turn-1.stderr", "tt-reference: something on stderr\n", 1)]
    assert not trace.trace_complete and "did not exit normally" in trace.notes[-1]


def test_policy_and_completion_mapping() -> None:
    trace = normalize_records(lines("faithful_two_turns"), run_id="r1")
    (pol,) = [e for e in trace.events if isinstance(e, PolicyEvent)]
    assert (pol.decision, pol.tool_call_id, pol.tool_name, pol.execution_started, pol.reason_visible_to_model) == (
        "deny", "c2", "shell", False, True)
    denied = next(e for e in tools(trace.events) if e.tool_call.id == "c2")
    assert denied.tool_result.is_error and denied.tool_result.status == "denied"
    finals = [e for e in trace.events if isinstance(e, TaskCompletionEvent) and e.child_principal_id is None]
    assert [(e.conversation_turn, e.status) for e in finals] == [(1, "completed"), (2, "completed")]
    assert finals[0].content["receipts"][0]["key"] == "receipt_id"
    asks = [e for e in trace.events if isinstance(e, NativeEvent) and e.native_event_type == "ask_user"]
    assert [e.status for e in asks] == ["answered"] and asks[0].raw_event["data"]["answer"] == "blue"
