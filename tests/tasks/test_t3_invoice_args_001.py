"""T3-invoice-args-001: the verifier on hand-built runs (exact transport, rounded big integer,
float, dropped null, added field, altered Unicode, lossy schema, wrong receipt), the ledger rule
of A2, the probe policy, and the billing simulator."""

from __future__ import annotations

import copy
import json
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
from tests.tasks import drive as drive_policy
from tests.tasks import load_module as _load
from tracetrial.policy import CallTool, Observation, Shell, Turn, WriteFile
from tracetrial.task import load_task
from tracetrial.trace import ToolCall, ToolEvent, ToolResult
from tracetrial.verify import VerifierContext

PACK = Path(__file__).resolve().parents[2] / "tasks" / "T3-invoice-args-001"


SCORE = _load(PACK / "verifier" / "score.py", "t3_score")
POLICY = _load(PACK / "probe_policy.py", "t3_policy")
TASK = load_task(PACK)
ORDER_TEXT = (PACK / "workspace" / "order.json").read_text(encoding="utf-8")
INVOICE = json.loads(ORDER_TEXT)["invoice"]
SCHEMA = next(t for t in load_service(PACK, TASK.spec.simulators[0]).spec.tools if t.name == "create_invoice").input_schema
RECEIPT = "INV-QKLKJXDXAR"
IDS = {"H1-arguments-arrive-as-sent", "H2-argument-schema-declared-intact", "A1-receipt-in-invoice-json",
       "A3-invoice-matches-order"}


def ledger(received: list[Any], *, served: bool = True) -> list[dict[str, Any]]:
    recs: list[dict[str, Any]] = [{"seq": 1, "kind": "transition", "tool": None, "detail": {"op": "init"}}]
    for i, args in enumerate(received):
        seq = len(recs) + 1
        recs.append({"seq": seq, "kind": "request", "tool": "create_invoice", "arguments": args, "detail": {}})
        if i == 0 and served:
            recs.append({"seq": seq + 1, "kind": "issued", "tool": "create_invoice",
                         "detail": {"name": "receipt", "value": RECEIPT, "scope": "call", "request_seq": seq}})
            recs.append({"seq": seq + 2, "kind": "transition", "tool": "create_invoice",
                         "detail": {"op": "append", "path": "state.invoices", "at": ["invoices"],
                                    "new": {"receipt": RECEIPT, "request": args}, "request_seq": seq}})
    return recs


def run(tmp_path: Path, *, received: Any = "same", receipt: Any = RECEIPT, schema: Any = None, wire: str = "anthropic",
        namespace: str | None = None, probe: bool = True, shown: str = ORDER_TEXT, served: bool = True,
        trace_args: Any = None) -> VerifierContext:
    ws, base = tmp_path / "workspace", tmp_path / "baseline"
    ws.mkdir(parents=True, exist_ok=True)
    base.mkdir(parents=True, exist_ok=True)
    (base / "order.json").write_text(ORDER_TEXT, encoding="utf-8")
    if receipt != "<none>":
        (ws / "invoice.json").write_text(json.dumps({"receipt": receipt}))
    args = copy.deepcopy(INVOICE) if received == "same" else received
    name = "create_invoice" if namespace else "mcp__billing__create_invoice"
    decl = {"name": name, "namespace": namespace, "type": "function", "description": "",
            "input_schema": SCHEMA if schema is None else schema}
    gateway = [{"index": 0, "wire_format": wire, "status": 200, "error": None, "inventory_complete": True,
                "tools": [decl], "tool_results": []},
               {"index": 1, "wire_format": wire, "status": 200, "error": None, "inventory_complete": True,
                "tools": [decl], "tool_results": [{"id": "call_1", "is_error": False, "content": shown}]},
               {"index": 2, "wire_format": wire, "status": 200, "error": None, "inventory_complete": True,
                "tools": [decl], "tool_results": [{"id": "call_2", "is_error": False,
                                                   "content": json.dumps({"receipt": RECEIPT})}]}]
    events = [ToolEvent(seq=7, timestamp=NOW, run_id="r", tool_call=ToolCall(
        id="call_2", name=name if not namespace else f"{namespace}__{name}",
        arguments=copy.deepcopy(INVOICE) if trace_args is None else trace_args),
        tool_result=ToolResult(content=json.dumps({"receipt": RECEIPT})))]
    report = {"requests": [{"index": 1, "action": "shell", "mapped_tool": "Bash", "call_id": "call_1"},
                           {"index": 2, "action": "call_tool", "mapped_tool": name, "call_id": "call_2"}]}
    return VerifierContext(workspace=ws, baseline=base, truth=TASK.truth, oracle=None, events=events,
                           gateway=gateway, probe=report if probe else None,
                           ledgers={"billing": ledger([args], served=served)}, run_dir=tmp_path)


