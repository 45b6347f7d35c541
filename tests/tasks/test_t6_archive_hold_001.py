"""T6-archive-hold-001: the verifier on hand-built runs (a refreshed inventory in every naming
form; a stale one; a refresh one request late; a re-list not passed on to the model; a harness
that defers MCP tools behind its own search; a call before the mount; wrong, invented or missing
hold references; a do-nothing run), the ledger rule of A3, the probe policy (it reads the tool
name and the reference from what it was shown, waits and looks again when the tool is not yet
offered), the records simulator (seeded reference, hidden tool, change announcement) and the
change carried through the reference harness's MCP bridge."""

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

PACK = Path(__file__).resolve().parents[2] / "tasks" / "T6-archive-hold-001"
NOW = datetime.now(UTC)

SCORE = _load(PACK / "verifier" / "score.py", "t6_archive_score")
POLICY = _load(PACK / "probe_policy.py", "t6_archive_policy")
TASK = load_task(PACK)
H1, H2, H3 = "H1-new-tool-in-inventory", "H2-new-tool-call-reached-service", "H3-tools-relisted-after-change"
A1, A2 = "A1-hold-reference-recorded", "A2-no-invented-reference"
IDS = {H1, H2, H3, A1, A2}
REF = "LH-TESTREF042"
DESC = "Look up a closed matter in the mounted cold archive; returns its litigation-hold reference."
MOUNTED = json.dumps({"mounted": True, "archive": "cold-2025", "adds_tool": "lookup_archived_matter",
                      "note": "the records service's tool list has changed"})
LOOKUP = json.dumps({"matter_id": "M-2291", "status": "closed", "hold_reference": REF})

# Declarations as the gateway records them, per naming form.
FORMS = {
    "chat": ([{"name": "mcp__records__get_matter"}, {"name": "mcp__records__mount_archive"}],
             {"name": "mcp__records__lookup_archived_matter", "description": DESC}),
    "codex-namespace": ([{"name": "get_matter", "namespace": "mcp__records"},
                         {"name": "mount_archive", "namespace": "mcp__records"}],
                        {"name": "lookup_archived_matter", "namespace": "mcp__records", "description": DESC}),
    "openclaw-direct": ([{"name": "records__get_matter"}, {"name": "records__mount_archive"}],
                        {"name": "records__lookup_archived_matter", "description": DESC}),
}


# ------------------------------------------------------------------ hand-built runs


def _ledger(*, mounted: bool = True, relisted: bool = True, called: str = "after", issued: bool = True,
            mounts: int = 1) -> list[dict[str, Any]]:
    recs: list[dict[str, Any]] = [{"seq": 1, "kind": "request", "tool": None,
                                   "detail": {"method": "tools/list", "tools": ["get_matter", "mount_archive"]}}]

    def add(kind: str, tool: str | None, detail: dict[str, Any], **extra: Any) -> int:
        recs.append({"seq": len(recs) + 1, "kind": kind, "tool": tool, "detail": detail, **extra})
        return len(recs)

    if called == "before":
        seq = add("request", "lookup_archived_matter", {"method": "tools/call"}, arguments={"matter_id": "M-2291"})
        add("error", "lookup_archived_matter", {"code": "UNKNOWN_TOOL", "message": "not available", "request_seq": seq})
    for n in range(mounts):
        seq = add("request", "mount_archive", {"method": "tools/call"}, arguments={})
        if mounted and n == 0:
            add("transition", "mount_archive", {"op": "set", "path": "state.archive_mounted", "old": False,
                                                "new": True, "request_seq": seq})
    if mounted and relisted:
        add("request", None, {"method": "tools/list",
                               "tools": ["get_matter", "mount_archive", "lookup_archived_matter"]})
    if mounted and called == "after":
        seq = add("request", "lookup_archived_matter", {"method": "tools/call"}, arguments={"matter_id": "M-2291"})
        if issued:
            add("issued", "lookup_archived_matter", {"name": "hold_reference", "value": REF, "scope": "run",
                                                     "via": "result", "request_seq": seq})
    return recs


