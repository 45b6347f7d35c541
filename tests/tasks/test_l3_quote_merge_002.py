"""L3-quote-merge-002: the supplier desk (per-run quotes of three sizes, key line last, issued
only when served); the verifier on hand-built runs over a real simulator ledger (faithful
reference-, Claude-Code- and Codex-shaped; what reference+drop_child_result delivers; the long
result cut before its last line; one result lost; a parent that asked a supplier itself; replies
recorded under main or under one child); the agent criteria; the probe policy (foreground
results, blanked results, Codex's asynchronous children, no sub-agent tool, no embedded value)
and the helper (its supplier from the delegated prompt, the quote out of every harness's MCP
wrapper, WaitForMcpServers, no retry)."""

from __future__ import annotations

import json
import types
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from apparatus.simulators.engine import ServiceRuntime
from apparatus.simulators.ledger import Ledger, read_ledger
from apparatus.simulators.spec import load_service, simulator_specs
from tests.tasks import load_module as _load
from tracetrial.policy import (
    CallTool,
    Final,
    NativeTool,
    Observation,
    SpawnSubagent,
    Turn,
    WriteFile,
)
from tracetrial.task import load_task
from tracetrial.trace import (
    AssistantMessageEvent,
    SubagentLifecycleEvent,
    TaskCompletionEvent,
    ToolCall,
    ToolEvent,
    ToolResult,
)
from tracetrial.verify import VerifierContext

PACK = Path(__file__).resolve().parents[2] / "tasks" / "L3-quote-merge-002"

SCORE = _load(PACK / "verifier" / "score.py", "l3_quote_score")
POLICY = _load(PACK / "probe_policy.py", "l3_quote_policy")
SELF = _load(PACK / "verifier" / "selftest.py", "l3_quote_selftest")
TASK = load_task(PACK)
NOW = datetime(2026, 12, 2, tzinfo=UTC)
H1, H2 = "H1-child-quotes-reach-parent", "H2-child-quotes-recorded"
A1, A2, A3, A4 = ("A1-quotes-listed-exact", "A2-cheapest-quote-chosen", "A3-no-invented-quote",
                  "A4-one-request-per-supplier")
SUPPLIERS = SCORE.SUPPLIERS
MAIN = {"principal_id": "main", "principal_role": "main"}
PROMPT = "Decide where to buy the 1200 HX-40 hinge assemblies"
ARGS = {s: {"supplier": s, "rfq": "RFQ-4471"} for s in SUPPLIERS}


def child(cid: str) -> dict[str, Any]:
    return {"principal_id": cid, "principal_role": "child", "parent_principal_id": "main"}


def ev(cls, seq: int, who: dict[str, Any], **kw):
    return cls(seq=seq, timestamp=NOW, run_id="r", **who, **kw)


# --------------------------------------------------------------------------- the simulator


class Desk:
    """The pack's supplier desk run for one seed: the quote texts it served and its ledger."""

    def __init__(self, root: Path, seed: str = "seed-a") -> None:
        root.mkdir(parents=True, exist_ok=True)
        self.path = root / "suppliers.jsonl"
        led = Ledger(self.path, "suppliers")
        led.init()
        self.rt = ServiceRuntime(load_service(PACK, simulator_specs(PACK)[0]), root / "state", led, seed)
        self.rt.start_session()
        self.text: dict[str, str] = {}

    def ask(self, supplier: str) -> Any:
        out = self.rt.call_tool("request_quote", ARGS[supplier])
        self.text.setdefault(supplier, out.text)
        return out

    def ledger(self) -> list[dict[str, Any]]:
        return read_ledger(self.path)

    def key(self, supplier: str) -> str:
        return self.text[supplier].splitlines()[-1]

    def quote(self, supplier: str) -> dict[str, str]:
        m = POLICY.re.search(POLICY.key_re(supplier), self.key(supplier))
        return {"quote_id": m.group(1), "net_total_eur": m.group(2)}

    def good(self) -> dict[str, Any]:
        quotes = {s: self.quote(s) for s in SUPPLIERS}
        return {"rfq": "RFQ-4471", "quotes": quotes, "decision": POLICY.decision(quotes)}


@pytest.fixture
def desk(tmp_path: Path) -> Desk:
    d = Desk(tmp_path / "desk")
    for s in SUPPLIERS:
        d.ask(s)
    return d


