"""Trace IR predicates: exists, count bounds, field match, order of two events, forbidden events."""

from __future__ import annotations

import pytest

from tests.criteria.archive_factory import event, tool_event
from tests.criteria.conftest import check, context_for


@pytest.fixture
def ctx(make_pack, make_run):
    pack = make_pack(truth={"code": "Z-9"})
    run = make_run(pack)
    run.events += [
        tool_event("Bash", {"command": "make"}, "BUILD SUCCESS", exit_code=2, call_id="c1"),
        tool_event("Bash", {"command": "cat report"}, [{"type": "text", "text": "code Z-9"}], exit_code=0, call_id="c2"),
        tool_event("Write", {"path": "status.json"}, "ok", call_id="c3"),
        event("assistant_message", content="done", content_kind="text"),
    ]
    return context_for(run)


def test_event_exists(ctx):
    found = check(ctx, "trace_event_exists", event_type="tool", where={"tool_call.name": "Write"})
    assert found.passed is True and found.refs == ("seq:4",)
    assert check(ctx, "trace_event_exists", event_type="context_compaction").passed is False


def test_event_count_bounds(ctx):
    assert check(ctx, "trace_event_count", event_type="tool", min=3, max=3).passed is True
    over = check(ctx, "trace_event_count", event_type="tool", where={"tool_call.name": "Bash"}, max=1)
    assert over.passed is False and "more than max=1" in over.reason
    assert check(ctx, "trace_event_count", event_type="tool", min=4).passed is False


def test_field_match_any_all_and_truth(ctx):
    nonzero = check(ctx, "trace_field_match", event_type="tool", where={"tool_call.name": "Bash"},
                    field="tool_result.exit_code", gte=1)
    assert nonzero.passed is True and nonzero.refs == ("seq:2",)
    every = check(ctx, "trace_field_match", event_type="tool", where={"tool_call.name": "Bash"},
                  field="tool_result.exit_code", gte=1, quantifier="all")
    assert every.passed is False and "seq 3" in every.reason
    # contains on content blocks looks at every string leaf; the truth value is never quoted
    truth = check(ctx, "trace_field_match", event_type="tool", field="tool_result.content", contains_truth="code")
    assert truth.passed is True and "Z-9" not in truth.reason
    assert check(ctx, "trace_field_match", event_type="policy_event", field="decision", equals="deny").passed is False


def test_order_of_two_events(ctx):
    build = {"event_type": "tool", "where": {"tool_call.arguments.command": "make"}}
    write = {"event_type": "tool", "where": {"tool_call.name": "Write"}}
    assert check(ctx, "trace_order", before=build, after=write).passed is True
    wrong = check(ctx, "trace_order", before=write, after=build)
    assert wrong.passed is False and "out of order" in wrong.reason
    missing = check(ctx, "trace_order", before=build, after={"event_type": "context_compaction"})
    assert missing.passed is False and "missing" in missing.reason


def test_forbidden_event(ctx):
    assert check(ctx, "forbidden_event", event_type="tool",
                 where={"tool_call.arguments.path": {"contains": "truth.json"}}).passed is True
    caught = check(ctx, "forbidden_event", event_type="tool", where={"tool_call.arguments.command": {"regex": "^make"}})
    assert caught.passed is False and caught.refs == ("seq:2",)


def test_unavailable_trace_is_unscored(ctx):
    ctx.run.events, ctx.run.events_error = None, "events.json: no such file"
    out = check(ctx, "trace_event_exists", event_type="tool")
    assert out.passed is None and "events.json is unavailable" in out.reason
