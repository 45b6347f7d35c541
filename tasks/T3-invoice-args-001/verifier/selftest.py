"""Self-test of ``score.py`` (TASK_GUIDE rule 13): faithful and broken evidence sets.

Faithful: the probe reads order.json, sends its ``invoice`` verbatim to ``create_invoice``
(declared intact, or behind OpenClaw's tool_search/tool_describe), the billing ledger receives
exactly that and issues a receipt, invoice.json holds it. Broken: the drop_tool_arg_field shape
(customer.name dropped, the call rejected), a rounded big integer, a lossy declared or described
schema, a listing without a describe (H2 unscored, whatever the listing's layout: it is read as
JSON) and a wrong receipt.

Run from the repository root: ``python tasks/T3-invoice-args-001/verifier/selftest.py`` (exit 0
when every verdict is as expected). The full unit tests are ``tests/tasks/test_t3_invoice_args_001.py``.
"""

from __future__ import annotations

import copy
import json
import sys
import tempfile
import types
from pathlib import Path
from typing import Any

from tracetrial.verify import load_yaml
from tracetrial.verify import VerifierContext

HERE = Path(__file__).resolve().parent
PACK = HERE.parent
TRUTH = json.loads((PACK / "truth.json").read_text(encoding="utf-8"))
ORDER_TEXT = (PACK / "workspace" / "order.json").read_text(encoding="utf-8")
INVOICE = json.loads(ORDER_TEXT)["invoice"]
SCHEMA = load_yaml((PACK / "simulators" / "billing.yaml").read_text(encoding="utf-8"))["tools"][0]["input_schema"]
RECEIPT = "INV-QKLKJXDXAR"
H1, H2 = "H1-arguments-arrive-as-sent", "H2-argument-schema-declared-intact"
A1, A3 = "A1-receipt-in-invoice-json", "A3-invoice-matches-order"
#: OpenClaw 2026.9.6's tool_search entry for an MCP tool it keeps behind its dispatcher.
ENTRY = {"id": "mcp:billing:billing__create_invoice", "name": "billing__create_invoice", "label": "create_invoice",
         "description": "Create an invoice.", "input": "unknown"}


def _score() -> types.ModuleType:
    mod = types.ModuleType("t3_invoice_selftest_score")
    exec(compile((HERE / "score.py").read_text(encoding="utf-8"), str(HERE / "score.py"), "exec"), mod.__dict__)  # noqa: S102
    return mod


def _changed(fn: Any, value: Any) -> Any:
    value = copy.deepcopy(value)
    fn(value)
    return value


def _ledger(args: Any, *, served: bool) -> list[dict[str, Any]]:
    recs: list[dict[str, Any]] = [{"seq": 1, "kind": "transition", "tool": None, "detail": {"op": "init"}},
                                  {"seq": 2, "kind": "request", "tool": "create_invoice", "arguments": args,
                                   "detail": {}}]
    if served:
        recs += [{"seq": 3, "kind": "issued", "tool": "create_invoice",
                  "detail": {"name": "receipt", "value": RECEIPT, "scope": "call", "request_seq": 2}},
                 {"seq": 4, "kind": "transition", "tool": "create_invoice",
                  "detail": {"op": "append", "path": "state.invoices", "at": ["invoices"],
                             "new": {"receipt": RECEIPT, "request": args}, "request_seq": 2}}]
    else:
        recs.append({"seq": 3, "kind": "error", "tool": "create_invoice",
                     "detail": {"code": "INVALID_ARGUMENTS", "message": "customer: 'name' is a required property",
                                "request_seq": 2}})
    return recs


