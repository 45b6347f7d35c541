"""The pure dual-source reconciler (:mod:`criteria.reconcile`): native record vs provider boundary."""

from __future__ import annotations

import json
import random
from datetime import UTC, datetime
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from apparatus.gateway.wire import CONTENT_EDGE_BYTES, tool_result_entry
from criteria.reconcile import DELIVERY_KINDS, find_notices, reconcile
from tracetrial.redact import REDACTED
from tracetrial.trace import (
    EventBase,
    ModelInputEvent,
    RunFailedEvent,
    TokenUsage,
    TokenUsageEvent,
    ToolCall,
    ToolEvent,
    ToolResult,
)

T0 = datetime(2026, 9, 1, 12, 0, 0, tzinfo=UTC)


def tool(seq: int, call_id: str, content: Any, *, name: str = "Bash", native_id: str | None = None,
         is_error: bool | None = None, omitted: int | None = None, no_result: bool = False,
         principal: str | None = None) -> ToolEvent:
    result = None if no_result else ToolResult(content=content, is_error=is_error, omitted_bytes=omitted,
                                               truncated=True if omitted else None)
    return ToolEvent(seq=seq, timestamp=T0, run_id="r", source="native:test/stdout", principal_id=principal,
                     tool_call=ToolCall(id=call_id, name=name, arguments={}, native_tool_call_id=native_id),
                     tool_result=result)


def request(index: int, results: list[tuple[str | None, Any, bool | None]], *, wire: str = "anthropic",
            tools: list[str] = (), usage: dict[str, int | None] | None = None, status: int = 200) -> dict[str, Any]:  # type: ignore[assignment]
    """A gateway record as the recorder writes it (content capped by the recorder's own function)."""
    return {"index": index, "wire_format": wire, "status": status, "error": None,
            "tools": [{"name": t, "type": "function", "description": None, "input_schema": {}, "namespace": None}
                      for t in tools],
            "inventory_present": bool(tools), "inventory_complete": True, "usage": usage,
            "tool_results": [tool_result_entry(i, e, c) for i, c, e in results]}


def kinds(events: list[EventBase], gateway: list[dict[str, Any]]) -> list[tuple[str, str | None]]:
    rec = reconcile(events, gateway)
    return [(d.kind, d.call_id) for d in rec.divergences if d.kind in DELIVERY_KINDS]


# --------------------------------------------------------------------------- properties

_ids = st.lists(st.from_regex(r"[a-z]{2,6}_[0-9]{1,3}", fullmatch=True), min_size=1, max_size=6, unique_by=lambda s: s.replace("_", ""))
_text = st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=300)


def _wire_form(call_id: str, style: int) -> str:
    """One call id spelled as another wire spells it."""
    return [call_id, call_id.replace("_", "-"), call_id.upper()][style % 3]


@st.composite
def runs(draw: st.DrawFn) -> tuple[list[str], list[str], list[int], int]:
    ids = draw(_ids)
    texts = draw(st.lists(_text, min_size=len(ids), max_size=len(ids)))
    styles = draw(st.lists(st.integers(0, 2), min_size=len(ids), max_size=len(ids)))
    seed = draw(st.integers(0, 2 ** 16))
    return ids, texts, styles, seed