def _req(index: int, tools: list[dict[str, Any]], results: list[dict[str, Any]], *, status: int = 200,
         complete: bool = True) -> dict[str, Any]:
    return {"index": index, "wire_format": "chat", "status": status, "error": None if status == 200 else "boom",
            "inventory_complete": complete, "tools": [{"namespace": None, **t} for t in tools],
            "tool_results": results}


def run(tmp_path: Path, *, form: str = "chat", declared_from: int | None = 1, hold: Any = "same",
        ledger: list[dict[str, Any]] | None = None, probe: bool = True, first_fails: bool = False,
        complete: bool = True, search: dict[str, Any] | None = None, lookup: bool = True) -> VerifierContext:
    """A run whose request 0 precedes the mount, request 1 carries the mount result (or request 2,
    when request 1 failed), and the next request the lookup result. ``declared_from`` is the first
    request whose inventory declares the new tool (None: never). ``search`` adds a search tool to
    every inventory and a search call whose result has this text, before the lookup."""
    ws = tmp_path / "workspace"
    ws.mkdir(parents=True, exist_ok=True)
    if hold == "same":
        hold = {"matter": "M-2291", "hold_reference": REF}
    if hold is not None:
        (ws / "hold.json").write_text(json.dumps(hold))
    base, new = FORMS[form]
    extra = [{"name": search["tool"], "description": "Search deferred tools"}] if search else []
    results: list[dict[str, Any]] = []
    gateway: list[dict[str, Any]] = []
    probe_reqs: list[dict[str, Any]] = [{"index": 0, "action": "call_tool", "mapped_tool": "mcp__records__mount_archive",
                                         "call_id": "call_1"}]
    events: list[EventBase] = [ToolEvent(seq=3, timestamp=NOW, run_id="r", tool_call=ToolCall(
        id="call_1", name="mcp__records__mount_archive", arguments={}), tool_result=ToolResult(content=MOUNTED))]

    def inventory(i: int) -> list[dict[str, Any]]:
        return base + extra + ([new] if declared_from is not None and i >= declared_from else [])

    gateway.append(_req(0, inventory(0), []))
    results.append({"id": "call_1", "is_error": None, "content": MOUNTED})
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
    if lookup:
        probe_reqs.append({"index": i, "action": "call_tool", "mapped_tool": new["name"], "call_id": "call_2"})
        events.append(ToolEvent(seq=5, timestamp=NOW, run_id="r", tool_call=ToolCall(
            id="call_2", name=new["name"], arguments={"matter_id": "M-2291"}), tool_result=ToolResult(content=LOOKUP)))
        results.append({"id": "call_2", "is_error": None, "content": LOOKUP})
        i += 1
        gateway.append(_req(i, inventory(i), list(results)))
    return VerifierContext(workspace=ws, baseline=ws, truth=None, oracle=None, events=events, gateway=gateway,
                           probe={"requests": probe_reqs} if probe else None,
                           ledgers={"records": _ledger() if ledger is None else ledger}, run_dir=tmp_path)


def failed(ctx: VerifierContext) -> set[str]:
    out = SCORE.score(ctx)
    assert set(out) == IDS
    return {k for k, v in out.items() if not v[0]}


def reason(ctx: VerifierContext, cid: str) -> str:
    return SCORE.score(ctx)[cid][1]


STALE = {"declared_from": None, "hold": {"matter": "M-2291", "hold_reference": None}, "lookup": False}


# ------------------------------------------------------------------ verifier


@pytest.mark.parametrize("form", sorted(FORMS))
def test_a_refreshed_inventory_passes_in_every_naming_form(tmp_path: Path, form: str) -> None:
    ctx = run(tmp_path, form=form)
    assert failed(ctx) == set()
    assert "request 1, the first after the mount result" in reason(ctx, H1)


def test_live_runs_find_the_mount_through_the_trace(tmp_path: Path) -> None:
    assert failed(run(tmp_path, probe=False)) == set()


def test_the_stale_tool_list_fails_h1_h2_h3_and_a1(tmp_path: Path) -> None:
    ctx = run(tmp_path, ledger=_ledger(relisted=False, called="none"), **STALE)
    assert failed(ctx) == {H1, H2, H3, A1}
    assert "not refreshed" in reason(ctx, H1) and "mcp__records__mount_archive" in reason(ctx, H1)


