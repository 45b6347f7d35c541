"""OpenClaw 2026.9.6 sub-agents in the normalizer, over real records (openclaw_subagent_records/):

* ``background_child``: L4-pending-report-001 under the probe — one background child
  (``sessions_spawn`` through ``tool_call``) that runs a ~20 s job, announced back to the parent;
* ``two_children``: O3-shard-seals-002 — two foreground children in turn (spawn, ``sessions_yield``,
  ``subagents list``), then the parent's own command.

Each is the ``native/`` folder of a real Gateway-backed cell (turn stdout, the session-store dumps);
the heavy trajectory rows (compiled context, prompts, metadata) are trimmed, every other row is
verbatim (``capture.json`` says which run). Re-capture: run the two cells with
``--tt-harness openclaw`` and copy ``native/turn-1.std*`` and ``native/openclaw/main/{transcript_events,
session_windows,trajectory_runtime_events}.jsonl`` (trimmed the same way).

What must hold (O3 provenance, L4 pending/finished state): a child's tool calls belong to their own
child principal (child of main, one per child, siblings distinct); the spawn result records the
child pending before the parent answers; the child's start and end are lifecycle records at native
time with its last reply; the parent's announce run stays in the turn; and defects injected into
the real records (no session key, a refused spawn) change exactly that.
"""

from __future__ import annotations

import json
import shutil
from datetime import UTC, datetime
from pathlib import Path

import pytest

from harnesses.base import NormalizedTrace
from harnesses.native import turn_files
from harnesses.openclaw.normalize import normalize
from tracetrial.trace import SubagentLifecycleEvent, TaskCompletionEvent, ToolEvent

RECORDS = Path(__file__).with_name("openclaw_subagent_records")
AT = datetime(2026, 12, 2, tzinfo=UTC)


def native(case: str) -> Path:
    return RECORDS / case / "native"


def session_of(case: str) -> str:
    return str(json.loads((RECORDS / case / "capture.json").read_text(encoding="utf-8"))["turns"][0]["session_id"])


def run(case: str, root: Path | None = None) -> NormalizedTrace:
    base = root or native(case)
    return normalize(turn_files(base, [1]), base / "openclaw", "run-oc-sub", sessions={1: session_of(case)}, at=AT)


def copy(case: str, tmp_path: Path) -> Path:
    dest = tmp_path / case
    shutil.copytree(native(case), dest)
    return dest


def tools(trace: NormalizedTrace) -> list[ToolEvent]:
    return [e for e in trace.events if isinstance(e, ToolEvent)]


def lifecycle(trace: NormalizedTrace) -> list[SubagentLifecycleEvent]:
    return [e for e in trace.events if isinstance(e, SubagentLifecycleEvent)]


def commands(trace: NormalizedTrace, needle: str) -> list[ToolEvent]:
    return [e for e in tools(trace) if e.tool_call.name == "exec" and needle in json.dumps(e.tool_call.arguments)]


@pytest.mark.parametrize("case", ["background_child", "two_children"])
def test_records_are_complete_and_every_event_is_in_the_turn(case: str) -> None:
    trace = run(case)
    assert trace.structured_trace_status == "complete"
    assert {e.conversation_turn for e in trace.events} == {1}  # the announce and child runs included


def test_the_child_s_command_is_the_child_s_principal() -> None:
    trace = run("background_child")
    spawn = next(e for e in tools(trace) if e.tool_call.name == "sessions_spawn")
    assert spawn.principal_id == "main" and spawn.principal_role == "main"
    (job,) = commands(trace, "slow_job.py")
    assert job.principal_role == "child" and job.parent_principal_id == "main"
    # the child is named after the native id of the spawn call that created it
    assert job.principal_id == (spawn.tool_call.native_tool_call_id or spawn.tool_call.id) != "main"
    assert "reconciliation value: RECON-" in str(job.tool_result.content if job.tool_result else "")