def _build(ids: list[str], texts: list[str], styles: list[int], seed: int,
           delivered: list[str] | None = None) -> tuple[list[EventBase], list[dict[str, Any]]]:
    events: list[EventBase] = [tool(i + 1, cid, text) for i, (cid, text) in enumerate(zip(ids, texts, strict=True))]
    out = list(zip(ids, delivered if delivered is not None else texts, styles, strict=True))
    random.Random(seed).shuffle(out)  # deliveries in any order, any request: joined by id only
    gateway = [request(i, [(_wire_form(cid, style), text, False)]) for i, (cid, text, style) in enumerate(out)]
    return events, gateway


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(runs())
def test_a_faithful_record_has_no_divergence_in_any_order_or_id_spelling(run: tuple[list[str], list[str], list[int], int]) -> None:
    ids, texts, styles, seed = run
    events, gateway = _build(ids, texts, styles, seed)
    rec = reconcile(events, gateway)
    assert [d for d in rec.divergences if d.kind in DELIVERY_KINDS] == []
    assert rec.counts["same_delivery"] == rec.counts["compared"] == len(ids)
    assert {r.match for r in rec.results} == {"exact"}


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(runs(), st.data())
def test_one_misstated_result_is_exactly_one_divergence_of_that_call(run: tuple[list[str], list[str], list[int], int],
                                                                      data: st.DataObject) -> None:
    ids, texts, styles, seed = run
    k = data.draw(st.integers(0, len(ids) - 1))
    changed = list(texts)
    changed[k] = ("Z" if texts[k][0] != "Z" else "Y") + texts[k][1:]
    events, gateway = _build(ids, texts, styles, seed, delivered=changed)
    found = kinds(events, gateway)
    assert len(found) == 1
    kind, call = found[0]
    assert call == ids[k]
    same_size = len(changed[k].encode()) == len(texts[k].encode())
    assert kind == ("content_mismatch" if same_size else "length_mismatch")


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(runs(), st.text(st.sampled_from("abc:\n 0123"), max_size=80), st.text(st.sampled_from("xyz\n ."), max_size=80))
def test_a_wrapped_result_is_the_same_delivery(run: tuple[list[str], list[str], list[int], int], prefix: str,
                                               suffix: str) -> None:
    ids, texts, styles, seed = run
    events, gateway = _build(ids, texts, styles, seed, delivered=[prefix + t + suffix for t in texts])
    rec = reconcile(events, gateway)
    assert [d for d in rec.divergences if d.kind in DELIVERY_KINDS] == []
    assert rec.counts["same_delivery"] == len(ids)
    assert {r.match for r in rec.results} <= {"exact", "wrapped", "whitespace", "json"}


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(runs(), st.data())
def test_a_dropped_side_is_missing_there(run: tuple[list[str], list[str], list[int], int], data: st.DataObject) -> None:
    ids, texts, styles, seed = run
    k = data.draw(st.integers(0, len(ids) - 1))
    events, gateway = _build(ids, texts, styles, seed)
    gateway.append(request(len(gateway), []))  # a later request: the run did go on
    without_delivery = [g for g in gateway if not g["tool_results"]
                        or g["tool_results"][0]["id"].replace("-", "_").lower() != ids[k]]
    assert kinds(events, without_delivery) == [("missing_at_gateway", ids[k])]
    without_native = [e for e in events if isinstance(e, ToolEvent) and e.tool_call.id != ids[k]]
    found = kinds(list(without_native), gateway)
    assert [kind for kind, _ in found] == ["missing_in_native"]
    assert (found[0][1] or "").replace("-", "_").lower() == ids[k]


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(runs())
def test_reconciliation_is_deterministic_and_order_free(run: tuple[list[str], list[str], list[int], int]) -> None:
    ids, texts, styles, seed = run
    changed = [t + "!" * 5000 for t in texts]  # beyond the wrap limit: every result diverges
    a = reconcile(*_build(ids, texts, styles, seed, delivered=changed))
    b = reconcile(*_build(ids, texts, styles, seed + 1, delivered=changed))
    key = sorted((d.kind, d.call_id, d.native.sha256 if d.native else None) for d in a.divergences)
    assert key == sorted((d.kind, d.call_id, d.native.sha256 if d.native else None) for d in b.divergences)
    assert a.counts == b.counts
    assert json.dumps(a.to_json()) == json.dumps(reconcile(*_build(ids, texts, styles, seed, delivered=changed)).to_json())


# --------------------------------------------------------------------------- notices