def test_a_refresh_one_request_late_fails_h1_only(tmp_path: Path) -> None:
    """The model decided its next step without the new tool; it appeared only later."""
    assert failed(run(tmp_path, declared_from=2)) == {H1}


def test_a_relist_not_passed_on_to_the_model_keeps_h3(tmp_path: Path) -> None:
    ctx = run(tmp_path, ledger=_ledger(called="none"), **STALE)
    assert failed(ctx) == {H1, H2, A1}


def test_an_inventory_declared_before_the_request_after_the_mount_is_not_needed(tmp_path: Path) -> None:
    """Request 0 (before the mount) never declares it; H1 reads the first request after."""
    ctx = run(tmp_path)
    assert "lookup_archived_matter" not in json.dumps(ctx.gateway[0]["tools"])


def test_a_failed_request_is_skipped_for_the_next_answered_one(tmp_path: Path) -> None:
    ctx = run(tmp_path, first_fails=True, declared_from=2)
    assert failed(ctx) == set()
    assert "request 2" in reason(ctx, H1)


def test_an_incomplete_inventory_is_not_authoritative(tmp_path: Path) -> None:
    assert failed(run(tmp_path, complete=False)) == {H1}


@pytest.mark.parametrize("tool, text", [
    ("ToolSearch", '<functions><function>{"description": "' + DESC + '", "name": '
                   '"mcp__records__lookup_archived_matter", "parameters": {}}</function></functions>'),
    ("ToolSearch", json.dumps([{"type": "tool_reference", "tool_name": "mcp__records__lookup_archived_matter"}])),
    ("tool_search", json.dumps({"matches": [{"id": "records__lookup_archived_matter", "description": DESC}]})),
])
def test_a_deferring_harness_passes_through_its_search(tmp_path: Path, tool: str, text: str) -> None:
    ctx = run(tmp_path, declared_from=None, search={"tool": tool, "text": text})
    assert failed(ctx) == set()
    assert f"defers MCP tools behind {tool}" in reason(ctx, H1)


@pytest.mark.parametrize("declared_from, passes", [(2, True), (None, False), (3, False)])
def test_a_bare_tool_reference_counts_when_its_request_declares_the_tool(tmp_path: Path, declared_from: Any,
                                                                         passes: bool) -> None:
    """Claude Code 2.1.332: the ToolSearch result is a tool_reference block (recorded as the text
    ``[tool_reference]``) and the request carrying it declares the loaded tool; a declaration that
    only appears on a later request is not credited to the search."""
    ctx = run(tmp_path, declared_from=declared_from, search={"tool": "ToolSearch", "text": "[tool_reference]"})
    assert failed(ctx) == (set() if passes else {H1})
    if passes:
        assert "references a tool, and that request declares it" in reason(ctx, H1)


@pytest.mark.parametrize("text", ["No tools matched lookup_archived_matter", json.dumps({"matches": []})])
def test_a_search_that_does_not_show_the_new_tool_fails_h1(tmp_path: Path, text: str) -> None:
    ctx = run(tmp_path, declared_from=None, search={"tool": "tool_search", "text": text})
    assert failed(ctx) == {H1}
    assert "no tool_search result delivered after it shows" in reason(ctx, H1)


def test_a_call_before_the_mount_does_not_count_for_h2(tmp_path: Path) -> None:
    ctx = run(tmp_path, ledger=_ledger(relisted=False, called="before"), **STALE)
    assert failed(ctx) == {H1, H2, H3, A1}
    assert "1 call(s) before the mount" in reason(ctx, H2)


def test_no_mount_fails_every_harness_criterion(tmp_path: Path) -> None:
    ctx = run(tmp_path, ledger=_ledger(mounted=False, called="none"), **STALE)
    assert failed(ctx) == {H1, H2, H3, A1}
    assert "never mounted" in reason(ctx, H1)


