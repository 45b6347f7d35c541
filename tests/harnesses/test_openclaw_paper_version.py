"""OpenClaw 2026.6.9 (the paper's version, the pin) over its own golden captures
(``golden/openclaw/<case>``: the same probe flows as the goldens of the newer named version
2026.9.6, ``golden/openclaw/<case>@2026.9.6``, captured through the real adapter with
``python -m tests.harnesses.capture openclaw/<case>``;
on a loaded machine give the cases a longer deadline, as these were: ``deadline_s=300``).

2026.6.9 has no ``agent exec``: every turn is ``agent --local --session-id <id>`` with the prompt
as ``--message=<text>``, and the session lives in JSONL files (``native/openclaw/main/sessions/``:
``<sid>.jsonl`` the transcript, ``<sid>.trajectory.jsonl`` the runtime trajectory). Its
``--local`` result carries no ``terminalReceipt``; the turn's run is the one whose
``trace.metadata`` record holds the result's system-prompt report, and transcript lines (no
``__openclaw.runId``) join the run whose span of the native clock holds them. Every record is
accounted; the traces of the successful flows are ``complete``. A failed run prints nothing on
stdout (exit 1, the error on stderr): its run joins the turn by the session id and its
``session.ended`` record ends the turn (trace ``partial`` by those notes, never unfinished).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from harnesses.openclaw.normalize import SESSIONS_DIR, SRC_STDOUT, SRC_TRAJECTORY, SRC_TRANSCRIPT
from tests.harnesses.conftest import Golden, golden_cases, load_golden
from tests.harnesses.test_openclaw_normalize import run, tools
from tests.harnesses.test_record_accounting import assert_accounted, normalize
from tracetrial.trace import (
    ContextCompactionEvent,
    AssistantMessageEvent,
    NativeDiagnosticEvent,
    NativeEvent,
    RawStdoutEvent,
    TaskCompletionEvent,
)

HARNESS = "openclaw"
VERSION = "2026.6.9"
#: The newer named version whose captures the pin's are compared with.
NEWER = "2026.9.6"
PAPER = [c for c in golden_cases(HARNESS) if "@" not in c]
#: Flows captured on the newer version only: a turn killed by a task's interrupt (newer than the
#: paper-version captures; the pin's interrupt behaviour is measured by the L7 packs' cells).
NEWER_ONLY = {"interrupted_turn"}
PINNED = [c.partition("@")[0] for c in golden_cases(HARNESS)
          if c.endswith(f"@{NEWER}") and c.partition("@")[0] not in NEWER_ONLY]
#: Cases whose run fails (HTTP 500 from the probe): 2026.6.9 gives up after three requests.
FAILED = {"api_error", "api_error_persistent"}
#: Runs that end with exit 1 and nothing on stdout: the failed ones, and the compaction flow — the
#: turn's work is done and auto-compaction succeeded, then 2026.6.9's post-run CLI compaction fails
#: ("CLI transcript compaction failed …: Already compacted", stderr) and the process exits 1.
NO_RESULT = FAILED | {"compaction"}


def session_files(g: Golden) -> list[Path]:
    return sorted((g.native / HARNESS).glob(f"*/{SESSIONS_DIR}/*.jsonl"))


def invocations(g: Golden) -> list[dict[str, Any]]:
    return [json.loads((g.native / f"turn-{t}.invocation.json").read_text(encoding="utf-8")) for t in g.turns]


def test_the_captures_are_of_that_version_and_cover_the_pinned_flows() -> None:
    assert PAPER, f"no golden capture of openclaw@{VERSION}"
    assert sorted(PAPER) == sorted(PINNED)  # the same flows on both versions
    for case in PAPER:
        g = load_golden(HARNESS, case)
        assert g.meta["version"] == VERSION  # captured as the named version openclaw@2026.6.9, before it became the pin
        # session files only: 2026.6.9 keeps no SQLite session store
        assert session_files(g) and not list((g.native / HARNESS).glob("*/*_events.jsonl"))


@pytest.mark.parametrize("case", PAPER)
def test_every_record_is_accounted_and_the_successful_flows_are_complete(case: str) -> None:
    g = load_golden(HARNESS, case)
    trace = normalize(g)
    assert_accounted(g, trace)
    acc = trace.accounting
    assert acc is not None and not acc.problems() and not [r for r in acc.records if r.unknown_type]
    assert trace.trace_complete  # every turn ended (a failed run by its own end record)
    if case in NO_RESULT:
        assert trace.structured_trace_status == "partial"
        assert [n.split(";")[0] for n in trace.notes] == ["turn 1: no run id on stdout", "turn 1: no result on stdout"]
    else:
        assert trace.structured_trace_status == "complete" and not trace.notes


@pytest.mark.parametrize("case", PAPER)
def test_every_turn_is_an_embedded_turn_with_the_prompt_as_one_argument(case: str) -> None:
    g = load_golden(HARNESS, case)
    for inv in invocations(g):
        argv = inv["argv"]
        assert argv[1:3] == ["agent", "--local"] and "exec" not in argv and "--message-file" not in argv
        assert argv[-1].startswith("--message=") and argv[argv.index("--session-id") + 1]


def test_a_resumed_turn_continues_the_named_session_and_each_turn_has_its_own_run() -> None:
    g = load_golden(HARNESS, "multi_turn_resume")
    trace = run(g)
    sessions = [t["session_id"] for t in g.meta["turns"]]
    assert sessions[0] == sessions[1] != sessions[2]
    assert [i["mode"] for i in invocations(g)] == ["new", "resume", "new"]
    assert [i["argv"][i["argv"].index("--session-id") + 1] for i in invocations(g)] == sessions
    calls = tools(trace)
    assert [(c.conversation_turn, c.session_id) for c in calls] == [(1, sessions[0]), (2, sessions[0]), (3, sessions[2])]
    assert calls[2].tool_result is not None and calls[2].tool_result.content == "one\ntwo"
    # each turn's run joined by its prompt report (the --local result names no run id)
    started = [e for e in trace.events if isinstance(e, NativeEvent) and e.native_event_type == "trajectory/session.started"]
    assert [e.conversation_turn for e in started] == [1, 2, 3]
    assert len({e.raw_event["runId"] for e in started}) == 3
    for turn, event in zip(g.turns, started, strict=True):
        report = json.loads((g.native / f"turn-{turn}.stdout").read_text(encoding="utf-8"))["meta"]["systemPromptReport"]
        meta = [e for e in trace.events if isinstance(e, NativeEvent) and e.native_event_type == "trajectory/trace.metadata"
                and e.raw_event["runId"] == event.raw_event["runId"]]
        assert meta[0].raw_event["data"]["prompting"]["systemPromptReport"]["generatedAt"] == report["generatedAt"]
    # a transcript line joins the turn whose run's span holds its time (the session header and
    # model snapshot, written just before the run starts, join the run after them)
    transcript = [e for e in trace.events if e.source == SRC_TRANSCRIPT]
    assert [e.conversation_turn for e in transcript if e.session_id == sessions[0]] == [1] * 9 + [2] * 5
    done = [e for e in trace.events if isinstance(e, TaskCompletionEvent)]
    assert [(e.conversation_turn, e.status, e.content["final_text"]) for e in done] == [
        (1, "stop", "Wrote one."), (2, "stop", "Appended two."), (3, "stop", "a.txt has one and two.")]
    assert all("model_calls" not in e.content for e in done if e.content)  # 2026.6.9 states no assistantTurns


@pytest.mark.parametrize("case", ["tool_roundtrip", "nonzero_exit", "large_output"])
def test_shell_results_are_the_pinned_versions_text_and_exit_code(case: str) -> None:
    """Same flows, same tool results; 2026.6.9 also flags a nonzero exit as ``isError`` (2026.9.6
    does not: its result says the code only in the exec details)."""
    pinned = tools(run(load_golden(HARNESS, f"{case}@{NEWER}")))
    paper = tools(run(load_golden(HARNESS, case)))
    assert [(c.tool_call.name, c.tool_call.arguments) for c in paper] == [
        (c.tool_call.name, c.tool_call.arguments) for c in pinned]
    for old, new in zip(pinned, paper, strict=True):
        assert old.tool_result is not None and new.tool_result is not None
        assert (new.tool_result.content, new.tool_result.exit_code) == (old.tool_result.content, old.tool_result.exit_code)
        assert new.tool_result.is_error is (new.tool_result.exit_code != 0) and old.tool_result.is_error is False


def test_mcp_tools_are_declared_directly_with_plain_results_and_arguments_kept() -> None:
    """2026.6.9 has no Tool Search in front of MCP tools: the model calls ``lookup__lookup``
    itself, the arguments are recorded as sent (2026.9.6 masks a ``key`` argument) and the
    result is the server's text without the untrusted-content framing."""
    calls = tools(run(load_golden(HARNESS, "mcp_native")))
    assert [c.tool_call.name for c in calls] == ["lookup__lookup", "lookup__lookup", "exec"]
    alpha, boom, shell = calls
    assert (alpha.tool_call.arguments, boom.tool_call.arguments) == ({"key": "alpha"}, {"key": "boom"})
    (block,) = [b for b in alpha.raw_event["message"]["content"] if b.get("id") == alpha.tool_call.id]
    assert block["name"] == "lookup__lookup"  # a direct call, no dispatcher to unwrap
    assert alpha.tool_result is not None and boom.tool_result is not None and shell.tool_result is not None
    assert (alpha.tool_result.content, alpha.tool_result.is_error) == ("value-of-alpha", False)
    assert (boom.tool_result.content, boom.tool_result.is_error) == ("lookup failed: no key 'boom'", True)
    assert shell.tool_result.exit_code == 0


