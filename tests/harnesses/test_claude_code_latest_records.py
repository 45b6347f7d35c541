"""Claude Code 2.1.332 (the latest on npm) over its own golden captures
(``golden/claude_code/<case>@2.1.332``: the same probe flows as the pinned 2.1.220 goldens,
captured with ``python -m tests.harnesses.capture claude_code@2.1.332``). Their trace snapshots are
taken with the pinned ones by ``test_claude_code_normalize.py::test_golden_trace_snapshot``.

What 2.1.332 records differently, each pinned here on the record that shows it:

* session and sub-agent transcripts record every model request the harness built
  (``api-request-shape``: system text and tool declarations; ``api-request-blob``: one message by
  hash; ``api-request``: parameters and message hashes) — accounted as context;
* a resumed process restores the session's running totals: ``result.modelUsage`` and
  ``total_cost_usd`` count the earlier turns again, and the new ``model_usage_since_last_result``
  is the calls since the previous ``result`` — the turn's usage; per model ``thinkingTokens``;
* MCP tools are deferred behind ``ToolSearch`` (the model loads them with ``select:<name>``,
  an extra model request), and a tool result states its ``permission_decision``;
* a compound Bash command (``touch marker && rm -f other``) that ``--allowedTools Bash`` left to
  approval on 2.1.220 (denied headless) is accepted by that rule;
* the synthetic API-error message states ``api_error_status``/``api_error_type``;
* a background sub-agent's notification reaches the model inside a ``<system-reminder>``;
  stderr carries a notice about the unrecognized model alias every turn.

Every trace is ``complete`` with every record accounted; the pinned traces are unchanged.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.harnesses.conftest import Golden, load_golden
from tests.harnesses.latest_records import (
    assert_complete_and_accounted,
    assert_latest_cover_the_pinned_flows,
    latest_cases,
)
from tests.harnesses.test_claude_code_normalize import HARNESS, run, stdout_lines, tools
from tests.harnesses.test_record_accounting import normalize, record_files
from tracetrial.trace import (
    AssistantMessageEvent,
    NativeDiagnosticEvent,
    PolicyEvent,
    RawStderrEvent,
    TaskCompletionEvent,
    TokenUsageEvent,
    ToolEvent,
)

VERSION = "2.1.332"
PINNED_VERSION = "2.1.220"
LATEST = latest_cases(HARNESS, VERSION)
REQUEST_TYPES = ("api-request", "api-request-blob", "api-request-shape")


def latest(case: str) -> Golden:
    return load_golden(HARNESS, f"{case}@{VERSION}")


def pinned(case: str) -> Golden:
    return load_golden(HARNESS, case)


def jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def session_transcript(g: Golden) -> list[dict[str, Any]]:
    """The entries of the capture's only session transcript."""
    (path,) = sorted((g.native / "transcripts").glob("*.jsonl"))
    return jsonl(path)


def subagent_transcripts(g: Golden) -> dict[str, Path]:
    """Accounting file name -> sub-agent transcript."""
    return {name: path for name, path in record_files(g).items() if "/subagents/" in name}


def results(g: Golden) -> list[tuple[int, dict[str, Any]]]:
    """(turn, record) of every ``result`` record, in turn and stream order."""
    return [(turn, data) for turn in g.turns for data in map(json.loads, stdout_lines(g, turn))
            if data.get("type") == "result"]


def usage_events(g: Golden) -> list[TokenUsageEvent]:
    return [e for e in run(g).events if isinstance(e, TokenUsageEvent)]


def test_the_latest_captures_are_of_that_version_and_cover_the_pinned_flows() -> None:
    assert_latest_cover_the_pinned_flows(HARNESS, VERSION)
    assert {pinned(c.partition("@")[0]).meta["version"] for c in LATEST} == {PINNED_VERSION}


@pytest.mark.parametrize("case", LATEST)
def test_latest_trace_is_complete_and_every_record_accounted(case: str) -> None:
    assert_complete_and_accounted(load_golden(HARNESS, case))


# ----------------------------------------------------------------- request records


