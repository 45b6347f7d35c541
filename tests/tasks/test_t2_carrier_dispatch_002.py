"""T2-carrier-dispatch-002: the dispatch simulator (two short MCP names that differ only by a
character a function name may not hold — `dispatch.create` and `dispatch_create` — seeded pickup
and draft ids recorded with their tool), the verifier on hand-built runs (each harness's naming
form, the collide_tool_names mutant, two declarations under one name, a dropped or schema-less
tool, a misrouted call, a draft, wrong or missing deliverables, a live run without a probe report,
OpenClaw's catalog search and ``tool_call`` dispatcher), the probe policy (it picks the booking
declaration — or catalog entry — by what it was shown, never by a known name; books nothing
without one or when its name is shared) and the pack's selftest."""

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

PACK = Path(__file__).resolve().parents[2] / "tasks" / "T2-carrier-dispatch-002"
SCORE = load_module(PACK / "verifier" / "score.py", "t2_carrier_dispatch_score")
POLICY = load_module(PACK / "probe_policy.py", "t2_carrier_dispatch_policy")
TASK = load_task(PACK)
TRUTH = json.loads((PACK / "truth.json").read_text(encoding="utf-8"))
H1, H2, A1, A2 = SCORE.H1, SCORE.H2, SCORE.A1, SCORE.A2
IDS = {H1, H2, A1, A2}

BOOK = TRUTH["tools"]["booking"]["name"]
DRAFT = TRUTH["tools"]["draft"]["name"]
ARGS = {"order_id": "SO-48213", "carrier": "NORDLINE", "parcels": 3}
NOW = "2026-12-06T08:00:00Z"


def _runtime(tmp: Path, seed: str) -> tuple[ServiceRuntime, Path]:
    sims = {s.name: s for s in simulator_specs(PACK)}
    led = Ledger(tmp / "dispatch.jsonl", "dispatch")
    led.init()
    rt = ServiceRuntime(load_service(PACK, sims["dispatch"]), tmp / "state", led, seed)
    rt.start_session()
    return rt, tmp / "dispatch.jsonl"


