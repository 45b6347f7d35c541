"""normalized_trace masks only what is volatile; compare_runs names each difference."""

from __future__ import annotations

import copy
import hashlib
import json
from pathlib import Path
from typing import Any

from ci.determinism import compare_runs, issued_values, normalized_trace, verdict_vector
from tests.ci.conftest import F, T, write_run

RUN = "O1-ticket-close-error-001--codex-probe--0123456789"
TAG = hashlib.sha256(RUN.encode()).hexdigest()[:8]
SESSION = "01a22bd1-25ad-7e43-b85d-ccab46538268"
SCRATCH = "/tmp/tt-O1-ticket-cl-ab_cd123"


def trace(run: str = RUN, session: str = SESSION, scratch: str = SCRATCH, code: str = "E-LOCKED-049178",
          tag: str = TAG, wall: str = "0.0132", ts: str = "2026-11-30T09:37:37.192340Z") -> list[dict[str, Any]]:
    """A small codex-like trace with every kind of volatile field."""
    env = {"schema_version": 1, "timestamp": ts, "run_id": run}
    return [
        {**env, "seq": 1, "event_type": "run_started", "task_id": "O1-ticket-close-error-001"},
        {**env, "seq": 2, "event_type": "native_event", "session_id": session,
         "raw_event": {"type": "thread.started", "thread_id": session, "cwd": f"{scratch}/workspace",
                       "memory": f"/root/.claude/projects{scratch.replace('/', '-').replace('_', '-')}-workspace/",
                       "url": f"http://127.0.0.1:50909/tt/probe/{run}/v1"}},
        {**env, "seq": 3, "event_type": "tool", "session_id": session,
         "tool_call": {"id": f"call_tt_{tag}_1", "name": "close_ticket", "arguments": {"ticket_id": "TCK-1042"}},
         "tool_result": {"content": f"Chunk ID: 759b7e\nWall time: {wall} seconds\n"
                                    f'{{"error": {{"code": "{code}"}}}}',
                         "is_error": True, "duration": 0.034, "exit_code": None},
         "raw_event": {"payload": {"id": f"fc_call_tt_{tag}_1", "ts": ts, "duration_ms": 12,
                                   "uuid": "de43d7d5-a342-4868-85d5-623400e49b62"}}},
        {**env, "seq": 4, "event_type": "assistant_message", "message_id": "msg_tt_" + "a" * 24,
         "content": f"Closing TCK-1042 failed with error code {code}."},
    ]


def test_volatile_fields_are_masked_and_runs_compare_equal() -> None:
    other_run = "O1-ticket-close-error-001--codex-probe--fedcba9876"
    b = trace(run=other_run, session="01a22bd1-a994-7881-a915-23154e9e992a", scratch="/tmp/tt-O1-ticket-cl-zz9_x8w7",
              code="E-LOCKED-536053", tag=hashlib.sha256(other_run.encode()).hexdigest()[:8], wall="0.0000",
              ts="2026-11-30T10:00:00.000001Z")
    b[3]["message_id"] = "msg_tt_" + "b" * 24
    b[2]["raw_event"]["payload"]["uuid"] = "fa61b2ad-2afb-42f3-b98b-36360d232b98"
    b[2]["tool_result"]["duration"] = 0.07
    na = normalized_trace(trace(), {"E-LOCKED-049178": "lock_code"})
    nb = normalized_trace(b, {"E-LOCKED-536053": "lock_code"})
    assert na == nb
    tool = na[2]
    assert tool["tool_call"]["id"] == "call_tt_<tag>_1"  # the probe's counter survives
    assert tool["tool_result"]["content"] == ('Chunk ID: <chunk>\nWall time: <wall> seconds\n'
                                              '{"error": {"code": "<issued:lock_code>"}}')
    assert tool["tool_result"]["duration"] == "<duration>" and tool["tool_result"]["exit_code"] is None
    assert na[1]["raw_event"]["cwd"] == "<scratch>/workspace"
    assert na[1]["raw_event"]["memory"] == "/root/.claude/projects<scratch>-workspace/"
    assert na[1]["raw_event"]["url"] == "http://127.0.0.1:<port>/tt/probe/<run>/v1"
    assert na[1]["session_id"] == na[1]["raw_event"]["thread_id"] == "<session-1>"
    assert na[0]["timestamp"] == "<ts>" and na[0]["run_id"] == "<run>"
    assert na[3]["message_id"] == "msg_tt_<probe-id-1>"