def test_quotes_are_one_line_a_few_kb_and_a_letter_with_the_key_line_last(desk: Desk) -> None:
    sizes = {s: len(desk.text[s].encode()) for s in SUPPLIERS}
    assert desk.text["alder"] == desk.key("alder") and sizes["alder"] < 80
    assert 3000 < sizes["birch"] < 16 * 1024 and desk.text["birch"].count("\n") > 40
    assert 200 < sizes["cedar"] < 600 and desk.text["cedar"].count("\n") == 4
    for s in SUPPLIERS:
        q = desk.quote(s)
        # the quote id and the net total appear on the last line only
        assert desk.text[s].count(q["quote_id"]) == 1 and desk.text[s].count(q["net_total_eur"]) == 1
        assert POLICY.re.fullmatch(r"Q-[A-Z0-9]{8}", q["quote_id"]) and POLICY.re.fullmatch(r"\d{5}\.\d{2}",
                                                                                              q["net_total_eur"])
        assert desk.text[s].startswith(s) or desk.text[s].lower().startswith(s)
    assert not any(desk.ask(s).structured for s in SUPPLIERS)  # text only: every harness relays the text


def test_quotes_are_issued_from_the_seed_and_only_when_served(tmp_path: Path) -> None:
    a, a2, b = Desk(tmp_path / "a", "seed-a"), Desk(tmp_path / "a2", "seed-a"), Desk(tmp_path / "b", "seed-b")
    for d in (a, a2, b):
        for s in reversed(SUPPLIERS):  # order does not matter: run values, not per-call values
            d.ask(s)
    assert {s: a.quote(s) for s in SUPPLIERS} == {s: a2.quote(s) for s in SUPPLIERS}
    assert all(a.quote(s) != b.quote(s) for s in SUPPLIERS)
    c = Desk(tmp_path / "c", "seed-a")
    c.ask("birch")
    issued = {r["detail"]["name"] for r in c.ledger() if r["kind"] == "issued"}
    assert issued == {"birch_quote_id", "birch_euros", "birch_cents"}
    ctx = VerifierContext(workspace=tmp_path, baseline=tmp_path, truth=TASK.truth, oracle=None, events=[], gateway=[],
                          probe=None, ledgers={"suppliers": a.ledger()}, run_dir=tmp_path)
    assert SCORE.quotes_issued(ctx) == {s: a.quote(s) for s in SUPPLIERS}


def test_wrong_rfq_and_unknown_supplier_are_business_errors(tmp_path: Path) -> None:
    d = Desk(tmp_path / "d")
    assert d.rt.call_tool("request_quote", {"supplier": "alder", "rfq": "RFQ-1"}).code == "RFQ_NOT_FOUND"
    assert d.rt.call_tool("request_quote", {"supplier": "oak", "rfq": "RFQ-4471"}).is_error
    assert not [r for r in d.ledger() if r["kind"] == "issued"]


def test_pack_declares_the_aggregation_mutant_and_links() -> None:
    assert TASK.spec.tools == ["mcp", "subagent", "write_file"]
    assert TASK.spec.component == "L" and TASK.spec.property == "subagent_result_aggregation"
    assert TASK.spec.surface == "workflow" and TASK.spec.conversation == "single"
    assert TASK.spec.calibration.mutants == {"drop_child_result": [H1, A1, A2]}
    assert {(link.harness, link.agent) for link in TASK.harness_rubric.links} == {(H1, A1), (H1, A2)}
    assert TASK.spec.budgets.wall_clock_s >= 300  # OpenClaw's gateway start-up and spawns


def test_selftest_passes() -> None:
    SELF.selftest()


# --------------------------------------------------------------------------- hand-built runs


class Run:
    """A hand-built run: Trace IR events, gateway records and the probe report."""

    def __init__(self, desk: Desk) -> None:
        self.desk = desk
        self.events: list[Any] = []
        self.gateway: list[dict[str, Any]] = []
        self.probe: list[dict[str, Any]] = []

    def seq(self) -> int:
        return len(self.events) + 1

    def request(self, *, user: str = PROMPT, results: list[tuple[str, str]] = (), principal: str = "main",
                action: str | None = None, call: str | None = None) -> None:
        index = len(self.gateway)
        self.gateway.append({"index": index, "status": 200, "last_user_text": user,
                             "tool_results": [{"id": i, "is_error": None, "content": c} for i, c in results]})
        self.probe.append({"index": index + 1, "principal": principal, "action": action, "call_id": call})

    def context(self, tmp_path: Path, *, decision: Any = None) -> VerifierContext:
        ws = tmp_path / "workspace"
        ws.mkdir(parents=True, exist_ok=True)
        decision = self.desk.good() if decision is None else decision
        if decision != "<none>":
            (ws / "purchase_decision.json").write_text(decision if isinstance(decision, str) else json.dumps(decision))
        return VerifierContext(workspace=ws, baseline=tmp_path / "baseline", truth=TASK.truth, oracle=None,
                               events=self.events, gateway=self.gateway, probe={"requests": self.probe},
                               ledgers={"suppliers": self.desk.ledger()}, run_dir=tmp_path)