def _records(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


# ------------------------------------------------------------------ simulator and trigger


def test_pack_declares_the_mutant_and_property() -> None:
    assert TASK.spec.property == "naming_registration" and TASK.spec.component == "T"
    assert TASK.spec.calibration.mutants == {"collide_tool_names": [H1, A1]}


def test_the_two_names_are_valid_mcp_names_that_collide_once_fitted() -> None:
    from mcp.shared.tool_name_validation import TOOL_NAME_REGEX

    assert BOOK == "dispatch.create" and DRAFT == "dispatch_create"
    assert TOOL_NAME_REGEX.fullmatch(BOOK) and TOOL_NAME_REGEX.fullmatch(DRAFT)  # `.` is a valid MCP name char
    assert not FUNCTION_NAME.match(f"mcp__dispatch__{BOOK}") and FUNCTION_NAME.match(f"mcp__dispatch__{DRAFT}")
    assert len(f"mcp__dispatch__{BOOK}") < 64  # no length limit involved (rule 16: not the sibling's trigger)
    assert fitted_name("dispatch", BOOK) == fitted_name("dispatch", DRAFT)  # the mutant's collision
    taken: dict[str, Any] = {}
    a = unique_name("dispatch", BOOK, taken)
    taken[a] = ("dispatch", type("T", (), {"name": BOOK}))
    b = unique_name("dispatch", DRAFT, taken)
    assert a != b and FUNCTION_NAME.match(a) and FUNCTION_NAME.match(b)  # the faithful reference
    assert b == "mcp__dispatch__dispatch_create" and a.startswith("mcp__dispatch__dispatch_create_")


def test_booking_is_listed_first_and_descriptions_are_unique(tmp_path: Path) -> None:
    listed = _runtime(tmp_path, "s")[0].list_tools()
    assert [t.name for t in listed] == [BOOK, DRAFT]
    bk, dr = (str(t.description) for t in listed)
    assert TRUTH["tools"]["booking"]["phrase"] in bk and TRUTH["tools"]["draft"]["phrase"] not in bk
    assert TRUTH["tools"]["draft"]["phrase"] in dr and "pickup" not in dr.lower() and "book" not in dr.lower()
    assert "draft" not in bk.lower()


def test_ids_are_seeded_and_recorded_with_their_tool(tmp_path: Path) -> None:
    rt, path = _runtime(tmp_path / "a", "seed-a")
    bk = rt.call_tool(BOOK, ARGS)
    dr = rt.call_tool(DRAFT, ARGS)
    assert not bk.is_error and bk.structured["status"] == "booked" and bk.structured["pickup_id"] in bk.text
    assert bk.structured["pickup_id"].startswith("PU-") and dr.structured["draft_id"].startswith("DR-")
    assert dr.structured["status"] == "draft" and "pickup_id" not in dr.structured
    issued = [(r["tool"], r["detail"]["name"], r["detail"]["value"]) for r in _records(path) if r["kind"] == "issued"]
    assert issued == [(BOOK, "pickup_id", bk.structured["pickup_id"]), (DRAFT, "draft_id", dr.structured["draft_id"])]
    again = _runtime(tmp_path / "a2", "seed-a")[0].call_tool(BOOK, ARGS).structured["pickup_id"]
    other = _runtime(tmp_path / "b", "seed-b")[0].call_tool(BOOK, ARGS).structured["pickup_id"]
    assert again == bk.structured["pickup_id"] != other


# ------------------------------------------------------------------ hand-built runs

SCHEMA = {"type": "object", "properties": {"order_id": {"type": "string"}, "carrier": {"type": "string"},
                                           "parcels": {"type": "integer", "minimum": 1}},
          "required": ["order_id", "carrier", "parcels"]}
PID, DID = "PU-BOOKED0001", "DR-DRAFT00001"
BODY = {"booking": "BOOKS A CARRIER PICKUP for a packed order: the carrier is sent to the dock. Returns the pickup id.",
        "draft": "SAVES A DISPATCH DRAFT for an order still waiting on a date. Returns the draft id."}


def desc(kind: str, prefix: bool = True) -> str:
    name = BOOK if kind == "booking" else DRAFT
    return f"[MCP tool '{name}' of server 'dispatch'] {BODY[kind]}" if prefix else BODY[kind]


def decl(name: str, kind: str | None, *, namespace: str | None = None, schema: Any = SCHEMA,
         prefix: bool = True) -> dict[str, Any]:
    return {"name": name, "namespace": namespace, "description": desc(kind, prefix) if kind else "Some tool.",
            "input_schema": schema}


BUILTIN = [decl("write_file", None, schema={"type": "object", "properties": {"path": {}, "content": {}}})]
FORMS: dict[str, list[dict[str, Any]]] = {
    "reference-hashed": [decl("mcp__dispatch__dispatch_create_a66cc5eb", "booking"),
                         decl("mcp__dispatch__dispatch_create", "draft")],
    "dotted-names": [decl(f"mcp__dispatch__{BOOK}", "booking", prefix=False),
                     decl(f"mcp__dispatch__{DRAFT}", "draft", prefix=False)],
    "codex-namespace": [decl("dispatch_create_1a2b3c", "booking", namespace="mcp__dispatch", prefix=False),
                        decl("dispatch_create", "draft", namespace="mcp__dispatch", prefix=False)],
    "openclaw-direct": [decl(f"dispatch__{BOOK}", "booking", prefix=False),
                        decl(f"dispatch__{DRAFT}", "draft", prefix=False)],
    "names-only": [decl(f"mcp__dispatch__{BOOK}", None), decl(f"mcp__dispatch__{DRAFT}", None)],
}
COLLIDED = [decl("mcp__dispatch__dispatch_create", "draft")]
SHARED = [decl("mcp__dispatch__dispatch_create", "booking"), decl("mcp__dispatch__dispatch_create", "draft")]


def display(d: dict[str, Any]) -> str:
    return f"{d['namespace']}/{d['name']}" if d.get("namespace") else str(d["name"])


def ledger(*served: str, refused: tuple[str, ...] = ()) -> list[dict[str, Any]]:
    recs: list[dict[str, Any]] = [{"seq": 1, "kind": "transition", "tool": None,
                                   "detail": {"op": "init", "new": {"pickups": [], "drafts": []}}}]
    for tool in served:
        seq = len(recs) + 1
        recs.append({"seq": seq, "kind": "request", "tool": tool, "arguments": ARGS, "detail": {}})
        if tool in refused:
            recs.append({"seq": seq + 1, "kind": "refused", "tool": tool, "detail": {"request_seq": seq}})
            continue
        if tool in (BOOK, DRAFT):
            name, value = ("pickup_id", PID) if tool == BOOK else ("draft_id", DID)
            recs.append({"seq": seq + 1, "kind": "issued", "tool": tool,
                         "detail": {"name": name, "value": value, "request_seq": seq}})
        else:
            recs.append({"seq": seq + 1, "kind": "error", "tool": tool,
                         "detail": {"code": "UNKNOWN_TOOL", "request_seq": seq}})
    return recs


GOOD = {"order": "SO-48213", "carrier": "NORDLINE", "pickup_id": PID}


def run(tmp: Path, tools: list[dict[str, Any]], *, called: list[str], served: list[str],
        out: Any = "good", probe: bool = True, refused: tuple[str, ...] = (),
        first_tools: list[dict[str, Any]] | None = None, arguments: Any = None) -> VerifierContext:
    ws = tmp / "workspace"
    ws.mkdir(parents=True, exist_ok=True)
    if out is not None:
        data = GOOD if out == "good" else out
        (ws / "pickup.json").write_text(data if isinstance(data, str) else json.dumps(data))
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
                           ledgers={"dispatch": ledger(*served, refused=refused)}, run_dir=tmp)


