"""T3-shipment-label-002: the verifier on hand-built runs (exact transport; a dropped null, an
absent field sent, NFC-normalised text, an escaped tab, a lost deep field; a lossy schema; a
wrong tracking number; a do-nothing run), the ledger rule of A2, the probe policy, the carrier
simulator, and what the drop_tool_arg_field mutant removes from these arguments."""

from __future__ import annotations

import copy
import json
import re
import unicodedata
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from apparatus.simulators.engine import ServiceRuntime
from apparatus.simulators.ledger import Ledger
from apparatus.simulators.spec import load_service, simulator_specs
from criteria.registry import RuleContext, evaluate_rule
from criteria.rundata import RunData
from harnesses.reference.mcp_tools import drop_nested_field
from tests.tasks import drive as drive_policy
from tests.tasks import load_module as _load
from tracetrial.policy import CallTool, Observation, Shell, Turn, WriteFile
from tracetrial.task import load_task
from tracetrial.trace import EventBase, ToolCall, ToolEvent, ToolResult
from tracetrial.verify import VerifierContext

PACK = Path(__file__).resolve().parents[2] / "tasks" / "T3-shipment-label-002"
NOW = datetime.now(UTC)


SCORE = _load(PACK / "verifier" / "score.py", "t3_ship_score")
POLICY = _load(PACK / "probe_policy.py", "t3_ship_policy")
TASK = load_task(PACK)
ORDER_TEXT = (PACK / "workspace" / "order.json").read_text(encoding="utf-8")
SHIPMENT = json.loads(ORDER_TEXT)["shipment"]
SCHEMA = next(t for t in load_service(PACK, TASK.spec.simulators[0]).spec.tools
              if t.name == "create_shipment").input_schema
TRACKING = "TRK-Q7M2XKAP4LZC"
IDS = {"H1-arguments-arrive-as-sent", "H2-argument-schema-declared-intact", "A1-tracking-in-shipment-json",
       "A3-label-matches-order"}


def ledger(received: list[Any], *, served: bool = True) -> list[dict[str, Any]]:
    recs: list[dict[str, Any]] = [{"seq": 1, "kind": "transition", "tool": None, "detail": {"op": "init"}}]
    for i, args in enumerate(received):
        seq = len(recs) + 1
        recs.append({"seq": seq, "kind": "request", "tool": "create_shipment", "arguments": args, "detail": {}})
        if i == 0 and served:
            recs.append({"seq": seq + 1, "kind": "issued", "tool": "create_shipment",
                         "detail": {"name": "tracking", "value": TRACKING, "scope": "call", "request_seq": seq}})
            recs.append({"seq": seq + 2, "kind": "transition", "tool": "create_shipment",
                         "detail": {"op": "append", "path": "state.labels", "at": ["labels"],
                                    "new": {"tracking": TRACKING, "request": args}, "request_seq": seq}})
    return recs


def run(tmp_path: Path, *, received: Any = "same", tracking: Any = TRACKING, schema: Any = None,
        probe: bool = True, served: bool = True, calls: int = 1, emitted: Any = "same") -> VerifierContext:
    ws, base = tmp_path / "workspace", tmp_path / "baseline"
    ws.mkdir(parents=True, exist_ok=True)
    base.mkdir(parents=True, exist_ok=True)
    (base / "order.json").write_text(ORDER_TEXT, encoding="utf-8")
    if tracking != "<none>":
        (ws / "shipment.json").write_text(json.dumps({"tracking": tracking}))
    args = copy.deepcopy(SHIPMENT) if received == "same" else received
    name = "mcp__shipping__create_shipment"
    decl = {"name": name, "type": "function", "description": "", "input_schema": SCHEMA if schema is None else schema}
    gateway = [{"index": 0, "wire_format": "chat", "status": 200, "error": None, "inventory_complete": True,
                "tools": [decl], "tool_results": []},
               {"index": 1, "wire_format": "chat", "status": 200, "error": None, "inventory_complete": True,
                "tools": [decl], "tool_results": [{"id": "call_1", "is_error": None,
                                                   "content": "Exit code 0\n" + ORDER_TEXT}]},
               {"index": 2, "wire_format": "chat", "status": 200, "error": None, "inventory_complete": True,
                "tools": [decl], "tool_results": [{"id": "call_2", "is_error": None,
                                                   "content": json.dumps({"tracking": TRACKING})}]}]
    events: list[EventBase] = [ToolEvent(seq=7, timestamp=NOW, run_id="r", tool_call=ToolCall(
        id="call_2", name=name, arguments=copy.deepcopy(SHIPMENT)),
        tool_result=ToolResult(content=json.dumps({"tracking": TRACKING})))]
    sent = copy.deepcopy(SHIPMENT) if emitted == "same" else emitted
    report = {"requests": [{"index": 1, "action": "shell", "mapped_tool": "shell", "call_id": "call_1"},
                           {"index": 2, "action": "call_tool", "mapped_tool": name, "call_id": "call_2",
                            **({"arguments": sent} if sent is not None else {})}]}
    return VerifierContext(workspace=ws, baseline=base, truth=None, oracle=None, events=events,
                           gateway=gateway, probe=report if probe else None,
                           ledgers={"shipping": ledger([args] * calls, served=served) if calls else ledger([])},
                           run_dir=tmp_path)


