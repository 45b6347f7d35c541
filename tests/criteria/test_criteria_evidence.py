"""Evidence selectors and bounded packets (SPEC §8)."""

from __future__ import annotations

import json
import time

from criteria.evidence import build_packet, packet_for
from criteria.reduce import Budget, Reducer
from criteria.rundata import load_run
from tests.criteria.archive_factory import event, gateway_request, tool_event
from tracetrial.rubric import EvidenceSelector


def _trace(*events):
    return [{"ref": f"seq:{i}", "source": "trace", "seq": i, **e} for i, e in enumerate(events, start=1)]


def _size(packet) -> int:
    return len(json.dumps(packet.records, ensure_ascii=False, sort_keys=True))


def test_short_strings_are_verbatim():
    records = _trace({"event_type": "tool", "tool_result": {"content": "exit code 2"}})
    packet = build_packet("H1", "harness", EvidenceSelector(), records)
    assert packet.records[0]["tool_result"]["content"] == "exit code 2"
    assert (packet.scanned, packet.matched, packet.returned, packet.truncated) == (1, 1, 1, False)
    assert packet.refs == ["seq:1"]


def test_long_string_keeps_boundaries_and_keyword_windows():
    middle = "x" * 200_000 + " [output truncated: 4096 bytes omitted] " + "y" * 200_000
    text = "HEAD-MARK " + middle + " CHECKSUM=abc123 TAIL-MARK"
    reducer = Reducer(match=("CHECKSUM",))
    out = reducer.reduce_string(text, Budget(string_limit=400, list_limit=10))
    assert isinstance(out, dict) and out["reduced_text"] and out["length"] == len(text)
    assert out["head"].startswith("HEAD-MARK") and out["tail"].endswith("TAIL-MARK")
    assert "CHECKSUM=abc123" in out["tail"]  # already in the tail: no separate window needed
    keywords = {w["keyword"] for w in out["windows"]}
    assert {"truncated", "omitted"} & keywords
    assert any("4096 bytes omitted" in w["text"] for w in out["windows"])
    assert len(out["windows"]) <= 4
    assert out["omitted_chars"] > 390_000


def test_keyword_windows_are_bounded_and_ordered():
    text = "".join(f"line {i} error code E{i}\n" if i % 1000 == 0 else f"line {i} ok\n" for i in range(50_000))
    out = Reducer(match=("E7000",)).reduce_string(text, Budget(string_limit=200, list_limit=5))
    assert 1 <= len(out["windows"]) <= 4
    assert [w["at"] for w in out["windows"]] == sorted(w["at"] for w in out["windows"])
    assert any("E7000" in w["text"] for w in out["windows"])


def test_catalogue_keeps_matching_entries_and_a_reduction_record():
    tools = [{"name": f"tool_{i}", "description": f"does thing {i}", "input_schema": {"type": "object"}}
             for i in range(60)]
    tools.append({"name": "mcp__tickets__export", "description": "export tickets", "input_schema": {}})
    records = [{"ref": "gateway:0", "source": "gateway", "index": 0, "tools": tools}]
    packet = build_packet("T1", "harness", EvidenceSelector(sources=["gateway"], match=["tickets"]), records)
    kept = packet.records[0]["tools"]
    assert kept[0] == tools[-1]  # the matching entry, in full
    reduction = kept[-1]
    assert reduction["reduced_collection"] and reduction["total"] == 61 and reduction["omitted"] == 60
    assert reduction["omitted_names"][:2] == ["tool_0", "tool_1"]
    assert packet.truncated is True


def test_event_types_match_and_counts():
    records = _trace(
        {"event_type": "tool", "tool_result": {"content": "all fine"}},
        {"event_type": "tool", "tool_result": {"content": "Error: disk full"}},
        {"event_type": "assistant_message", "content": "error seen"},
    )
    sel = EvidenceSelector(event_types=["tool"], match=["error"])
    packet = build_packet("H1", "harness", sel, records)
    assert (packet.scanned, packet.matched, packet.returned) == (3, 1, 1)
    assert packet.records[0]["ref"] == "seq:2" and packet.records[0]["matched_keywords"] == ["error"]


def test_max_records_keeps_both_ends():
    records = _trace(*({"event_type": "tool", "n": i} for i in range(10)))
    packet = build_packet("H1", "harness", EvidenceSelector(max_records=4), records)
    assert packet.refs == ["seq:1", "seq:2", "seq:9", "seq:10"]
    assert (packet.matched, packet.returned, packet.truncated) == (10, 4, True)


def test_packet_respects_max_chars_and_is_deterministic():
    records = _trace(*({"event_type": "tool", "tool_result": {"content": f"{i} " + "z" * 5000}} for i in range(30)))
    sel = EvidenceSelector(max_records=30, max_chars=3000)
    first = build_packet("H1", "harness", sel, records)
    assert _size(first) <= 3000 and first.truncated
    assert first.returned >= 1 and first.refs[0] == "seq:1"
    assert build_packet("H1", "harness", sel, records).model_dump() == first.model_dump()


def test_fields_selector_projects_trace_events():
    records = _trace({"event_type": "tool", "tool_call": {"name": "Bash"}, "tool_result": {"content": "x", "exit_code": 2}},
                     {"event_type": "tool", "tool_call": {"name": "Read"}})
    sel = EvidenceSelector(fields=["tool_result.exit_code"])
    packet = build_packet("H1", "harness", sel, records)
    assert packet.records == [{"ref": "seq:1", "source": "trace", "seq": 1, "event_type": "tool",
                               "fields": {"tool_result.exit_code": 2}}]