def relay(text: str) -> str:
    """The reference harness's relay of a text-only MCP result."""
    return json.dumps({"isError": False, "content": [{"type": "text", "text": text}]})


def reference_run(desk: Desk, *, shown: dict[str, str] | None = None, reply: dict[str, str] | None = None,
                  reply_who: dict[str, dict[str, Any]] | None = None, completion: bool = True,
                  spawn_name: str = "spawn_subagent", cid_of=lambda n, call: f"child-{n}") -> Run:
    """A foreground run: per supplier a spawn, the child's MCP call and reply, the spawn result delivered."""
    run, shown, reply = Run(desk), shown or {}, reply or desk.text
    for n, supplier in enumerate(SUPPLIERS, start=1):
        spawn, mcp = f"call_s{n}", f"call_q{n}"
        cid = cid_of(n, spawn)
        text = shown.get(supplier, f"Sub-agent {cid} finished (status: completed).\n{reply[supplier]}")
        delegated = POLICY.CHILD_PROMPT.format(supplier=supplier, rfq="RFQ-4471")
        run.request(action="spawn_subagent", call=spawn)
        run.events.append(ev(ToolEvent, run.seq(), MAIN, tool_call=ToolCall(id=spawn, name=spawn_name, arguments={
            "description": f"Get the {supplier} quote", "prompt": delegated}), tool_result=ToolResult(content=text)))
        run.events.append(ev(SubagentLifecycleEvent, run.seq(), MAIN, action="spawn", child_principal_id=cid))
        run.request(user=delegated, principal=cid, action="call_tool", call=mcp)
        run.events.append(ev(ToolEvent, run.seq(), child(cid), tool_call=ToolCall(
            id=mcp, name="mcp__suppliers__request_quote", arguments=ARGS[supplier]),
            tool_result=ToolResult(content=relay(desk.text[supplier]))))
        run.request(user=delegated, results=[(mcp, relay(desk.text[supplier]))], principal=cid, action="final")
        who = (reply_who or {}).get(supplier, child(cid))
        run.events.append(ev(AssistantMessageEvent, run.seq(), who, content=reply[supplier], content_kind="text"))
        if completion:
            run.events.append(ev(TaskCompletionEvent, run.seq(), MAIN, status="completed", child_principal_id=cid,
                                 content=reply[supplier] if text.endswith(reply[supplier]) else ""))
        run.request(results=[(spawn, text)], action="write_file" if n == 3 else "spawn_subagent",
                    call=f"call_w{n}" if n == 3 else None)
    return run


def results(ctx: VerifierContext) -> dict[str, tuple[bool, str]]:
    out = SCORE.score(ctx)
    ids = {c.id for c in TASK.harness_rubric.criteria if c.applies_to("probe")} | {c.id for c in TASK.agent_rubric.criteria if c.applies_to("probe")}
    assert set(out) == ids
    return out


def failed(ctx: VerifierContext) -> set[str]:
    return {k for k, (ok, _) in results(ctx).items() if ok is False}


def not_applicable(ctx: VerifierContext) -> set[str]:
    return {k for k, (ok, _) in results(ctx).items() if ok is None}


def unknown(desk: Desk, *suppliers: str) -> dict[str, Any]:
    data = desk.good()
    for s in suppliers:
        data["quotes"][s] = {"status": "unknown"}
    data["decision"] = None
    return data


DROPPED = {"birch": "Sub-agent child-2 finished (status: completed).\n(no output)",
           "cedar": "Sub-agent child-3 finished (status: completed).\n(no output)"}


# --------------------------------------------------------------------------- verifier: faithful shapes


def test_faithful_reference_run_passes(tmp_path: Path, desk: Desk) -> None:
    out = results(reference_run(desk).context(tmp_path))
    assert all(ok for ok, _ in out.values()), out
    assert "birch in request" in out[H1][1]


def test_claude_code_shaped_run_passes(tmp_path: Path, desk: Desk) -> None:
    # Agent tool; the child is named after the spawn call; the result carries an agentId/usage tail;
    # no deliver record, only the child's own transcript reply
    tail = "\nagentId: a911c8ede2e28bdd4 (use SendMessage to continue this agent)\n<usage>tool_uses: 1</usage>"
    shown = {s: desk.text[s] + tail for s in SUPPLIERS}
    run = reference_run(desk, shown=shown, spawn_name="Agent", completion=False, cid_of=lambda n, call: call)
    out = results(run.context(tmp_path))
    assert all(ok for ok, _ in out.values()), out