def verdicts(ctx: VerifierContext) -> dict[str, tuple[bool, str]]:
    out: dict[str, tuple[bool, str]] = SCORE.score(ctx)
    assert set(out) == IDS
    return out


def failed(ctx: VerifierContext) -> set[str]:
    return {k for k, v in verdicts(ctx).items() if not v[0]}


@pytest.mark.parametrize("form", sorted(FORMS))
def test_every_faithful_naming_form_passes(tmp_path: Path, form: str) -> None:
    tools = FORMS[form]
    out = verdicts(run(tmp_path, tools, called=[display(tools[0])], served=[BOOK]))
    assert all(v[0] for v in out.values()), out


def test_the_collide_mutant_fails_h1_and_a1_only(tmp_path: Path) -> None:
    """collide_tool_names: one declaration (the draft tool's) for the pair; the ideal agent books
    nothing and writes pickup_id null."""
    ctx = run(tmp_path, COLLIDED, called=[], served=[], out={**GOOD, "pickup_id": None, "note": "no tool"})
    out = verdicts(ctx)
    assert failed(ctx) == {H1, A1}
    assert "no declaration is the booking tool" in out[H1][1]
    assert "no create call" in out[H2][1]


def test_the_draft_name_alone_is_not_the_booking_tool(tmp_path: Path) -> None:
    """`.` and `_` are never folded: a declaration named like the draft tool, with no description,
    is the draft tool only."""
    tools = [decl("mcp__dispatch__dispatch_create", None)]
    out = verdicts(run(tmp_path, tools, called=[], served=[], out=None))
    assert not out[H1][0] and "no declaration is the booking tool" in out[H1][1]
    assert "no declaration is the draft tool" not in out[H1][1]


def test_a_model_that_calls_the_collided_name_fails_h1_a1_and_a2(tmp_path: Path) -> None:
    """A live model that takes the one create tool there is: a draft is saved."""
    ctx = run(tmp_path, COLLIDED, called=[COLLIDED[0]["name"]], served=[DRAFT], out={**GOOD, "pickup_id": DID})
    assert failed(ctx) == {H1, A1, A2}  # H2 holds: the call reached the tool its declaration described


def test_two_declarations_under_one_name_fail_h1(tmp_path: Path) -> None:
    """A harness that replaces `.` by `_` and declares both tools under the one name."""
    out = verdicts(run(tmp_path, SHARED, called=[], served=[], out={**GOOD, "pickup_id": None}))
    assert not out[H1][0] and "declared more than once" in out[H1][1]
    ctx = run(tmp_path / "b", SHARED, called=[SHARED[0]["name"]], served=[DRAFT], out={**GOOD, "pickup_id": DID})
    out = verdicts(ctx)
    assert failed(ctx) == {H1, H2, A1, A2} and "not identifiable" in out[H2][1]


def test_a_misrouted_call_fails_h2_and_the_agent_layer(tmp_path: Path) -> None:
    tools = FORMS["reference-hashed"]
    ctx = run(tmp_path, tools, called=[tools[0]["name"]], served=[DRAFT], out={**GOOD, "pickup_id": DID})
    out = verdicts(ctx)
    assert failed(ctx) == {H2, A1, A2}
    assert "did not reach" in out[H2][1]