def test_notices_and_their_stated_sizes() -> None:
    cases = {
        "[file truncated: showing the first 262144 of 320514 bytes; 58370 bytes omitted.]": (58370.0, "bytes"),
        "... [20011 characters truncated] ...": (20011.0, "chars"),
        "Coho…77629 tokens truncated…18 Lucerne": (77629.0, "tokens"),
        "Warning: truncated output (original token count: 80129)": (80129.0, "tokens"),
        "Output too large (2KB). Full output saved to: /tmp/x": (2048.0, "bytes"),
        "[Read output capped at 1.5KB for this call. Use offset=575 to continue.]": (1536.0, "bytes"),
        "| 00906014[... 106923 more characters truncated; rerun with narrower args if needed]": (106923.0, "chars"),
    }
    for text, size in cases.items():
        notices = find_notices("row 1\n" + text + "\nrow 2")
        assert len(notices) == 1 and size in notices[0].sizes, (text, notices)
    assert find_notices("plain output\nno notice here") == []


def test_a_notice_stating_another_omitted_size_is_a_notice_mismatch() -> None:
    body = "line\n" * 20
    native = body + "[output truncated: 4096 bytes omitted]"
    shown = body + "[output truncated: 9000 bytes omitted]"
    rec = reconcile([tool(1, "c1", native)], [request(0, [("c1", shown, False)])])
    assert sorted(d.kind for d in rec.divergences) == ["content_mismatch", "notice_mismatch"]
    notice = next(d for d in rec.divergences if d.kind == "notice_mismatch")
    assert "4096" in notice.detail and "9000" in notice.detail
    assert notice.native is not None and notice.gateway is not None
    assert notice.native.notices[0].sizes == [(4096.0, "bytes")]
    assert notice.gateway.notices[0].sizes == [(9000.0, "bytes")]
    assert rec.results[0].notice == "differs"


def test_a_notice_only_the_wrapper_carries_is_a_notice_mismatch() -> None:
    rec = reconcile([tool(1, "c1", "partial output")],
                    [request(0, [("c1", "partial output\n[20011 characters truncated]", False)])])
    assert [d.kind for d in rec.divergences if d.kind in DELIVERY_KINDS] == ["notice_mismatch"]
    assert rec.results[0].match == "wrapped"


def test_structured_omitted_bytes_against_the_delivered_notice() -> None:
    text = "data\n[file truncated: showing the first 100 of 400 bytes; 300 bytes omitted]"
    agree = reconcile([tool(1, "c1", text, omitted=300)], [request(0, [("c1", text, False)])])
    assert agree.divergences == [] or all(d.kind == "usage_mismatch" for d in agree.divergences)
    assert agree.results[0].notice == "agree"
    wrong = reconcile([tool(1, "c1", text, omitted=250)], [request(0, [("c1", text, False)])])
    assert [d.kind for d in wrong.divergences if d.kind in DELIVERY_KINDS] == ["notice_mismatch"]
    silent = reconcile([tool(1, "c1", "data", omitted=300)], [request(0, [("c1", "data", False)])])
    assert [d.kind for d in silent.divergences if d.kind in DELIVERY_KINDS] == []
    assert any(n.aspect == "notice" and "no byte figure" in n.reason for n in silent.not_comparable)


# --------------------------------------------------------------------------- error flag


def test_error_flag_is_compared_only_where_both_sides_have_one() -> None:
    rec = reconcile([tool(1, "c1", "boom", is_error=False)], [request(0, [("c1", "boom", True)])])
    assert [d.kind for d in rec.divergences] == ["error_flag_mismatch"]
    assert rec.results[0].error_flag == "differs"
    same = reconcile([tool(1, "c1", "boom", is_error=True)], [request(0, [("c1", "boom", True)])])
    assert same.results[0].error_flag == "agree" and same.counts["error_flag_mismatch"] == 0
    no_native = reconcile([tool(1, "c1", "boom")], [request(0, [("c1", "boom", True)])])
    assert no_native.results[0].error_flag == "not_comparable" and no_native.counts["divergences"] == 0
    responses = reconcile([tool(1, "c1", "boom", is_error=True)], [request(0, [("c1", "boom", None)], wire="responses")])
    assert responses.results[0].error_flag == "not_comparable" and responses.counts["divergences"] == 0