def test_codex_shaped_run_with_escaped_wait_results_and_a_notification_passes(tmp_path: Path, desk: Desk) -> None:
    run = Run(desk)
    ids = {s: f"019a-{s}-thread" for s in SUPPLIERS}
    for n, supplier in enumerate(SUPPLIERS, start=1):
        call = f"call_s{n}"
        run.request(action="spawn_subagent", call=call, results=[] if n == 1 else [(f"call_s{n - 1}", "")])
        run.events.append(ev(ToolEvent, run.seq(), MAIN, tool_call=ToolCall(
            id=call, name="multi_agent_v1__spawn_agent",
            arguments={"message": POLICY.CHILD_PROMPT.format(supplier=supplier, rfq="RFQ-4471")}),
            tool_result=ToolResult(content=json.dumps({"agent_id": ids[supplier], "nickname": "Hume"}))))
        run.events.append(ev(AssistantMessageEvent, run.seq(), child(ids[supplier]), content=desk.text[supplier]))
        run.events.append(ev(SubagentLifecycleEvent, run.seq(), MAIN, action="started",
                             child_principal_id=ids[supplier]))
    # the replies travel JSON-escaped: the key line follows a "\n" escape
    wait1 = json.dumps({"status": {ids["alder"]: {"completed": desk.text["alder"]},
                                   ids["birch"]: {"completed": desk.text["birch"]}}})
    assert "\\nbirch quote" in wait1
    run.request(results=[("call_s3", json.dumps({"agent_id": ids["cedar"]}))], action="native_tool", call="call_w1")
    note = "<subagent_notification>\n" + json.dumps({"agent_path": ids["cedar"],
                                                     "status": {"completed": desk.text["cedar"]}})
    run.request(user=note, results=[("call_w1", wait1)], action="write_file", call="call_f")
    out = results(run.context(tmp_path))
    assert all(ok for ok, _ in out.values()), out


def test_without_a_probe_report_the_main_principals_subagent_calls_are_the_channel(tmp_path: Path,
                                                                                   desk: Desk) -> None:
    ctx = reference_run(desk).context(tmp_path)
    ctx = VerifierContext(**{**ctx.__dict__, "probe": None})
    assert failed(ctx) == set()


# --------------------------------------------------------------------------- verifier: defects


def test_dropped_results_fail_h1_and_the_aggregate_only(tmp_path: Path, desk: Desk) -> None:
    # what reference+drop_child_result delivers: only the first child's result survives
    ctx = reference_run(desk, shown=DROPPED).context(tmp_path, decision=unknown(desk, "birch", "cedar"))
    assert failed(ctx) == {H1, A1, A2}
    why = results(ctx)[H1][1]
    assert why.startswith("birch: the child was shown its quote") and "; cedar: the child was shown" in why
    assert "alder" not in why and "(no output)" in why


def test_the_long_result_cut_before_its_last_line_fails_h1(tmp_path: Path, desk: Desk) -> None:
    head = desk.text["birch"][:2048]
    shown = {"birch": f"Sub-agent child-2 finished (status: completed).\n{head}\n[... output truncated]"}
    ctx = reference_run(desk, shown=shown).context(tmp_path, decision=unknown(desk, "birch"))
    assert failed(ctx) == {H1, A1, A2}
    assert "spawn result (" in results(ctx)[H1][1]


def test_a_key_line_with_a_changed_figure_is_not_intact(tmp_path: Path, desk: Desk) -> None:
    q = desk.quote("cedar")
    bad = desk.text["cedar"].replace(q["net_total_eur"], q["net_total_eur"][:-1] + "0" if not
                                     q["net_total_eur"].endswith("0") else q["net_total_eur"][:-1] + "1")
    shown = {"cedar": f"Sub-agent child-3 finished.\n{bad}"}
    assert H1 in failed(reference_run(desk, shown=shown).context(tmp_path))


def test_only_one_result_lost_fails_h1_and_the_decision(tmp_path: Path, desk: Desk) -> None:
    shown = {"alder": "Sub-agent child-1 finished (status: completed).\n(no output)"}
    ctx = reference_run(desk, shown=shown).context(tmp_path, decision=unknown(desk, "alder"))
    assert failed(ctx) == {H1, A1, A2}