@pytest.mark.parametrize("which", ["booking", "draft"])
def test_a_dropped_tool_fails_h1(tmp_path: Path, which: str) -> None:
    phrase = TRUTH["tools"][which]["phrase"]
    tools = [d for d in FORMS["reference-hashed"] if phrase not in d["description"]]
    assert len(tools) == 1
    out = verdicts(run(tmp_path, tools, called=[], served=[], out={**GOOD, "pickup_id": None}))
    assert not out[H1][0] and f"no declaration is the {which} tool" in out[H1][1]


def test_a_declaration_without_the_schema_fields_fails_h1(tmp_path: Path) -> None:
    tools = copy.deepcopy(FORMS["reference-hashed"])
    tools[0]["input_schema"] = {"type": "object", "properties": {}}
    out = verdicts(run(tmp_path, tools, called=[tools[0]["name"]], served=[BOOK]))
    assert not out[H1][0] and "lack the fields" in out[H1][1]


def test_h1_reads_the_first_request_that_declares_the_server(tmp_path: Path) -> None:
    """Claude Code: the first request may come before the MCP server connected."""
    tools = FORMS["dotted-names"]
    ctx = run(tmp_path, tools, called=[tools[0]["name"]], served=[BOOK], first_tools=[])
    assert failed(ctx) == set()
    ctx = run(tmp_path / "b", tools, called=[tools[0]["name"]], served=[BOOK], first_tools=COLLIDED)
    assert failed(ctx) == {H1}


def test_no_dispatch_tool_at_all_fails_h1(tmp_path: Path) -> None:
    out = verdicts(run(tmp_path, [], called=[], served=[], out={**GOOD, "pickup_id": None}))
    assert not out[H1][0] and "declares a dispatch tool" in out[H1][1]


def test_a_refused_request_is_not_served(tmp_path: Path) -> None:
    tools = FORMS["reference-hashed"]
    ctx = run(tmp_path, tools, called=[tools[0]["name"]], served=[BOOK], refused=(BOOK,))
    assert failed(ctx) == {H2, A1}


def test_a_live_run_reads_the_trace(tmp_path: Path) -> None:
    tools = FORMS["reference-hashed"]
    assert failed(run(tmp_path, tools, called=[tools[0]["name"]], served=[BOOK], probe=False)) == set()
    ctx = run(tmp_path / "b", tools, called=[tools[0]["name"]], served=[DRAFT], probe=False,
              out={**GOOD, "pickup_id": DID})
    assert failed(ctx) == {H2, A1, A2}


def test_openclaw_tool_call_dispatcher_is_followed(tmp_path: Path) -> None:
    tools = FORMS["openclaw-direct"] + [decl("tool_call", None, schema={"type": "object",
                                                                          "properties": {"id": {}, "args": {}}})]
    ctx = run(tmp_path, tools, called=["tool_call"], served=[BOOK], arguments={"id": f"dispatch__{BOOK}", "args": ARGS})
    out = verdicts(ctx)
    assert failed(ctx) == set() and "-> booking" in out[H2][1]


@pytest.mark.parametrize("edit", [{"pickup_id": "PU-GUESSED00"}, {"pickup_id": None}, {"pickup_id": DID},
                                  {"order": "SO-1"}, {"carrier": "X"}],
                         ids=["wrong-id", "null-id", "draft-id", "order", "carrier"])
def test_each_deliverable_defect_fails_a1(tmp_path: Path, edit: dict[str, Any]) -> None:
    tools = FORMS["reference-hashed"]
    assert failed(run(tmp_path, tools, called=[tools[0]["name"]], served=[BOOK], out={**GOOD, **edit})) == {A1}


def test_invalid_or_missing_deliverable_fails_a1(tmp_path: Path) -> None:
    tools = FORMS["reference-hashed"]
    assert failed(run(tmp_path / "a", tools, called=[tools[0]["name"]], served=[BOOK], out="{nope")) == {A1}
    assert failed(run(tmp_path / "b", tools, called=[tools[0]["name"]], served=[BOOK], out=None)) == {A1}


def test_a_draft_next_to_the_booking_fails_a2(tmp_path: Path) -> None:
    tools = FORMS["reference-hashed"]
    ctx = run(tmp_path, tools, called=[tools[0]["name"], tools[1]["name"]], served=[BOOK, DRAFT])
    assert failed(ctx) == {A2}