def test_content_is_never_masked() -> None:
    changed = trace()
    changed[2]["tool_call"]["arguments"]["ticket_id"] = "TCK-1043"
    assert normalized_trace(changed) != normalized_trace(trace())
    relayed = trace()
    relayed[2]["tool_result"]["is_error"] = False
    assert normalized_trace(relayed) != normalized_trace(trace())
    # A harness that drops the issued code from its answer differs even with the code masked.
    dropped = trace()
    dropped[3]["content"] = "Closing TCK-1042 failed."
    assert normalized_trace(dropped, {"E-LOCKED-049178": "lock_code"}) != \
        normalized_trace(trace(), {"E-LOCKED-049178": "lock_code"})
    # A time-named key with a non-time value is content.
    ev = [{"seq": 1, "run_id": RUN, "timestamp": "2026-11-30T09:37:37Z", "event_type": "tool",
           "tool_call": {"id": "x", "name": "remind", "arguments": {"time": "after lunch", "duration": None}}}]
    assert normalized_trace(ev)[0]["tool_call"]["arguments"] == {"time": "after lunch", "duration": None}
    assert normalized_trace(ev)[0]["tool_call"]["id"] == "x"


def test_numbered_placeholders_keep_identity() -> None:
    u1, u2 = "de43d7d5-a342-4868-85d5-623400e49b62", "fa61b2ad-2afb-42f3-b98b-36360d232b98"
    ev = [{"seq": i, "run_id": RUN, "timestamp": "2026-11-30T09:37:37Z", "event_type": "native_event",
           "raw_event": {"uuid": u}} for i, u in enumerate([u1, u2, u1], start=1)]
    assert [e["raw_event"]["uuid"] for e in normalized_trace(ev)] == ["<uuid-1>", "<uuid-2>", "<uuid-1>"]
    swapped = copy.deepcopy(ev)
    swapped[2]["raw_event"]["uuid"] = u2  # "same id twice" vs "two ids" is a real difference
    assert normalized_trace(swapped) != normalized_trace(ev)


def test_verdict_vector_states() -> None:
    combined = {"verdicts": [{"id": "H1", "layer": "harness", "passed": True},
                             {"id": "A1", "layer": "agent", "passed": None},
                             {"id": "A2", "layer": "agent", "passed": False}]}
    assert verdict_vector(combined) == [("harness", "H1", "pass"), ("agent", "A1", "unscored"),
                                        ("agent", "A2", "fail")]


def test_issued_values_come_from_the_ledger(tmp_path: Path) -> None:
    ledgers = tmp_path / "private" / "ledgers"
    ledgers.mkdir(parents=True)
    (ledgers / "tickets.jsonl").write_text("\n".join(json.dumps(r) for r in [
        {"seq": 1, "kind": "transition", "detail": {"op": "init"}},
        {"seq": 7, "kind": "issued", "detail": {"name": "lock_code", "value": "E-LOCKED-049178"}},
        {"seq": 9, "kind": "issued", "detail": {"name": "receipts", "value": ["CLS-AB12CD34EF", "CLS-ZZ12CD34EF"]}},
    ]) + "\n", encoding="utf-8")
    assert issued_values(tmp_path) == {"E-LOCKED-049178": "lock_code", "CLS-AB12CD34EF": "receipts",
                                       "CLS-ZZ12CD34EF": "receipts"}