@pytest.mark.parametrize("case", ["subagent", "subagent_background"])
def test_a_subagent_transcripts_request_records_are_context_of_a_known_type(case: str) -> None:
    """New transcript records: each model request the sub-agent made, as the harness built it.
    They are known and accounted as context (the gateway records the request itself)."""
    g = latest(case)
    (name, path) = next(iter(subagent_transcripts(g).items()))
    entries = jsonl(path)
    requests = [d for d in entries if d["type"] == "api-request"]
    assert len(requests) == 2  # the child's two model calls (Bash, then its reply)
    shapes = {d["shapeHash"] for d in entries if d["type"] == "api-request-shape"}
    assert all(r["shapeHash"] in shapes and r["querySource"].startswith("agent:") for r in requests)
    assert not [d for f in subagent_transcripts(pinned(case)).values() for d in jsonl(f) if d["type"] in REQUEST_TYPES]
    trace = normalize(g)
    assert trace.accounting is not None
    accounted = [r for r in trace.accounting.records if r.file == name and r.type in REQUEST_TYPES]
    assert len(accounted) == len([d for d in entries if d["type"] in REQUEST_TYPES])
    assert all(r.disposition == "context" and not r.unknown_type and "model request" in (r.reason or "")
               for r in accounted)


def test_an_unknown_type_beside_the_request_records_still_makes_the_trace_partial(tmp_path: Path) -> None:
    g = latest("subagent").copy_to(tmp_path / "g")
    (name, path) = next(iter(subagent_transcripts(g).items()))
    lines = path.read_text(encoding="utf-8").splitlines()
    at = next(i for i, text in enumerate(lines) if json.loads(text)["type"] == "api-request")
    lines.insert(at + 1, json.dumps({"type": "api-request-tt-future", "sessionId": "s"}))
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    trace = normalize(g)
    assert trace.structured_trace_status == "partial"
    (diag,) = [e for e in trace.events if isinstance(e, NativeDiagnosticEvent)
               and e.diagnostic_type == "unknown_record_type"]
    assert (diag.detail["file"], diag.detail["seq"]) == (name, at + 2)


# -------------------------------------------------------------------------- usage


def _models(per_model: dict[str, Any], key: str) -> int:
    return sum(int(m[key]) for m in per_model.values())


@pytest.mark.parametrize("case", ["multi_turn_resume", "compaction", "reused_call_ids"])
def test_a_resumed_turns_usage_is_its_own_calls_not_the_sessions_running_total(case: str) -> None:
    g = latest(case)
    records = results(g)
    # 2.1.332: modelUsage and total_cost_usd run over the session (a resumed turn counts the
    # earlier turns again); model_usage_since_last_result is this result's own calls
    running: dict[str, int] = {}
    for _, data in records:
        running[data["session_id"]] = running.get(data["session_id"], 0) + _models(
            data["model_usage_since_last_result"], "inputTokens")
        assert _models(data["modelUsage"], "inputTokens") == running[data["session_id"]]
    resumed = records[1][1]
    assert _models(resumed["modelUsage"], "inputTokens") > _models(resumed["model_usage_since_last_result"],
                                                                    "inputTokens")
    events = usage_events(g)
    assert [e.conversation_turn for e in events] == g.turns
    for event, (_, data) in zip(events, records, strict=True):
        since = data["model_usage_since_last_result"]
        assert event.usage is not None
        assert (event.usage.input_tokens, event.usage.output_tokens) == (_models(since, "inputTokens"),
                                                                         _models(since, "outputTokens"))
        assert event.reported_cost_usd == pytest.approx(sum(m["costUSD"] for m in since.values()))
    # 2.1.220's modelUsage is the process's own calls: its trace takes it as it is
    old = results(pinned(case))
    assert all("model_usage_since_last_result" not in d for _, d in old)
    assert [e.usage.input_tokens for e in usage_events(pinned(case)) if e.usage] == [
        _models(d["modelUsage"], "inputTokens") for _, d in old]


def test_a_later_result_with_no_call_since_the_previous_one_adds_no_usage() -> None:
    """A background sub-agent ends its turn with two ``result`` records, both written after every
    call: the first's calls-since are all of them, the second's are none."""
    g = latest("subagent_background")
    (_, first), (_, second) = results(g)
    assert second["model_usage_since_last_result"] == {} and second["modelUsage"] == first["modelUsage"]
    (event,) = usage_events(g)
    assert event.usage is not None
    assert event.usage.input_tokens == _models(first["modelUsage"], "inputTokens")
    assert event.usage.input_tokens > first["usage"]["input_tokens"]  # the sub-agent's calls are in it