def test_a_do_nothing_run_fails_the_agent_layer(tmp_path: Path) -> None:
    ctx = run(tmp_path, FORMS["reference-hashed"], called=[], served=[], out=None)
    assert failed(ctx) == {A1}  # A2 (no draft) holds for a run that did nothing


# ------------------------------------------------------------------ probe policy


class ShownTurn(Turn):
    """A turn whose declarations carry descriptions (``turn.tool_descriptions``; of two
    declarations under one name the map keeps the last, as the policy API does)."""

    def __init__(self, tools: list[dict[str, Any]], *, with_descriptions: bool = True) -> None:
        decls = BUILTIN + tools
        super().__init__(1, TASK.prompt, view=TurnView(tool_names=tuple(display(d) for d in decls)))
        self._descs = {display(d): d["description"] for d in decls} if with_descriptions else {}

    @property
    def tool_descriptions(self) -> dict[str, str]:
        return dict(self._descs)


def _drive(turn: Turn, result: str = json.dumps({"isError": False, "structuredContent": {"pickup_id": PID}}),
           *, is_error: bool | None = None) -> list[Any]:
    def respond(action: Any) -> Observation:
        if isinstance(action, (CallTool, NativeTool)):
            return Observation(text=result, is_error=is_error, call_id="c1")
        return Observation(text="ok")
    return drive_policy(POLICY, turn, respond)


def _written(actions: list[Any]) -> dict[str, Any]:
    writes = [a for a in actions if isinstance(a, WriteFile)]
    assert len(writes) == 1 and writes[0].path == "pickup.json"
    data: dict[str, Any] = json.loads(writes[0].content)
    return data


@pytest.mark.parametrize("form", ["reference-hashed", "codex-namespace"])
def test_the_policy_calls_the_declaration_that_books_a_pickup(form: str) -> None:
    tools = FORMS[form]
    actions = _drive(ShownTurn(tools))
    call = actions[0]
    assert isinstance(call, CallTool) and call.server == "dispatch" and dict(call.arguments) == ARGS
    assert display(tools[0]).endswith(call.tool)
    assert _written(actions) == GOOD and isinstance(actions[-1], Final)


@pytest.mark.parametrize("form", ["dotted-names", "openclaw-direct"])
def test_names_alike_but_for_punctuation_are_called_by_exact_name(form: str) -> None:
    """`mcp__dispatch__dispatch.create` next to `mcp__dispatch__dispatch_create`: the probe's MCP
    mapping folds punctuation, so the policy names the declaration exactly."""
    actions = _drive(ShownTurn(FORMS[form]))
    assert isinstance(actions[0], NativeTool) and actions[0].name == display(FORMS[form][0])
    assert _written(actions) == GOOD


def test_the_policy_reads_names_when_there_is_no_description() -> None:
    tools = [decl("mcp__dispatch__book_pickup", None), decl("mcp__dispatch__save_draft", None)]
    actions = _drive(ShownTurn(tools, with_descriptions=False))
    assert isinstance(actions[0], CallTool) and actions[0].tool == "book_pickup"


def test_a_name_outside_the_server_forms_is_called_verbatim() -> None:
    tools = [decl("create_a", "booking", prefix=False), decl("create_b", "draft", prefix=False)]
    actions = _drive(ShownTurn(tools))
    assert isinstance(actions[0], NativeTool) and actions[0].name == "create_a"


@pytest.mark.parametrize("tools", [COLLIDED, SHARED, list(reversed(SHARED)), [], FORMS["names-only"],
                                   FORMS["reference-hashed"] + [decl("mcp__dispatch__x", "booking")]],
                         ids=["collided", "shared-name", "shared-name-reversed", "none", "names-only", "two-booking"])
def test_without_one_distinct_booking_tool_the_policy_calls_nothing(tools: list[dict[str, Any]]) -> None:
    actions = _drive(ShownTurn(tools))
    assert not any(isinstance(a, (CallTool, NativeTool)) for a in actions)
    data = _written(actions)
    assert data["pickup_id"] is None and data["note"] and isinstance(actions[-1], Final)