def failed(ctx: VerifierContext) -> set[str]:
    out = SCORE.score(ctx)
    assert set(out) == IDS
    return {k for k, v in out.items() if not v[0]}


def with_change(fn: Any) -> Any:
    args = copy.deepcopy(SHIPMENT)
    fn(args)
    return args


# ------------------------------------------------------------------ pack


def test_the_order_holds_every_trigger() -> None:
    r = SHIPMENT["recipient"]
    assert r["company"] is None and "reference" not in SHIPMENT and SHIPMENT["insurance"] is None
    assert '"' in r["name"] and "\\" in r["address"]["lines"][0]
    assert "\t" in SHIPMENT["delivery_note"] and "\n" in SHIPMENT["delivery_note"]
    items = SHIPMENT["parcel"]["contents"]["customs"]["declaration"]["items"]
    assert items[0]["origin"]["region"] is None and "\U0001F4E6" in items[0]["description"]
    assert unicodedata.normalize("NFC", items[1]["description"]) != items[1]["description"]   # combining ring


def test_the_mutant_drops_exactly_the_explicit_null_company() -> None:
    dropped = drop_nested_field(SHIPMENT)
    assert "company" not in dropped["recipient"]
    assert SCORE.diff(SHIPMENT, dropped) == ["$.recipient.company: sent None, absent on arrival"]


# ------------------------------------------------------------------ verifier


def test_exact_transport_passes(tmp_path: Path) -> None:
    assert failed(run(tmp_path)) == set()


def test_emitted_arguments_fall_back_to_the_shown_order(tmp_path: Path) -> None:
    assert failed(run(tmp_path, emitted=None)) == set()


def test_live_runs_use_the_trace_record(tmp_path: Path) -> None:
    assert failed(run(tmp_path, probe=False)) == set()


@pytest.mark.parametrize("change, where", [
    (lambda a: a["recipient"].pop("company"), "recipient.company"),                                  # the mutant
    (lambda a: a.update(reference=None), "reference"),                                              # absent -> null
    (lambda a: a["recipient"].update(name=unicodedata.normalize("NFC", a["recipient"]["name"]) + " "), "name"),
    (lambda a: a.update(delivery_note=a["delivery_note"].replace("\t", "\\t")), "delivery_note"),   # escape kept literal
    (lambda a: a["parcel"]["contents"]["customs"]["declaration"]["items"][0]["origin"].pop("region"), "region"),
    (lambda a: a["parcel"]["contents"]["customs"]["declaration"]["items"][1].update(
        description=unicodedata.normalize("NFC", a["parcel"]["contents"]["customs"]["declaration"]["items"][1]
                                          ["description"])), "description"),
])
def test_altered_arguments_fail_h1_and_the_stored_label(tmp_path: Path, change: Any, where: str) -> None:
    ctx = run(tmp_path, received=with_change(change))
    assert failed(ctx) == {"H1-arguments-arrive-as-sent", "A3-label-matches-order"}
    assert where in SCORE.score(ctx)["H1-arguments-arrive-as-sent"][1]


def test_rejected_call_fails_h1_a1_a3(tmp_path: Path) -> None:
    ctx = run(tmp_path, received=with_change(lambda a: a.pop("recipient")), served=False, tracking=None)
    assert failed(ctx) == {"H1-arguments-arrive-as-sent", "A1-tracking-in-shipment-json", "A3-label-matches-order"}