def test_fields_naming_gateway_keys_project_gateway_records():
    """A notice criterion reads what was delivered (tool_results), not every request's tool catalogue."""
    records = [{"ref": f"gateway:{i}", "source": "gateway", "index": i, "tools": [{"name": "Bash"}] * 30,
                "status": 200, **r} for i, r in enumerate([{}, {"tool_results": [{"id": "c1", "content":
                "output truncated: 9000 bytes omitted"}]}])]
    sel = EvidenceSelector(sources=["gateway"], fields=["tool_results"], match=["omitted"])
    packet = build_packet("H1", "harness", sel, records)
    assert [r["ref"] for r in packet.records] == ["gateway:1"]
    assert set(packet.records[0]) == {"ref", "source", "index", "tool_results", "matched_keywords"}
    trace_only = build_packet("H1", "harness", EvidenceSelector(sources=["gateway"], fields=["content"]), records)
    assert trace_only.returned == 2 and "tools" in trace_only.records[0]  # no gateway key named: as before


def test_empty_selection_is_flagged():
    packet = build_packet("H1", "harness", EvidenceSelector(match=["nothing-like-this"]), _trace({"event_type": "tool"}))
    assert packet.empty_selection and packet.returned == 0 and packet.scanned == 1


def test_multi_megabyte_input_is_fast_and_bounded():
    blob = ("0123456789abcdef" * 4096 + "\n") * 80  # ~5.2 MB
    big = blob[: len(blob) // 2] + "\n... 812345 bytes truncated ...\n" + blob[len(blob) // 2:] + "SHA=feedbeef"
    records = _trace(*({"event_type": "tool", "tool_result": {"content": big if i % 2 == 0 else f"small {i}"}}
                       for i in range(8)))
    sel = EvidenceSelector(match=["SHA="], max_chars=6000, max_records=8)
    start = time.perf_counter()
    packet = build_packet("C1", "harness", sel, records)
    elapsed = time.perf_counter() - start
    assert elapsed < 3.0, f"packet took {elapsed:.2f}s"
    assert len(big) > 5_000_000 and _size(packet) <= 6000
    assert packet.matched == 4 and packet.truncated
    reduced = packet.records[0]["tool_result"]["content"]
    assert reduced["length"] == len(big) and reduced["tail"].endswith("SHA=feedbeef")
    assert any("bytes truncated" in w["text"] for w in reduced["windows"])


def test_packet_from_an_archive_reads_every_source(make_pack, make_run):
    pack = make_pack(workspace={"keep.txt": "same\n"})
    run = make_run(pack, probe={"run_id": "run-0001", "task_id": pack.name, "requests": [
        {"index": 0, "wire_format": "anthropic", "kind": "main", "observation_digest": "d", "action": "shell",
         "mapped_tool": "Bash"}], "absent_capabilities": [{"action": "ask_user", "needed": True,
                                                            "declared_tools": ["Bash"]}],
        "apparatus_errors": [], "final_text": "done"})
    run.events += [tool_event("Bash", {"command": "make"}, "BUILD SUCCESS", exit_code=2), event("assistant_message", content="ok")]
    run.gateway = [gateway_request(0, tools=["Bash"]), gateway_request(1, tools=["Bash"], results=[("t", "out", None)])]
    run.workspace["status.json"] = '{"build": "failed"}'
    run.ledgers["svc"] = [{"kind": "request", "tool": "get"}]
    run.native["claude/session.jsonl"] = '{"type": "result"}\n'
    run_dir = run.build()
    data = load_run(run_dir)
    sel = EvidenceSelector(sources=["trace", "gateway", "ledger", "workspace", "native", "probe"], max_records=50,
                           max_chars=20000)
    packet = packet_for("H1", "harness", sel, data)
    refs = packet.refs
    for ref in ("seq:2", "gateway:0", "gateway:1", "ledger:svc:1", "file:status.json",
                "native:claude/session.jsonl", "probe:request:0", "probe:absent:0", "probe:final"):
        assert ref in refs
    assert "file:keep.txt" not in refs  # agent evidence is what changed against the frozen baseline
    second = next(r for r in packet.records if r["ref"] == "gateway:1")
    assert second["tools"] == {"same_as": "gateway:0"}  # identical catalogue given once


def test_multi_megabyte_run_scores_fast_with_a_bounded_packet(make_pack, make_run):
    from criteria import score_run
    from tests.criteria.archive_factory import rubric_criterion
    from tracetrial.task import load_task

    pack = make_pack(harness=[rubric_criterion("H1", "the truncation is disclosed", event_types=["tool"],
                                               match=["checksum"], max_chars=5000)])
    run = make_run(pack)
    rows = "row,value\n" * 300_000
    huge = rows + "[... 2000000 bytes omitted ...]\n" + rows + "checksum=9f8e7d\n"  # ~6 MB
    run.events.append(tool_event("Bash", {"command": "report"}, huge, exit_code=0, truncated=True))
    run.workspace["out.txt"] = "9f8e7d"
    run_dir = run.build()
    start = time.perf_counter()
    score = score_run(load_task(run_dir / "private" / "task" / pack.name), run_dir)
    elapsed = time.perf_counter() - start
    assert elapsed < 10.0, f"scoring took {elapsed:.2f}s"
    packet = json.loads((run_dir / "evidence" / "packets" / "H1.json").read_text())
    assert len(json.dumps(packet["records"], ensure_ascii=False, sort_keys=True)) <= 5000
    content = packet["records"][0]["tool_result"]["content"]
    assert content["length"] == len(huge) and "checksum=9f8e7d" in content["tail"]
    assert any("omitted" in w["text"] for w in content["windows"])
    assert next(v for v in score.verdicts if v.id == "H1").reason == "unscored: no judge configured"