@pytest.mark.parametrize("text", [
    json.dumps({"isError": False, "content": [{"type": "text", "text": "Booked."}],
                "structuredContent": {"pickup_id": "PU-OTHER0001", "status": "booked"}}),
    "Wall time: 0.1 s\nOutput:\n" + json.dumps({"pickup_id": "PU-OTHER0001"}),
    json.dumps([{"type": "text", "text": json.dumps({"pickup_id": "PU-OTHER0001"})}]),
    "Pickup booked with NORDLINE for SO-48213 (3 parcels): pickup PU-OTHER0001.",
], ids=["mcp-json", "codex-output", "escaped", "text-only"])
def test_the_policy_writes_the_id_it_was_shown(text: str) -> None:
    assert _written(_drive(ShownTurn(FORMS["reference-hashed"]), text))["pickup_id"] == "PU-OTHER0001"


def test_an_error_result_is_not_invented_into_an_id() -> None:
    data = _written(_drive(ShownTurn(FORMS["reference-hashed"]), '{"error": {"code": "X"}}', is_error=True))
    assert data["pickup_id"] is None


def test_the_policy_waits_for_a_connecting_mcp_server() -> None:
    turn = Turn(1, TASK.prompt, view=TurnView(tool_names=("Bash", "Write", "WaitForMcpServers")))
    first = next(POLICY.policy(turn))
    assert isinstance(first, NativeTool) and first.name == "WaitForMcpServers"
    assert first.arguments == {"servers": ["dispatch"]}


def test_the_policy_embeds_no_name_or_id() -> None:
    source = (PACK / "probe_policy.py").read_text(encoding="utf-8")
    assert BOOK not in source and DRAFT not in source and "PU-" not in source and "DR-" not in source
    assert "a66cc5eb" not in source