@pytest.mark.parametrize("hold, fails", [
    ({"matter": "M-2291", "hold_reference": "LH-GUESSED001"}, {A1, A2}),
    ({"matter": "M-2291", "hold_reference": None}, {A1}),
    ({"matter": "M-3307", "hold_reference": REF}, {A1}),
    ({"hold_reference": REF}, {A1}),
    (None, {A1, A2}),
])
def test_wrong_missing_or_invented_references_fail_the_agent_layer(tmp_path: Path, hold: Any, fails: set[str]) -> None:
    assert failed(run(tmp_path, hold=hold)) == fails


def test_an_invented_reference_fails_a2_when_nothing_was_issued(tmp_path: Path) -> None:
    ctx = run(tmp_path, ledger=_ledger(relisted=False, called="none"),
              **{**STALE, "hold": {"matter": "M-2291", "hold_reference": "LH-GUESSED001"}})
    assert failed(ctx) == {H1, H2, H3, A1, A2}
    assert "it issued none" in reason(ctx, A2)


def _a3(tmp_path: Path, mounts: int) -> bool | None:
    crit = next(c for c in TASK.agent_rubric.criteria if c.id == "A3-single-mount")
    assert crit.rule is not None
    run_data = RunData(root=tmp_path, ledgers={"records": _ledger(mounts=mounts, called="none" if not mounts else "after")})
    return evaluate_rule(crit.rule, crit.id, RuleContext(task=TASK, run=run_data)).passed


def test_a3_counts_mount_requests(tmp_path: Path) -> None:
    assert [_a3(tmp_path, n) for n in (1, 2, 0)] == [True, False, False]


def test_do_nothing_run_fails_the_agent_layer(tmp_path: Path) -> None:
    ctx = VerifierContext(workspace=tmp_path, baseline=tmp_path, truth=None, oracle=None, events=[],
                          gateway=[_req(0, FORMS["chat"][0], [])], probe=None,
                          ledgers={"records": _ledger(mounted=False, mounts=0, called="none")}, run_dir=tmp_path)
    assert failed(ctx) == IDS
    assert _a3(tmp_path, 0) is False


def test_the_rubrics_declare_the_links_and_the_mutant() -> None:
    links = {(lk.harness, lk.agent) for lk in TASK.harness_rubric.links}
    assert links == {(H1, A1), (H2, A1), (H1, "A3-single-mount")}
    assert TASK.spec.calibration.mutants == {"stale_tool_list": [H1, H2, H3, A1]}
    roles = {c.id: c.role for c in TASK.harness_rubric.criteria}
    assert roles == {H1: "core", H2: "core", H3: "diagnostic"}


# ------------------------------------------------------------------ probe policy


def turn(tools: tuple[str, ...] = ()) -> Turn:
    return Turn(1, TASK.prompt, view=TurnView(tool_names=tools))


def drive(observations: list[Observation], tools: tuple[str, ...] = ()) -> list[Any]:
    return drive_policy(POLICY, turn(tools), observations)


@pytest.mark.parametrize("wrap", [
    lambda t: t,
    lambda t: json.dumps({"isError": False, "content": [{"type": "text", "text": t}]}),   # reference: escaped JSON
    lambda t: "Wall time: 0.05 seconds\nOutput:\n" + t,                                  # Codex
    lambda t: "SECURITY NOTICE\n<<<EXTERNAL_UNTRUSTED_CONTENT>>>\n" + json.dumps({"content": [{"type": "text", "text": t}]},
                                                                                 indent=2) + "\n<<<END>>>",
])
def test_policy_mounts_then_calls_the_named_tool_and_records_the_shown_reference(wrap: Any) -> None:
    acts = drive([Observation(text=wrap(MOUNTED)), Observation(text=wrap(LOOKUP)), Observation(text="ok")])
    calls = [a for a in acts if isinstance(a, CallTool)]
    assert [(c.server, c.tool, dict(c.arguments)) for c in calls] == [
        ("records", "mount_archive", {}), ("records", "lookup_archived_matter", {"matter_id": "M-2291"})]
    out = json.loads(next(a for a in acts if isinstance(a, WriteFile)).content)
    assert out == {"matter": "M-2291", "hold_reference": REF}
    assert REF in next(a for a in acts if isinstance(a, Final)).text