@pytest.mark.parametrize("case", ["tool_roundtrip", "subagent", "api_error"])
def test_thinking_tokens_are_the_reasoning_count_where_stated(case: str) -> None:
    (new,) = usage_events(latest(case))
    (old,) = usage_events(pinned(case))
    assert new.usage is not None and old.usage is not None
    assert new.usage.reasoning_tokens == 0  # stated per model (thinkingTokens): measured zero
    assert old.usage.reasoning_tokens is None  # 2.1.220 does not state it


def test_an_api_error_turn_reports_zero_usage_on_both_versions() -> None:
    """No call succeeded: nothing since the last result (2.1.332) / an empty modelUsage (2.1.220)."""
    for g in (latest("api_error"), pinned("api_error")):
        (event,) = usage_events(g)
        assert event.usage is not None and (event.usage.input_tokens, event.usage.output_tokens) == (0, 0)
        assert event.reported_cost_usd == 0


# ---------------------------------------------------------------- tools and policy


def test_mcp_tools_are_deferred_behind_tool_search() -> None:
    g = latest("mcp_native")
    (init,) = [d for d in map(json.loads, stdout_lines(g)) if d.get("subtype") == "init"]
    assert {"ToolSearch", "mcp__lookup__lookup"} <= set(init["tools"])
    search, alpha, boom, bash = tools(run(g))
    assert (search.tool_call.name, search.tool_call.arguments) == ("ToolSearch", {"query": "select:mcp__lookup__lookup"})
    assert search.tool_result is not None
    assert search.tool_result.content == [{"type": "tool_reference", "tool_name": "mcp__lookup__lookup"}]  # verbatim
    # the first request declared a placeholder, not the MCP tool; the one after the search declared it
    shapes = [d["shape"] for d in session_transcript(g) if d["type"] == "api-request-shape"]
    names = [[t["name"] for t in s["tools"]] for s in shapes]
    assert "mcp__lookup__lookup" not in names[0] and "DeferredToolPlaceholder" in names[0]
    assert "mcp__lookup__lookup" in names[-1]
    (delta,) = [d["attachment"] for d in session_transcript(g)
                if d["type"] == "attachment" and d["attachment"]["type"] == "deferred_tools_delta"]
    assert "mcp__lookup__lookup" in delta["addedNames"]
    # the MCP calls themselves give what they gave on 2.1.220
    old_alpha, old_boom, _ = tools(run(pinned("mcp_native")))
    for new, old in ((alpha, old_alpha), (boom, old_boom)):
        assert new.tool_result is not None and old.tool_result is not None
        assert (new.tool_call.name, new.tool_call.arguments) == (old.tool_call.name, old.tool_call.arguments)
        assert (new.tool_result.content, new.tool_result.is_error) == (old.tool_result.content,
                                                                       old.tool_result.is_error)
    assert boom.tool_result is not None and boom.tool_result.is_error is True
    assert bash.tool_call.name == "Bash"


def test_a_compound_bash_command_denied_on_the_pin_is_accepted_by_the_allow_rule() -> None:
    command = {"command": "touch marker && rm -f other"}
    old_trace, new_trace = run(pinned("mcp_native")), run(latest("mcp_native"))
    old_bash, new_bash = tools(old_trace)[-1], tools(new_trace)[-1]
    assert old_bash.tool_call.arguments == new_bash.tool_call.arguments == command
    assert old_bash.tool_result is not None and old_bash.tool_result.status == "user-rejected"
    (policy,) = [e for e in old_trace.events if isinstance(e, PolicyEvent)]
    assert (policy.decision, policy.tool_call_id) == ("denied", old_bash.tool_call.id)
    # 2.1.332 ran it: no denial, and the result states the decision that let it run
    assert new_bash.tool_result is not None
    assert (new_bash.tool_result.is_error, new_bash.tool_result.status) == (False, None)
    assert not [e for e in new_trace.events if isinstance(e, PolicyEvent)]
    (record,) = [d for d in map(json.loads, stdout_lines(latest("mcp_native"))) if d.get("type") == "user"
                 and d["message"]["content"][0]["tool_use_id"] == new_bash.tool_call.id]
    assert record["tool_result_meta"][0]["permission_decision"] == {"decision": "accept", "source": "config",
                                                                    "reason_type": "rule"}