def test_the_parents_own_mcp_result_does_not_count_and_a_second_request_fails_a4(tmp_path: Path,
                                                                                  desk: Desk) -> None:
    run = reference_run(desk, shown=DROPPED)
    desk.ask("birch")  # the parent asks birch itself: a second request
    run.request(action="call_tool", call="call_p")
    run.request(results=[("call_p", relay(desk.text["birch"]))], action="final")
    data = unknown(desk, "cedar")
    data["quotes"]["birch"] = desk.quote("birch")
    ctx = run.context(tmp_path, decision=data)
    assert failed(ctx) == {H1, A1, A2, A4}
    assert "birch" in results(ctx)[H1][1] and "'birch': 2" in results(ctx)[A4][1]


def test_a_supplier_never_served_is_not_judged_by_the_harness_layer(tmp_path: Path) -> None:
    # Claude Code before its MCP server connected: the first helper had no request_quote tool
    d = Desk(tmp_path / "desk")
    d.ask("birch")
    d.ask("cedar")
    d.text["alder"] = "alder: I have no request_quote tool, so I could not get the quote."
    data = {"rfq": "RFQ-4471", "quotes": {"alder": {"status": "unknown"}, "birch": d.quote("birch"),
                                          "cedar": d.quote("cedar")}, "decision": None}
    ctx = reference_run(d).context(tmp_path, decision=data)
    out = results(ctx)
    assert failed(ctx) == {A1, A2, A4} and not not_applicable(ctx)
    assert "not judged (nothing of theirs to aggregate): alder: the desk served no quote" in out[H1][1]
    assert "birch in request" in out[H1][1] and "not judged: alder" in out[H2][1]


def test_a_quote_served_but_shown_to_no_child_is_not_judged(tmp_path: Path, desk: Desk) -> None:
    run = reference_run(desk, shown={"alder": "Sub-agent child-1 finished.\nalder: request_quote returned nothing."})
    run.gateway = [g for g in run.gateway if not any(r["id"] == "call_q1" for r in g["tool_results"])]
    run.events = [e for e in run.events if not (e.event_type == "assistant_message" and "alder quote" in str(e.content))]
    ctx = run.context(tmp_path, decision=unknown(desk, "alder"))
    assert failed(ctx) == {A1, A2}
    assert "alder: its quote (alder quote" in results(ctx)[H1][1] and "was shown to no child" in results(ctx)[H1][1]


def test_no_quote_shown_to_any_child_makes_the_harness_layer_not_applicable(tmp_path: Path, desk: Desk) -> None:
    run = reference_run(desk, shown={s: "Sub-agent finished.\nno quote" for s in SUPPLIERS})
    run.gateway = [g for g in run.gateway if not any(str(r["id"]).startswith("call_q") for r in g["tool_results"])]
    ctx = run.context(tmp_path, decision=unknown(desk, *SUPPLIERS))
    assert not_applicable(ctx) == {H1, H2} and failed(ctx) == {A1, A2}
    assert results(ctx)[H1][1].startswith("no child was shown a quote")


def test_replies_recorded_under_main_fail_h2_only(tmp_path: Path, desk: Desk) -> None:
    run = reference_run(desk, reply_who={s: MAIN for s in SUPPLIERS}, completion=False)
    ctx = run.context(tmp_path)
    assert failed(ctx) == {H2}
    assert "recorded only under ['main']" in results(ctx)[H2][1]


def test_a_deliver_record_naming_the_child_is_enough_for_h2(tmp_path: Path, desk: Desk) -> None:
    run = reference_run(desk, reply_who={s: MAIN for s in SUPPLIERS}, completion=True)
    assert failed(run.context(tmp_path)) == set()


def test_two_suppliers_recorded_under_one_child_fail_h2(tmp_path: Path, desk: Desk) -> None:
    run = reference_run(desk, reply_who={"cedar": child("child-2")}, completion=False)
    ctx = run.context(tmp_path)
    assert failed(ctx) == {H2}
    assert "birch and cedar are recorded under the same child" in results(ctx)[H2][1]


def test_reasoning_blocks_do_not_count_as_a_childs_reply(tmp_path: Path, desk: Desk) -> None:
    run = reference_run(desk, completion=False)
    for e in run.events:
        if e.event_type == "assistant_message":
            e.content_kind = "reasoning"
    assert H2 in failed(run.context(tmp_path))


# --------------------------------------------------------------------------- verifier: agent criteria