@pytest.mark.parametrize("case", sorted(FAILED))
def test_a_failed_run_prints_no_result_and_its_own_end_record_ends_the_turn(case: str) -> None:
    """Five (api_error) or fifty (persistent) HTTP 500s: 2026.6.9 stops after three requests and
    exits 1 with nothing on stdout (2026.9.6 retried until the sixth request succeeded in
    ``api_error``, and printed an error envelope when it gave up)."""
    g = load_golden(HARNESS, case)
    assert (g.meta["turns"][0]["exit_code"], g.meta["model_requests"]) == (1, 3)
    assert (g.native / "turn-1.stdout").read_text(encoding="utf-8") == ""
    assert "FailoverError: HTTP 500" in (g.native / "turn-1.stderr").read_text(encoding="utf-8")
    trace = run(g)
    assert not [e for e in trace.events if isinstance(e, AssistantMessageEvent)]
    (error,) = [e for e in trace.events if isinstance(e, NativeDiagnosticEvent)]
    assert error.diagnostic_type == "assistant_error" and "injected by the TraceTrial probe" in error.detail
    (ended,) = [e for e in trace.events if isinstance(e, NativeEvent) and e.native_event_type == "trajectory/session.ended"]
    assert (ended.conversation_turn, ended.status) == (1, "error")
    assert not [e for e in trace.events if isinstance(e, TaskCompletionEvent)]  # no result, no completion claim
    assert {e.conversation_turn for e in trace.events if e.source in (SRC_TRANSCRIPT, SRC_TRAJECTORY)} == {1}
    assert isinstance(next(e for e in trace.events if e.source == SRC_STDOUT), RawStdoutEvent)