# ---------------------------------------------------------------- errors and stderr


def test_the_api_error_message_states_its_structured_status() -> None:
    def diags(g: Golden) -> list[NativeDiagnosticEvent]:
        return [e for e in run(g).events if isinstance(e, NativeDiagnosticEvent)]

    new, old = diags(latest("api_error")), diags(pinned("api_error"))
    assert [e.diagnostic_type for e in new] == [e.diagnostic_type for e in old] == [
        "api_retry", "api_error_message", "result_error"]
    assert (new[1].detail["api_error_status"], new[1].detail["api_error_type"]) == (500, "api_error")
    assert "api_error_status" not in old[1].detail  # the pinned message states no status
    assert (new[2].detail["api_error_status"], new[2].detail["api_error_type"]) == (500, "api_error")
    assert set(old[2].detail) == {"subtype", "terminal_reason", "api_error_status", "result"}
    assert not [e for e in run(latest("api_error")).events if isinstance(e, AssistantMessageEvent)]


@pytest.mark.parametrize("case", ["tool_roundtrip", "multi_turn_resume"])
def test_every_turn_writes_a_model_alias_notice_to_stderr_kept_as_raw_stderr(case: str) -> None:
    new = [e for e in run(latest(case)).events if isinstance(e, RawStderrEvent)]
    assert [e.conversation_turn for e in new] == latest(case).turns
    assert all(e.text.startswith("[claude-code:unrecognized_model]") for e in new)
    assert not [e for e in run(pinned(case)).events if isinstance(e, RawStderrEvent)]


# -------------------------------------------------------------------- sub-agents


@pytest.mark.parametrize("case", ["subagent", "subagent_background"])
def test_subagent_principals_and_replies_are_the_same_on_both_versions(case: str) -> None:
    def shape(g: Golden) -> list[tuple[str, str, str | None]]:
        """(tool name or "reply", principal role, parent principal or source) in trace order."""
        trace = run(g)
        return [(e.tool_call.name, str(e.principal_role), e.parent_principal_id) for e in trace.events
                if isinstance(e, ToolEvent)] + [
            ("reply", str(e.principal_role), e.source) for e in trace.events
            if isinstance(e, AssistantMessageEvent) and e.content == "hi printed"]

    assert shape(latest(case)) == shape(pinned(case))
    # new on the stream: a child's line names its agent, the id of its own transcript
    g = latest(case)
    agents = {d["agent_id"] for d in map(json.loads, stdout_lines(g)) if d.get("parent_tool_use_id")}
    assert agents == {Path(n).stem.removeprefix("agent-") for n in subagent_transcripts(g)}
    assert not [d for d in map(json.loads, stdout_lines(pinned(case))) if "agent_id" in d]


def test_a_background_notification_reached_the_model_inside_a_system_reminder() -> None:
    """``model_visible_content`` is the transcript's notification entry; 2.1.332 sent it wrapped
    in a ``<system-reminder>`` behind a "[SYSTEM NOTIFICATION - NOT USER INPUT]" preface (its
    request record shows it). The probe does not look inside reminders, so its reactivated parent
    repeated "Waiting for the helper." where on 2.1.220 it answered the notification."""
    g = latest("subagent_background")
    (done,) = [e for e in run(g).events if isinstance(e, TaskCompletionEvent)]
    assert done.content == "hi printed" and done.parent_reactivated is True
    visible = done.model_visible_content
    assert visible is not None and visible.startswith("<task-notification>")
    sent = [b["text"] for d in session_transcript(g) if d["type"] == "api-request-blob"
            for b in d["message"]["content"] if isinstance(b, dict) and visible in b.get("text", "")]
    assert len(sent) == 1 and sent[0].startswith("<system-reminder>\n[SYSTEM NOTIFICATION - NOT USER INPUT]")
    replies = [e.content for e in run(g).events if isinstance(e, AssistantMessageEvent) and e.principal_role == "main"]
    assert replies == ["Waiting for the helper.", "Waiting for the helper."]
    old = [e.content for e in run(pinned("subagent_background")).events
           if isinstance(e, AssistantMessageEvent) and e.principal_role == "main"]
    assert old == ["Waiting for the helper.", "The helper printed hi."]
