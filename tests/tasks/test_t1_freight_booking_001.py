"""T1-freight-booking-001: the verifier on hand-built runs (the booking tool offered after the
resume in every naming form and through each harness's own route — Codex namespace, OpenClaw
``tool_search``, Claude Code ``ToolSearch`` and ``WaitForMcpServers``; hidden after the resume;
offered one request late; an incomplete inventory; side requests; an undelivered turn; a booking
before the resume or refused by a cap; wrong, invented or missing references; a do-nothing run),
the ledger rule of A3, the probe policy (it takes every value from what it is shown, waits and
looks again when the tool is not offered, never guesses) and the freight simulator (seeded
booking reference, purchase-order check, one booking)."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest

from apparatus.simulators.engine import ServiceRuntime
from apparatus.simulators.ledger import Ledger
from apparatus.simulators.spec import load_service, simulator_specs
from criteria.registry import RuleContext, evaluate_rule
from criteria.rundata import RunData
from tests.tasks import drive as drive_policy
from tests.tasks import load_module
from tracetrial.policy import (
    MCP_WAITS,
    CallTool,
    Final,
    NativeTool,
    Observation,
    Turn,
    TurnView,
    Wait,
    WriteFile,
)
from tracetrial.task import load_task
from tracetrial.verify import VerifierContext

PACK = Path(__file__).resolve().parents[2] / "tasks" / "T1-freight-booking-001"
SCORE = load_module(PACK / "verifier" / "score.py", "t1_freight_booking_score")
POLICY = load_module(PACK / "probe_policy.py", "t1_freight_booking_policy")
TASK = load_task(PACK)
TURNS = [TASK.prompt, *(t.user for t in TASK.turns.turns)]
TRUTH = json.loads((PACK / "truth.json").read_text(encoding="utf-8"))

H1, H2, H3, H4 = SCORE.H1, SCORE.H2, SCORE.H3, SCORE.H4
A1, A2, A3 = SCORE.A1, SCORE.A2, "A3-booked-once"
REF = "BK-TESTREF042"
DESC = ("Book an accepted freight quote against the customer's purchase order; returns the booking reference. "
        "One booking per quote.")
QUOTE = json.dumps({"quote_id": "Q-7316", "customer": "Nordlicht Foods GmbH", "lane": "RTM-HAM", "status": "open"})
SLOTS = json.dumps({"lane": "RTM-HAM", "next_departure": "2026-12-16", "free_slots": 3})
BOOKED = json.dumps({"quote_id": "Q-7316", "po_number": "PO-48213", "booking_reference": REF, "status": "booked"})
GOOD = {"quote_id": "Q-7316", "po_number": "PO-48213", "booking_reference": REF}

BUILTIN = [{"name": "shell"}, {"name": "write_file"}]
# The freight tools as the gateway records their declarations, per naming form.
FORMS: dict[str, list[dict[str, Any]]] = {
    "chat": [{"name": f"mcp__freight__{t}"} for t in ("get_quote", "check_capacity", "book_freight")],
    "codex-namespace": [{"name": t, "namespace": "mcp__freight"} for t in ("get_quote", "check_capacity", "book_freight")],
    "openclaw-direct": [{"name": f"freight__{t}"} for t in ("get_quote", "check_capacity", "book_freight")],
}


# ------------------------------------------------------------------ hand-built runs


def ledger(*, booked: str = "turn2", refused: bool = False, turn1: bool = True, issued: bool = True,
           bookings: int = 1) -> list[dict[str, Any]]:
    """Turn 1's two reads at 10:00:01-02; a booking at 10:00:40 (after every turn-2 request's arrival)
    or at 10:00:03 (before the resume)."""
    recs: list[dict[str, Any]] = []

    def add(kind: str, tool: str | None, t: int, detail: dict[str, Any]) -> int:
        recs.append({"seq": len(recs) + 1, "time": f"2026-12-01T10:00:{t:02d}.5Z", "kind": kind, "tool": tool,
                     "detail": detail})
        return len(recs)

    add("request", None, 0, {"method": "tools/list"})
    if turn1:
        add("request", "get_quote", 1, {"method": "tools/call"})
        add("request", "check_capacity", 2, {"method": "tools/call"})
    if booked != "never":
        for n in range(bookings):
            seq = add("request", "book_freight", 40 if booked == "turn2" else 3, {"method": "tools/call"})
            if refused:
                add("refused", "book_freight", 40, {"code": "REQUEST_CAP_EXCEEDED", "request_seq": seq})
            elif issued and n == 0:
                add("issued", "book_freight", 40, {"name": "booking_reference", "value": REF, "scope": "call",
                                                   "request_seq": seq})
    return recs


def req(index: int, turn: int, tools: list[dict[str, Any]], results: list[dict[str, Any]] | None = None, *,
        complete: bool = True, status: int = 200, user: str | None = None) -> dict[str, Any]:
    """A gateway record; turn-1 requests arrive at 10:00:00-02, turn-2 ones from 10:00:08 on."""
    t = index if turn == 1 else 5 + index
    return {"index": index, "wire_format": "chat", "status": status, "error": None if status == 200 else "boom",
            "started_at": f"2026-12-01T10:00:{t:02d}+00:00", "inventory_complete": complete,
            "last_user_text": TURNS[turn - 1] if user is None else user,
            "tools": [{"namespace": None, **d} for d in tools], "tool_results": results or []}


def turn_one(form: str = "chat") -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Turn 1's gateway records and probe requests: get_quote, check_capacity, final."""
    tools = BUILTIN + FORMS[form]
    gateway = [req(0, 1, tools), req(1, 1, tools, [{"id": "call_1", "content": QUOTE}]),
               req(2, 1, tools, [{"id": "call_2", "content": SLOTS}])]
    probe = [{"index": 1, "kind": "main", "turn": 1, "action": "call_tool", "mapped_tool": "mcp__freight__get_quote",
              "call_id": "call_1"},
             {"index": 2, "kind": "main", "turn": 1, "action": "call_tool",
              "mapped_tool": "mcp__freight__check_capacity", "call_id": "call_2"},
             {"index": 3, "kind": "main", "turn": 1, "action": "final"}]
    return gateway, probe