def test_policy_embeds_no_reference_and_no_tool_name() -> None:
    other = LOOKUP.replace(REF, "LH-OTHER00077")
    acts = drive([Observation(text=MOUNTED.replace("lookup_archived_matter", "find_closed_matter")),
                  Observation(text=other), Observation(text="ok")])
    assert [a.tool for a in acts if isinstance(a, CallTool)] == ["mount_archive", "find_closed_matter"]
    assert json.loads(next(a for a in acts if isinstance(a, WriteFile)).content)["hold_reference"] == "LH-OTHER00077"
    source = (PACK / "probe_policy.py").read_text(encoding="utf-8")
    assert "LH-" not in source and "lookup_archived_matter" not in source and "M-2291" not in source


def test_policy_waits_and_looks_again_then_records_null_when_the_tool_never_appears() -> None:
    absent = Observation(absent=True)
    acts = drive([Observation(text=MOUNTED), absent, Observation(text="slept"), absent, Observation(text="slept"),
                  absent, Observation(text="ok")])
    assert [type(a).__name__ for a in acts] == ["CallTool", "CallTool", "Wait", "CallTool", "Wait", "CallTool",
                                                "WriteFile", "Final"]
    assert all(a.seconds == POLICY.WAIT_S for a in acts if isinstance(a, Wait))
    assert json.loads(next(a for a in acts if isinstance(a, WriteFile)).content)["hold_reference"] is None
    assert "never offered" in acts[-1].text


def test_policy_uses_the_tool_once_it_appears_after_a_wait() -> None:
    acts = drive([Observation(text=MOUNTED), Observation(absent=True), Observation(text="slept"),
                  Observation(text=LOOKUP), Observation(text="ok")])
    assert json.loads(next(a for a in acts if isinstance(a, WriteFile)).content)["hold_reference"] == REF


@pytest.mark.parametrize("mount", [Observation(text="MCP error: server not connected", is_error=True),
                                   Observation(absent=True), Observation(text='{"mounted": true}')])
def test_policy_records_null_when_the_mount_fails(mount: Observation) -> None:
    acts = drive([mount, Observation(text="ok")])
    assert [a.tool for a in acts if isinstance(a, CallTool)] == ["mount_archive"]
    assert json.loads(next(a for a in acts if isinstance(a, WriteFile)).content)["hold_reference"] is None


def test_policy_records_null_for_an_error_or_a_result_without_reference() -> None:
    for obs in (Observation(text='{"error": {"code": "MATTER_NOT_FOUND"}}', is_error=True),
                Observation(text='{"matter_id": "M-2291", "hold_reference": null}')):
        acts = drive([Observation(text=MOUNTED), obs, Observation(text="ok")])
        assert json.loads(next(a for a in acts if isinstance(a, WriteFile)).content)["hold_reference"] is None


def test_policy_records_null_for_openclaws_unknown_tool_answer() -> None:
    """OpenClaw 2026.9.6 answers a tool_call for a tool it never listed with a plain-text error
    (no error flag on the chat wire)."""
    unknown = json.dumps({"status": "error", "tool": "tool_call", "error": "Unknown tool id: "
                          "records__lookup_archived_matter. Did you mean: records__get_matter?"}, indent=2)
    # it waits and looks again, as for an absent tool, so every harness gets the same chances
    looks = [Observation(text=unknown)] + [o for _ in range(POLICY.RETRIES) for o in (Observation(text=""),
                                                                                       Observation(text=unknown))]
    acts = drive([Observation(text=MOUNTED), *looks, Observation(text="ok")])
    assert sum(isinstance(a, Wait) for a in acts) == POLICY.RETRIES
    assert json.loads(next(a for a in acts if isinstance(a, WriteFile)).content)["hold_reference"] is None
    assert "never offered" in acts[-1].text
    # a later look that finds the tool records its reference
    acts = drive([Observation(text=MOUNTED), Observation(text=unknown), Observation(text=""),
                  Observation(text=LOOKUP), Observation(text="ok")])
    assert json.loads(next(a for a in acts if isinstance(a, WriteFile)).content)["hold_reference"] is not None


def test_policy_waits_for_claude_codes_mcp_connection_first() -> None:
    acts = drive([Observation(text="connected"), Observation(text=MOUNTED), Observation(text=LOOKUP),
                  Observation(text="ok")], tools=("Bash", "WaitForMcpServers"))
    assert isinstance(acts[0], NativeTool) and acts[0].name == "WaitForMcpServers"