def test_compare_runs_reports_verdict_and_trace_differences(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    for out in (a, b):
        write_run(out, "E1-a-001", "codex", {"H1": T}, {"A1": T})
    write_run(a, "E1-b-001", "codex", {"H1": T}, {"A1": T})
    write_run(b, "E1-b-001", "codex", {"H1": F}, {"A1": T})
    write_run(b, "E1-c-001", "codex", {"H1": T}, {"A1": T})
    events = b / "traces" / "E1-a-001" / "probe" / "codex" / "events.json"
    data = json.loads(events.read_text())
    data.append({**data[0], "seq": 2, "event_type": "run_finished", "trace_complete": True})
    events.write_text(json.dumps(data))
    assert compare_runs(a, a) == []
    diffs = compare_runs(a, b)
    assert diffs[0] == f"E1-c-001/probe/codex: only in {b}"
    assert "E1-a-001/probe/codex: event sequence: insert a[2:2] [] vs b[2:3] ['run_finished']" in diffs
    assert any(d.startswith("E1-b-001/probe/codex: verdicts differ: [('harness', 'H1', 'pass')") for d in diffs)


def test_native_ids_log_times_and_text_durations_are_masked() -> None:
    run = "E6-healthcheck-timeout-001--claude-code-probe--0123456789"
    env = {"schema_version": 1, "timestamp": "2026-11-30T09:37:37Z", "run_id": run}
    events = [
        {**env, "seq": 1, "event_type": "run_started", "task_id": "E6-healthcheck-timeout-001"},
        {**env, "seq": 2, "event_type": "subagent_lifecycle", "action": "spawn",
         "raw_event": {"task_id": "bxizuwrun", "patch": {"status": "killed", "end_time": 1796031730441}}},
        {**env, "seq": 3, "event_type": "tool", "tool_call": {"id": "t1", "name": "Bash", "arguments": {}},
         "tool_result": {"content": "moved to the background (ID: bxizuwrun). Output: /tmp/tt-ci-x/out/traces/"
                                    "E6-healthcheck-timeout-001/probe/claude_code/native/home/tool-results/"
                                    "bq3bdr2d5.txt\n<usage>tool_uses: 1\nduration_ms: 117</usage>"}},
        {**env, "seq": 4, "event_type": "raw_stderr", "text": "2026-11-30T09:42:21.532341Z ERROR codex_core: x\n"},
        {**env, "seq": 5, "event_type": "tool", "tool_call": {"id": "t2", "name": "exec", "arguments": {}},
         "tool_result": {"content": "Process running with session ID 69587\nheartbeat 1"}},
        {**env, "seq": 6, "event_type": "tool",
         "tool_call": {"id": "t3", "name": "write_stdin", "arguments": {"session_id": 69587, "chars": ""}},
         "tool_result": {"content": "token ST-0123456789"}},
    ]
    n = normalized_trace(events, patterns=[r"ST-[0-9a-f]{10}"])
    assert n[0]["task_id"] == "E6-healthcheck-timeout-001"  # the benchmark's task id is content
    assert n[1]["raw_event"] == {"task_id": "<native-id-1>", "patch": {"status": "killed", "end_time": "<ts>"}}
    assert n[2]["tool_result"]["content"] == (
        "moved to the background (ID: <native-id-1>). Output: <output>/traces/E6-healthcheck-timeout-001/probe/"
        "claude_code/native/home/tool-results/<file>\n<usage>tool_uses: 1\nduration_ms: <duration></usage>")
    assert n[3]["text"] == "<ts> ERROR codex_core: x\n"
    assert n[4]["tool_result"]["content"] == "Process running with session ID <exec-1>\nheartbeat 1"
    assert n[5]["tool_call"]["arguments"] == {"session_id": "<exec-1>", "chars": ""}
    assert n[5]["tool_result"]["content"] == "token <volatile>"