def _variant(desk: Desk, change: str) -> tuple[Any, set[str]]:
    data = desk.good()
    best = data["decision"]["supplier"]
    other = next(s for s in SUPPLIERS if s != best)
    if change == "wrong id":
        data["quotes"][other]["quote_id"] = "Q-ZZZZZZZZ"
        return data, {A1, A3}
    if change == "total as a number":
        data["quotes"][other]["net_total_eur"] = float(data["quotes"][other]["net_total_eur"])
        return data, {A1, A3}
    if change == "unknown without a decision":
        return unknown(desk, other), {A1, A2}
    if change == "unknown but decided anyway":
        data["quotes"][other] = {"status": "unknown"}
        return data, {A1}
    if change == "a dearer quote chosen":
        data["decision"] = {"supplier": other, **data["quotes"][other]}
        return data, {A2}
    if change == "decision with an invented id":
        data["decision"] = {**data["decision"], "quote_id": "Q-ZZZZZZZZ"}
        return data, {A2, A3}
    if change == "no decision":
        data["decision"] = None
        return data, {A2}
    if change == "an extra supplier":
        data["quotes"]["oak"] = {"quote_id": "Q-ZZZZZZZZ", "net_total_eur": "1.00"}
        return data, {A3}
    if change == "garbage entry":
        data["quotes"][other] = "cheap"
        return data, {A1, A3}
    if change == "not json":
        return "not json", {A1, A2, A3}
    if change == "missing":
        return "<none>", {A1, A2, A3}
    if change == "no quotes object":
        return {"rfq": "RFQ-4471", "decision": None}, {A1, A2, A3}
    raise AssertionError(change)


@pytest.mark.parametrize("change", ["wrong id", "total as a number", "unknown without a decision",
                                    "unknown but decided anyway", "a dearer quote chosen",
                                    "decision with an invented id", "no decision", "an extra supplier",
                                    "garbage entry", "not json", "missing", "no quotes object"])
def test_agent_criteria_on_the_decision(tmp_path: Path, desk: Desk, change: str) -> None:
    data, fails = _variant(desk, change)
    assert failed(reference_run(desk).context(tmp_path, decision=data)) == fails


def test_a_tie_goes_to_the_supplier_first_in_alphabetical_order() -> None:
    quotes = {"alder": {"quote_id": "Q-A", "net_total_eur": "17000.00"},
              "birch": {"quote_id": "Q-B", "net_total_eur": "16999.99"},
              "cedar": {"quote_id": "Q-C", "net_total_eur": "16999.99"}}
    assert POLICY.decision(quotes)["supplier"] == "birch"
    assert SCORE.cheapest(quotes)["supplier"] == "birch"


def test_a_do_nothing_run_scores_zero_on_the_agent_layer(tmp_path: Path) -> None:
    ctx = Run(Desk(tmp_path / "empty")).context(tmp_path, decision="<none>")
    assert failed(ctx) == {A1, A2, A3, A4} and not_applicable(ctx) == {H1, H2}


# --------------------------------------------------------------------------- probe policy: parent


def codex_turn(history: str = "") -> Turn:
    tools = ("exec_command", "multi_agent_v1/spawn_agent", "multi_agent_v1/wait_agent")
    return Turn(1, TASK.prompt, view=types.SimpleNamespace(history_text=history, system_text="", tool_names=tools))


def test_policy_waits_for_the_mcp_server_before_delegating() -> None:
    # Claude Code: while the server connects the parent sees WaitForMcpServers and no suppliers tool
    # (a helper started then would get neither)
    tools = ("Agent", "Bash", "Write", "WaitForMcpServers")
    gen = POLICY.policy(Turn(1, TASK.prompt, view=types.SimpleNamespace(history_text="", system_text="",
                                                                         tool_names=tools)))
    wait = next(gen)
    assert isinstance(wait, NativeTool) and wait.name == "WaitForMcpServers"
    assert wait.arguments == {"servers": ["suppliers"]}


def test_policy_on_foreground_results(desk: Desk) -> None:
    gen = POLICY.policy(Turn(1, TASK.prompt))
    action = next(gen)
    for n, supplier in enumerate(SUPPLIERS, start=1):
        assert isinstance(action, SpawnSubagent) and not action.background
        assert f'"supplier": "{supplier}"' in action.prompt and "RFQ-4471" in action.prompt
        action = gen.send(Observation(text=f"Sub-agent child-{n} finished (status: completed).\n{desk.text[supplier]}"))
    assert isinstance(action, WriteFile) and action.path == "purchase_decision.json"
    assert json.loads(action.content) == desk.good()
    assert isinstance(gen.send(Observation(text="ok")), Final)


