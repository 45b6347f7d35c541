"""T1-customs-entry-002: the verifier on hand-built three-turn runs (the customs tool declared in
every naming form; hidden on every or on one resumed request; reached through a harness's own
search or wait tool; a search that never shows it; an undelivered turn; a call that never reaches
the service; wrong, invented or missing deliverables; a do-nothing run), the ledger rule of A4, the
probe policy per turn (every value from what it was shown; waits and looks again, then records
null), the two simulators (seeded quantities and entry number, one lodgement only) and the
declaration builder against the verifier's own computation."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from apparatus.simulators.engine import ServiceRuntime
from apparatus.simulators.ledger import Ledger
from apparatus.simulators.spec import load_service, simulator_specs
from criteria.registry import RuleContext, evaluate_rule
from criteria.rundata import RunData
from tests.tasks import drive as drive_policy
from tests.tasks import load_module as _load
from tracetrial.policy import (
    CallTool,
    NativeTool,
    Observation,
    Shell,
    Turn,
    TurnView,
    Wait,
    WriteFile,
)
from tracetrial.task import load_task
from tracetrial.trace import ToolCall, ToolEvent, ToolResult
from tracetrial.verify import VerifierContext

PACK = Path(__file__).resolve().parents[2] / "tasks" / "T1-customs-entry-002"
NOW = datetime.now(UTC)
SCORE = _load(PACK / "verifier" / "score.py", "t1_customs_score")
POLICY = _load(PACK / "probe_policy.py", "t1_customs_policy")
TASK = load_task(PACK)
TURNS = [TASK.prompt] + [t.user for t in TASK.turns.turns]
H1, H2, H3 = SCORE.H1, SCORE.H2, SCORE.H3
A1, A2, A3 = SCORE.A1, SCORE.A2, SCORE.A3
A4 = "A4-single-lodgement"
IDS = {H1, H2, H3, A1, A2, A3}
ENTRY = "CE-TESTENT042"
LINES = [{"sku": "KB-2210", "qty": 10, "unit_price": "38.40"}, {"sku": "MS-0417", "qty": 4, "unit_price": "11.95"},
         {"sku": "CB-0090", "qty": 3, "unit_price": "2.15"}, {"sku": "MS-0512", "qty": 2, "unit_price": "9.80"}]
TOTAL = "457.85"
DECLARATION = f"hs_code,value\n8471.60,451.40\n8544.42,6.45\nTOTAL,{TOTAL}\n"
DESC = ("Lodge the import customs entry of an inbound shipment with its declared customs value; returns the "
        "customs entry number.")
LODGED = json.dumps({"shipment_id": "SH-40718", "declared_value": TOTAL, "status": "lodged", "entry_number": ENTRY})
SHIPMENT = {"shipment_id": "SH-40718", "consignee": "ACME Retail GmbH", "currency": "EUR", "lines": LINES}

# Declarations as the gateway records them, per naming form: (builtins + freight, the customs tool).
_BUILTIN = [{"name": "shell"}, {"name": "write_file"}]
FORMS: dict[str, tuple[list[dict[str, Any]], dict[str, Any]]] = {
    "chat": (_BUILTIN + [{"name": "mcp__freight__get_shipment"}], {"name": "mcp__customs__lodge_entry", "description": DESC}),
    "codex-namespace": (_BUILTIN + [{"name": "get_shipment", "namespace": "mcp__freight"}],
                        {"name": "lodge_entry", "namespace": "mcp__customs", "description": DESC}),
    "openclaw-direct": (_BUILTIN + [{"name": "freight__get_shipment"}], {"name": "customs__lodge_entry", "description": DESC}),
}


# ------------------------------------------------------------------ hand-built runs


def _req(index: int, user: str, tools: list[dict[str, Any]], results: list[dict[str, Any]],
         status: int = 200) -> dict[str, Any]:
    return {"index": index, "wire_format": "chat", "status": status, "error": None if status == 200 else "boom",
            "inventory_present": True, "inventory_complete": True, "tools": [{"namespace": None, **t} for t in tools],
            "tool_results": results, "last_user_text": user}


def _customs_ledger(lodged: int, served: bool) -> list[dict[str, Any]]:
    recs: list[dict[str, Any]] = [{"seq": 1, "kind": "transition", "tool": None, "detail": {"op": "init", "new": {"entries": {}}}}]
    for n in range(lodged):
        seq = len(recs) + 1
        recs.append({"seq": seq, "kind": "request", "tool": "lodge_entry", "detail": {"method": "tools/call"},
                     "arguments": {"shipment_id": "SH-40718", "declared_value": TOTAL}})
        if not served:
            recs.append({"seq": seq + 1, "kind": "error", "tool": "lodge_entry",
                         "detail": {"code": "UNKNOWN_TOOL", "request_seq": seq}})
        elif n == 0:
            recs.append({"seq": seq + 1, "kind": "issued", "tool": "lodge_entry",
                         "detail": {"name": "entry_number", "value": ENTRY, "scope": "run", "request_seq": seq}})
        else:
            recs.append({"seq": seq + 1, "kind": "error", "tool": "lodge_entry",
                         "detail": {"code": "ALREADY_LODGED", "request_seq": seq}})
    return recs


def _freight_ledger() -> list[dict[str, Any]]:
    return [{"seq": 1, "kind": "transition", "tool": None,
             "detail": {"op": "init", "new": {"shipments": {"SH-40718": {**SHIPMENT}}}}}]


def run(tmp_path: Path, *, form: str = "chat", hidden: Any = (), search: dict[str, Any] | None = None,
        wait: bool = False, lodge: bool = True, served: bool = True, lodged: int | None = None,
        entry: Any = "same", declaration: str | None = DECLARATION, turns: tuple[int, ...] = (1, 2, 3),
        probe: bool = True) -> VerifierContext:
    """A three-turn run. Turns 1 and 2 take two requests each; turn 3's requests follow the probe's
    steps (cat, [WaitForMcpServers], [search], lodge, write, final), request k delivering step k-1's
    result. ``hidden`` lists the turn-3 requests (0-based within the turn, or ``"all"``) whose
    inventory leaves the customs tool out; ``wait`` declares WaitForMcpServers instead of it until
    the wait; ``search`` defers it behind a search tool (``{"tool", "text", "loads"}``: the search
    result's text; whether the request carrying that result declares the tool)."""
    ws, base = tmp_path / "workspace", tmp_path / "baseline"
    shutil.copytree(PACK / "workspace", ws)
    shutil.copytree(PACK / "workspace", base)
    snap = tmp_path / "private" / "task" / TASK.id
    snap.mkdir(parents=True)
    for name in ("prompt.md", "turns.json"):
        shutil.copy(PACK / name, snap / name)
    (ws / "shipment.json").write_text(json.dumps(SHIPMENT))
    if declaration is not None:
        (ws / "declaration.csv").write_text(declaration)
    if entry == "same":
        entry = {"shipment_id": "SH-40718", "declared_value": TOTAL, "entry_number": ENTRY if lodge and served else None}
    if entry is not None:
        (ws / "entry.json").write_text(json.dumps(entry))

    base_tools, customs = FORMS[form]
    user = {n: TURNS[n - 1] if n in turns else "(a blank user turn)" for n in (1, 2, 3)}
    gateway = [_req(0, user[1], base_tools + [customs], []),
               _req(1, user[1], base_tools + [customs], [{"id": "c-ship", "content": json.dumps(SHIPMENT)}]),
               _req(2, user[2], base_tools + [customs], []),
               _req(3, user[2], base_tools + [customs], [{"id": "c-build", "content": f"TOTAL {TOTAL}"}])]
    steps = ["cat"] + (["wait"] if wait else []) + (["search"] if search else []) + (["lodge"] if lodge else []) + \
            ["write", "final"]
    results = {"cat": DECLARATION, "wait": "All requested MCP servers are connected.", "lodge": LODGED
               if served else "Error: unknown tool mcp__customs__lodge_entry", "write": "Wrote 80 bytes",
               "search": (search or {}).get("text", "")}
    mapped = {"cat": "shell", "wait": "WaitForMcpServers", "lodge": customs["name"], "write": "write_file",
              "search": (search or {}).get("tool", "")}
    probe_reqs: list[dict[str, Any]] = []
    events = []
    for k, step in enumerate(steps):
        tools = list(base_tools)
        if search:
            tools.append({"name": search["tool"], "description": "Search deferred tools"})
        if wait and k <= steps.index("wait"):
            tools.append({"name": "WaitForMcpServers"})
        offered = not (hidden == "all" or k in hidden)
        if wait and k <= steps.index("wait"):
            offered = False
        if search and (k <= steps.index("search") or not search.get("loads")):
            offered = False
        delivered = [{"id": f"c-{steps[k - 1]}", "content": results[steps[k - 1]]}] if k and steps[k - 1] != "final" else []
        gateway.append(_req(len(gateway), user[3], tools + ([customs] if offered else []), delivered))
        if step != "final":
            probe_reqs.append({"index": len(gateway), "kind": "main", "turn": 3, "action": "call_tool" if step in
                               ("lodge", "search") else "shell", "mapped_tool": mapped[step], "call_id": f"c-{step}"})
        if step == "lodge":
            events.append(ToolEvent(seq=9, timestamp=NOW, run_id="r", conversation_turn=3, tool_call=ToolCall(
                id="c-lodge", name=customs["name"], arguments={"shipment_id": "SH-40718", "declared_value": TOTAL}),
                tool_result=ToolResult(content=results["lodge"])))
    count = lodged if lodged is not None else int(lodge)
    ledgers = {"freight": _freight_ledger(), "customs": _customs_ledger(count, served)}
    return VerifierContext(workspace=ws, baseline=base, truth=None, oracle=None, events=list(events), gateway=gateway,
                           probe={"requests": probe_reqs} if probe else None, ledgers=ledgers, run_dir=tmp_path)


def results(ctx: VerifierContext) -> dict[str, tuple[bool, str]]:
    out: dict[str, tuple[bool, str]] = SCORE.score(ctx)
    assert set(out) == IDS
    return out


def failed(ctx: VerifierContext) -> set[str]:
    return {k for k, (ok, _) in results(ctx).items() if not ok}


def reason(ctx: VerifierContext, cid: str) -> str:
    return results(ctx)[cid][1]


HIDDEN: dict[str, Any] = {"hidden": "all", "lodge": False}


# ------------------------------------------------------------------ pack


def test_pack_is_three_turns_two_resumes_two_servers() -> None:
    assert TASK.spec.conversation == "multi" and len(TURNS) == 3
    assert all(t.session_boundary is not None and t.session_boundary.kind == "resume" for t in TASK.turns.turns)
    assert [s.name for s in TASK.spec.simulators] == ["freight", "customs"]
    # turns 1 and 2 never name the customs tool; turn 3 names it and the shipment, not the number
    assert "lodge_entry" not in TURNS[0] + TURNS[1] and "lodge_entry" in TURNS[2]
    assert "SH-40718" in TURNS[0] and "SH-40718" in TURNS[2] and "CE-" not in "".join(TURNS)


def test_the_rubrics_declare_the_links_and_the_mutants() -> None:
    links = {(lk.harness, lk.agent) for lk in TASK.harness_rubric.links}
    assert links == {(H1, A1), (H1, A4), (H2, A1), (H2, A4), (H3, A1), (H3, A2), (H3, A4)}
    assert TASK.spec.calibration.mutants == {"hide_mcp_tool": [H1, H2, A1, A4], "lose_turn_fact": []}
    assert {c.id: c.role for c in TASK.harness_rubric.criteria} == {H1: "core", H2: "core", H3: "core"}


# ------------------------------------------------------------------ verifier


@pytest.mark.parametrize("form", sorted(FORMS))
def test_a_faithful_run_passes_in_every_naming_form(tmp_path: Path, form: str) -> None:
    ctx = run(tmp_path, form=form)
    assert failed(ctx) == set()
    assert "requests 4–5, up to the lodge_entry call (result delivered on request 6)" in reason(ctx, H1)


def test_live_runs_find_the_call_through_the_trace(tmp_path: Path) -> None:
    assert failed(run(tmp_path, probe=False)) == set()


def test_the_hidden_tool_fails_h1_h2_a1(tmp_path: Path) -> None:
    """hide_mcp_tool: no turn-3 request declares it; the probe cannot call it and records null."""
    ctx = run(tmp_path, **HIDDEN)
    assert failed(ctx) == {H1, H2, A1}
    assert "request 4 declares 3 tools without lodge_entry (customs tools: none; no tool search)" in reason(ctx, H1)
    assert "no lodge_entry call" in reason(ctx, H1)


@pytest.mark.parametrize("hidden", [(0,), (1,)])
def test_one_resumed_request_without_the_tool_fails_h1_only(tmp_path: Path, hidden: tuple[int, ...]) -> None:
    """The tool must be offered on every turn-3 request up to the call, not only on the last."""
    ctx = run(tmp_path, hidden=hidden)
    assert failed(ctx) == {H1}
    assert f"request {4 + hidden[0]} declares" in reason(ctx, H1)


def test_requests_after_the_call_do_not_count(tmp_path: Path) -> None:
    assert failed(run(tmp_path, hidden=(2, 3))) == set()


def test_turns_1_and_2_are_not_read_by_h1(tmp_path: Path) -> None:
    ctx = run(tmp_path)
    for r in ctx.gateway[:4]:
        r["tools"] = r["tools"][:2]
    assert failed(ctx) == set()


def test_a_failed_request_in_the_window_is_skipped(tmp_path: Path) -> None:
    ctx = run(tmp_path)
    ctx.gateway[4]["status"], ctx.gateway[4]["error"] = 500, "boom"
    ctx.gateway[4]["tools"] = ctx.gateway[4]["tools"][:2]
    assert failed(ctx) == set()


@pytest.mark.parametrize("tool, text, loads", [
    ("ToolSearch", '<functions><function>{"description": "' + DESC + '", "name": "mcp__customs__lodge_entry", '
                   '"parameters": {}}</function></functions>', False),
    ("ToolSearch", "[tool_reference]", True),     # Claude Code 2.1.332: the request carrying it declares the tool
    ("tool_search", json.dumps({"matches": [{"id": "customs__lodge_entry", "description": DESC}]}), False),
])
def test_a_deferring_harness_passes_through_its_search(tmp_path: Path, tool: str, text: str, loads: bool) -> None:
    ctx = run(tmp_path, search={"tool": tool, "text": text, "loads": loads})
    assert failed(ctx) == set()
    assert re.search(rf"requests 4, 5(, 6)? declare {tool}; request 6 ", reason(ctx, H1)), reason(ctx, H1)


@pytest.mark.parametrize("text", ["No tools matched lodge_entry", json.dumps({"matches": []}), "[tool_reference]"])
def test_a_search_that_never_shows_the_tool_fails_h1(tmp_path: Path, text: str) -> None:
    ctx = run(tmp_path, search={"tool": "tool_search", "text": text, "loads": False}, served=False)
    assert failed(ctx) == {H1, H2, A1}
    assert "tool_search declared but never led to it" in reason(ctx, H1)


def test_claude_codes_wait_for_mcp_servers_is_a_route_when_the_tool_follows(tmp_path: Path) -> None:
    ctx = run(tmp_path, wait=True)
    assert failed(ctx) == set()
    assert "requests 4, 5 declare WaitForMcpServers; request 6 declares mcp__customs__lodge_entry" in reason(ctx, H1)


def test_waiting_for_a_server_that_never_connects_fails_h1(tmp_path: Path) -> None:
    ctx = run(tmp_path, wait=True, hidden="all", lodge=False)
    assert failed(ctx) == {H1, H2, A1}
    assert "WaitForMcpServers declared but never led to it" in reason(ctx, H1)


def test_a_call_the_service_never_served_fails_h2(tmp_path: Path) -> None:
    ctx = run(tmp_path, served=False)
    assert failed(ctx) == {H2, A1}
    assert "all refused or unknown" in reason(ctx, H2)


@pytest.mark.parametrize("missing, fails", [(3, {H1, H3}), (2, {H3}), (1, {H3})])
def test_an_undelivered_turn_fails_h3(tmp_path: Path, missing: int, fails: set[str]) -> None:
    ctx = run(tmp_path, turns=tuple(n for n in (1, 2, 3) if n != missing))
    assert failed(ctx) == fails
    assert f"turn {missing}: never" in reason(ctx, H3)
    if missing == 3:
        assert "turn 3 never reached the model" in reason(ctx, H1)


@pytest.mark.parametrize("entry, fails", [
    ({"shipment_id": "SH-40718", "declared_value": TOTAL, "entry_number": "CE-GUESSED0001"}, {A1, A3}),
    ({"shipment_id": "SH-40718", "declared_value": TOTAL, "entry_number": None}, {A1}),
    ({"shipment_id": "SH-40733", "declared_value": TOTAL, "entry_number": ENTRY}, {A1}),
    ({"shipment_id": "SH-40718", "declared_value": "457.8", "entry_number": ENTRY}, {A1}),
    ({"shipment_id": "SH-40718", "entry_number": ENTRY}, {A1}),
    (None, {A1, A3}),
])
def test_wrong_missing_or_invented_entries_fail_the_agent_layer(tmp_path: Path, entry: Any, fails: set[str]) -> None:
    assert failed(run(tmp_path, entry=entry)) == fails


def test_an_invented_entry_fails_a3_when_nothing_was_issued(tmp_path: Path) -> None:
    ctx = run(tmp_path, **HIDDEN, entry={"shipment_id": "SH-40718", "declared_value": TOTAL, "entry_number": "CE-X"})
    assert failed(ctx) == {H1, H2, A1, A3}
    assert "never issued" in reason(ctx, A3)


def test_a_lodgement_with_another_value_fails_a1(tmp_path: Path) -> None:
    ctx = run(tmp_path)
    ctx.ledgers["customs"][1]["arguments"]["declared_value"] = "999.00"
    assert failed(ctx) == {A1}
    assert "the lodgement carried" in reason(ctx, A1)


@pytest.mark.parametrize("declaration", [
    None,
    DECLARATION.replace("6.45", "6.40"),
    DECLARATION.replace(f"TOTAL,{TOTAL}\n", ""),
    "hs_code,value\n8544.42,6.45\n8471.60,451.40\nTOTAL,457.85\n",   # not in HS-code order
])
def test_a_wrong_or_missing_declaration_fails_a2(tmp_path: Path, declaration: str | None) -> None:
    assert failed(run(tmp_path, declaration=declaration)) == {A2}


def _a4(tmp_path: Path, lodged: int) -> bool | None:
    crit = next(c for c in TASK.agent_rubric.criteria if c.id == A4)
    assert crit.rule is not None
    data = RunData(root=tmp_path, ledgers={"customs": _customs_ledger(lodged, True)})
    return evaluate_rule(crit.rule, crit.id, RuleContext(task=TASK, run=data)).passed


def test_a4_counts_lodgements_in_the_ledger(tmp_path: Path) -> None:
    assert [_a4(tmp_path, n) for n in (1, 2, 0)] == [True, False, False]


def test_do_nothing_run_fails_every_criterion_but_turn_delivery(tmp_path: Path) -> None:
    ctx = run(tmp_path, lodge=False, entry=None, declaration=None, probe=False)
    ctx.ledgers["freight"] = []
    assert failed(ctx) == {H2, A1, A2, A3}
    assert _a4(tmp_path, 0) is False
    empty = VerifierContext(workspace=tmp_path / "none", baseline=tmp_path / "none", truth=None, oracle=None, events=[],
                            gateway=[], probe=None, ledgers={}, run_dir=tmp_path / "none")
    assert failed(empty) == IDS


def test_the_selftest_passes() -> None:
    proc = subprocess.run([sys.executable, "-B", str(PACK / "verifier" / "selftest.py")], capture_output=True,
                          text=True, check=False, cwd=PACK / "verifier")
    assert proc.returncode == 0, proc.stdout + proc.stderr


# ------------------------------------------------------------------ probe policy


def turn(index: int, tools: tuple[str, ...] = ()) -> Turn:
    return Turn(index, TURNS[index - 1], view=TurnView(tool_names=tools))


def drive(index: int, observations: list[Observation], tools: tuple[str, ...] = ()) -> list[Any]:
    return drive_policy(POLICY, turn(index, tools), observations)


WRAPS = [
    lambda t: t,
    lambda t: json.dumps({"isError": False, "content": [{"type": "text", "text": t}]}),   # reference: escaped JSON
    lambda t: "Wall time: 0.05 seconds\nOutput:\n" + t,                                  # Codex
    lambda t: "SECURITY NOTICE\n<<<EXTERNAL_UNTRUSTED_CONTENT>>>\n" + json.dumps({"content": [{"type": "text", "text": t}]},
                                                                                 indent=2) + "\n<<<END>>>",
]


@pytest.mark.parametrize("wrap", WRAPS)
def test_policy_turn_1_saves_the_shipment_it_was_shown(wrap: Any) -> None:
    acts = drive(1, [Observation(text=wrap(json.dumps(SHIPMENT))), Observation(text="ok")])
    assert [(a.server, a.tool, dict(a.arguments)) for a in acts if isinstance(a, CallTool)] == [
        ("freight", "get_shipment", {"shipment_id": "SH-40718"})]
    assert json.loads(next(a for a in acts if isinstance(a, WriteFile)).content) == SHIPMENT
    assert not any(isinstance(a, CallTool) and a.server == "customs" for a in acts)


@pytest.mark.parametrize("res", [Observation(absent=True), Observation(text="SHIPMENT_NOT_FOUND", is_error=True),
                                 Observation(text='{"shipment_id": "SH-40733", "lines": []}')])
def test_policy_turn_1_writes_nothing_without_the_shipment(res: Observation) -> None:
    acts = drive(1, [res])
    assert not any(isinstance(a, WriteFile) for a in acts) and "could not be fetched" in acts[-1].text


def test_policy_turn_2_runs_the_builder_only() -> None:
    acts = drive(2, [Observation(text=f"declaration.csv: 2 HS lines for SH-40718, TOTAL {TOTAL} EUR")])
    assert [type(a).__name__ for a in acts] == ["Shell", "Final"]
    assert acts[0].command == "python3 tools/build_declaration.py" and TOTAL in acts[-1].text


@pytest.mark.parametrize("wrap", WRAPS)
def test_policy_turn_3_lodges_the_total_it_read_and_records_the_shown_number(wrap: Any) -> None:
    acts = drive(3, [Observation(text=DECLARATION), Observation(text=wrap(LODGED)), Observation(text="ok")])
    assert isinstance(acts[0], Shell) and acts[0].command == "cat declaration.csv"
    assert [(a.server, a.tool, dict(a.arguments)) for a in acts if isinstance(a, CallTool)] == [
        ("customs", "lodge_entry", {"shipment_id": "SH-40718", "declared_value": TOTAL})]
    assert json.loads(next(a for a in acts if isinstance(a, WriteFile)).content) == {
        "shipment_id": "SH-40718", "declared_value": TOTAL, "entry_number": ENTRY}
    assert ENTRY in acts[-1].text


def test_policy_embeds_no_value_it_was_not_shown() -> None:
    other_total, other_entry = "1520.40", "CE-OTHER00077"
    acts = drive(3, [Observation(text=DECLARATION.replace(TOTAL, other_total)),
                     Observation(text=LODGED.replace(ENTRY, other_entry)), Observation(text="ok")])
    assert json.loads(next(a for a in acts if isinstance(a, WriteFile)).content) == {
        "shipment_id": "SH-40718", "declared_value": other_total, "entry_number": other_entry}
    source = (PACK / "probe_policy.py").read_text(encoding="utf-8")
    assert not re.search(r"CE-|SH-40718|\d+\.\d{2}\b", source)


def test_policy_waits_and_looks_again_then_records_null_when_the_tool_never_appears() -> None:
    absent = Observation(absent=True)
    acts = drive(3, [Observation(text=DECLARATION), absent, Observation(text="slept"), absent,
                     Observation(text="slept"), absent, Observation(text="ok")])
    assert [type(a).__name__ for a in acts] == ["Shell", "CallTool", "Wait", "CallTool", "Wait", "CallTool",
                                                "WriteFile", "Final"]
    assert all(a.seconds == POLICY.WAIT_S for a in acts if isinstance(a, Wait))
    assert json.loads(next(a for a in acts if isinstance(a, WriteFile)).content)["entry_number"] is None
    assert "never offered the customs tool" in acts[-1].text


def test_policy_uses_the_tool_once_it_appears_after_a_wait() -> None:
    acts = drive(3, [Observation(text=DECLARATION), Observation(absent=True), Observation(text="slept"),
                     Observation(text=LODGED), Observation(text="ok")])
    assert json.loads(next(a for a in acts if isinstance(a, WriteFile)).content)["entry_number"] == ENTRY


@pytest.mark.parametrize("res", [Observation(text='{"error": {"code": "ALREADY_LODGED"}}', is_error=True),
                                 Observation(text=json.dumps({"status": "error", "error": "Unknown tool id: customs__lodge_entry"})),
                                 Observation(kind="missing")])
def test_policy_records_null_for_an_error_or_a_result_without_a_number(res: Observation) -> None:
    acts = drive(3, [Observation(text=DECLARATION), res, Observation(text="ok")])
    assert json.loads(next(a for a in acts if isinstance(a, WriteFile)).content)["entry_number"] is None


def test_policy_turn_3_lodges_nothing_without_a_total() -> None:
    acts = drive(3, [Observation(text="cat: declaration.csv: No such file or directory"), Observation(text="ok")])
    assert not any(isinstance(a, CallTool) for a in acts)
    assert json.loads(next(a for a in acts if isinstance(a, WriteFile)).content)["declared_value"] is None


def test_policy_waits_for_claude_codes_mcp_connection_before_each_server() -> None:
    tools = ("Bash", "WaitForMcpServers", "mcp__freight__get_shipment")
    acts = drive(3, [Observation(text=DECLARATION), Observation(text="connected"), Observation(text=LODGED),
                     Observation(text="ok")], tools=tools)
    assert isinstance(acts[1], NativeTool) and dict(acts[1].arguments) == {"servers": ["customs"]}
    first = drive(1, [Observation(text=json.dumps(SHIPMENT)), Observation(text="ok")], tools=tools)
    assert isinstance(first[0], CallTool)   # freight is connected: no wait


# ------------------------------------------------------------------ simulators and builder


def _runtime(tmp_path: Path, service: str, seed: str) -> tuple[ServiceRuntime, Path]:
    sims = {s.name: s for s in simulator_specs(PACK)}
    led = Ledger(tmp_path / f"{service}.jsonl", service)
    led.init()
    rt = ServiceRuntime(load_service(PACK, sims[service]), tmp_path / "state", led, seed)
    rt.start_session()
    return rt, tmp_path / f"{service}.jsonl"


def test_the_entry_number_is_seeded_and_only_the_lodgement_returns_it(tmp_path: Path) -> None:
    numbers = []
    for name, seed in (("a", "seed-a"), ("a2", "seed-a"), ("b", "seed-b")):
        rt, path = _runtime(tmp_path / name, "customs", seed)
        listed = json.dumps([[t.name, t.description, t.input_schema] for t in rt.list_tools()])
        out = rt.call_tool("lodge_entry", {"shipment_id": "SH-40718", "declared_value": TOTAL})
        number = out.structured["entry_number"]
        assert re.fullmatch(r"CE-[A-Z0-9]{10}", number) and number not in listed
        again = rt.call_tool("lodge_entry", {"shipment_id": "SH-40718", "declared_value": TOTAL})
        assert again.is_error and again.code == "ALREADY_LODGED" and number not in again.text
        recs = [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines()]
        assert [r["detail"]["value"] for r in recs if r["kind"] == "issued"] == [number]
        numbers.append(number)
    assert numbers[0] == numbers[1] != numbers[2]


def test_lodge_entry_validates_its_arguments(tmp_path: Path) -> None:
    rt, _ = _runtime(tmp_path, "customs", "s")
    assert rt.call_tool("lodge_entry", {"shipment_id": "SH-40718", "declared_value": "457.8"}).code == "INVALID_ARGUMENTS"


def test_the_shipment_quantities_are_seeded(tmp_path: Path) -> None:
    served = [_runtime(tmp_path / s, "freight", s)[0].call_tool("get_shipment", {"shipment_id": "SH-40718"}).structured
              for s in ("seed-a", "seed-b")]
    assert [len(s["lines"]) for s in served] == [4, 4]
    assert [ln["qty"] for ln in served[0]["lines"]] != [ln["qty"] for ln in served[1]["lines"]]
    assert all(isinstance(ln["qty"], int) for ln in served[0]["lines"])


def test_the_builder_writes_what_the_verifier_expects(tmp_path: Path) -> None:
    """The workspace's declaration builder and the verifier's independent computation agree on a
    seeded shipment served by the freight simulator."""
    rt, path = _runtime(tmp_path / "sim", "freight", "seed-builder")
    shipment = rt.call_tool("get_shipment", {"shipment_id": "SH-40718"}).structured
    ws = tmp_path / "ws"
    shutil.copytree(PACK / "workspace", ws)
    (ws / "shipment.json").write_text(json.dumps(shipment))
    proc = subprocess.run([sys.executable, "-B", "tools/build_declaration.py"], cwd=ws, capture_output=True,
                          text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    ledger = [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines()]
    ctx = VerifierContext(workspace=ws, baseline=PACK / "workspace", truth=None, oracle=None, events=[], gateway=[],
                          probe=None, ledgers={"freight": ledger}, run_dir=tmp_path)
    want, why = SCORE.expected_declaration(ctx)
    assert want is not None, why
    assert SCORE.score(ctx)[A2][0] is True
    assert f"TOTAL {want[-1][1]}" in proc.stdout