@pytest.mark.parametrize("lossy", [
    lambda s: s["properties"]["recipient"]["properties"]["company"].update(type="string"),
    lambda s: s.update(required=[*s["required"], "reference"]),
    lambda s: s["properties"]["parcel"]["properties"].pop("contents"),
    lambda s: s["properties"].pop("reference"),
])
def test_lossy_schema_fails_h2(tmp_path: Path, lossy: Any) -> None:
    schema = copy.deepcopy(SCHEMA)
    lossy(schema)
    assert failed(run(tmp_path, schema=schema)) == {"H2-argument-schema-declared-intact"}


ENTRY = {"id": "mcp:shipping:shipping__create_shipment", "name": "shipping__create_shipment",
         "label": "create_shipment", "description": "Create a shipment", "input": "unknown"}


def _discovery_only(tmp_path: Path, described: dict[str, Any] | None, listing: str | None = None) -> Any:
    """Seen on OpenClaw: MCP tools sit behind tool_search, whose listing gives the input as "unknown";
    its tool_describe answers with the entry and the tool's ``parameters``."""
    ctx = run(tmp_path)
    entry = ENTRY
    for rec in ctx.gateway:
        rec["tools"] = [{"name": "tool_search", "type": "function", "input_schema": {"type": "object"}}]
    ctx.gateway[1]["tool_results"].append({"id": "call_ts", "is_error": None,
                                           "content": json.dumps([entry], indent=2) if listing is None else listing})
    if described is not None:
        wrapped = "SECURITY NOTICE ...\n---\n" + json.dumps({**entry, "parameters": described}, indent=2) + "\n<<<END>>>"
        ctx.gateway[1]["tool_results"].append({"id": "call_td", "is_error": None, "content": wrapped})
    return SCORE.score(ctx)["H2-argument-schema-declared-intact"]


def test_a_tool_only_listed_through_discovery_is_unscored_with_what_the_listing_showed(tmp_path: Path) -> None:
    out = _discovery_only(tmp_path, None)
    assert out[0] is None and "'\"unknown\"'" in out[1]


OTHER = {"id": "mcp:shipping:shipping__void_label", "name": "shipping__void_label", "label": "void_label",
         "description": "Void a label", "input": "unknown"}


@pytest.mark.parametrize("listing", [
    json.dumps([{"input": "unknown", **ENTRY}]),                                           # input before name
    json.dumps([{**{k: v for k, v in ENTRY.items() if k != "input"},
                 "annotations": {"readOnlyHint": False}, "input": "unknown"}], indent=2),  # an object between
    "Found 2 tools for 'shipment':\n" + json.dumps({"results": [OTHER, ENTRY], "total": 2}),  # wrapped, after a header
    json.dumps([{"type": "text", "text": json.dumps([OTHER, ENTRY], indent=2)}]),          # relayed as JSON text
], ids=["input-before-name", "object-between", "wrapped-after-header", "relayed-as-json-text"])
def test_the_listing_is_read_as_json_whatever_its_layout(tmp_path: Path, listing: str) -> None:
    out = _discovery_only(tmp_path, None, listing=listing)
    assert out[0] is None and "'\"unknown\"'" in out[1]


def test_a_listing_of_other_tools_only_is_no_listing_of_this_one(tmp_path: Path) -> None:
    out = _discovery_only(tmp_path, None, listing="create_shipment: see below\n" + json.dumps([OTHER]))
    assert out[0] is False and "no successful request" in out[1]


def test_a_described_schema_is_graded_like_a_declaration(tmp_path: Path) -> None:
    intact = next(t for t in run(tmp_path / "ref").gateway[0]["tools"] if "create_shipment" in t["name"])["input_schema"]
    assert _discovery_only(tmp_path / "a", intact)[0] is True
    lossy = copy.deepcopy(intact)
    lossy["required"] = sorted(set(lossy.get("required", [])) | set(lossy["properties"]))  # optional made required
    out = _discovery_only(tmp_path / "b", lossy)
    assert out[0] is False and "described schema" in out[1]