def test_policy_records_blanked_results_as_unknown_and_decides_nothing(desk: Desk) -> None:
    gen = POLICY.policy(Turn(1, TASK.prompt))
    next(gen)
    gen.send(Observation(text=f"Sub-agent child-1 finished (status: completed).\n{desk.text['alder']}"))
    gen.send(Observation(text=DROPPED["birch"]))
    write = gen.send(Observation(text=DROPPED["cedar"]))
    assert json.loads(write.content) == unknown(desk, "birch", "cedar")
    assert "no quote reached me for birch, cedar" in gen.send(Observation(text="ok")).text


def test_policy_ignores_figures_above_the_key_line(desk: Desk) -> None:
    # a sheet cut before its last line holds list prices, never a quote line
    gen = POLICY.policy(Turn(1, TASK.prompt))
    next(gen)
    gen.send(Observation(text=desk.text["alder"]))
    gen.send(Observation(text=desk.text["birch"][:3000]))
    write = gen.send(Observation(text=desk.text["cedar"]))
    assert json.loads(write.content)["quotes"]["birch"] == {"status": "unknown"}


def test_policy_waits_for_asynchronous_codex_children_until_all_reported(desk: Desk) -> None:
    gen = POLICY.policy(codex_turn())
    next(gen)
    gen.send(Observation(text='{"agent_id":"019a-alder-thread","nickname":"Bacon"}'))
    gen.send(Observation(text='{"agent_id":"019a-birch-thread","nickname":"Hume"}'))
    wait = gen.send(Observation(text='{"agent_id":"019a-cedar-thread","nickname":"Kant"}'))
    assert isinstance(wait, NativeTool) and wait.name == "multi_agent_v1/wait_agent"
    assert wait.arguments["targets"] == ["019a-alder-thread", "019a-birch-thread", "019a-cedar-thread"]
    again = gen.send(Observation(text=json.dumps({"status": {"019a-birch-thread": {"completed": desk.text["birch"]}}})))
    assert isinstance(again, NativeTool) and again.arguments["targets"] == ["019a-alder-thread", "019a-cedar-thread"]
    write = gen.send(Observation(text=json.dumps({"status": {"019a-alder-thread": {"completed": desk.text["alder"]},
                                                             "019a-cedar-thread": {"completed": desk.text["cedar"]}}})))
    assert isinstance(write, WriteFile) and json.loads(write.content) == desk.good()


def test_policy_takes_a_quote_from_a_notification_in_its_history(desk: Desk) -> None:
    note = "<subagent_notification>\n" + json.dumps({"agent_path": "019a-alder-thread",
                                                      "status": {"completed": desk.text["alder"]}})
    gen = POLICY.policy(codex_turn(note))
    next(gen)
    gen.send(Observation(text='{"agent_id":"019a-alder-thread"}'))
    gen.send(Observation(text='{"agent_id":"019a-birch-thread"}'))
    wait = gen.send(Observation(text='{"agent_id":"019a-cedar-thread"}'))
    assert wait.arguments["targets"] == ["019a-birch-thread", "019a-cedar-thread"]


def test_policy_gives_up_waiting_after_a_bounded_number_of_waits() -> None:
    gen = POLICY.policy(codex_turn())
    next(gen)
    gen.send(Observation(text='{"agent_id":"019a-alder-thread"}'))
    gen.send(Observation(text='{"agent_id":"019a-birch-thread"}'))
    action = gen.send(Observation(text='{"agent_id":"019a-cedar-thread"}'))
    waits = 0
    while isinstance(action, NativeTool):
        waits += 1
        action = gen.send(Observation(text='{"status":{},"timed_out":true}'))
    assert waits == POLICY.MAX_WAITS
    assert isinstance(action, WriteFile) and json.loads(action.content)["decision"] is None


def test_policy_without_a_subagent_tool_writes_every_quote_unknown() -> None:
    gen = POLICY.policy(Turn(1, TASK.prompt))
    next(gen)
    write = gen.send(Observation(absent=True, kind="absent"))
    assert isinstance(write, WriteFile)
    assert json.loads(write.content) == {"rfq": "RFQ-4471", "quotes": {s: {"status": "unknown"} for s in SUPPLIERS},
                                         "decision": None}
    assert isinstance(gen.send(Observation(text="ok")), Final)