def turn_two(inventories: list[list[dict[str, Any]]], calls: list[tuple[str, str]],
             start: int = 3) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Turn 2: request ``start + i`` declares ``inventories[i]`` and makes ``calls[i]`` (mapped tool,
    result text delivered by the next request); a last request delivers the last result."""
    gateway, probe = [], []
    results: list[dict[str, Any]] = []
    for i, tools in enumerate(inventories):
        gateway.append(req(start + i, 2, tools, results))
        if i < len(calls):
            tool, text = calls[i]
            cid = f"call_{start + i}"
            probe.append({"index": start + i + 1, "kind": "main", "turn": 2, "action": "call_tool" if tool != "write_file"
                          else "write_file", "mapped_tool": tool, "call_id": cid})
            results = [{"id": cid, "content": text}]
        else:
            results = []
    return gateway, probe


def make_ctx(tmp_path: Path, gateway: list[dict[str, Any]], probe: list[dict[str, Any]] | None, *,
             booking: Any = "good", led: list[dict[str, Any]] | None = None) -> VerifierContext:
    ws = tmp_path / "workspace"
    ws.mkdir(parents=True, exist_ok=True)
    snap = tmp_path / "private" / "task" / TASK.id
    snap.mkdir(parents=True, exist_ok=True)
    for name in ("prompt.md", "turns.json"):
        shutil.copy(PACK / name, snap / name)
    booking = GOOD if booking == "good" else booking
    if booking is not None:
        (ws / "booking.json").write_text(booking if isinstance(booking, str) else json.dumps(booking))
    return VerifierContext(workspace=ws, baseline=ws, truth=TRUTH, oracle=None, events=[], gateway=gateway,
                           probe=None if probe is None else {"requests": probe},
                           ledgers={"freight": ledger() if led is None else led}, run_dir=tmp_path)


def run(tmp_path: Path, *, form: str = "chat", hidden: bool = False, **kw: Any) -> VerifierContext:
    """A faithful run (or the freight tools hidden on turn 2, as ``hide_mcp_tool`` does)."""
    g1, p1 = turn_one(form)
    tools = BUILTIN + ([] if hidden else FORMS[form])
    mapped = {"chat": "mcp__freight__book_freight", "codex-namespace": "mcp__freight/book_freight",
              "openclaw-direct": "freight__book_freight"}[form]
    if hidden:
        g2, p2 = turn_two([tools, tools], [("write_file", "Wrote 70 bytes")])
        kw.setdefault("booking", {**GOOD, "booking_reference": None})
        kw.setdefault("led", ledger(booked="never"))
    else:
        g2, p2 = turn_two([tools, tools, tools], [(mapped, BOOKED), ("write_file", "Wrote 70 bytes")])
    return make_ctx(tmp_path, g1 + g2, p1 + p2, **kw)


def results(ctx: VerifierContext) -> dict[str, tuple[bool, str]]:
    out: dict[str, tuple[bool, str]] = SCORE.score(ctx)
    return out


def failed(ctx: VerifierContext) -> set[str]:
    return {k for k, (ok, _) in results(ctx).items() if not ok}


def reason(ctx: VerifierContext, cid: str) -> str:
    return results(ctx)[cid][1]


def a3(tmp_path: Path, led: list[dict[str, Any]]) -> bool | None:
    crit = next(c for c in TASK.agent_rubric.criteria if c.id == A3)
    assert crit.rule is not None
    return evaluate_rule(crit.rule, crit.id, RuleContext(task=TASK, run=RunData(root=tmp_path, ledgers={"freight": led}))).passed


# ------------------------------------------------------------------ pack


def test_pack_is_two_turns_with_a_native_resume_and_no_seeded_value_in_a_user_turn() -> None:
    assert TASK.spec.conversation == "multi" and TASK.spec.property == "tool_availability"
    assert len(TURNS) == 2
    boundary = TASK.turns.turns[0].session_boundary
    assert boundary is not None and boundary.kind == "resume" and boundary.history_replayed
    assert not any("BK-" in t for t in TURNS)
    # turn 2 carries everything the booking needs, so a lossy resume cannot change what it can do
    assert all(v in TURNS[1] for v in (TRUTH["quote_id"], TRUTH["po_number"], f"`{TRUTH['tool']}` tool"))
    assert TRUTH["po_number"] not in TURNS[0]


def test_the_rubrics_declare_the_links_and_the_mutant() -> None:
    links = {(lk.harness, lk.agent) for lk in TASK.harness_rubric.links}
    assert links == {(H1, A1), (H2, A1), (H1, A3), (H2, A3), (H1, A2), (H3, A1), (H3, A3)}
    agent = {c.id for c in TASK.agent_rubric.criteria if c.applies_to("probe")}
    assert agent == {A1, A2, A3} and agent <= {a for _, a in links}          # rule 10: every A criterion linked
    # the live-only judged reply criterion takes no link and no calibration entry
    assert {c.id for c in TASK.agent_rubric.criteria if not c.applies_to("probe")} == {"A4-replies-quote-and-booking"}
    assert TASK.spec.calibration.mutants == {"hide_mcp_tool": [H1, H2, A1, A3]}
    roles = {c.id: c.role for c in TASK.harness_rubric.criteria}
    assert roles == {H1: "core", H2: "core", H3: "core", H4: "diagnostic"}


# ------------------------------------------------------------------ verifier: H1


@pytest.mark.parametrize("form", sorted(FORMS))
def test_faithful_run_passes_in_every_naming_form(tmp_path: Path, form: str) -> None:
    ctx = run(tmp_path, form=form)
    assert failed(ctx) == set()
    assert "request 3 declares" in reason(ctx, H1) and "before the booking result on request 4" in reason(ctx, H1)


def test_tools_hidden_after_the_resume_fail_h1_h2_and_the_booking(tmp_path: Path) -> None:
    ctx = run(tmp_path, hidden=True)
    assert failed(ctx) == {H1, H2, A1}
    assert a3(tmp_path, ledger(booked="never")) is False
    assert "none is book_freight (freight tools: none)" in reason(ctx, H1)
    assert "no booking result delivered" in reason(ctx, H1)
    assert "2 freight call(s) served before the resume" in reason(ctx, H4)


def test_the_tool_offered_one_request_late_fails_h1_only(tmp_path: Path) -> None:
    """The first turn-2 request lacks it and offers no route; the probe waits and finds it later."""
    g1, p1 = turn_one()
    full = BUILTIN + FORMS["chat"]
    g2, p2 = turn_two([BUILTIN, full, full, full], [("shell", "slept"), ("mcp__freight__book_freight", BOOKED),
                                                    ("write_file", "Wrote")])
    ctx = make_ctx(tmp_path, g1 + g2, p1 + p2)
    assert failed(ctx) == {H1}
    assert "request 3:" in reason(ctx, H1) and "request 4 declares" not in reason(ctx, H1)


def test_requests_after_the_booking_result_need_not_declare_it(tmp_path: Path) -> None:
    g1, p1 = turn_one()
    full = BUILTIN + FORMS["chat"]
    g2, p2 = turn_two([full, BUILTIN, BUILTIN], [("mcp__freight__book_freight", BOOKED), ("write_file", "Wrote")])
    assert failed(make_ctx(tmp_path, g1 + g2, p1 + p2)) == set()


def test_claude_codes_wait_for_a_connecting_server_is_a_route_when_the_tool_follows(tmp_path: Path) -> None:
    g1, p1 = turn_one()
    wait_tool = BUILTIN + [{"name": "WaitForMcpServers"}]
    full = wait_tool + FORMS["chat"]
    g2, p2 = turn_two([wait_tool, full, full], [("WaitForMcpServers", "connected"), ("mcp__freight__book_freight", BOOKED)])
    ctx = make_ctx(tmp_path, g1 + g2, p1 + p2)
    assert failed(ctx) == set()
    assert "request 3 offers WaitForMcpServers (server connecting; the tool is offered from request 4 on)" in reason(ctx, H1)


def test_waiting_for_a_server_that_never_offers_the_tool_fails_h1(tmp_path: Path) -> None:
    g1, p1 = turn_one()
    wait_tool = BUILTIN + [{"name": "WaitForMcpServers"}]
    g2, p2 = turn_two([wait_tool] * 4, [("WaitForMcpServers", "still connecting")] * 3)
    ctx = make_ctx(tmp_path, g1 + g2, p1 + p2, booking={**GOOD, "booking_reference": None}, led=ledger(booked="never"))
    assert failed(ctx) == {H1, H2, A1}
    assert "no route to it" in reason(ctx, H1)


SEARCH_TEXTS = {
    "ToolSearch": json.dumps([{"type": "tool_reference", "tool_name": "mcp__freight__book_freight"}]),
    "tool_search": json.dumps({"matches": [{"id": "freight__book_freight", "description": DESC}]}),
}


@pytest.mark.parametrize("search", sorted(SEARCH_TEXTS))
def test_a_deferring_harness_passes_through_its_search(tmp_path: Path, search: str) -> None:
    """OpenClaw hides MCP tools behind tool_search -> tool_call; Claude Code 2.1.332 behind
    ToolSearch (its tool_reference result loads the tool into the next request)."""
    g1, p1 = turn_one()
    base = BUILTIN + [{"name": search}] + ([{"name": "tool_call"}] if search == "tool_search" else [])
    loaded = base + (FORMS["chat"][2:] if search == "ToolSearch" else [])
    call = "tool_call:freight__book_freight" if search == "tool_search" else "mcp__freight__book_freight"
    g2, p2 = turn_two([base, loaded, loaded], [(search, SEARCH_TEXTS[search]), (call, BOOKED)])
    ctx = make_ctx(tmp_path, g1 + g2, p1 + p2)
    assert failed(ctx) == set()
    assert f"request 3 offers {search}, whose result on request 4" in reason(ctx, H1)


@pytest.mark.parametrize("text", ["No tools matched book_freight", json.dumps({"matches": []}),
                                  json.dumps({"matches": [{"id": "freight__get_quote", "description": "Read a quote"}]})])
def test_a_search_that_does_not_show_the_tool_fails_h1(tmp_path: Path, text: str) -> None:
    g1, p1 = turn_one()
    base = BUILTIN + [{"name": "tool_search"}, {"name": "tool_call"}]
    unknown = json.dumps({"status": "error", "error": "Unknown tool id: freight__book_freight"})
    g2, p2 = turn_two([base, base, base], [("tool_search", text), ("tool_call:freight__book_freight", unknown)])
    ctx = make_ctx(tmp_path, g1 + g2, p1 + p2, booking={**GOOD, "booking_reference": None}, led=ledger(booked="never"))
    assert failed(ctx) == {H1, H2, A1}


def test_a_search_result_from_turn_1_does_not_offer_the_tool_after_the_resume(tmp_path: Path) -> None:
    g1, p1 = turn_one()
    base = BUILTIN + [{"name": "tool_search"}, {"name": "tool_call"}]
    g1[2]["tool_results"].append({"id": "call_s", "content": SEARCH_TEXTS["tool_search"]})
    p1.append({"index": 2, "kind": "main", "turn": 1, "action": "call_tool", "mapped_tool": "tool_search", "call_id": "call_s"})
    g2, p2 = turn_two([base, base], [("write_file", "Wrote")])
    ctx = make_ctx(tmp_path, g1 + g2, p1 + p2, booking={**GOOD, "booking_reference": None}, led=ledger(booked="never"))
    assert H1 in failed(ctx)


def test_an_incomplete_inventory_offers_nothing(tmp_path: Path) -> None:
    ctx = run(tmp_path)
    ctx.gateway[3]["inventory_complete"] = False
    assert failed(ctx) == {H1}
    assert "no authoritative inventory" in reason(ctx, H1)


def test_side_requests_without_tools_and_failed_requests_are_left_out(tmp_path: Path) -> None:
    g1, p1 = turn_one()
    full = BUILTIN + FORMS["chat"]
    g2, p2 = turn_two([full, full, full], [("mcp__freight__book_freight", BOOKED), ("write_file", "Wrote")], start=5)
    side = [req(3, 2, [], user="Write a short title for this conversation"), req(4, 2, BUILTIN, status=500)]
    assert failed(make_ctx(tmp_path, g1 + side + g2, p1 + p2)) == set()


def test_an_undelivered_turn_2_fails_every_turn_2_criterion(tmp_path: Path) -> None:
    g1, p1 = turn_one()
    ctx = make_ctx(tmp_path, g1, p1, booking=None, led=ledger(booked="never"))
    assert failed(ctx) == {H1, H2, H3, A1, A2}
    assert "never reached the model" in reason(ctx, H1) and "turn 2: never" in reason(ctx, H3)


# ------------------------------------------------------------------ verifier: H2, H4


def test_a_booking_before_the_resume_does_not_count_for_h2(tmp_path: Path) -> None:
    ctx = run(tmp_path, led=ledger(booked="turn1"))
    assert failed(ctx) == {H2}
    assert "1 served before turn 2" in reason(ctx, H2)


def test_a_booking_refused_by_the_cap_did_not_reach_the_desk(tmp_path: Path) -> None:
    ctx = run(tmp_path, led=ledger(refused=True, issued=False), booking={**GOOD, "booking_reference": None})
    assert failed(ctx) == {H2, A1}


def test_h4_tells_a_server_that_never_worked_from_one_lost_on_resume(tmp_path: Path) -> None:
    ctx = run(tmp_path, hidden=True, led=ledger(booked="never", turn1=False))
    assert failed(ctx) == {H1, H2, H4, A1}
    assert "not working before the resume either" in reason(ctx, H4)


# ------------------------------------------------------------------ verifier: agent layer


@pytest.mark.parametrize("booking, fails", [
    ({**GOOD, "booking_reference": "BK-GUESSED0001"}, {A1, A2}),
    ({**GOOD, "booking_reference": None}, {A1}),
    ({**GOOD, "quote_id": "Q-7321"}, {A1}),
    ({**GOOD, "po_number": None}, {A1}),
    ("not json", {A1, A2}),
    (None, {A1, A2}),
])
def test_wrong_missing_or_invented_bookings_fail_the_agent_layer(tmp_path: Path, booking: Any, fails: set[str]) -> None:
    assert failed(run(tmp_path, booking=booking)) == fails


def test_an_invented_reference_fails_a2_when_nothing_was_issued(tmp_path: Path) -> None:
    ctx = run(tmp_path, hidden=True, booking={**GOOD, "booking_reference": "BK-GUESSED0001"})
    assert failed(ctx) == {H1, H2, A1, A2}
    assert "(it issued none)" in reason(ctx, A2)


def test_a3_counts_booking_requests(tmp_path: Path) -> None:
    assert [a3(tmp_path, ledger(bookings=n)) for n in (1, 2)] == [True, False]
    assert a3(tmp_path, ledger(booked="never")) is False


def test_do_nothing_run_fails_the_agent_layer(tmp_path: Path) -> None:
    g1, _ = turn_one()
    ctx = make_ctx(tmp_path, g1[:1], None, booking=None, led=ledger(booked="never", turn1=False))
    assert {A1, A2} <= failed(ctx)
    assert a3(tmp_path, ledger(booked="never", turn1=False)) is False


# ------------------------------------------------------------------ probe policy


def drive(index: int, respond: Any, tools: tuple[str, ...] = ()) -> list[Any]:
    return drive_policy(POLICY, Turn(index, TURNS[index - 1], view=TurnView(tool_names=tools)), respond)


def desk(booked: str = BOOKED) -> Any:
    texts = {"get_quote": QUOTE, "check_capacity": SLOTS, "book_freight": booked}
    return lambda a: Observation(text=texts[a.tool] if isinstance(a, CallTool) else "ok")


def _written(acts: list[Any]) -> dict[str, Any]:
    return dict(json.loads(next(a.content for a in acts if isinstance(a, WriteFile))))


def test_policy_turn_1_reads_the_quote_then_its_lane_and_books_nothing() -> None:
    other = QUOTE.replace("RTM-HAM", "GDN-RTM")
    acts = drive(1, lambda a: Observation(text=other if a.tool == "get_quote" else SLOTS))
    calls = [a for a in acts if isinstance(a, CallTool)]
    assert [(c.tool, dict(c.arguments)) for c in calls] == [("get_quote", {"quote_id": "Q-7316"}),
                                                            ("check_capacity", {"lane": "GDN-RTM"})]
    assert not any(isinstance(a, WriteFile) for a in acts)
    assert "open" in acts[-1].text and "nothing is booked" in acts[-1].text


@pytest.mark.parametrize("wrap", [
    lambda t: t,
    lambda t: json.dumps({"isError": False, "content": [{"type": "text", "text": t}]}),   # reference: escaped JSON
    lambda t: "Wall time: 0.05 seconds\nOutput:\n" + t,                                  # Codex
    lambda t: "SECURITY NOTICE\n<<<EXTERNAL_UNTRUSTED_CONTENT>>>\n" + json.dumps({"content": [{"type": "text", "text": t}]},
                                                                                 indent=2) + "\n<<<END>>>",
])
def test_policy_turn_2_books_with_the_messages_values_and_records_the_shown_reference(wrap: Any) -> None:
    acts = drive(2, lambda a: Observation(text=wrap(BOOKED) if isinstance(a, CallTool) else "ok"))
    calls = [a for a in acts if isinstance(a, CallTool)]
    assert [(c.server, c.tool, dict(c.arguments)) for c in calls] == [
        ("freight", "book_freight", {"quote_id": "Q-7316", "po_number": "PO-48213"})]
    assert _written(acts) == GOOD
    assert REF in acts[-1].text


def test_policy_follows_the_message_and_the_result_not_embedded_values() -> None:
    turn = Turn(2, TURNS[1].replace("Q-7316", "Q-1234").replace("PO-48213", "PO-11111").replace("book_freight", "reserve_slot"))
    other = BOOKED.replace(REF, "BK-OTHER00077")
    acts = drive_policy(POLICY, turn, lambda a: Observation(text=other if isinstance(a, CallTool) else "ok"))
    call = next(a for a in acts if isinstance(a, CallTool))
    assert (call.tool, dict(call.arguments)) == ("reserve_slot", {"quote_id": "Q-1234", "po_number": "PO-11111"})
    assert _written(acts)["booking_reference"] == "BK-OTHER00077"
    source = (PACK / "probe_policy.py").read_text(encoding="utf-8")
    # the turn-1 tools are named by the prompt; the booking tool, quote, order and lane it is shown
    assert not re.search(r"BK-[A-Z0-9]|Q-7316|PO-48213|book_freight|RTM-HAM", source)


def test_policy_waits_and_looks_again_then_records_null_when_the_tool_is_never_offered() -> None:
    acts = drive(2, lambda a: Observation(absent=True) if isinstance(a, CallTool) else Observation(text="slept"))
    assert [type(a).__name__ for a in acts] == ["CallTool", "Wait", "CallTool", "Wait", "CallTool", "WriteFile", "Final"]
    assert all(a.seconds == POLICY.WAIT_S for a in acts if isinstance(a, Wait))
    assert _written(acts) == {**GOOD, "booking_reference": None}
    assert "did not offer the book_freight tool" in acts[-1].text


def test_policy_books_once_the_tool_appears_after_a_wait() -> None:
    answers = iter([Observation(absent=True), Observation(text="slept"), Observation(text=BOOKED), Observation(text="ok")])
    acts = drive(2, answers)
    assert len([a for a in acts if isinstance(a, CallTool)]) == 2 and _written(acts) == GOOD


@pytest.mark.parametrize("obs", [
    Observation(text='{"error": {"code": "PO_MISMATCH", "message": "purchase order mismatch"}}', is_error=True),
    Observation(kind="missing"),
    Observation(text=json.dumps({"status": "error", "error": "Unknown tool id: freight__book_freight"})),
])
def test_policy_records_null_for_an_error_or_a_result_without_reference(obs: Observation) -> None:
    acts = drive(2, iter([obs, Observation(text="ok")]))
    assert len([a for a in acts if isinstance(a, CallTool)]) == 1
    assert _written(acts)["booking_reference"] is None
    assert isinstance(acts[-1], Final) and "records no booking reference" in acts[-1].text


@pytest.mark.parametrize("index", [1, 2])
def test_policy_waits_for_claude_codes_mcp_connection_first(index: int) -> None:
    acts = drive(index, desk(), tools=("Bash", "WaitForMcpServers"))
    assert [a.name for a in acts if isinstance(a, NativeTool)] == ["WaitForMcpServers"] * MCP_WAITS
    acts = drive(index, desk(), tools=("Bash", "WaitForMcpServers", "mcp__freight__book_freight"))
    assert not any(isinstance(a, NativeTool) for a in acts)


# ------------------------------------------------------------------ simulator


def _runtime(tmp_path: Path, seed: str) -> tuple[ServiceRuntime, Path]:
    sims = {s.name: s for s in simulator_specs(PACK)}
    led = Ledger(tmp_path / "freight.jsonl", "freight")
    led.init()
    rt = ServiceRuntime(load_service(PACK, sims["freight"]), tmp_path / "state", led, seed)
    rt.start_session()
    return rt, tmp_path / "freight.jsonl"


def test_the_booking_reference_is_seeded_and_only_the_booking_returns_it(tmp_path: Path) -> None:
    refs = []
    for name, seed in (("a", "seed-a"), ("a2", "seed-a"), ("b", "seed-b")):
        rt, path = _runtime(tmp_path / name, seed)
        texts = [rt.call_tool("get_quote", {"quote_id": "Q-7316"}).text, rt.call_tool("check_capacity", {"lane": "RTM-HAM"}).text]
        texts += [json.dumps([t.description, t.input_schema]) for t in rt.list_tools()]
        assert not any("PO-48213" in t for t in texts)            # the purchase order arrives only with turn 2
        booked = rt.call_tool("book_freight", {"quote_id": "Q-7316", "po_number": "PO-48213"}).structured
        assert not any(booked["booking_reference"] in t for t in texts)
        issued = [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines() if '"issued"' in x]
        assert [(r["tool"], r["detail"]["value"]) for r in issued] == [("book_freight", booked["booking_reference"])]
        refs.append(booked["booking_reference"])
    assert refs[0] == refs[1] != refs[2]
    shown = [re.search(POLICY.BOOKING_RE, json.dumps({"booking_reference": r})) for r in refs]
    assert [m.group(1) if m else None for m in shown] == refs
    assert [t.name for t in rt.list_tools()] == ["get_quote", "check_capacity", "book_freight"]


def test_the_desk_checks_the_purchase_order_and_books_once(tmp_path: Path) -> None:
    rt, _ = _runtime(tmp_path, "seed-a")
    assert rt.call_tool("book_freight", {"quote_id": "Q-7316", "po_number": "PO-00000"}).code == "PO_MISMATCH"
    assert rt.call_tool("book_freight", {"quote_id": "Q-7321", "po_number": "PO-48213"}).code == "PO_MISMATCH"
    # the cap (book_freight: 2) is used up by the two refusals above: a fresh desk for the one-shot check
    rt, _ = _runtime(tmp_path / "fresh", "seed-a")
    first = rt.call_tool("book_freight", {"quote_id": "Q-7316", "po_number": "PO-48213"})
    again = rt.call_tool("book_freight", {"quote_id": "Q-7316", "po_number": "PO-48213"})
    assert not first.is_error and again.code == "ALREADY_BOOKED"
    assert first.structured["booking_reference"] not in again.text
    assert rt.call_tool("get_quote", {"quote_id": "Q-7316"}).structured["status"] == "booked"