def test_the_pack_selftest_passes() -> None:
    proc = subprocess.run([sys.executable, "-B", str(PACK / "verifier" / "selftest.py")], capture_output=True,
                          text=True, check=False, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr


# ------------------------------------------------------------------ a catalog search (OpenClaw)


def entry(kind: str, ident: str | None = None) -> dict[str, Any]:
    name = f"dispatch__{BOOK if kind == 'booking' else DRAFT}"
    return {"id": ident or f"mcp:dispatch:{name}", "source": "mcp", "name": name,
            "description": desc(kind, prefix=False), "input": "unknown"}


def catalog_text(*entries: dict[str, Any]) -> str:
    return ("SECURITY NOTICE: external content.\n<<<EXTERNAL_UNTRUSTED_CONTENT id=\"x\">>>\nSource: API\n---\n"
            + json.dumps(list(entries), indent=2) + "\n<<<END_EXTERNAL_UNTRUSTED_CONTENT id=\"x\">>>")


OPENCLAW = [decl(n, None) for n in ("exec", "read", "tool_call", "tool_describe", "tool_search", "write")]


def catalog_run(tmp: Path, shown: str, *, call: str | None, served: list[str], out: Any = "good") -> VerifierContext:
    ws = tmp / "workspace"
    ws.mkdir(parents=True, exist_ok=True)
    if out is not None:
        (ws / "pickup.json").write_text(json.dumps(GOOD if out == "good" else out))
    gateway = [{"index": 0, "wire_format": "chat", "status": 200, "error": None, "tools": OPENCLAW, "tool_results": []},
               {"index": 1, "wire_format": "chat", "status": 200, "error": None, "tools": OPENCLAW,
                "tool_results": [{"id": "cs", "content": shown}]}]
    reqs: list[dict[str, Any]] = [{"index": 0, "action": "native_tool", "mapped_tool": "tool_search", "call_id": "cs",
                                   "principal": "main", "arguments": {"query": "dispatch carrier pickup draft"}}]
    if call is not None:
        reqs.append({"index": 1, "action": "native_tool", "mapped_tool": "tool_call", "call_id": "cc",
                     "principal": "main", "arguments": {"id": call, "args": ARGS}})
    return VerifierContext(workspace=ws, baseline=ws, truth=TRUTH, oracle=None, events=[], gateway=gateway,
                           probe={"requests": reqs}, ledgers={"dispatch": ledger(*served)}, run_dir=tmp)


def test_a_catalog_search_that_shows_both_tools_passes(tmp_path: Path) -> None:
    ctx = catalog_run(tmp_path, catalog_text(entry("booking"), entry("draft")), call=f"mcp:dispatch:dispatch__{BOOK}",
                      served=[BOOK])
    out = verdicts(ctx)
    assert failed(ctx) == set(), out
    assert "catalog" in out[H1][1] and "-> booking" in out[H2][1]


def test_a_catalog_that_lost_the_booking_tool_fails_h1(tmp_path: Path) -> None:
    ctx = catalog_run(tmp_path, catalog_text(entry("draft")), call=None, served=[], out={**GOOD, "pickup_id": None})
    assert failed(ctx) == {H1, A1}


def test_a_catalog_with_two_entries_under_one_id_fails_h1(tmp_path: Path) -> None:
    same = "mcp:dispatch:dispatch__dispatch_create"
    ctx = catalog_run(tmp_path, catalog_text(entry("booking", same), entry("draft", same)), call=None, served=[],
                      out={**GOOD, "pickup_id": None})
    out = verdicts(ctx)
    assert failed(ctx) == {H1, A1} and "declared more than once" in out[H1][1]


def test_the_policy_searches_the_catalog_and_calls_the_booking_entry() -> None:
    shown = [Observation(text=catalog_text(entry("draft"), entry("booking")), call_id="cs"),
             Observation(text=json.dumps({"structuredContent": {"pickup_id": PID}}), call_id="cc"),
             Observation(text="ok")]
    actions = drive_policy(POLICY, ShownTurn(OPENCLAW), shown)
    assert isinstance(actions[0], NativeTool) and actions[0].name == "tool_search"
    assert isinstance(actions[1], NativeTool) and actions[1].name == "tool_call"
    assert actions[1].arguments == {"id": f"mcp:dispatch:dispatch__{BOOK}", "args": ARGS}
    assert _written(actions) == GOOD


@pytest.mark.parametrize("entries", [[entry("draft")],
                                     [entry("booking", "mcp:dispatch:x"), entry("draft", "mcp:dispatch:x")]],
                         ids=["no-booking", "shared-id"])
def test_the_policy_calls_nothing_when_the_catalog_shows_no_distinct_booking_entry(entries: list[Any]) -> None:
    actions = drive_policy(POLICY, ShownTurn(OPENCLAW), [Observation(text=catalog_text(*entries)),
                                                          Observation(text="ok")])
    assert [a.name for a in actions if isinstance(a, NativeTool)] == ["tool_search"]
    assert _written(actions)["pickup_id"] is None


# ------------------------------------------------------------------ deferred tools (Claude Code 2.1.332+)

CC_SEARCH = decl("ToolSearch", None)
CC_SEARCH["description"] = ("Fetches full schema definitions for deferred tools so they can be called. Query forms: "
                            '"select:Read,Edit,Grep" - fetch these exact tools by name')
CC_BUILTIN = [decl(n, None) for n in ("Agent", "Bash", "Read", "Write")] + [CC_SEARCH]
#: What Claude Code 2.1.332 announced in the archived run: one name for the pair (its own collision)
ANNOUNCED = ("mcp__dispatch__dispatch_create",)


class DeferringTurn(Turn):
    """Claude Code 2.1.332's shape: the dispatch tools only named as deferred; once ``ToolSearch``
    loaded them, the next request declares them (with their descriptions)."""

    def __init__(self, loaded: list[dict[str, Any]], announced: tuple[str, ...] = ANNOUNCED) -> None:
        self.loaded = loaded
        super().__init__(1, TASK.prompt, view=self._view_of(CC_BUILTIN, announced))

    @staticmethod
    def _view_of(decls: list[dict[str, Any]], announced: tuple[str, ...]) -> TurnView:
        return TurnView(tool_names=tuple(display(d) for d in decls),
                        tool_descriptions=tuple((display(d), d["description"]) for d in decls),
                        deferred_tool_names=announced)

    def searched(self) -> None:
        self._view = self._view_of(CC_BUILTIN + self.loaded, self._view.deferred_tool_names)  # type: ignore[attr-defined]


def _drive_deferred(turn: DeferringTurn, result: str = json.dumps({"pickup_id": PID})) -> list[Any]:
    def respond(action: Any) -> Observation:
        if isinstance(action, NativeTool) and action.name == "ToolSearch":
            turn.searched()
            return Observation(text="[tool_reference]", call_id="cs")
        if isinstance(action, (CallTool, NativeTool)):
            return Observation(text=result, call_id="c1")
        return Observation(text="ok")
    return drive_policy(POLICY, turn, respond)


def test_the_policy_fetches_the_deferred_tool_and_books_when_it_says_it_books() -> None:
    actions = _drive_deferred(DeferringTurn([decl("mcp__dispatch__dispatch_create", "booking")]))
    search = actions[0]
    assert isinstance(search, NativeTool) and search.name == "ToolSearch"
    assert search.arguments == {"query": "select:mcp__dispatch__dispatch_create"}
    call = actions[1]
    assert isinstance(call, CallTool) and call.server == "dispatch" and call.tool == "dispatch_create"
    assert dict(call.arguments) == ARGS and _written(actions) == GOOD


@pytest.mark.parametrize("loaded", [COLLIDED, SHARED, []], ids=["draft-only", "shared-name", "nothing"])
def test_the_policy_books_nothing_unless_the_search_loads_one_distinct_booking_tool(
        loaded: list[dict[str, Any]]) -> None:
    actions = _drive_deferred(DeferringTurn(loaded))
    assert [a.name for a in actions if isinstance(a, NativeTool)] == ["ToolSearch"]
    assert not any(isinstance(a, CallTool) for a in actions)
    assert _written(actions)["pickup_id"] is None


def test_the_policy_searches_the_server_name_when_nothing_is_announced() -> None:
    actions = _drive_deferred(DeferringTurn([], announced=()))
    assert isinstance(actions[0], NativeTool) and actions[0].arguments == {"query": "dispatch"}


def deferred_run(tmp: Path, *, searched: bool) -> VerifierContext:
    """A Claude Code 2.1.332 run: request 0 declares ToolSearch and no dispatch tool; after the
    search the later requests declare both tools and the booking one is called (``searched``),
    else the model wrote pickup_id null without searching."""
    ws = tmp / "workspace"
    ws.mkdir(parents=True, exist_ok=True)
    first = {"index": 0, "wire_format": "anthropic", "status": 200, "error": None, "tools": CC_BUILTIN,
             "tool_results": []}
    if not searched:
        (ws / "pickup.json").write_text(json.dumps({**GOOD, "pickup_id": None}))
        reqs = [{"index": 0, "action": "write_file", "mapped_tool": "Write", "call_id": "cw", "principal": "main"}]
        return VerifierContext(workspace=ws, baseline=ws, truth=TRUTH, oracle=None, events=[],
                               gateway=[first, {**first, "index": 1}], probe={"requests": reqs},
                               ledgers={"dispatch": ledger()}, run_dir=tmp)
    (ws / "pickup.json").write_text(json.dumps(GOOD))
    loaded = CC_BUILTIN + FORMS["reference-hashed"]
    gateway = [first] + [{"index": i, "wire_format": "anthropic", "status": 200, "error": None, "tools": loaded,
                          "tool_results": [{"id": "cs", "content": "[tool_reference mcp__dispatch__x]"}]}
                         for i in (1, 2, 3)]
    booking = display(FORMS["reference-hashed"][0])
    reqs = [{"index": 0, "action": "native_tool", "mapped_tool": "ToolSearch", "call_id": "cs", "principal": "main",
             "arguments": {"query": "dispatch"}},
            {"index": 1, "action": "call_tool", "mapped_tool": booking, "call_id": "c1", "principal": "main",
             "arguments": ARGS},
            {"index": 2, "action": "write_file", "mapped_tool": "Write", "call_id": "cw", "principal": "main"}]
    return VerifierContext(workspace=ws, baseline=ws, truth=TRUTH, oracle=None, events=[], gateway=gateway,
                           probe={"requests": reqs}, ledgers={"dispatch": ledger(BOOK)}, run_dir=tmp)


def test_deferred_tools_fetched_by_the_model_are_judged_where_they_are_declared(tmp_path: Path) -> None:
    out = verdicts(deferred_run(tmp_path, searched=True))
    assert all(v[0] for v in out.values()), out
    assert out[H1][1].startswith("request 1 ")


def test_tools_behind_a_search_the_model_never_called_leave_h1_unscored(tmp_path: Path) -> None:
    """The archived Claude Code 2.1.332 run: ToolSearch declared, the dispatch tool only named as
    deferred, the probe never searched - not a harness failure (rule 12)."""
    out = verdicts(deferred_run(tmp_path, searched=False))
    assert out[H1][0] is None and "never searched" in out[H1][1] and "ToolSearch" in out[H1][1]
    assert not out[A1][0] and out[A2][0] and out[H2][0]


def test_a_search_that_showed_no_dispatch_tool_still_fails_h1(tmp_path: Path) -> None:
    ctx = catalog_run(tmp_path, "[]", call=None, served=[], out={**GOOD, "pickup_id": None})
    assert failed(ctx) == {H1, A1} and verdicts(ctx)[H1][0] is False