def _drop_trace_metadata(g: Golden) -> None:
    """Delete every ``trace.metadata`` trajectory record (the records naming the prompt reports)."""
    for path in session_files(g):
        if path.name.endswith(".trajectory.jsonl"):
            kept = [line for line in path.read_text(encoding="utf-8").splitlines()
                    if json.loads(line).get("type") != "trace.metadata"]
            path.write_text("\n".join(kept) + "\n", encoding="utf-8")


def test_without_the_prompt_reports_runs_of_one_session_are_never_given_to_turns_by_order(tmp_path: Path) -> None:
    g = load_golden(HARNESS, "multi_turn_resume").copy_to(tmp_path / "g")
    _drop_trace_metadata(g)
    trace = normalize(g)
    assert_accounted(g, trace)
    # turns 1 and 2 share a session: nothing native tells their runs apart, so both stay outside;
    # turn 3's session has one run, joined by the session id the adapter recorded
    unmatched = [e for e in trace.events if isinstance(e, NativeDiagnosticEvent) and e.diagnostic_type == "unmatched_run"]
    assert len(unmatched) == 2 and all(e.conversation_turn is None for e in unmatched)
    assert {e.conversation_turn for e in trace.events if e.source == SRC_TRAJECTORY} == {None, 3}
    assert any("joined by its session id" in n for n in trace.notes) and trace.structured_trace_status == "partial"


def test_a_transcript_line_without_a_time_stays_in_its_place(tmp_path: Path) -> None:
    g = load_golden(HARNESS, "tool_roundtrip").copy_to(tmp_path / "g")
    (transcript,) = [p for p in session_files(g) if not p.name.endswith(".trajectory.jsonl")]
    lines = [json.loads(line) for line in transcript.read_text(encoding="utf-8").splitlines()]
    lines[4].pop("timestamp")  # the user message
    transcript.write_text("".join(json.dumps(d) + "\n" for d in lines), encoding="utf-8")
    trace = normalize(g)
    assert_accounted(g, trace)
    seqs = [e.source_event_seq or 0 for e in trace.events if e.source == SRC_TRANSCRIPT]
    assert seqs == sorted(seqs) and 5 in seqs
    assert {e.conversation_turn for e in trace.events if e.source == SRC_TRANSCRIPT} == {1}
    assert trace.structured_trace_status == "complete"


def test_the_compaction_flow_is_recorded_and_its_post_run_failure_is_the_harnesss_own() -> None:
    """2026.6.9 compacts at its threshold (one summary request, a ``compaction`` transcript record)
    and then exits 1: its CLI budget compaction refuses to run again ("Already compacted")."""
    g = load_golden(HARNESS, "compaction")
    assert g.meta["turns"][0]["exit_code"] == 1
    assert "CLI transcript compaction failed" in (g.native / "turn-1.stderr").read_text(encoding="utf-8")
    trace = run(g)
    (compacted,) = [e for e in trace.events if isinstance(e, ContextCompactionEvent)]
    assert compacted.native_event_type == "transcript/compaction"