# --------------------------------------------------------------------------- what is comparable


def test_the_digest_compares_beyond_the_recorder_cap() -> None:
    big = "x" * (3 * CONTENT_EDGE_BYTES)
    same = reconcile([tool(1, "c1", big)], [request(0, [("c1", big, False)])])
    assert same.results[0].match == "exact"
    assert reconcile([tool(1, "c1", big)], [request(0, [("c1", "exit 0\n" + big, False)])]).results[0].match \
        == "not_comparable"  # a wrap whose middle the recorder cut: not shown either way
    other = "y" * (3 * CONTENT_EDGE_BYTES)
    assert kinds([tool(1, "c1", big)], [request(0, [("c1", other, False)])]) == [("content_mismatch", "c1")]
    shorter = "x" * (2 * CONTENT_EDGE_BYTES + 10)
    assert kinds([tool(1, "c1", big)], [request(0, [("c1", shorter, False)])]) == [("length_mismatch", "c1")]


def test_redacted_text_is_compared_as_text_not_by_digest() -> None:
    native = f"token={REDACTED} ok"
    entry = tool_result_entry("c1", False, "token=sk-live-123 ok")  # the recorder hashed the clear text
    entry["content"] = native  # and the archive redacted its copy
    gw = [{"index": 0, "wire_format": "anthropic", "status": 200, "tools": [], "tool_results": [entry]}]
    rec = reconcile([tool(1, "c1", native)], gw)
    assert rec.results[0].match == "redacted" and rec.counts["divergences"] == 0
    assert rec.results[0].match != "exact"
    nat = rec.results[0]
    assert nat.native_ref == "seq:1"


def test_json_reserialization_and_content_parts_are_the_same_delivery() -> None:
    rec = reconcile([tool(1, "c1", {"b": 1, "a": [1, 2]}), tool(2, "c2", [{"type": "text", "text": "hello"}])],
                    [request(0, [("c1", '{"b":1,"a":[1,2]}', False), ("c2", "hello", False)])])
    assert [r.match for r in rec.results] == ["json", "exact"]
    assert rec.counts["divergences"] == 0


def test_a_reused_call_id_is_paired_by_content_never_by_position() -> None:
    events: list[EventBase] = [tool(1, "call_1", "first", native_id="call_1"),
                               tool(2, "t2:call_1", "second", native_id="call_1")]
    gateway = [request(0, [("call_1", "second", False)]), request(1, [("call_1", "first", False)])]
    rec = reconcile(events, gateway)
    assert [r.match for r in rec.results] == ["exact", "exact"] and rec.counts["divergences"] == 0
    wrong = reconcile(events, [request(0, [("call_1", "second", False)]), request(1, [("call_1", "third", False)])])
    assert [r.match for r in wrong.results] == ["not_comparable", "exact"]
    assert wrong.counts["divergences"] == 0 and wrong.counts["not_comparable"] >= 1


def test_a_retried_request_counts_its_results_once() -> None:
    rec = reconcile([tool(1, "c1", "out")], [request(0, [("c1", "out", False)], status=500),
                                             request(1, [("c1", "out", False)])])
    assert rec.counts["tool_results_delivered"] == 1 and rec.results[0].gateway_refs == ["gateway:0", "gateway:1"]


def test_missing_sides_and_their_exceptions() -> None:
    call_only = reconcile([tool(1, "c1", None, no_result=True)], [request(0, [("c1", "out", False)])])
    assert [(d.kind, d.detail) for d in call_only.divergences] == [
        ("missing_in_native", "the native record has the call but no result for it")]
    assert call_only.divergences[0].tool == "Bash"
    no_gateway = reconcile([tool(1, "c1", "out")], [])
    assert no_gateway.counts["divergences"] == 0 and no_gateway.not_comparable[0].aspect == "presence"
    failed: list[EventBase] = [tool(1, "c1", "a"), tool(2, "c2", "b"),
                               RunFailedEvent(seq=3, timestamp=T0, run_id="r", error_type="HarnessTimeout",
                                              error_message="t")]
    rec = reconcile(failed, [request(0, [("c1", "a", False)])])
    assert rec.counts["missing_at_gateway"] == 0 and rec.results[-1].match == "not_comparable"
    assert reconcile(None, [], reason="events.json is unavailable").available is False