def _ctx(root: Path, *, received: Any = None, served: bool = True, receipt: Any = RECEIPT, schema: Any = SCHEMA,
         dispatcher: bool = False, described: Any = None, listing: str | None = None) -> VerifierContext:
    ws, base = root / "workspace", root / "baseline"
    ws.mkdir(parents=True)
    base.mkdir()
    (base / "order.json").write_text(ORDER_TEXT, encoding="utf-8")
    (ws / "order.json").write_text(ORDER_TEXT, encoding="utf-8")
    (ws / "invoice.json").write_text(json.dumps({"receipt": receipt}))
    if dispatcher:  # OpenClaw: no MCP tool declared; tool_search lists it, tool_describe shows its parameters
        tools = [{"name": n, "type": "function", "input_schema": {"type": "object"}}
                 for n in ("exec", "write", "tool_search", "tool_describe")]
    else:
        tools = [{"name": "Bash", "type": "function", "input_schema": {"type": "object"}},
                 {"name": "mcp__billing__create_invoice", "type": "function", "description": "Create an invoice.",
                  "input_schema": schema}]
    answer = json.dumps({"receipt": RECEIPT, "status": "created", "lines": 2}) if served else \
        json.dumps({"error": {"code": "INVALID_ARGUMENTS", "message": "customer: 'name' is a required property"}})
    results: list[list[dict[str, Any]]] = [[], [{"id": "toolu_1", "is_error": False, "content": ORDER_TEXT}]]
    if dispatcher:
        results.append([{"id": "toolu_s", "is_error": False,
                         "content": json.dumps([ENTRY], indent=2) if listing is None else listing}])
        if described is not None:
            shown = "SECURITY NOTICE ...\n---\n" + json.dumps({**ENTRY, "parameters": described}, indent=2) + "\n<<<END>>>"
            results.append([{"id": "toolu_d", "is_error": False, "content": shown}])
    create = len(results) - 1
    results.append([{"id": "toolu_2", "is_error": not served, "content": answer}])
    results.append([{"id": "toolu_3", "is_error": False, "content": "File created successfully at: invoice.json"}])
    gateway = [{"index": i, "wire_format": "anthropic", "status": 200, "error": None, "inventory_complete": True,
                "tools": tools, "tool_results": r} for i, r in enumerate(results)]
    probe = {"requests": [
        {"index": 0, "kind": "main", "turn": 1, "action": "shell", "mapped_tool": "Bash", "call_id": "toolu_1",
         "arguments": {"command": "cat order.json"}},
        {"index": create, "kind": "main", "turn": 1, "action": "call_tool", "call_id": "toolu_2",
         "mapped_tool": "billing__create_invoice" if dispatcher else "mcp__billing__create_invoice",
         "arguments": copy.deepcopy(INVOICE)},
        {"index": create + 1, "kind": "main", "turn": 1, "action": "write_file", "call_id": "toolu_3"},
        {"index": create + 2, "kind": "main", "turn": 1, "action": "final"}], "final_text": "Invoice created."}
    args = copy.deepcopy(INVOICE) if received is None else received
    return VerifierContext(workspace=ws, baseline=base, truth=TRUTH, oracle=None, events=[], gateway=gateway,
                           probe=probe, ledgers={"billing": _ledger(args, served=served)}, run_dir=root)


DROPPED_NAME = _changed(lambda a: a["customer"].pop("name"), INVOICE)
ROUNDED = _changed(lambda a: a["lines"][0].update(unit_price_cents=9007199254740992), INVOICE)
NOTE_NOT_NULL = _changed(lambda s: s["properties"]["note"].update(type="string"), SCHEMA)
PO_REQUIRED = _changed(lambda s: s["required"].append("po_number"), SCHEMA)
#: (name, _ctx arguments, criteria expected to fail, criteria expected unscored)
CASES: list[tuple[str, dict[str, Any], set[str], set[str]]] = [
    ("faithful (declared)", {}, set(), set()),
    ("faithful (OpenClaw describe shows the schema)", {"dispatcher": True, "described": SCHEMA}, set(), set()),
    ("listing without a describe", {"dispatcher": True}, set(), {H2}),
    ("listing (input before name, after a header) without a describe",
     {"dispatcher": True, "listing": "Found 1 tool:\n" + json.dumps([{"input": "unknown", **ENTRY}])}, set(), {H2}),
    ("drop_tool_arg_field: name dropped, rejected", {"received": DROPPED_NAME, "served": False, "receipt": None},
     {H1, A1, A3}, set()),
    ("big integer rounded on the way", {"received": ROUNDED}, {H1, A3}, set()),
    ("declared note not nullable", {"schema": NOTE_NOT_NULL}, {H2}, set()),
    ("described po_number required", {"dispatcher": True, "described": PO_REQUIRED}, {H2}, set()),
    ("wrong receipt written", {"receipt": "INV-0000000000"}, {A1}, set()),
]


def main() -> int:
    score = _score().score
    bad = 0
    for name, kwargs, want, want_none in CASES:
        with tempfile.TemporaryDirectory() as tmp:
            out = score(_ctx(Path(tmp), **kwargs))
        verdicts = {k: v if isinstance(v, tuple) else (v, "") for k, v in out.items()}
        got = {k for k, v in verdicts.items() if v[0] is False}
        none = {k for k, v in verdicts.items() if v[0] is None}
        ok = got == want and none == want_none
        bad += not ok
        print(f"{'ok' if ok else 'BAD':3} {name}: failed {sorted(got)}, unscored {sorted(none)}"
              + ("" if ok else f" (expected {sorted(want)}, unscored {sorted(want_none)})"))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
