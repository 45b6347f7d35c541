"""Codex 0.171.0 (the latest the registry serves) over its own golden captures
(``golden/codex/<case>@0.171.0``, the same probe flows as the pinned goldens, captured with
``python -m tests.harnesses.capture codex@0.171.0``).

0.171.0 writes a top-level rollout record ``token_usage_record`` after every model response
(``payload.usage`` that response's usage, ``response_id``, running turn/thread totals). It maps to
a ``token_usage`` event of scope ``call``; the traces of every case are ``complete`` with every
record accounted. The pinned 0.145.0 rollouts carry no such record, so their traces are unchanged
(their snapshots are the pinned ones in ``__snapshots__/test_codex_normalize``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from harnesses.codex.normalize import SRC_ROLLOUT
from tests.harnesses.conftest import load_golden
from tests.harnesses.latest_records import (
    assert_complete_and_accounted,
    assert_latest_cover_the_pinned_flows,
    latest_cases,
    pinned_cases,
)
from tests.harnesses.test_codex_normalize import run
from tests.harnesses.test_record_accounting import normalize
from tracetrial.trace import NativeDiagnosticEvent, TokenUsageEvent, ToolEvent

VERSION = "0.171.0"
LATEST = latest_cases("codex", VERSION)
PINNED = pinned_cases("codex")


def usage_records(case: str) -> list[tuple[str, int, dict[str, Any]]]:
    """(rollout file, line, payload) of every ``token_usage_record`` of a capture."""
    g = load_golden("codex", case)
    out = []
    for path in sorted((g.native / "rollouts").glob("rollout-*.jsonl")):
        for no, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            data = json.loads(line)
            if data.get("type") == "token_usage_record":
                out.append((path.name, no, data["payload"]))
    return out


def test_the_latest_captures_are_of_that_version_and_cover_the_pinned_flows() -> None:
    assert_latest_cover_the_pinned_flows("codex", VERSION)
    assert sum(len(usage_records(c)) for c in LATEST) > 0
    assert all(not usage_records(c) for c in PINNED)  # a record type new in 0.171


@pytest.mark.parametrize("case", LATEST)
def test_latest_trace_is_complete_and_every_record_accounted(case: str) -> None:
    assert_complete_and_accounted(load_golden("codex", case))


@pytest.mark.parametrize("case", [c for c in LATEST if usage_records(c)])
def test_token_usage_record_is_one_call_scope_usage_per_response(case: str) -> None:
    g = load_golden("codex", case)
    trace = run(g)
    calls = [e for e in trace.events if isinstance(e, TokenUsageEvent) and e.usage_scope == "call"]
    records = usage_records(case)
    assert len(calls) == len(records)
    assert {e.source for e in calls} == {SRC_ROLLOUT}
    by_record = {(e.source_event_seq, e.step_id): e for e in calls}
    for _, no, payload in records:
        event = by_record[(no, payload["response_id"])]
        assert event.usage is not None and event.usage_available
        u = payload["usage"]
        assert (event.usage.input_tokens, event.usage.output_tokens, event.usage.cache_read_tokens,
                event.usage.reasoning_tokens) == (u["input_tokens"], u["output_tokens"],
                                                  u["cached_input_tokens"], u["reasoning_output_tokens"])
        assert event.raw_event["payload"] == payload  # the running totals stay in the raw record
    acc = trace.accounting
    assert acc is not None
    mapped = {r.seq for r in acc.records if r.type == "token_usage_record"}
    assert mapped == {no for _, no, _ in records}
    assert {r.disposition for r in acc.records if r.type == "token_usage_record"} == {"mapped"}


def test_mcp_native_usage_matches_the_responses_the_run_served() -> None:
    """One record per model request the probe answered (4), their input sum is the thread total."""
    records = usage_records(f"mcp_native@{VERSION}")
    meta = load_golden("codex", f"mcp_native@{VERSION}").meta
    assert len(records) == meta["model_requests"]
    assert len({p["response_id"] for _, _, p in records}) == len(records)
    total = records[-1][2]["thread_token_usage"]["input_tokens"]
    assert sum(p["usage"]["input_tokens"] for _, _, p in records) == total


def test_an_unknown_record_type_beside_it_still_makes_the_trace_partial(tmp_path: Path) -> None:
    g = load_golden("codex", f"tool_roundtrip@{VERSION}").copy_to(tmp_path / "g")
    (path,) = sorted((g.native / "rollouts").glob("rollout-*.jsonl"))
    lines = path.read_text(encoding="utf-8").splitlines()
    lines.insert(2, json.dumps({"timestamp": "2026-12-02T00:00:00.000Z", "type": "tt_future_record", "payload": {}}))
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    trace = normalize(g)
    assert trace.structured_trace_status == "partial"
    (diag,) = [e for e in trace.events if isinstance(e, NativeDiagnosticEvent)
               and e.diagnostic_type == "unknown_record_type"]
    assert diag.detail["seq"] == 3 and "tt_future_record" in diag.detail["type"]


def _results(case: str) -> list[tuple[str, bool | None, int | None]]:
    trace = run(load_golden("codex", case))
    return [(e.tool_call.name, e.tool_result.is_error if e.tool_result else None,
             e.tool_result.exit_code if e.tool_result else None) for e in trace.events if isinstance(e, ToolEvent)]


@pytest.mark.parametrize("case", ["mcp_native", "nonzero_exit", "tool_roundtrip"])
def test_tool_item_completed_gives_the_structured_result_fields_the_pinned_end_records_gave(case: str) -> None:
    """0.171 moved ``isError`` from ``mcp_tool_call_end`` into ``event_msg/item_completed`` (item
    id = call id): the same flows give the same error flags (a command item also states its
    ``exit_code``, which the pinned rollouts do not: see the next test)."""
    latest, pinned = _results(f"{case}@{VERSION}"), _results(case)
    assert [(n, e) for n, e, _ in latest] == [(n, e) for n, e, _ in pinned]
    assert all(x is None for _, _, x in pinned)
    g = load_golden("codex", f"{case}@{VERSION}")
    trace = normalize(g)
    acc = trace.accounting
    assert acc is not None
    tool_items = [r for r in acc.records if r.type == "event_msg/item_completed"
                  and r.disposition == "folded"]
    assert tool_items and all(r.folded_into is not None for r in tool_items)
    for r in tool_items:
        into = trace.events[r.folded_into]  # type: ignore[index]
        assert isinstance(into, ToolEvent)
        assert into.tool_result is not None and into.tool_result.status in ("completed", "failed")


def test_an_mcp_error_and_a_nonzero_exit_are_stated_from_item_completed() -> None:
    assert ("mcp__lookup__lookup", True, None) in _results(f"mcp_native@{VERSION}")
    assert [x for n, _, x in _results(f"nonzero_exit@{VERSION}") if n == "exec_command"] == [3]  # build.py exits 3