NOW = datetime.now(UTC)


def failed(ctx: VerifierContext) -> set[str]:
    out = SCORE.score(ctx)
    assert set(out) == IDS
    return {k for k, v in out.items() if not v[0]}


def with_change(fn: Any) -> Any:
    args = copy.deepcopy(INVOICE)
    fn(args)
    return args


# ------------------------------------------------------------------ verifier


def test_exact_transport_passes(tmp_path: Path) -> None:
    assert failed(run(tmp_path)) == set()


def test_exact_transport_passes_with_a_codex_namespace_and_shell_header(tmp_path: Path) -> None:
    shown = "Chunk ID: ab12\nWall time: 0.01 seconds\nProcess exited with code 0\nOutput:\n" + ORDER_TEXT
    assert failed(run(tmp_path, wire="responses", namespace="mcp__billing", shown=shown)) == set()


@pytest.mark.parametrize("change, where", [
    (lambda a: a["lines"][0].update(unit_price_cents=9007199254740992), "unit_price_cents"),     # rounded (double)
    (lambda a: a["lines"][0].update(unit_price_cents=9007199254740993.0), "unit_price_cents"),   # float
    (lambda a: a.pop("note"), "note"),                                                           # null dropped
    (lambda a: a.update(po_number=None), "po_number"),                                          # absent -> null
    (lambda a: a.update(po_number=""), "po_number"),                                            # absent -> ""
    (lambda a: a["customer"].update(name=unicodedata.normalize("NFD", a["customer"]["name"])), "name"),
    (lambda a: a["customer"].update(name="Zo? ?ngstr?m ? ????"), "name"),                        # mangled
    (lambda a: a["customer"].pop("name"), "name"),                                               # nested drop
])
def test_any_transport_distortion_fails_h1_and_a3(tmp_path: Path, change: Any, where: str) -> None:
    ctx = run(tmp_path, received=with_change(change))
    out = SCORE.score(ctx)
    assert failed(ctx) == {"H1-arguments-arrive-as-sent", "A3-invoice-matches-order"}
    assert where in out["H1-arguments-arrive-as-sent"][1]


def test_rejected_call_fails_the_receipt_too(tmp_path: Path) -> None:
    ctx = run(tmp_path, received=with_change(lambda a: a["customer"].pop("name")), served=False, receipt=None)
    assert failed(ctx) == {"H1-arguments-arrive-as-sent", "A1-receipt-in-invoice-json", "A3-invoice-matches-order"}


def test_no_request_fails_h1(tmp_path: Path) -> None:
    ctx = run(tmp_path)
    ctx.ledgers["billing"] = ledger([])
    assert SCORE.score(ctx)["H1-arguments-arrive-as-sent"][0] is False


def test_h1_reference_is_what_the_probe_was_shown(tmp_path: Path) -> None:
    # The probe was shown an order whose name differs; it sent that, the ledger got that: H1 holds
    # (transport was exact) while A3 (the deliverable vs the real order) fails.
    shown_order = json.loads(ORDER_TEXT)
    shown_order["invoice"]["customer"]["name"] = "Zoe Angstrom"
    ctx = run(tmp_path, shown=json.dumps(shown_order), received=shown_order["invoice"])
    assert failed(ctx) == {"A3-invoice-matches-order"}


def test_live_protocol_falls_back_to_the_trace_record(tmp_path: Path) -> None:
    assert failed(run(tmp_path, probe=False)) == set()
    rounded = with_change(lambda a: a["lines"][0].update(unit_price_cents=9007199254740992))
    ctx = run(tmp_path / "b", probe=False, received=rounded)
    assert "H1-arguments-arrive-as-sent" in failed(ctx)
    assert "Trace IR" in SCORE.score(ctx)["H1-arguments-arrive-as-sent"][1]


def _schema_with(fn: Any) -> Any:
    s = copy.deepcopy(SCHEMA)
    fn(s)
    return s


