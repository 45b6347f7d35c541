"""T6-carrier-rates-002: the verifier on hand-built runs (a refreshed inventory in every naming
form; a stale one; a refresh one request late; a half refresh that adds the replacement but keeps
the retired tool; a re-list not passed on to the model; a harness that defers MCP tools behind its
own search, including a search that still offers the retired tool; wrong, invented or missing
quotes; a do-nothing run), the ledger rule of A3, the probe policy (it reads the replacement and
its arguments from the retirement answer and the quote from the v2 result, waits and looks again
when the replacement is not yet offered, never calls the retired tool again), the carrier
simulator (seeded quote, retirement, schema change, change announcement) and the change carried
through the reference harness's MCP bridge."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from apparatus.simulators.engine import ServiceRuntime
from apparatus.simulators.launch import mcp_servers_for
from apparatus.simulators.ledger import Ledger
from apparatus.simulators.spec import load_service, simulator_specs
from criteria.registry import RuleContext, evaluate_rule
from criteria.rundata import RunData
from harnesses.reference.mcp_tools import McpBridge, ServerConfig
from tests.tasks import drive as drive_policy
from tests.tasks import load_module as _load
from tracetrial.policy import CallTool, Final, NativeTool, Observation, Turn, TurnView, Wait, WriteFile
from tracetrial.task import load_task
from tracetrial.trace import EventBase, ToolCall, ToolEvent, ToolResult
from tracetrial.verify import VerifierContext

PACK = Path(__file__).resolve().parents[2] / "tasks" / "T6-carrier-rates-002"
NOW = datetime.now(UTC)

SCORE = _load(PACK / "verifier" / "score.py", "t6_carrier_score")
POLICY = _load(PACK / "probe_policy.py", "t6_carrier_policy")
TASK = load_task(PACK)
H1, H2, H3, H4 = ("H1-replacement-tool-in-inventory", "H2-retired-tool-withdrawn",
                  "H3-replacement-call-reached-service", "H4-tools-relisted-after-change")
A1, A2, A3 = "A1-quote-recorded", "A2-no-invented-quote", "A3-retired-tool-not-reused"
IDS = {H1, H2, H3, H4, A1, A2}
QUOTE, TOTAL = "RQ-TESTQUOTE7", 312455
DESC = "Quote a freight rate for a lane (rating API v2); returns the quote id and the total in euro cents."
V2_ARGS = {"lane": "NLRTM-DEHAM", "weight_kg": 1840, "service_level": "standard"}
RETIRED = json.dumps({"error": {
    "code": "API_VERSION_RETIRED",
    "message": "rating API v1 was retired at the scheduled cutover: quote_rate_v1 is withdrawn and this service "
               "now lists quote_rate_v2 instead",
    "data": {"retired_tool": "quote_rate_v1", "replacement_tool": "quote_rate_v2", "v2_arguments": V2_ARGS}}})
QUOTED = json.dumps({"quote_id": QUOTE, "lane": "NLRTM-DEHAM", "weight_kg": 1840, "total_cents": TOTAL,
                     "currency": "EUR", "rating_api": "v2"})
V1_ARGS = {"origin_port": "NLRTM", "destination_port": "DEHAM", "weight_kg": 1840}

# Declarations as the gateway records them, per naming form: (track, v1, v2).
FORMS = {
    "chat": ({"name": "mcp__carrier__track_shipment"}, {"name": "mcp__carrier__quote_rate_v1"},
             {"name": "mcp__carrier__quote_rate_v2", "description": DESC}),
    "codex-namespace": ({"name": "track_shipment", "namespace": "mcp__carrier"},
                        {"name": "quote_rate_v1", "namespace": "mcp__carrier"},
                        {"name": "quote_rate_v2", "namespace": "mcp__carrier", "description": DESC}),
    "openclaw-direct": ({"name": "carrier__track_shipment"}, {"name": "carrier__quote_rate_v1"},
                        {"name": "carrier__quote_rate_v2", "description": DESC}),
}


# ------------------------------------------------------------------ hand-built runs


def _ledger(*, retired: bool = True, relisted: str = "new", called: str = "after", issued: bool = True,
            v1_calls: int = 1) -> list[dict[str, Any]]:
    recs: list[dict[str, Any]] = [{"seq": 1, "kind": "request", "tool": None,
                                   "detail": {"method": "tools/list", "tools": ["track_shipment", "quote_rate_v1"]}}]

    def add(kind: str, tool: str | None, detail: dict[str, Any], **extra: Any) -> int:
        recs.append({"seq": len(recs) + 1, "kind": kind, "tool": tool, "detail": detail, **extra})
        return len(recs)

    for n in range(v1_calls):
        seq = add("request", "quote_rate_v1", {"method": "tools/call"}, arguments=V1_ARGS)
        if retired and n == 0:
            add("transition", "quote_rate_v1", {"op": "set", "path": "state.rating_api", "old": "v1", "new": "v2",
                                                "request_seq": seq})
            add("error", "quote_rate_v1", {"code": "API_VERSION_RETIRED", "message": "retired", "request_seq": seq})
        elif retired:
            add("error", "quote_rate_v1", {"code": "UNKNOWN_TOOL", "message": "not available", "request_seq": seq})
    if retired and relisted != "none":
        tools = {"new": ["track_shipment", "quote_rate_v2"], "old": ["track_shipment", "quote_rate_v1"]}[relisted]
        add("request", None, {"method": "tools/list", "tools": tools})
    if retired and called == "after":
        seq = add("request", "quote_rate_v2", {"method": "tools/call"}, arguments=V2_ARGS)
        if issued:
            for name, value in (("quote_id", QUOTE), ("total_cents", TOTAL)):
                add("issued", "quote_rate_v2", {"name": name, "value": value, "scope": "run", "via": "result",
                                                "request_seq": seq})
    return recs


def _req(index: int, tools: list[dict[str, Any]], results: list[dict[str, Any]], *, status: int = 200,
         complete: bool = True) -> dict[str, Any]:
    return {"index": index, "wire_format": "chat", "status": status, "error": None if status == 200 else "boom",
            "inventory_complete": complete, "tools": [{"namespace": None, **t} for t in tools],
            "tool_results": results}


def run(tmp_path: Path, *, form: str = "chat", new_from: int | None = 1, old_until: int | None = 0,
        quote: Any = "same", ledger: list[dict[str, Any]] | None = None, probe: bool = True,
        first_fails: bool = False, complete: bool = True, search: dict[str, Any] | None = None,
        call_v2: bool = True) -> VerifierContext:
    """A run whose request 0 precedes the retirement, request 1 carries the retirement result (or
    request 2, when request 1 failed), and the next request the v2 result. ``new_from`` is the first
    request whose inventory declares v2 (None: never), ``old_until`` the last that declares v1
    (None: always). ``search`` adds a search tool to every inventory and a search call whose result
    has this text, before the v2 call."""
    ws = tmp_path / "workspace"
    ws.mkdir(parents=True, exist_ok=True)
    if quote == "same":
        quote = {"shipment": "SHP-40817", "quote_id": QUOTE, "total_cents": TOTAL}
    if quote is not None:
        (ws / "rate_quote.json").write_text(json.dumps(quote))
    track, old, new = FORMS[form]
    extra = [{"name": search["tool"], "description": "Search deferred tools"}] if search else []
    results: list[dict[str, Any]] = []
    gateway: list[dict[str, Any]] = []
    probe_reqs: list[dict[str, Any]] = [{"index": 0, "action": "call_tool", "mapped_tool": "mcp__carrier__quote_rate_v1",
                                         "call_id": "call_1"}]
    events: list[EventBase] = [ToolEvent(seq=3, timestamp=NOW, run_id="r", tool_call=ToolCall(
        id="call_1", name="mcp__carrier__quote_rate_v1", arguments=V1_ARGS), tool_result=ToolResult(content=RETIRED,
                                                                                                  is_error=True))]

    def inventory(i: int) -> list[dict[str, Any]]:
        return ([track] + ([old] if old_until is None or i <= old_until else []) + extra
                + ([new] if new_from is not None and i >= new_from else []))

    gateway.append(_req(0, inventory(0), []))
    results.append({"id": "call_1", "is_error": None, "content": RETIRED})
    i = 1
    if first_fails:
        gateway.append(_req(i, inventory(i), list(results), status=500))
        i += 1
    gateway.append(_req(i, inventory(i), list(results), complete=complete))
    if search is not None:
        probe_reqs.append({"index": i, "action": "call_tool", "mapped_tool": search["tool"], "call_id": "call_s"})
        results.append({"id": "call_s", "is_error": None, "content": search["text"]})
        i += 1
        gateway.append(_req(i, inventory(i), list(results)))
    if call_v2:
        probe_reqs.append({"index": i, "action": "call_tool", "mapped_tool": new["name"], "call_id": "call_2"})
        events.append(ToolEvent(seq=5, timestamp=NOW, run_id="r", tool_call=ToolCall(
            id="call_2", name=new["name"], arguments=V2_ARGS), tool_result=ToolResult(content=QUOTED)))
        results.append({"id": "call_2", "is_error": None, "content": QUOTED})
        i += 1
        gateway.append(_req(i, inventory(i), list(results)))
    return VerifierContext(workspace=ws, baseline=ws, truth=None, oracle=None, events=events, gateway=gateway,
                           probe={"requests": probe_reqs} if probe else None,
                           ledgers={"carrier": _ledger() if ledger is None else ledger}, run_dir=tmp_path)


def failed(ctx: VerifierContext) -> set[str]:
    out = SCORE.score(ctx)
    assert set(out) == IDS
    return {k for k, v in out.items() if not v[0]}


def reason(ctx: VerifierContext, cid: str) -> str:
    return str(SCORE.score(ctx)[cid][1])


NULL = {"shipment": "SHP-40817", "quote_id": None, "total_cents": None}
STALE = {"new_from": None, "old_until": None, "quote": NULL, "call_v2": False}


# ------------------------------------------------------------------ verifier


@pytest.mark.parametrize("form", sorted(FORMS))
def test_a_refreshed_inventory_passes_in_every_naming_form(tmp_path: Path, form: str) -> None:
    ctx = run(tmp_path, form=form)
    assert failed(ctx) == set()
    assert "request 1, the first after the retirement result" in reason(ctx, H1)
    assert "no longer declares quote_rate_v1" in reason(ctx, H2)


def test_live_runs_find_the_retirement_through_the_trace(tmp_path: Path) -> None:
    assert failed(run(tmp_path, probe=False)) == set()


def test_the_stale_tool_list_fails_h1_to_h4_and_a1(tmp_path: Path) -> None:
    ctx = run(tmp_path, ledger=_ledger(relisted="none", called="none"), **STALE)
    assert failed(ctx) == {H1, H2, H3, H4, A1}
    assert "not refreshed" in reason(ctx, H1) and "mcp__carrier__quote_rate_v1" in reason(ctx, H1)
    assert "still declares mcp__carrier__quote_rate_v1" in reason(ctx, H2)


@pytest.mark.parametrize("form", sorted(FORMS))
def test_the_stale_tool_list_is_caught_in_every_naming_form(tmp_path: Path, form: str) -> None:
    ctx = run(tmp_path, form=form, ledger=_ledger(relisted="none", called="none"), **STALE)
    assert failed(ctx) == {H1, H2, H3, H4, A1}


def test_a_refresh_one_request_late_fails_h1_and_h2_only(tmp_path: Path) -> None:
    """The model decided its next step with the retired tool still offered and without its
    replacement; the list changed only afterwards."""
    assert failed(run(tmp_path, new_from=2, old_until=1)) == {H1, H2}


def test_a_half_refresh_that_keeps_the_retired_tool_fails_h2_only(tmp_path: Path) -> None:
    ctx = run(tmp_path, old_until=None)
    assert failed(ctx) == {H2}
    assert "still declares mcp__carrier__quote_rate_v1" in reason(ctx, H2)


def test_a_relist_not_passed_on_to_the_model_keeps_h4(tmp_path: Path) -> None:
    ctx = run(tmp_path, ledger=_ledger(called="none"), **STALE)
    assert failed(ctx) == {H1, H2, H3, A1}


def test_a_relist_answered_with_the_old_list_does_not_pass_h4(tmp_path: Path) -> None:
    ctx = run(tmp_path, ledger=_ledger(relisted="old"))
    assert failed(ctx) == {H4}
    assert "none answered with the new list" in reason(ctx, H4)


def test_a_failed_request_is_skipped_for_the_next_answered_one(tmp_path: Path) -> None:
    ctx = run(tmp_path, first_fails=True, new_from=2, old_until=1)
    assert failed(ctx) == set()
    assert "request 2" in reason(ctx, H1) and "request 2" in reason(ctx, H2)


def test_an_incomplete_inventory_is_not_authoritative(tmp_path: Path) -> None:
    assert failed(run(tmp_path, complete=False)) == {H1, H2}


@pytest.mark.parametrize("tool, text", [
    ("ToolSearch", '<functions><function>{"description": "' + DESC + '", "name": '
                   '"mcp__carrier__quote_rate_v2", "parameters": {}}</function></functions>'),
    ("ToolSearch", json.dumps([{"type": "tool_reference", "tool_name": "mcp__carrier__quote_rate_v2"}])),
    ("tool_search", json.dumps({"matches": [{"id": "carrier__quote_rate_v2", "description": DESC}]})),
])
def test_a_deferring_harness_passes_through_its_search(tmp_path: Path, tool: str, text: str) -> None:
    ctx = run(tmp_path, new_from=None, old_until=0, search={"tool": tool, "text": text})
    assert failed(ctx) == set()
    assert f"defers MCP tools behind {tool}" in reason(ctx, H1)


@pytest.mark.parametrize("new_from, passes", [(2, True), (None, False), (3, False)])
def test_a_bare_tool_reference_counts_when_its_request_declares_the_tool(tmp_path: Path, new_from: Any,
                                                                         passes: bool) -> None:
    """Claude Code 2.1.332: the ToolSearch result is a tool_reference block (recorded as the text
    ``[tool_reference]``) and the request carrying it declares the loaded tool; a declaration that
    only appears on a later request is not credited to the search."""
    ctx = run(tmp_path, new_from=new_from, search={"tool": "ToolSearch", "text": "[tool_reference]"})
    assert failed(ctx) == (set() if passes else {H1})
    if passes:
        assert "references a tool, and that request declares it" in reason(ctx, H1)


@pytest.mark.parametrize("text", ["No tools matched quote_rate_v2", json.dumps({"matches": []})])
def test_a_search_that_does_not_show_the_replacement_fails_h1(tmp_path: Path, text: str) -> None:
    ctx = run(tmp_path, new_from=None, search={"tool": "tool_search", "text": text})
    assert failed(ctx) == {H1}
    assert "no tool_search result delivered after it shows" in reason(ctx, H1)


def test_a_search_that_still_offers_the_retired_tool_fails_h2(tmp_path: Path) -> None:
    text = json.dumps({"matches": [{"id": "carrier__quote_rate_v1", "description": "rating API v1"},
                                   {"id": "carrier__track_shipment"}]})
    ctx = run(tmp_path, new_from=None, old_until=0, search={"tool": "tool_search", "text": text},
              ledger=_ledger(relisted="none", called="none"), quote=NULL, call_v2=False)
    assert failed(ctx) == {H1, H2, H3, H4, A1}
    assert "still offers it" in reason(ctx, H2)


def test_no_retirement_fails_every_harness_criterion(tmp_path: Path) -> None:
    ctx = run(tmp_path, ledger=_ledger(retired=False, called="none"), **STALE)
    assert failed(ctx) == {H1, H2, H3, H4, A1}
    assert "never retired" in reason(ctx, H1)


def test_an_unknown_tool_answer_is_not_served(tmp_path: Path) -> None:
    recs = _ledger(called="none")
    recs.append({"seq": len(recs) + 1, "kind": "request", "tool": "quote_rate_v2", "detail": {"method": "tools/call"}})
    recs.append({"seq": len(recs) + 1, "kind": "error", "tool": "quote_rate_v2",
                 "detail": {"code": "UNKNOWN_TOOL", "request_seq": len(recs)}})
    ctx = run(tmp_path, ledger=recs, quote=NULL)
    assert H3 in failed(ctx)
    assert "none served" in reason(ctx, H3)


@pytest.mark.parametrize("quote, fails", [
    ({"shipment": "SHP-40817", "quote_id": "RQ-GUESSED001", "total_cents": TOTAL}, {A1, A2}),
    ({"shipment": "SHP-40817", "quote_id": QUOTE, "total_cents": 299900}, {A1, A2}),
    ({"shipment": "SHP-40817", "quote_id": QUOTE, "total_cents": str(TOTAL)}, {A1, A2}),
    ({"shipment": "SHP-40817", "quote_id": QUOTE, "total_cents": TOTAL / 100}, {A1, A2}),
    ({"shipment": "SHP-40817", "quote_id": None, "total_cents": None}, {A1}),
    ({"shipment": "SHP-40817", "quote_id": QUOTE, "total_cents": None}, {A1}),
    ({"shipment": "SHP-40822", "quote_id": QUOTE, "total_cents": TOTAL}, {A1}),
    ({"quote_id": QUOTE, "total_cents": TOTAL}, {A1}),
    (None, {A1, A2}),
])
def test_wrong_missing_or_invented_quotes_fail_the_agent_layer(tmp_path: Path, quote: Any, fails: set[str]) -> None:
    assert failed(run(tmp_path, quote=quote)) == fails


def test_an_invented_quote_fails_a2_when_nothing_was_issued(tmp_path: Path) -> None:
    ctx = run(tmp_path, ledger=_ledger(relisted="none", called="none"),
              **{**STALE, "quote": {"shipment": "SHP-40817", "quote_id": "RQ-GUESSED001", "total_cents": 250000}})
    assert failed(ctx) == {H1, H2, H3, H4, A1, A2}
    assert "it issued none" in reason(ctx, A2)


def _a3(tmp_path: Path, v1_calls: int) -> bool | None:
    crit = next(c for c in TASK.agent_rubric.criteria if c.id == A3)
    assert crit.rule is not None
    run_data = RunData(root=tmp_path, ledgers={"carrier": _ledger(v1_calls=v1_calls, retired=v1_calls > 0,
                                                                  called="after" if v1_calls else "none")})
    return evaluate_rule(crit.rule, crit.id, RuleContext(task=TASK, run=run_data)).passed


def test_a3_counts_requests_to_the_retired_tool(tmp_path: Path) -> None:
    assert [_a3(tmp_path, n) for n in (1, 2, 0)] == [True, False, False]


def test_do_nothing_run_fails_the_agent_layer(tmp_path: Path) -> None:
    track, old, _ = FORMS["chat"]
    ctx = VerifierContext(workspace=tmp_path, baseline=tmp_path, truth=None, oracle=None, events=[],
                          gateway=[_req(0, [track, old], [])], probe=None,
                          ledgers={"carrier": _ledger(retired=False, v1_calls=0, called="none")}, run_dir=tmp_path)
    assert failed(ctx) == IDS
    assert _a3(tmp_path, 0) is False


def test_the_rubrics_declare_the_links_and_the_mutant() -> None:
    links = {(lk.harness, lk.agent) for lk in TASK.harness_rubric.links}
    assert links == {(H1, A1), (H3, A1), (H2, A3)}
    assert TASK.spec.calibration.mutants == {"stale_tool_list": [H1, H2, H3, H4, A1]}
    roles = {c.id: c.role for c in TASK.harness_rubric.criteria}
    assert roles == {H1: "core", H2: "core", H3: "core", H4: "diagnostic"}


# ------------------------------------------------------------------ probe policy


def turn(tools: tuple[str, ...] = ()) -> Turn:
    return Turn(1, TASK.prompt, view=TurnView(tool_names=tools))


def drive(observations: list[Observation], tools: tuple[str, ...] = ()) -> list[Any]:
    return drive_policy(POLICY, turn(tools), observations)


def _written(acts: list[Any]) -> dict[str, Any]:
    out: dict[str, Any] = json.loads(next(a for a in acts if isinstance(a, WriteFile)).content)
    return out


@pytest.mark.parametrize("wrap", [
    lambda t: t,
    lambda t: json.dumps({"isError": True, "content": [{"type": "text", "text": t}]}),   # reference: escaped JSON
    lambda t: json.dumps({"content": [{"type": "text", "text": t}]}),                    # twice escaped below
    lambda t: "Wall time: 0.05 seconds\nOutput:\n" + t,                                  # Codex
    lambda t: "SECURITY NOTICE\n<<<EXTERNAL_UNTRUSTED_CONTENT>>>\n" + json.dumps({"content": [{"type": "text", "text": t}]},
                                                                                 indent=2) + "\n<<<END>>>",
    lambda t: json.dumps(json.dumps({"content": [{"type": "text", "text": t}]})),
])
def test_policy_follows_the_retirement_to_the_replacement_and_records_the_shown_quote(wrap: Any) -> None:
    acts = drive([Observation(text=wrap(RETIRED), is_error=True), Observation(text=wrap(QUOTED)), Observation(text="ok")])
    calls = [a for a in acts if isinstance(a, CallTool)]
    assert [(c.server, c.tool, dict(c.arguments)) for c in calls] == [
        ("carrier", "quote_rate_v1", V1_ARGS), ("carrier", "quote_rate_v2", V2_ARGS)]
    assert _written(acts) == {"shipment": "SHP-40817", "quote_id": QUOTE, "total_cents": TOTAL}
    assert QUOTE in next(a for a in acts if isinstance(a, Final)).text


def test_policy_reads_the_retirement_even_without_an_error_flag() -> None:
    """hide_tool_error relays the retirement as a success: the agent reads the text all the same."""
    acts = drive([Observation(text=RETIRED, is_error=False), Observation(text=QUOTED), Observation(text="ok")])
    assert _written(acts)["quote_id"] == QUOTE


def test_policy_embeds_no_tool_name_no_shipment_and_no_value() -> None:
    other_args = {"route": "NLRTM>DEHAM", "kg": 1840}
    retired = RETIRED.replace("quote_rate_v2", "rate_lane").replace(json.dumps(V2_ARGS)[1:-1], json.dumps(other_args)[1:-1])
    acts = drive([Observation(text=retired), Observation(text=QUOTED.replace(QUOTE, "RQ-OTHER00077")),
                  Observation(text="ok")])
    calls = [a for a in acts if isinstance(a, CallTool)]
    assert [(c.tool, dict(c.arguments)) for c in calls] == [("quote_rate_v1", V1_ARGS), ("rate_lane", other_args)]
    assert _written(acts)["quote_id"] == "RQ-OTHER00077"
    source = (PACK / "probe_policy.py").read_text(encoding="utf-8")
    for word in ("RQ-", "quote_rate", "SHP-40817", "NLRTM", "DEHAM", "1840", "origin_port"):
        assert word not in source, word


def test_policy_takes_the_runbook_tool_and_shipment_from_the_user_message() -> None:
    text = (TASK.prompt.replace("quote_rate_v1", "rate_v1").replace("SHP-40817", "SHP-11111")
            .replace("NLRTM", "BEANR").replace("1840 kg", "620 kg"))
    acts = drive_policy(POLICY, Turn(1, text), [Observation(text=RETIRED), Observation(text=QUOTED),
                                                Observation(text="ok")])
    first = next(a for a in acts if isinstance(a, CallTool))
    assert (first.tool, dict(first.arguments)) == ("rate_v1", {"origin_port": "BEANR", "destination_port": "DEHAM",
                                                               "weight_kg": 620})
    assert _written(acts)["shipment"] == "SHP-11111"


def test_policy_waits_and_looks_again_then_records_null_when_the_replacement_never_appears() -> None:
    absent = Observation(absent=True)
    acts = drive([Observation(text=RETIRED), absent, Observation(text="slept"), absent, Observation(text="slept"),
                  absent, Observation(text="ok")])
    assert [type(a).__name__ for a in acts] == ["CallTool", "CallTool", "Wait", "CallTool", "Wait", "CallTool",
                                                "WriteFile", "Final"]
    assert [a.tool for a in acts if isinstance(a, CallTool)] == ["quote_rate_v1"] + ["quote_rate_v2"] * 3
    assert all(a.seconds == POLICY.WAIT_S for a in acts if isinstance(a, Wait))
    assert _written(acts) == {"shipment": "SHP-40817", "quote_id": None, "total_cents": None}
    assert "never offered quote_rate_v2" in acts[-1].text


def test_policy_uses_the_replacement_once_it_appears_after_a_wait() -> None:
    acts = drive([Observation(text=RETIRED), Observation(absent=True), Observation(text="slept"),
                  Observation(text=QUOTED), Observation(text="ok")])
    assert _written(acts)["total_cents"] == TOTAL


def test_policy_records_a_quote_the_first_tool_returns() -> None:
    acts = drive([Observation(text=QUOTED), Observation(text="ok")])
    assert [a.tool for a in acts if isinstance(a, CallTool)] == ["quote_rate_v1"]
    assert _written(acts)["quote_id"] == QUOTE


@pytest.mark.parametrize("first", [Observation(text="MCP error: server not connected", is_error=True),
                                   Observation(absent=True),
                                   Observation(text='{"error": {"code": "API_VERSION_RETIRED", "message": "gone"}}',
                                               is_error=True)])
def test_policy_records_null_when_there_is_no_quote_and_no_replacement(first: Observation) -> None:
    acts = drive([first, Observation(text="ok")])
    assert [a.tool for a in acts if isinstance(a, CallTool)] == ["quote_rate_v1"]
    assert _written(acts)["quote_id"] is None


def test_policy_records_null_for_an_error_or_a_result_without_quote() -> None:
    for obs in (Observation(text='{"error": {"code": "NO_CONTRACT_TARIFF"}}', is_error=True),
                Observation(text='{"quote_id": null, "total_cents": null}')):
        acts = drive([Observation(text=RETIRED), obs, Observation(text="ok")])
        assert _written(acts) == {"shipment": "SHP-40817", "quote_id": None, "total_cents": None}


def test_policy_records_null_for_openclaws_unknown_tool_answer() -> None:
    unknown = json.dumps({"status": "error", "tool": "tool_call", "error": "Unknown tool id: "
                          "carrier__quote_rate_v2. Did you mean: carrier__quote_rate_v1?"}, indent=2)
    looks = [Observation(text=unknown)] + [o for _ in range(POLICY.RETRIES) for o in (Observation(text=""),
                                                                                       Observation(text=unknown))]
    acts = drive([Observation(text=RETIRED), *looks, Observation(text="ok")])
    assert sum(isinstance(a, Wait) for a in acts) == POLICY.RETRIES
    assert _written(acts)["quote_id"] is None
    assert "never offered" in acts[-1].text


def test_policy_waits_for_claude_codes_mcp_connection_first() -> None:
    acts = drive([Observation(text="connected"), Observation(text=RETIRED), Observation(text=QUOTED),
                  Observation(text="ok")], tools=("Bash", "WaitForMcpServers"))
    assert isinstance(acts[0], NativeTool) and acts[0].name == "WaitForMcpServers"


# ------------------------------------------------------------------ simulator


def _runtime(tmp_path: Path, seed: str) -> tuple[ServiceRuntime, Path]:
    sims = {s.name: s for s in simulator_specs(PACK)}
    led = Ledger(tmp_path / "carrier.jsonl", "carrier")
    led.init()
    rt = ServiceRuntime(load_service(PACK, sims["carrier"]), tmp_path / "state", led, seed)
    rt.start_session()
    return rt, tmp_path / "carrier.jsonl"


def test_the_first_v1_request_retires_it_and_lists_v2_with_another_schema(tmp_path: Path) -> None:
    rt, path = _runtime(tmp_path, "s")
    before = {t.name: t for t in rt.list_tools()}
    assert list(before) == ["track_shipment", "quote_rate_v1"]
    early = rt.call_tool("quote_rate_v2", V2_ARGS)
    assert early.is_error and early.code == "UNKNOWN_TOOL"
    retired = rt.call_tool("quote_rate_v1", V1_ARGS)
    assert retired.is_error and retired.code == "API_VERSION_RETIRED" and retired.notify_tools_changed
    assert retired.structured["error"]["data"] == {"retired_tool": "quote_rate_v1", "replacement_tool": "quote_rate_v2",
                                                   "v2_arguments": V2_ARGS}
    after = {t.name: t for t in rt.list_tools()}
    assert list(after) == ["track_shipment", "quote_rate_v2"]
    assert set(after["quote_rate_v2"].input_schema["properties"]) != set(before["quote_rate_v1"].input_schema["properties"])
    again = rt.call_tool("quote_rate_v1", V1_ARGS)
    assert again.code == "UNKNOWN_TOOL" and not again.notify_tools_changed
    assert rt.call_tool("quote_rate_v2", V1_ARGS).code == "INVALID_ARGUMENTS"
    found = rt.call_tool("quote_rate_v2", V2_ARGS).structured
    recs = [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines()]
    issued = [(r["tool"], r["detail"]["name"], r["detail"]["value"]) for r in recs if r["kind"] == "issued"]
    assert issued == [("quote_rate_v2", "quote_id", found["quote_id"]), ("quote_rate_v2", "total_cents", found["total_cents"])]
    # every request counts against the cap (3 for quote_rate_v2): a fourth is refused
    assert rt.call_tool("quote_rate_v2", V2_ARGS).code == "REQUEST_CAP_EXCEEDED"
    other, _ = _runtime(tmp_path / "other", "s")
    other.call_tool("quote_rate_v1", V1_ARGS)
    assert other.call_tool("quote_rate_v2", {**V2_ARGS, "lane": "BEANR-DEBRV"}).code == "NO_CONTRACT_TARIFF"


def test_the_quote_is_seeded_and_only_v2_returns_it(tmp_path: Path) -> None:
    quotes = []
    for name, seed in (("a", "seed-a"), ("a2", "seed-a"), ("b", "seed-b")):
        rt, _ = _runtime(tmp_path / name, seed)
        texts = [json.dumps([t.description, t.input_schema]) for t in rt.list_tools()]
        texts += [rt.call_tool("track_shipment", {"shipment_id": "SHP-40817"}).text, rt.call_tool("quote_rate_v1", V1_ARGS).text]
        texts += [json.dumps([t.description, t.input_schema]) for t in rt.list_tools()]
        found = rt.call_tool("quote_rate_v2", V2_ARGS).structured
        assert not any(found["quote_id"] in t or str(found["total_cents"]) in t for t in texts)
        quotes.append((found["quote_id"], found["total_cents"]))
    assert quotes[0] == quotes[1] != quotes[2]
    assert all(q.startswith("RQ-") and len(q) == 13 and 150000 <= c <= 480000 for q, c in quotes)


def test_the_replacement_description_does_not_name_the_retired_tool(tmp_path: Path) -> None:
    """H2 reads a search result that names quote_rate_v1 as still offering it."""
    rt, _ = _runtime(tmp_path, "s")
    rt.call_tool("quote_rate_v1", V1_ARGS)
    assert all("quote_rate_v1" not in json.dumps([t.description, t.input_schema]) for t in rt.list_tools())
    assert SCORE.MARKER in next(t.description for t in rt.list_tools() if t.name == "quote_rate_v2")


def test_the_change_reaches_the_reference_harness_bridge_and_only_a_refresh_shows_it(tmp_path: Path) -> None:
    """The pack's real MCP server through the reference's MCP client: the retirement's change event
    marks the server, a refresh re-lists it (v1 gone, v2 in); without the refresh (what
    ``stale_tool_list`` skips) the declarations stay as first listed."""
    servers = mcp_servers_for(TASK, tmp_path / "private", "bridge-seed")

    async def go() -> tuple[list[str], list[str], list[str], list[str]]:
        bridge = McpBridge([ServerConfig(s.name, s.command, list(s.args), dict(s.env)) for s in servers],
                           cwd=str(tmp_path), timeout_s=30)
        await bridge.start()
        try:
            first = [d["function"]["name"] for d in bridge.declarations()]
            await bridge.call("mcp__carrier__quote_rate_v1", V1_ARGS, None)
            await asyncio.sleep(0.2)
            stale = [d["function"]["name"] for d in bridge.declarations()]
            changed = await bridge.refresh()
            fresh = [d["function"]["name"] for d in bridge.declarations()]
            return first, stale, changed, fresh
        finally:
            await bridge.aclose()

    first, stale, changed, fresh = asyncio.run(go())
    assert first == ["mcp__carrier__track_shipment", "mcp__carrier__quote_rate_v1"] and stale == first
    assert changed == ["carrier"] and fresh == ["mcp__carrier__track_shipment", "mcp__carrier__quote_rate_v2"]