def test_siblings_get_distinct_principals_and_the_parent_keeps_main() -> None:
    trace = run("two_children")
    spawns = [e for e in tools(trace) if e.tool_call.name == "sessions_spawn"]
    (east,), (west,), (index,) = (commands(trace, f"seal.py {s}") for s in ("east", "west", "index"))
    assert index.principal_id == "main" and index.principal_role == "main"
    assert {east.principal_role, west.principal_role} == {"child"}
    assert east.principal_id != west.principal_id
    assert [east.principal_id, west.principal_id] == [s.tool_call.native_tool_call_id or s.tool_call.id for s in spawns]
    assert east.parent_principal_id == west.parent_principal_id == "main"
    # the dispatcher's own calls around the spawn stay the parent's
    for e in tools(trace):
        if e.tool_call.name in ("tool_describe", "sessions_yield", "subagents"):
            assert e.principal_id == "main"


def test_pending_then_running_then_completed_with_the_child_s_reply() -> None:
    trace = run("background_child")
    child = next(e.principal_id for e in commands(trace, "slow_job.py"))
    records = [e for e in lifecycle(trace) if e.child_principal_id == child]
    assert [(e.action, e.status) for e in records] == [("spawned", "pending"), ("started", "running"),
                                                       ("completed", "completed")]
    spawned, started, done = records
    assert spawned.principal_id == "main" and spawned.pending_child_ids == [child]
    assert started.principal_role == done.principal_role == "child"
    # native times: pending at the spawn result, completed after the ~20 s job
    t = [datetime.fromisoformat(str(e.source_timestamp)) for e in records]
    assert t[0] <= t[1] < t[2] and (t[2] - t[1]).total_seconds() > 15
    (completion,) = [e for e in trace.events if isinstance(e, TaskCompletionEvent) and e.child_principal_id == child]
    assert completion.status == "completed"
    assert "reconciliation value: RECON-" in str(completion.content)


def test_the_pending_record_precedes_the_parent_s_first_answer() -> None:
    trace = run("background_child")
    events = trace.events
    pending = next(i for i, e in enumerate(events) if isinstance(e, SubagentLifecycleEvent) and e.status == "pending")
    answer = next(i for i, e in enumerate(events) if e.event_type == "assistant_message" and e.principal_id == "main"
                  and i > pending and getattr(e, "content", None))
    assert pending < answer
    assert not any(isinstance(e, SubagentLifecycleEvent) and e.status == "completed" for e in events[:answer])


def _rewrite(path: Path, edit) -> None:  # type: ignore[no-untyped-def]
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    path.write_text("".join(json.dumps(edit(r)) + "\n" for r in rows), encoding="utf-8")


def test_without_the_child_s_session_key_its_command_falls_back_to_main(tmp_path: Path) -> None:
    """The principal comes from OpenClaw's own session key: a store that does not name the child
    session a sub-agent gives no child principal (nothing is guessed)."""
    root = copy("background_child", tmp_path)
    main_dir = root / "openclaw" / "main"

    def unkey(row: dict) -> dict:  # type: ignore[type-arg]
        text = json.dumps(row).replace(":subagent:", ":explicit:")
        return json.loads(text)  # type: ignore[no-any-return]

    _rewrite(main_dir / "session_windows.jsonl", unkey)
    _rewrite(main_dir / "trajectory_runtime_events.jsonl", unkey)
    trace = run("background_child", root)
    (job,) = commands(trace, "slow_job.py")
    assert job.principal_id == "main" and job.principal_role == "main"
    assert not any(e.principal_role == "child" for e in trace.events)


def test_a_refused_spawn_is_a_failed_spawn_not_a_pending_child(tmp_path: Path) -> None:
    root = copy("background_child", tmp_path)
    refused = json.dumps({"status": "error", "error": "published reply runtime missing for main"})

    def refuse(row: dict) -> dict:  # type: ignore[type-arg]
        msg = (row.get("event") or {}).get("message") or {}
        if msg.get("role") == "toolResult" and "childSessionKey" in json.dumps(msg.get("content")):
            msg["content"] = [{"type": "text", "text": refused}]
            msg["details"] = {"status": "error", "error": "published reply runtime missing for main"}
            msg["isError"] = True
        return row

    _rewrite(root / "openclaw" / "main" / "transcript_events.jsonl", refuse)
    trace = run("background_child", root)
    spawn_records = [e for e in lifecycle(trace) if e.principal_id == "main"]
    assert [(e.action, e.status) for e in spawn_records] == [("spawn_failed", "failed")]
    assert spawn_records[0].pending_child_ids is None