@pytest.mark.parametrize("change", [
    lambda s: s["properties"]["note"].update(type="string"),
    lambda s: s["required"].append("po_number"),
    lambda s: s["properties"].pop("po_number"),
    lambda s: s["properties"]["lines"]["items"]["properties"]["unit_price_cents"].update(type="number"),
    lambda s: s.update(required=["customer", "lines"]),
])
def test_lossy_schema_declaration_fails_h2(tmp_path: Path, change: Any) -> None:
    assert failed(run(tmp_path, schema=_schema_with(change))) == {"H2-argument-schema-declared-intact"}


def test_schema_without_validation_keywords_or_with_anyof_null_passes(tmp_path: Path) -> None:
    def strip(s: Any) -> None:
        s["properties"]["lines"].pop("minItems")
        s["properties"]["note"] = {"anyOf": [{"type": "string"}, {"type": "null"}]}
    assert failed(run(tmp_path, schema=_schema_with(strip))) == set()


ENTRY = {"id": "mcp:billing:billing__create_invoice", "name": "billing__create_invoice",
         "label": "create_invoice", "description": "Create an invoice.", "input": "unknown"}
OTHER = {"id": "mcp:billing:billing__void_invoice", "name": "billing__void_invoice", "label": "void_invoice",
         "description": "Void an invoice.", "input": "unknown"}


def _discovery_only(tmp_path: Path, described: dict[str, Any] | None, listing: str | None = None) -> Any:
    """Seen on OpenClaw: MCP tools sit behind tool_search, whose listing gives the input as "unknown";
    its tool_describe answers with the entry and the tool's ``parameters``."""
    ctx = run(tmp_path)
    for rec in ctx.gateway:
        rec["tools"] = [{"name": "tool_search", "type": "function", "input_schema": {"type": "object"}}]
    ctx.gateway[1]["tool_results"].append({"id": "call_ts", "is_error": None,
                                           "content": json.dumps([ENTRY], indent=2) if listing is None else listing})
    if described is not None:
        wrapped = "SECURITY NOTICE ...\n---\n" + json.dumps({**ENTRY, "parameters": described}, indent=2) + "\n<<<END>>>"
        ctx.gateway[1]["tool_results"].append({"id": "call_td", "is_error": None, "content": wrapped})
    return SCORE.score(ctx)["H2-argument-schema-declared-intact"]


def test_a_tool_only_listed_through_discovery_is_unscored_with_what_the_listing_showed(tmp_path: Path) -> None:
    out = _discovery_only(tmp_path, None)
    assert out[0] is None and "'\"unknown\"'" in out[1]


def test_a_described_schema_is_graded_like_a_declaration(tmp_path: Path) -> None:
    assert _discovery_only(tmp_path / "a", copy.deepcopy(SCHEMA))[0] is True
    out = _discovery_only(tmp_path / "b", _schema_with(lambda s: s["required"].append("po_number")))
    assert out[0] is False and "described schema" in out[1] and "po_number" in out[1]


@pytest.mark.parametrize("listing", [
    json.dumps([{"input": "unknown", **ENTRY}]),                                           # input before name
    json.dumps([{**{k: v for k, v in ENTRY.items() if k != "input"},
                 "annotations": {"readOnlyHint": False}, "input": "unknown"}], indent=2),  # an object between
    "Found 2 tools for 'invoice':\n" + json.dumps({"results": [OTHER, ENTRY], "total": 2}),  # wrapped, after a header
    json.dumps([{"type": "text", "text": json.dumps([OTHER, ENTRY], indent=2)}]),          # relayed as JSON text
], ids=["input-before-name", "object-between", "wrapped-after-header", "relayed-as-json-text"])
def test_the_listing_is_read_as_json_whatever_its_layout(tmp_path: Path, listing: str) -> None:
    out = _discovery_only(tmp_path, None, listing=listing)
    assert out[0] is None and "'\"unknown\"'" in out[1]


def test_a_listing_of_other_tools_only_is_no_listing_of_this_one(tmp_path: Path) -> None:
    out = _discovery_only(tmp_path, None, listing="create_invoice: see below\n" + json.dumps([OTHER]))
    assert out[0] is False and "no successful request" in out[1]


@pytest.mark.parametrize("receipt", ["INV-0000000000", None, "<none>"])
def test_wrong_or_missing_receipt_fails_a1(tmp_path: Path, receipt: Any) -> None:
    assert failed(run(tmp_path, receipt=receipt)) == {"A1-receipt-in-invoice-json"}


def test_a2_counts_create_invoice_requests(tmp_path: Path) -> None:
    crit = next(c for c in TASK.agent_rubric.criteria if c.id == "A2-single-create-invoice")
    assert crit.rule is not None
    for received, expected in (([INVOICE], True), ([INVOICE, INVOICE], False), ([], False)):
        ctx = RuleContext(task=TASK, run=RunData(root=tmp_path, ledgers={"billing": ledger(received)}))
        assert evaluate_rule(crit.rule, crit.id, ctx).passed is expected