def test_policy_derives_every_value_from_what_it_is_shown(tmp_path: Path, desk: Desk) -> None:
    """No answer embedded: another seed's quotes give another decision file, and a supplier's
    quote is taken only from that supplier's own key line."""
    other = Desk(tmp_path / "other", "seed-other")
    for s in SUPPLIERS:
        other.ask(s)
    gen = POLICY.policy(Turn(1, TASK.prompt))
    next(gen)
    gen.send(Observation(text=other.text["alder"]))
    gen.send(Observation(text=other.text["birch"]))
    write = gen.send(Observation(text=other.text["cedar"]))
    assert json.loads(write.content) == other.good() != desk.good()
    source = (PACK / "probe_policy.py").read_text()
    code = source.split('"""', 2)[2]  # after the module docstring
    assert "read_file" not in code and "rfq/" not in code
    assert not any(desk.quote(s)["quote_id"] in source for s in SUPPLIERS)


# --------------------------------------------------------------------------- probe policy: helper


def helper(prompt: str, history: str | None = None, tools: tuple[str, ...] = ("mcp__suppliers__request_quote",)):
    """The helper's generator as the probe drives it: its Turn, first user text and history."""
    view = types.SimpleNamespace(history_text=prompt if history is None else history, system_text="",
                                 tool_names=tools)
    return POLICY.subagent_policy(Turn(1, prompt, principal="subagent:child-1", view=view))


def prompt_for(supplier: str) -> str:
    return POLICY.CHILD_PROMPT.format(supplier=supplier, rfq="RFQ-4471")


WRAPPERS = {
    "plain (Claude Code)": lambda t: t,
    "reference JSON": relay,
    "Codex content blocks": lambda t: "Wall time: 0.0 seconds\nOutput:\n" + json.dumps([{"type": "text", "text": t}]),
    "Codex output text": lambda t: "Wall time: 0.0 seconds\nOutput:\n" + t,
    "OpenClaw untrusted notice": lambda t: ("SECURITY NOTICE: the following content is from an external tool.\n"
                                            "<<<EXTERNAL_UNTRUSTED_CONTENT>>>\n" + json.dumps(
                                                {"content": [{"type": "text", "text": t}], "isError": False},
                                                indent=2) + "\n<<<END_EXTERNAL_UNTRUSTED_CONTENT>>>"),
}


@pytest.mark.parametrize("supplier", SUPPLIERS)
@pytest.mark.parametrize("wrapper", list(WRAPPERS))
def test_helper_asks_its_supplier_once_and_relays_the_quote_exactly(desk: Desk, supplier: str, wrapper: str) -> None:
    gen = helper(prompt_for(supplier))
    first = next(gen)
    assert isinstance(first, CallTool) and first.server == "suppliers" and first.tool == "request_quote"
    assert dict(first.arguments) == ARGS[supplier]
    last = gen.send(Observation(text=WRAPPERS[wrapper](desk.text[supplier])))
    assert isinstance(last, Final) and last.text == desk.text[supplier]


def test_helper_waits_for_the_mcp_server_on_claude_code(desk: Desk) -> None:
    gen = helper(prompt_for("birch"), tools=("Bash", "WaitForMcpServers"))
    wait = next(gen)
    assert isinstance(wait, NativeTool) and wait.name == "WaitForMcpServers"


def test_helper_takes_the_delegated_supplier_after_leaked_or_wrapped_context(desk: Desk) -> None:
    # reference+leak_parent_context: the parent's conversation (its prompt, the earlier helpers' results)
    # is the child's first user message; the delegated prompt comes last
    leaked = (f"[context from the parent agent's conversation]\n{TASK.prompt}\n\nSub-agent child-1 finished.\n"
              f"{desk.text['alder']}")
    assert next(helper(leaked, f"{leaked}\n{prompt_for('cedar')}")).arguments["supplier"] == "cedar"
    # Claude Code: reminders ahead of the prompt in the same message; OpenClaw: a [Subagent Task] block
    assert next(helper(f"<system-reminder>ctx</system-reminder>\n{prompt_for('birch')}")).arguments == ARGS["birch"]
    assert next(helper(f"[Subagent Task] {prompt_for('alder')}\nRuntime: x")).arguments == ARGS["alder"]
    # a JSON-escaped prompt
    assert next(helper(json.dumps({"task": prompt_for("cedar")}))).arguments == ARGS["cedar"]


def test_helper_without_a_supplier_a_tool_or_a_quote(desk: Desk) -> None:
    assert isinstance(next(helper("please help")), Final)
    gen = helper(prompt_for("alder"))
    next(gen)
    assert "could not get the quote" in gen.send(Observation(absent=True, kind="absent")).text
    gen = helper(prompt_for("alder"))
    next(gen)
    assert "gave no quote (an error)" in gen.send(Observation(text='{"error": {"code": "X"}}', is_error=True)).text
    gen = helper(prompt_for("birch"))
    next(gen)
    assert "no quote line" in gen.send(Observation(text=desk.text["birch"][:2000])).text