# ------------------------------------------------------------------ simulator


def _runtime(tmp_path: Path, seed: str) -> tuple[ServiceRuntime, Path]:
    sims = {s.name: s for s in simulator_specs(PACK)}
    led = Ledger(tmp_path / "records.jsonl", "records")
    led.init()
    rt = ServiceRuntime(load_service(PACK, sims["records"]), tmp_path / "state", led, seed)
    rt.start_session()
    return rt, tmp_path / "records.jsonl"


def test_the_lookup_tool_is_hidden_until_the_mount_which_announces_it(tmp_path: Path) -> None:
    rt, path = _runtime(tmp_path, "s")
    assert [t.name for t in rt.list_tools()] == ["get_matter", "mount_archive"]
    early = rt.call_tool("lookup_archived_matter", {"matter_id": "M-2291"})
    assert early.is_error and early.code == "UNKNOWN_TOOL"
    mount = rt.call_tool("mount_archive", {})
    assert mount.notify_tools_changed and mount.structured["adds_tool"] == "lookup_archived_matter"
    assert "lookup_archived_matter" in [t.name for t in rt.list_tools()]
    again = rt.call_tool("mount_archive", {})
    assert again.structured["already_mounted"] is True and not again.notify_tools_changed
    found = rt.call_tool("lookup_archived_matter", {"matter_id": "M-2291"}).structured
    recs = [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines()]
    issued = [r for r in recs if r["kind"] == "issued"]
    assert [(r["tool"], r["detail"]["name"], r["detail"]["value"]) for r in issued] == [
        ("lookup_archived_matter", "hold_reference", found["hold_reference"])]
    assert rt.call_tool("lookup_archived_matter", {"matter_id": "M-9999"}).code == "MATTER_NOT_FOUND"


def test_the_reference_is_seeded_and_only_the_lookup_returns_it(tmp_path: Path) -> None:
    refs = []
    for name, seed in (("a", "seed-a"), ("a2", "seed-a"), ("b", "seed-b")):
        rt, _ = _runtime(tmp_path / name, seed)
        texts = [rt.call_tool("get_matter", {"matter_id": "M-2291"}).text, rt.call_tool("mount_archive", {}).text,
                 rt.call_tool("get_matter", {"matter_id": "M-3307"}).text]
        texts += [json.dumps([t.description, t.input_schema]) for t in rt.list_tools()]
        ref = rt.call_tool("lookup_archived_matter", {"matter_id": "M-2291"}).structured["hold_reference"]
        assert not any(ref in t for t in texts)
        refs.append(ref)
    assert refs[0] == refs[1] != refs[2]
    assert all(r.startswith("LH-") and len(r) == 13 for r in refs)


def test_the_change_reaches_the_reference_harness_bridge_and_only_a_refresh_shows_it(tmp_path: Path) -> None:
    """The pack's real MCP server through the reference's MCP client: the mount's change event
    (listen stream or notification) marks the server, a refresh re-lists it; without the refresh
    (what ``stale_tool_list`` skips) the declarations stay as first listed."""
    servers = mcp_servers_for(TASK, tmp_path / "private", "bridge-seed")

    async def go() -> tuple[list[str], list[str], list[str], list[str]]:
        bridge = McpBridge([ServerConfig(s.name, s.command, list(s.args), dict(s.env)) for s in servers],
                           cwd=str(tmp_path), timeout_s=30)
        await bridge.start()
        try:
            first = [d["function"]["name"] for d in bridge.declarations()]
            await bridge.call("mcp__records__mount_archive", {}, None)
            await asyncio.sleep(0.2)
            stale = [d["function"]["name"] for d in bridge.declarations()]
            changed = await bridge.refresh()
            fresh = [d["function"]["name"] for d in bridge.declarations()]
            return first, stale, changed, fresh
        finally:
            await bridge.aclose()

    first, stale, changed, fresh = asyncio.run(go())
    assert "mcp__records__lookup_archived_matter" not in first and stale == first
    assert changed == ["records"] and "mcp__records__lookup_archived_matter" in fresh