@pytest.mark.parametrize("tracking", [None, "TRK-OTHER", "<none>"])
def test_wrong_or_missing_tracking_fails_a1(tmp_path: Path, tracking: Any) -> None:
    assert failed(run(tmp_path, tracking=tracking)) == {"A1-tracking-in-shipment-json"}


def _ledger_rule(tmp_path: Path, calls: int) -> bool | None:
    crit = next(c for c in TASK.agent_rubric.criteria if c.id == "A2-single-create-shipment")
    assert crit.rule is not None
    recs = ledger([copy.deepcopy(SHIPMENT)] * calls)
    return evaluate_rule(crit.rule, crit.id, RuleContext(task=TASK, run=RunData(root=tmp_path,
                                                                                 ledgers={"shipping": recs}))).passed


def test_a2_counts_requests(tmp_path: Path) -> None:
    assert _ledger_rule(tmp_path, 1) is True
    assert _ledger_rule(tmp_path, 2) is False
    assert _ledger_rule(tmp_path, 0) is False


def test_do_nothing_run_fails_the_agent_layer(tmp_path: Path) -> None:
    ctx = run(tmp_path, calls=0, tracking="<none>", probe=False)
    assert {"A1-tracking-in-shipment-json", "A3-label-matches-order", "H1-arguments-arrive-as-sent"} <= failed(ctx)
    assert _ledger_rule(tmp_path, 0) is False


# ------------------------------------------------------------------ probe policy


def drive(observations: list[Observation]) -> list[Any]:
    return drive_policy(POLICY, Turn(1, TASK.prompt), observations)


def test_policy_sends_the_shipment_verbatim_and_writes_the_tracking() -> None:
    shown = "Chunk ID: 1\nProcess exited with code 0\nOutput:\n" + ORDER_TEXT
    acts = drive([Observation(text=shown), Observation(text=json.dumps({"tracking": TRACKING})), Observation(text="ok")])
    assert acts[0] == Shell("cat order.json")
    call = next(a for a in acts if isinstance(a, CallTool))
    assert call.tool == "create_shipment" and dict(call.arguments) == SHIPMENT
    assert SCORE.diff(SHIPMENT, dict(call.arguments)) == []
    assert json.loads(next(a for a in acts if isinstance(a, WriteFile)).content) == {"tracking": TRACKING}


def test_policy_reports_no_tracking_after_an_error() -> None:
    acts = drive([Observation(text=ORDER_TEXT), Observation(text="INVALID_ARGUMENTS", is_error=True),
                  Observation(text="ok")])
    assert json.loads(next(a for a in acts if isinstance(a, WriteFile)).content) == {"tracking": None}


# ------------------------------------------------------------------ simulator


def _runtime(tmp_path: Path, seed: str) -> ServiceRuntime:
    sims = {s.name: s for s in simulator_specs(PACK)}
    led = Ledger(tmp_path / "shipping.jsonl", "shipping")
    led.init()
    rt = ServiceRuntime(load_service(PACK, sims["shipping"]), tmp_path / "state", led, seed)
    rt.start_session()
    return rt


def test_simulator_accepts_the_order_and_keeps_the_arguments_exactly(tmp_path: Path) -> None:
    out = _runtime(tmp_path / "a", "seed-a").call_tool("create_shipment", copy.deepcopy(SHIPMENT))
    other = _runtime(tmp_path / "b", "seed-b").call_tool("create_shipment", copy.deepcopy(SHIPMENT))
    assert not out.is_error and re.fullmatch(r"TRK-[A-Z0-9]{12}", out.structured["tracking"])
    assert out.structured["tracking"] != other.structured["tracking"]
    recs = [json.loads(x) for x in (tmp_path / "a" / "shipping.jsonl").read_text().splitlines()]
    req = next(r for r in recs if r["kind"] == "request" and r["tool"] == "create_shipment")
    assert req["arguments"] == SHIPMENT
    stored = next(r for r in recs if r["kind"] == "transition" and r["detail"].get("path") == "state.labels")
    assert SCORE.diff(SHIPMENT, stored["detail"]["new"]["request"]) == []


def test_simulator_accepts_the_mutant_arguments_too(tmp_path: Path) -> None:
    """Without company the call is still valid (optional), so the mutant changes the label, not the receipt."""
    out = _runtime(tmp_path, "s").call_tool("create_shipment", drop_nested_field(SHIPMENT))
    assert not out.is_error