# ------------------------------------------------------------------ probe policy


def drive(observations: list[Observation]) -> list[Any]:
    return drive_policy(POLICY, Turn(1, TASK.prompt), observations)


def test_policy_sends_the_invoice_verbatim_and_reports_the_receipt() -> None:
    shown = "Chunk ID: 1\nProcess exited with code 0\nOutput:\n" + ORDER_TEXT
    acts = drive([Observation(text=shown), Observation(text=json.dumps({"receipt": RECEIPT, "status": "created"})),
                  Observation(text="ok")])
    assert isinstance(acts[0], Shell) and "order.json" in acts[0].command
    call = next(a for a in acts if isinstance(a, CallTool))
    assert (call.server, call.tool) == ("billing", "create_invoice")
    assert json.dumps(dict(call.arguments), ensure_ascii=False) == json.dumps(INVOICE, ensure_ascii=False)
    assert call.arguments["lines"][0]["unit_price_cents"] == 2**53 + 1 and "po_number" not in call.arguments
    assert "note" in call.arguments and call.arguments["note"] is None
    assert json.loads(next(a for a in acts if isinstance(a, WriteFile)).content) == {"receipt": RECEIPT}


def test_policy_reports_no_receipt_on_an_error() -> None:
    err = json.dumps({"error": {"code": "INVALID_ARGUMENTS", "message": "customer: 'name' is a required property"}})
    acts = drive([Observation(text=ORDER_TEXT), Observation(text=err, is_error=True), Observation(text="ok")])
    assert json.loads(next(a for a in acts if isinstance(a, WriteFile)).content) == {"receipt": None}


def test_policy_reads_a_receipt_from_json_escaped_text() -> None:
    escaped = "Output:\n" + json.dumps([{"type": "text", "text": json.dumps({"receipt": RECEIPT})}])
    acts = drive([Observation(text=ORDER_TEXT), Observation(text=escaped), Observation(text="ok")])
    assert json.loads(next(a for a in acts if isinstance(a, WriteFile)).content) == {"receipt": RECEIPT}


# ------------------------------------------------------------------ simulator and workspace


def _runtime(tmp_path: Path) -> ServiceRuntime:
    sims = {s.name: s for s in simulator_specs(PACK)}
    led = Ledger(tmp_path / "billing.jsonl", "billing")
    led.init()
    rt = ServiceRuntime(load_service(PACK, sims["billing"]), tmp_path / "state", led, "seed")
    rt.start_session()
    return rt


def test_simulator_stores_the_arguments_exactly_and_issues_a_receipt(tmp_path: Path) -> None:
    out = _runtime(tmp_path).call_tool("create_invoice", copy.deepcopy(INVOICE))
    assert not out.is_error and out.structured["receipt"].startswith("INV-")
    recs = [json.loads(x) for x in (tmp_path / "billing.jsonl").read_text(encoding="utf-8").splitlines()]
    req = next(r for r in recs if r["kind"] == "request" and r["tool"] == "create_invoice")
    assert req["arguments"] == INVOICE and req["arguments"]["lines"][0]["unit_price_cents"] == 2**53 + 1
    stored = next(r for r in recs if r["kind"] == "transition" and r["detail"].get("path") == "state.invoices")
    assert stored["detail"]["new"]["request"] == INVOICE and "po_number" not in stored["detail"]["new"]["request"]


def test_simulator_rejects_a_dropped_nested_field_and_caps_a_second_call(tmp_path: Path) -> None:
    rt = _runtime(tmp_path)
    assert rt.call_tool("create_invoice", with_change(lambda a: a["customer"].pop("name"))).code == "INVALID_ARGUMENTS"
    assert rt.call_tool("create_invoice", copy.deepcopy(INVOICE)).code == "REQUEST_CAP_EXCEEDED"


def test_order_holds_the_four_triggers() -> None:
    assert INVOICE["lines"][0]["unit_price_cents"] == 2**53 + 1
    assert float(INVOICE["lines"][0]["unit_price_cents"]) != INVOICE["lines"][0]["unit_price_cents"]
    assert any(ord(ch) > 0x2000 for ch in INVOICE["customer"]["name"])
    assert "note" in INVOICE and INVOICE["note"] is None and "po_number" not in INVOICE
