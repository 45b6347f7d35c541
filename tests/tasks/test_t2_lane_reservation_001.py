"""T2-lane-reservation-001: the warehouse simulator (two valid long MCP names that collide once
prefixed and cut to 64 characters; seeded reservation ids recorded with their tool), the verifier
on hand-built runs (each harness's naming form, the collide_tool_names mutant, a duplicate name, a
dropped or schema-less tool, a misrouted call, a standard-lane reservation, wrong or missing
deliverables, a live run without a probe report, OpenClaw's catalog search and ``tool_call``
dispatcher), the probe policy (it picks the express declaration — or catalog entry — by what it
was shown, never by a known name; reserves nothing without one) and the pack's selftest."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from apparatus.simulators.engine import ServiceRuntime
from apparatus.simulators.ledger import Ledger
from apparatus.simulators.spec import load_service, simulator_specs
from harnesses.reference.mcp_tools import FUNCTION_NAME, fitted_name, unique_name
from tests.tasks import drive as drive_policy
from tests.tasks import load_module
from tracetrial.policy import CallTool, Final, NativeTool, Observation, Turn, TurnView, WriteFile
from tracetrial.task import load_task
from tracetrial.trace import ToolCall, ToolEvent, ToolResult
from tracetrial.verify import VerifierContext

PACK = Path(__file__).resolve().parents[2] / "tasks" / "T2-lane-reservation-001"
SCORE = load_module(PACK / "verifier" / "score.py", "t2_lane_reservation_score")
POLICY = load_module(PACK / "probe_policy.py", "t2_lane_reservation_policy")
TASK = load_task(PACK)
TRUTH = json.loads((PACK / "truth.json").read_text(encoding="utf-8"))
H1, H2, A1, A2 = SCORE.H1, SCORE.H2, SCORE.A1, SCORE.A2
IDS = {H1, H2, A1, A2}

EXPRESS = TRUTH["tools"]["express"]["name"]
STANDARD = TRUTH["tools"]["standard"]["name"]
SERVICE_YAML = (PACK / "simulators" / "warehouse.yaml").read_text(encoding="utf-8")
ARGS = {"order_id": "SO-55127", "sku": "CHR-2290-GRN", "quantity": 2}
NOW = "2026-12-06T08:00:00Z"


def _runtime(tmp: Path, seed: str) -> tuple[ServiceRuntime, Path]:
    sims = {s.name: s for s in simulator_specs(PACK)}
    led = Ledger(tmp / "warehouse.jsonl", "warehouse")
    led.init()
    rt = ServiceRuntime(load_service(PACK, sims["warehouse"]), tmp / "state", led, seed)
    rt.start_session()
    return rt, tmp / "warehouse.jsonl"


def _records(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


# ------------------------------------------------------------------ simulator and trigger


def test_pack_declares_the_mutant_and_property() -> None:
    assert TASK.spec.property == "naming_registration" and TASK.spec.component == "T"
    assert TASK.spec.calibration.mutants == {"collide_tool_names": [H1, A1]}


def test_the_two_names_are_valid_mcp_names_that_collide_once_fitted() -> None:
    assert 64 < len("mcp__warehouse__" + EXPRESS) <= 128 and 64 < len("mcp__warehouse__" + STANDARD) <= 128
    assert len(EXPRESS) <= 128 and len(STANDARD) <= 128
    assert fitted_name("warehouse", EXPRESS) == fitted_name("warehouse", STANDARD)  # the mutant's collision
    taken: dict[str, Any] = {}
    a = unique_name("warehouse", EXPRESS, taken)
    taken[a] = ("warehouse", type("T", (), {"name": EXPRESS}))
    b = unique_name("warehouse", STANDARD, taken)
    assert a != b and FUNCTION_NAME.match(a) and FUNCTION_NAME.match(b)  # the faithful reference
    # cut names no longer say which lane: only the description does
    assert "express" not in a and "standard" not in b


def test_express_is_listed_first_and_descriptions_are_unique(tmp_path: Path) -> None:
    listed = _runtime(tmp_path, "s")[0].list_tools()
    assert [t.name for t in listed] == [EXPRESS, STANDARD]
    ex, st = (str(t.description) for t in listed)
    assert TRUTH["tools"]["express"]["phrase"] in ex and TRUTH["tools"]["standard"]["phrase"] not in ex
    assert TRUTH["tools"]["standard"]["phrase"] in st and "express" not in st.lower()


def test_reservations_are_seeded_and_recorded_with_their_tool(tmp_path: Path) -> None:
    rt, path = _runtime(tmp_path / "a", "seed-a")
    ex = rt.call_tool(EXPRESS, ARGS)
    st = rt.call_tool(STANDARD, ARGS)
    assert not ex.is_error and ex.structured["lane"] == "express" and ex.structured["reservation_id"] in ex.text
    assert st.structured["lane"] == "standard" and st.structured["reservation_id"] != ex.structured["reservation_id"]
    issued = [(r["tool"], r["detail"]["value"]) for r in _records(path) if r["kind"] == "issued"]
    assert issued == [(EXPRESS, ex.structured["reservation_id"]), (STANDARD, st.structured["reservation_id"])]
    again = _runtime(tmp_path / "a2", "seed-a")[0].call_tool(EXPRESS, ARGS).structured["reservation_id"]
    other = _runtime(tmp_path / "b", "seed-b")[0].call_tool(EXPRESS, ARGS).structured["reservation_id"]
    assert again == ex.structured["reservation_id"] != other


# ------------------------------------------------------------------ hand-built runs

SCHEMA = {"type": "object", "properties": {"order_id": {"type": "string"}, "sku": {"type": "string"},
                                           "quantity": {"type": "integer", "minimum": 1}},
          "required": ["order_id", "sku", "quantity"]}
RID, RID_STD = "RSV-EXPRESS001", "RSV-STANDARD01"


def desc(lane: str, prefix: bool = True) -> str:
    name = EXPRESS if lane == "express" else STANDARD
    body = (f"Reserve outbound stock for a customer order on the PRIORITY {lane.upper()} lane. "
            "Returns the reservation id.")
    return f"[MCP tool '{name}' of server 'warehouse'] {body}" if prefix else body


def decl(name: str, lane: str | None, *, namespace: str | None = None, schema: Any = SCHEMA,
         prefix: bool = True) -> dict[str, Any]:
    return {"name": name, "namespace": namespace, "description": desc(lane, prefix) if lane else "Some tool.",
            "input_schema": schema}


BUILTIN = [decl("write_file", None, schema={"type": "object", "properties": {"path": {}, "content": {}}})]
# The reservation tools as each harness may declare them: (express wire name, standard wire name, extra)
FORMS: dict[str, list[dict[str, Any]]] = {
    "reference-hashed": [decl("mcp__warehouse__reserve_outbound_inventory_for_the_cust_2b96180a", "express"),
                         decl("mcp__warehouse__reserve_outbound_inventory_for_the_cust_b61c5cd2", "standard")],
    "full-names": [decl(f"mcp__warehouse__{EXPRESS}", "express", prefix=False),
                   decl(f"mcp__warehouse__{STANDARD}", "standard", prefix=False)],
    "codex-namespace": [decl("reserve_outbound_inventory_for_the_customer_sh1a2b3c", "express",
                             namespace="mcp__warehouse", prefix=False),
                        decl("reserve_outbound_inventory_for_the_customer_sh4d5e6f", "standard",
                             namespace="mcp__warehouse", prefix=False)],
    "openclaw-direct": [decl(f"warehouse__{EXPRESS}", "express", prefix=False),
                        decl(f"warehouse__{STANDARD}", "standard", prefix=False)],
    "names-only": [decl(f"mcp__warehouse__{EXPRESS}", None), decl(f"mcp__warehouse__{STANDARD}", None)],
}
COLLIDED = [decl("mcp__warehouse__reserve_outbound_inventory_for_the_customer_ship", "standard")]


def display(d: dict[str, Any]) -> str:
    return f"{d['namespace']}/{d['name']}" if d.get("namespace") else str(d["name"])


def ledger(*served: str, refused: tuple[str, ...] = ()) -> list[dict[str, Any]]:
    recs: list[dict[str, Any]] = [{"seq": 1, "kind": "transition", "tool": None,
                                   "detail": {"op": "init", "new": {"reservations": []}}}]
    for tool in served:
        seq = len(recs) + 1
        recs.append({"seq": seq, "kind": "request", "tool": tool, "arguments": ARGS, "detail": {}})
        if tool in refused:
            recs.append({"seq": seq + 1, "kind": "refused", "tool": tool, "detail": {"request_seq": seq}})
            continue
        if tool in (EXPRESS, STANDARD):
            value = RID if tool == EXPRESS else RID_STD
            recs.append({"seq": seq + 1, "kind": "issued", "tool": tool,
                         "detail": {"name": "reservation_id", "value": value, "request_seq": seq}})
        else:
            recs.append({"seq": seq + 1, "kind": "error", "tool": tool,
                         "detail": {"code": "UNKNOWN_TOOL", "request_seq": seq}})
    return recs


GOOD = {"order_id": "SO-55127", "sku": "CHR-2290-GRN", "lane": "express", "reservation_id": RID}


def run(tmp: Path, tools: list[dict[str, Any]], *, called: list[str], served: list[str],
        out: Any = "good", probe: bool = True, refused: tuple[str, ...] = (),
        first_tools: list[dict[str, Any]] | None = None, arguments: Any = None) -> VerifierContext:
    ws = tmp / "workspace"
    ws.mkdir(parents=True, exist_ok=True)
    if out is not None:
        data = GOOD if out == "good" else out
        (ws / "reservation.json").write_text(data if isinstance(data, str) else json.dumps(data))
    decls = BUILTIN + tools
    gateway = [{"index": i, "wire_format": "chat", "status": 200, "error": None, "tools": decls, "tool_results": []}
               for i in (1, 2, 3)]
    if first_tools is not None:
        gateway.insert(0, {"index": 0, "wire_format": "chat", "status": 200, "error": None,
                           "tools": BUILTIN + first_tools, "tool_results": []})
    reqs = [{"index": 1 + n, "action": "call_tool", "mapped_tool": name, "call_id": f"c{n}", "principal": "main",
             "arguments": arguments if arguments is not None else ARGS} for n, name in enumerate(called)]
    reqs.append({"index": 1 + len(called), "action": "write_file", "mapped_tool": "write_file", "call_id": "cw",
                 "principal": "main", "arguments": {}})
    events: list[Any] = [ToolEvent(seq=10 + n, timestamp=NOW, run_id="r",
                                   tool_call=ToolCall(id=r["call_id"], name=r["mapped_tool"],
                                                      arguments=r["arguments"]),
                                   tool_result=ToolResult(content="ok")) for n, r in enumerate(reqs)]
    return VerifierContext(workspace=ws, baseline=ws, truth=TRUTH, oracle=None, events=events, gateway=gateway,
                           probe={"requests": reqs} if probe else None,
                           ledgers={"warehouse": ledger(*served, refused=refused)}, run_dir=tmp)


def verdicts(ctx: VerifierContext) -> dict[str, tuple[bool, str]]:
    out: dict[str, tuple[bool, str]] = SCORE.score(ctx)
    assert set(out) == IDS
    return out


def failed(ctx: VerifierContext) -> set[str]:
    return {k for k, v in verdicts(ctx).items() if not v[0]}


@pytest.mark.parametrize("form", sorted(FORMS))
def test_every_faithful_naming_form_passes(tmp_path: Path, form: str) -> None:
    tools = FORMS[form]
    out = verdicts(run(tmp_path, tools, called=[display(tools[0])], served=[EXPRESS]))
    assert all(v[0] for v in out.values()), out


def test_the_collide_mutant_fails_h1_and_a1_only(tmp_path: Path) -> None:
    """collide_tool_names: one declaration (the standard tool's) for the pair; the ideal agent
    reserves nothing and writes reservation_id null."""
    ctx = run(tmp_path, COLLIDED, called=[], served=[], out={**GOOD, "reservation_id": None, "note": "no tool"})
    out = verdicts(ctx)
    assert failed(ctx) == {H1, A1}
    assert "no declaration is the express tool" in out[H1][1]
    assert "no reservation call" in out[H2][1]


def test_a_model_that_calls_the_collided_name_fails_h1_a1_and_a2(tmp_path: Path) -> None:
    """A live model that takes the one reserve tool there is: the standard lane is reserved."""
    ctx = run(tmp_path, COLLIDED, called=[COLLIDED[0]["name"]], served=[STANDARD],
              out={**GOOD, "reservation_id": RID_STD})
    assert failed(ctx) == {H1, A1, A2}  # H2 holds: the call reached the tool its declaration described


def test_two_declarations_under_one_name_fail_h1(tmp_path: Path) -> None:
    name = "mcp__warehouse__reserve_outbound_inventory_for_the_customer_ship"
    tools = [decl(name, "express"), decl(name, "standard")]
    out = verdicts(run(tmp_path, tools, called=[name], served=[EXPRESS]))
    assert not out[H1][0] and "declared more than once" in out[H1][1]


def test_a_misrouted_call_fails_h2_and_the_agent_layer(tmp_path: Path) -> None:
    tools = FORMS["reference-hashed"]
    ctx = run(tmp_path, tools, called=[tools[0]["name"]], served=[STANDARD], out={**GOOD, "reservation_id": RID_STD})
    out = verdicts(ctx)
    assert failed(ctx) == {H2, A1, A2}
    assert "did not reach" in out[H2][1]


@pytest.mark.parametrize("which", ["express", "standard"])
def test_a_dropped_tool_fails_h1(tmp_path: Path, which: str) -> None:
    tools = [d for d in FORMS["reference-hashed"] if which.upper() not in d["description"]]
    assert len(tools) == 1
    out = verdicts(run(tmp_path, tools, called=[], served=[], out={**GOOD, "reservation_id": None}))
    assert not out[H1][0] and f"no declaration is the {which} tool" in out[H1][1]


def test_a_declaration_without_the_schema_fields_fails_h1(tmp_path: Path) -> None:
    tools = copy.deepcopy(FORMS["reference-hashed"])
    tools[0]["input_schema"] = {"type": "object", "properties": {}}
    out = verdicts(run(tmp_path, tools, called=[tools[0]["name"]], served=[EXPRESS]))
    assert not out[H1][0] and "lack the fields" in out[H1][1]


def test_a_cut_name_without_description_fails_h1(tmp_path: Path) -> None:
    tools = [decl("mcp__warehouse__reserve_outbound_inventory_for_the_cust_2b96180a", None),
             decl("mcp__warehouse__reserve_outbound_inventory_for_the_cust_b61c5cd2", None)]
    assert not verdicts(run(tmp_path, tools, called=[], served=[], out=None))[H1][0]


def test_h1_reads_the_first_request_that_declares_the_warehouse(tmp_path: Path) -> None:
    """Claude Code: the first request may come before the MCP server connected."""
    tools = FORMS["full-names"]
    ctx = run(tmp_path, tools, called=[tools[0]["name"]], served=[EXPRESS], first_tools=[])
    assert failed(ctx) == set()
    ctx = run(tmp_path / "b", tools, called=[tools[0]["name"]], served=[EXPRESS], first_tools=COLLIDED)
    assert failed(ctx) == {H1}


def test_no_warehouse_tool_at_all_fails_h1(tmp_path: Path) -> None:
    out = verdicts(run(tmp_path, [], called=[], served=[], out={**GOOD, "reservation_id": None}))
    assert not out[H1][0] and "declares a warehouse tool" in out[H1][1]


def test_a_refused_request_is_not_served(tmp_path: Path) -> None:
    tools = FORMS["reference-hashed"]
    ctx = run(tmp_path, tools, called=[tools[0]["name"]], served=[EXPRESS], refused=(EXPRESS,))
    assert failed(ctx) == {H2, A1}


def test_a_live_run_reads_the_trace(tmp_path: Path) -> None:
    tools = FORMS["reference-hashed"]
    assert failed(run(tmp_path, tools, called=[tools[0]["name"]], served=[EXPRESS], probe=False)) == set()
    ctx = run(tmp_path / "b", tools, called=[tools[0]["name"]], served=[STANDARD], probe=False,
              out={**GOOD, "reservation_id": RID_STD})
    assert failed(ctx) == {H2, A1, A2}


def test_openclaw_tool_call_dispatcher_is_followed(tmp_path: Path) -> None:
    tools = FORMS["openclaw-direct"] + [decl("tool_call", None, schema={"type": "object",
                                                                          "properties": {"id": {}, "args": {}}})]
    ctx = run(tmp_path, tools, called=["tool_call"], served=[EXPRESS],
              arguments={"id": f"warehouse__{EXPRESS}", "args": ARGS})
    out = verdicts(ctx)
    assert failed(ctx) == set() and "-> express" in out[H2][1]


@pytest.mark.parametrize("edit,want", [
    ({"reservation_id": "RSV-GUESSED00"}, {A1}),
    ({"reservation_id": None}, {A1}),
    ({"lane": "standard"}, {A1}),
    ({"order_id": "SO-1"}, {A1}),
    ({"sku": "X"}, {A1}),
], ids=["wrong-id", "null-id", "lane", "order", "sku"])
def test_each_deliverable_defect_fails_a1(tmp_path: Path, edit: dict[str, Any], want: set[str]) -> None:
    tools = FORMS["reference-hashed"]
    assert failed(run(tmp_path, tools, called=[tools[0]["name"]], served=[EXPRESS], out={**GOOD, **edit})) == want


def test_invalid_or_missing_deliverable_fails_a1(tmp_path: Path) -> None:
    tools = FORMS["reference-hashed"]
    assert failed(run(tmp_path / "a", tools, called=[tools[0]["name"]], served=[EXPRESS], out="{nope")) == {A1}
    assert failed(run(tmp_path / "b", tools, called=[tools[0]["name"]], served=[EXPRESS], out=None)) == {A1}


def test_a_standard_reservation_next_to_the_express_one_fails_a2(tmp_path: Path) -> None:
    tools = FORMS["reference-hashed"]
    ctx = run(tmp_path, tools, called=[tools[0]["name"], tools[1]["name"]], served=[EXPRESS, STANDARD])
    assert failed(ctx) == {A2}


def test_a_do_nothing_run_fails_the_agent_layer(tmp_path: Path) -> None:
    ctx = run(tmp_path, FORMS["reference-hashed"], called=[], served=[], out=None)
    assert failed(ctx) == {A1}  # A2 (nothing on the wrong lane) holds for a run that did nothing


# ------------------------------------------------------------------ probe policy


class ShownTurn(Turn):
    """A turn whose declarations carry descriptions (``turn.tool_descriptions``)."""

    def __init__(self, tools: list[dict[str, Any]], *, with_descriptions: bool = True) -> None:
        decls = BUILTIN + tools
        super().__init__(1, TASK.prompt, view=TurnView(tool_names=tuple(display(d) for d in decls)))
        self._descs = {display(d): d["description"] for d in decls} if with_descriptions else {}

    @property
    def tool_descriptions(self) -> dict[str, str]:
        return dict(self._descs)


def _drive(turn: Turn, result: str = json.dumps({"isError": False, "structuredContent": {"reservation_id": RID}}),
           *, is_error: bool | None = None) -> list[Any]:
    def respond(action: Any) -> Observation:
        if isinstance(action, (CallTool, NativeTool)):
            return Observation(text=result, is_error=is_error, call_id="c1")
        return Observation(text="ok")
    return drive_policy(POLICY, turn, respond)


def _written(actions: list[Any]) -> dict[str, Any]:
    writes = [a for a in actions if isinstance(a, WriteFile)]
    assert len(writes) == 1 and writes[0].path == "reservation.json"
    data: dict[str, Any] = json.loads(writes[0].content)
    return data


@pytest.mark.parametrize("form", ["reference-hashed", "full-names", "openclaw-direct", "codex-namespace"])
def test_the_policy_calls_the_declaration_that_says_express(form: str) -> None:
    tools = FORMS[form]
    actions = _drive(ShownTurn(tools))
    call = actions[0]
    assert isinstance(call, CallTool) and call.server == "warehouse" and dict(call.arguments) == ARGS
    want = display(tools[0])
    assert want.endswith(call.tool) and "standard" not in call.tool
    assert _written(actions) == GOOD and isinstance(actions[-1], Final)


def test_the_policy_reads_names_when_they_still_say_the_lane() -> None:
    actions = _drive(ShownTurn(FORMS["names-only"], with_descriptions=False))
    assert isinstance(actions[0], CallTool) and actions[0].tool == EXPRESS


def test_a_name_outside_the_server_forms_is_called_verbatim() -> None:
    tools = [decl("reserve_on_lane_a", "express", prefix=False), decl("reserve_on_lane_b", "standard", prefix=False)]
    actions = _drive(ShownTurn(tools))
    assert isinstance(actions[0], NativeTool) and actions[0].name == "reserve_on_lane_a"


@pytest.mark.parametrize("tools", [COLLIDED, [], FORMS["reference-hashed"] + [decl("mcp__warehouse__x", "express")]],
                         ids=["collided", "none", "two-express"])
def test_without_exactly_one_express_tool_the_policy_reserves_nothing(tools: list[dict[str, Any]]) -> None:
    actions = _drive(ShownTurn(tools))
    assert not any(isinstance(a, (CallTool, NativeTool)) for a in actions)
    data = _written(actions)
    assert data["reservation_id"] is None and data["note"] and isinstance(actions[-1], Final)


def test_hashed_names_without_descriptions_give_no_express_tool() -> None:
    """What the policy sees when the harness's view carries names only: a cut name says no lane."""
    actions = _drive(ShownTurn(FORMS["reference-hashed"], with_descriptions=False))
    assert _written(actions)["reservation_id"] is None


@pytest.mark.parametrize("text", [
    json.dumps({"isError": False, "content": [{"type": "text", "text": "Reserved."}],
                "structuredContent": {"reservation_id": "RSV-OTHER0001", "lane": "express"}}),
    "Wall time: 0.1 s\nOutput:\n" + json.dumps({"reservation_id": "RSV-OTHER0001"}),
    json.dumps([{"type": "text", "text": json.dumps({"reservation_id": "RSV-OTHER0001"})}]),
    "Reserved 2 x CHR-2290-GRN for SO-55127 on the priority express lane: reservation RSV-OTHER0001.",
], ids=["mcp-json", "codex-output", "escaped", "text-only"])
def test_the_policy_writes_the_id_it_was_shown(text: str) -> None:
    assert _written(_drive(ShownTurn(FORMS["reference-hashed"]), text))["reservation_id"] == "RSV-OTHER0001"


def test_an_error_result_is_not_invented_into_an_id() -> None:
    data = _written(_drive(ShownTurn(FORMS["reference-hashed"]), '{"error": {"code": "X"}}', is_error=True))
    assert data["reservation_id"] is None


def test_the_policy_waits_for_a_connecting_mcp_server() -> None:
    turn = Turn(1, TASK.prompt, view=TurnView(tool_names=("Bash", "Write", "WaitForMcpServers")))
    first = next(POLICY.policy(turn))
    assert isinstance(first, NativeTool) and first.name == "WaitForMcpServers"
    assert first.arguments == {"servers": ["warehouse"]}


def test_the_policy_embeds_no_name_or_id() -> None:
    source = (PACK / "probe_policy.py").read_text(encoding="utf-8")
    assert EXPRESS not in source and STANDARD not in source and "RSV-" not in source
    assert "2b96180a" not in source


def test_the_pack_selftest_passes() -> None:
    proc = subprocess.run([sys.executable, str(PACK / "verifier" / "selftest.py")], capture_output=True, text=True,
                          check=False, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr


# ------------------------------------------------------------------ a catalog search (OpenClaw)


def catalog_text(*lanes: str) -> str:
    entries = [{"id": f"mcp:warehouse:warehouse__{EXPRESS if lane == 'express' else STANDARD}", "source": "mcp",
                "name": f"warehouse__{EXPRESS if lane == 'express' else STANDARD}",
                "description": desc(lane, prefix=False), "input": "unknown"} for lane in lanes]
    return ("SECURITY NOTICE: external content.\n<<<EXTERNAL_UNTRUSTED_CONTENT id=\"x\">>>\nSource: API\n---\n"
            + json.dumps(entries, indent=2) + "\n<<<END_EXTERNAL_UNTRUSTED_CONTENT id=\"x\">>>")


OPENCLAW = [decl(n, None) for n in ("exec", "read", "tool_call", "tool_describe", "tool_search", "write")]


def catalog_run(tmp: Path, shown: str, *, call: str | None, served: list[str], out: Any = "good") -> VerifierContext:
    ws = tmp / "workspace"
    ws.mkdir(parents=True, exist_ok=True)
    if out is not None:
        (ws / "reservation.json").write_text(json.dumps(GOOD if out == "good" else out))
    gateway = [{"index": 0, "wire_format": "chat", "status": 200, "error": None, "tools": OPENCLAW, "tool_results": []},
               {"index": 1, "wire_format": "chat", "status": 200, "error": None, "tools": OPENCLAW,
                "tool_results": [{"id": "cs", "content": shown}]}]
    reqs: list[dict[str, Any]] = [{"index": 0, "action": "native_tool", "mapped_tool": "tool_search", "call_id": "cs",
                                   "principal": "main", "arguments": {"query": "reserve outbound stock lane"}}]
    if call is not None:
        reqs.append({"index": 1, "action": "native_tool", "mapped_tool": "tool_call", "call_id": "cc",
                     "principal": "main", "arguments": {"id": call, "args": ARGS}})
    return VerifierContext(workspace=ws, baseline=ws, truth=TRUTH, oracle=None, events=[], gateway=gateway,
                           probe={"requests": reqs}, ledgers={"warehouse": ledger(*served)}, run_dir=tmp)


def test_a_catalog_search_that_shows_both_tools_passes(tmp_path: Path) -> None:
    ctx = catalog_run(tmp_path, catalog_text("express", "standard"), call=f"mcp:warehouse:warehouse__{EXPRESS}",
                      served=[EXPRESS])
    out = verdicts(ctx)
    assert failed(ctx) == set(), out
    assert "catalog" in out[H1][1] and "-> express" in out[H2][1]


def test_a_catalog_that_lost_the_express_tool_fails_h1(tmp_path: Path) -> None:
    ctx = catalog_run(tmp_path, catalog_text("standard"), call=None, served=[], out={**GOOD, "reservation_id": None})
    assert failed(ctx) == {H1, A1}


def test_the_policy_searches_the_catalog_and_calls_the_express_entry() -> None:
    turn = ShownTurn(OPENCLAW)
    shown = [Observation(text=catalog_text("standard", "express"), call_id="cs"),
             Observation(text=json.dumps({"structuredContent": {"reservation_id": RID}}), call_id="cc"),
             Observation(text="ok")]
    actions = drive_policy(POLICY, turn, shown)
    assert isinstance(actions[0], NativeTool) and actions[0].name == "tool_search"
    assert isinstance(actions[1], NativeTool) and actions[1].name == "tool_call"
    assert actions[1].arguments == {"id": f"mcp:warehouse:warehouse__{EXPRESS}", "args": ARGS}
    assert _written(actions) == GOOD


def test_the_policy_reserves_nothing_when_the_catalog_shows_no_express_tool() -> None:
    actions = drive_policy(POLICY, ShownTurn(OPENCLAW), [Observation(text=catalog_text("standard")),
                                                          Observation(text="ok")])
    assert [a.name for a in actions if isinstance(a, NativeTool)] == ["tool_search"]
    assert _written(actions)["reservation_id"] is None


def test_a_call_by_a_cut_catalog_id_is_routed_by_its_entry(tmp_path: Path) -> None:
    """OpenClaw 2026.9.6 cuts both names to 64 characters itself and keeps them unique (``-2``);
    the called id is then found among the entries the search showed."""
    cut = "warehouse__reserve_outbound_inventory_for_the_customer_shipment_"
    entries = [{"id": f"mcp:warehouse:{cut}", "name": cut, "description": desc("express", prefix=False)},
               {"id": f"mcp:warehouse:{cut[:-1]}-2", "name": f"{cut[:-1]}-2", "description": desc("standard", prefix=False)}]
    ctx = catalog_run(tmp_path, json.dumps(entries), call=f"mcp:warehouse:{cut}", served=[EXPRESS])
    out = verdicts(ctx)
    assert failed(ctx) == set() and f"{cut} -> express" in out[H2][1]
    bad = catalog_run(tmp_path / "b", json.dumps(entries), call=f"mcp:warehouse:{cut}", served=[STANDARD],
                      out={**GOOD, "reservation_id": RID_STD})
    assert failed(bad) == {H2, A1, A2}


# ------------------------------------------------------------------ deferred tools (Claude Code 2.1.332+)

CC_SEARCH = decl("ToolSearch", None)
CC_SEARCH["description"] = ("Fetches full schema definitions for deferred tools so they can be called. Query forms: "
                            '"select:Read,Edit,Grep" - fetch these exact tools by name')
CC_BUILTIN = [decl(n, None) for n in ("Agent", "Bash", "Read", "Write")] + [CC_SEARCH]
DEFERRED = (f"mcp__warehouse__{EXPRESS}", f"mcp__warehouse__{STANDARD}")


class DeferringTurn(Turn):
    """Claude Code 2.1.332's shape: the warehouse tools only named as deferred; once ``ToolSearch``
    loaded them, the next request declares them (with their descriptions)."""

    def __init__(self, loaded: list[dict[str, Any]], announced: tuple[str, ...] = DEFERRED) -> None:
        self.loaded = loaded
        super().__init__(1, TASK.prompt, view=self._view_of(CC_BUILTIN, announced))

    @staticmethod
    def _view_of(decls: list[dict[str, Any]], announced: tuple[str, ...]) -> TurnView:
        return TurnView(tool_names=tuple(display(d) for d in decls),
                        tool_descriptions=tuple((display(d), d["description"]) for d in decls),
                        deferred_tool_names=announced)

    def searched(self) -> None:
        self._view = self._view_of(CC_BUILTIN + self.loaded, self._view.deferred_tool_names)  # type: ignore[attr-defined]


def _drive_deferred(turn: DeferringTurn, result: str = json.dumps({"reservation_id": RID})) -> list[Any]:
    def respond(action: Any) -> Observation:
        if isinstance(action, NativeTool) and action.name == "ToolSearch":
            turn.searched()
            return Observation(text="[tool_reference]", call_id="cs")
        if isinstance(action, (CallTool, NativeTool)):
            return Observation(text=result, call_id="c1")
        return Observation(text="ok")
    return drive_policy(POLICY, turn, respond)


def test_the_policy_fetches_deferred_tools_and_calls_the_one_that_says_express() -> None:
    actions = _drive_deferred(DeferringTurn(FORMS["full-names"][::-1]))
    search = actions[0]
    assert isinstance(search, NativeTool) and search.name == "ToolSearch"
    assert search.arguments == {"query": "select:" + ",".join(DEFERRED)}  # both, as announced
    call = actions[1]
    assert isinstance(call, CallTool) and call.server == "warehouse" and call.tool == EXPRESS
    assert dict(call.arguments) == ARGS
    assert _written(actions) == GOOD


def test_the_policy_chooses_a_deferred_tool_by_its_description_not_its_name() -> None:
    cut = [decl("mcp__warehouse__reserve_outbound_inventory_for_the_cust_2b96180a", "standard"),
           decl("mcp__warehouse__reserve_outbound_inventory_for_the_cust_b61c5cd2", "express")]
    actions = _drive_deferred(DeferringTurn(cut, announced=tuple(d["name"] for d in cut)))
    call = actions[1]
    assert isinstance(call, CallTool) and call.tool == "reserve_outbound_inventory_for_the_cust_b61c5cd2"


def test_the_policy_reserves_nothing_when_the_search_loads_no_express_tool() -> None:
    actions = _drive_deferred(DeferringTurn([FORMS["full-names"][1]], announced=DEFERRED[1:]))
    assert [a.name for a in actions if isinstance(a, NativeTool)] == ["ToolSearch"]
    assert not any(isinstance(a, CallTool) for a in actions)
    data = _written(actions)
    assert data["reservation_id"] is None and "search loaded" in data["note"]


def test_the_policy_searches_the_server_name_when_nothing_is_announced() -> None:
    actions = _drive_deferred(DeferringTurn([], announced=()))
    assert isinstance(actions[0], NativeTool) and actions[0].arguments == {"query": "warehouse"}
    assert _written(actions)["reservation_id"] is None


def deferred_run(tmp: Path, *, searched: bool) -> VerifierContext:
    """A Claude Code 2.1.332 run: request 0 declares ToolSearch and no warehouse tool; after the
    search the later requests declare both tools and the express one is called (``searched``),
    else the model wrote reservation_id null without searching."""
    ws = tmp / "workspace"
    ws.mkdir(parents=True, exist_ok=True)
    first = {"index": 0, "wire_format": "anthropic", "status": 200, "error": None, "tools": CC_BUILTIN,
             "tool_results": []}
    if not searched:
        (ws / "reservation.json").write_text(json.dumps({**GOOD, "reservation_id": None}))
        gateway = [first, {**first, "index": 1}]
        reqs = [{"index": 0, "action": "write_file", "mapped_tool": "Write", "call_id": "cw", "principal": "main"}]
        return VerifierContext(workspace=ws, baseline=ws, truth=TRUTH, oracle=None, events=[], gateway=gateway,
                               probe={"requests": reqs}, ledgers={"warehouse": ledger()}, run_dir=tmp)
    (ws / "reservation.json").write_text(json.dumps(GOOD))
    loaded = CC_BUILTIN + FORMS["full-names"]
    gateway = [first] + [{"index": i, "wire_format": "anthropic", "status": 200, "error": None, "tools": loaded,
                          "tool_results": [{"id": "cs", "content": f"[tool_reference {DEFERRED[0]}]"}]}
                         for i in (1, 2, 3)]
    reqs = [{"index": 0, "action": "native_tool", "mapped_tool": "ToolSearch", "call_id": "cs", "principal": "main",
             "arguments": {"query": "select:" + ",".join(DEFERRED)}},
            {"index": 1, "action": "call_tool", "mapped_tool": DEFERRED[0], "call_id": "c1", "principal": "main",
             "arguments": ARGS},
            {"index": 2, "action": "write_file", "mapped_tool": "Write", "call_id": "cw", "principal": "main"}]
    return VerifierContext(workspace=ws, baseline=ws, truth=TRUTH, oracle=None, events=[], gateway=gateway,
                           probe={"requests": reqs}, ledgers={"warehouse": ledger(EXPRESS)}, run_dir=tmp)


def test_deferred_tools_fetched_by_the_model_are_judged_where_they_are_declared(tmp_path: Path) -> None:
    out = verdicts(deferred_run(tmp_path, searched=True))
    assert all(v[0] for v in out.values()), out
    assert out[H1][1].startswith("request 1 ")


def test_tools_behind_a_search_the_model_never_called_leave_h1_unscored(tmp_path: Path) -> None:
    """The archived Claude Code 2.1.332 flip: ToolSearch declared, the warehouse tools only named
    as deferred, the probe never searched - not a harness failure (rule 12)."""
    out = verdicts(deferred_run(tmp_path, searched=False))
    assert out[H1][0] is None and "never searched" in out[H1][1] and "ToolSearch" in out[H1][1]
    assert not out[A1][0] and out[A2][0] and out[H2][0]


def test_a_search_that_showed_no_warehouse_tool_still_fails_h1(tmp_path: Path) -> None:
    ctx = catalog_run(tmp_path, "[]", call=None, served=[], out={**GOOD, "reservation_id": None})
    assert failed(ctx) == {H1, A1} and verdicts(ctx)[H1][0] is False