# --------------------------------------------------------------------------- inventory and usage


def _model_input(seq: int, names: list[str]) -> ModelInputEvent:
    return ModelInputEvent(seq=seq, timestamp=T0, run_id="r", source="native:test/log",
                           tools=[{"type": "function", "function": {"name": n, "parameters": {}}} for n in names])


def test_native_declarations_against_the_captured_inventory() -> None:
    ok = reconcile([_model_input(1, ["shell", "read_file"])], [request(0, [], tools=["read_file", "shell"])])
    assert ok.inventory is not None and ok.inventory.compared and ok.counts["inventory_mismatch"] == 0
    bad = reconcile([_model_input(1, ["shell", "read_file"])], [request(0, [], tools=["shell", "write_file"])])
    values = [d.values for d in bad.divergences if d.kind == "inventory_mismatch"]
    assert {"native_only": ["read_file"], "gateway_only": ["write_file"], "native_size": 2, "gateway_size": 2} in values
    none = reconcile([tool(1, "c1", "x")], [request(0, [("c1", "x", False)], tools=["shell"])])
    assert none.inventory is not None and not none.inventory.compared
    assert none.counts["inventory_mismatch"] == 0


def _usage(seq: int, scope: str, **counts: int | None) -> TokenUsageEvent:
    return TokenUsageEvent(seq=seq, timestamp=T0, run_id="r", source="native:test/log", usage=TokenUsage(**counts),
                           usage_scope=scope)  # type: ignore[arg-type]


def test_usage_totals_are_reported_from_both_sides() -> None:
    events: list[EventBase] = [_usage(1, "call", input_tokens=10, output_tokens=2),
                               _usage(2, "call", input_tokens=20, output_tokens=3)]
    gw = [request(0, [], usage={"input_tokens": 10, "output_tokens": 2, "cache_read_tokens": None,
                                "cache_write_tokens": None}),
          request(1, [], usage={"input_tokens": 25, "output_tokens": 3, "cache_read_tokens": None,
                                "cache_write_tokens": None})]
    rec = reconcile(events, gw)
    assert rec.usage is not None and rec.usage.native is not None
    assert (rec.usage.native.input_tokens, rec.usage.gateway.input_tokens) == (30, 35)
    assert rec.usage.fields["input_tokens"] == "differs" and rec.usage.fields["output_tokens"] == "agree"
    assert rec.usage.fields["requests"] == "agree" and rec.usage.fields["cache_read_tokens"] == "not_comparable"
    assert [d.values for d in rec.divergences] == [{"field": "input_tokens", "native": 30, "gateway": 35}]
    run_scope = reconcile([_usage(1, "run", input_tokens=5, output_tokens=1)], gw)
    assert run_scope.usage is not None and run_scope.usage.fields["requests"] == "not_comparable"


def test_a_notice_in_the_kept_tail_of_a_capped_delivery_is_compared() -> None:
    body = "r" * (3 * CONTENT_EDGE_BYTES)
    native, shown = body + "\n[48370 bytes omitted]", body + "\n[58370 bytes omitted]"
    rec = reconcile([tool(1, "c1", native)], [request(0, [("c1", shown, False)])])
    assert sorted(d.kind for d in rec.divergences) == ["content_mismatch", "notice_mismatch"]
    wrapped = reconcile([tool(1, "c1", native)], [request(0, [("c1", "Exit 0\n" + shown, False)])])
    assert wrapped.results[0].notice == "not_comparable" and "notice_mismatch" not in \
        [d.kind for d in wrapped.divergences]
