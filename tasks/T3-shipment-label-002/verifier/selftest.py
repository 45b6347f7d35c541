"""Self-test of ``score.py`` (TASK_GUIDE rule 13): faithful and broken evidence sets.

Faithful: the probe reads order.json, sends its ``shipment`` verbatim to ``create_shipment``
(declared intact by Claude Code once its MCP server connected, or shown by OpenClaw's
tool_describe), the shipping ledger receives exactly that and issues a tracking number,
shipment.json holds it. Broken: the drop_tool_arg_field shape (recipient.company dropped and
accepted), a tab re-escaped on the way, a lossy declared or described schema, a listing without a
describe (H2 unscored, whatever the listing's layout: it is read as JSON) and a wrong tracking number.

Run from the repository root: ``python tasks/T3-shipment-label-002/verifier/selftest.py`` (exit 0
when every verdict is as expected). The full unit tests are ``tests/tasks/test_t3_shipment_label_002.py``.
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
ORDER_TEXT = (PACK / "workspace" / "order.json").read_text(encoding="utf-8")
SHIPMENT = json.loads(ORDER_TEXT)["shipment"]
SCHEMA = load_yaml((PACK / "simulators" / "shipping.yaml").read_text(encoding="utf-8"))["tools"][0]["input_schema"]
TRACKING = "TRK-Q7M2XKAP4LZC"
H1, H2 = "H1-arguments-arrive-as-sent", "H2-argument-schema-declared-intact"
A1, A3 = "A1-tracking-in-shipment-json", "A3-label-matches-order"
#: OpenClaw 2026.9.6's tool_search entry for an MCP tool it keeps behind its dispatcher.
ENTRY = {"id": "mcp:shipping:shipping__create_shipment", "name": "shipping__create_shipment",
         "label": "create_shipment", "description": "Create a shipment", "input": "unknown"}


def _score() -> types.ModuleType:
    mod = types.ModuleType("t3_shipment_selftest_score")
    exec(compile((HERE / "score.py").read_text(encoding="utf-8"), str(HERE / "score.py"), "exec"), mod.__dict__)  # noqa: S102
    return mod


def _changed(fn: Any, value: Any) -> Any:
    value = copy.deepcopy(value)
    fn(value)
    return value


def _ledger(args: Any) -> list[dict[str, Any]]:
    """The carrier accepts the call (the mutant's dropped null is still valid input)."""
    return [{"seq": 1, "kind": "transition", "tool": None, "detail": {"op": "init"}},
            {"seq": 2, "kind": "request", "tool": "create_shipment", "arguments": args, "detail": {}},
            {"seq": 3, "kind": "issued", "tool": "create_shipment",
             "detail": {"name": "tracking", "value": TRACKING, "scope": "call", "request_seq": 2}},
            {"seq": 4, "kind": "transition", "tool": "create_shipment",
             "detail": {"op": "append", "path": "state.labels", "at": ["labels"],
                        "new": {"tracking": TRACKING, "request": args}, "request_seq": 2}}]


def _ctx(root: Path, *, received: Any = None, tracking: Any = TRACKING, schema: Any = SCHEMA,
         dispatcher: bool = False, described: Any = None, listing: str | None = None) -> VerifierContext:
    ws, base = root / "workspace", root / "baseline"
    ws.mkdir(parents=True)
    base.mkdir()
    for d in (ws, base):
        (d / "order.json").write_text(ORDER_TEXT, encoding="utf-8")
    (ws / "shipment.json").write_text(json.dumps({"tracking": tracking}))
    fn = {"name": "Bash", "type": "function", "input_schema": {"type": "object"}}
    if dispatcher:  # OpenClaw: no MCP tool declared; tool_search lists it, tool_describe shows its parameters
        later = first = [{**fn, "name": n} for n in ("exec", "write", "tool_search", "tool_describe")]
        steps: list[tuple[str, str | None, str | None]] = [("shell", "toolu_1", "Exit code 0\n" + ORDER_TEXT),
                 ("native_tool", "toolu_s", json.dumps([ENTRY], indent=2) if listing is None else listing)]
        if described is not None:
            steps.append(("native_tool", "toolu_d", "SECURITY NOTICE ...\n---\n"
                          + json.dumps({**ENTRY, "parameters": described}, indent=2) + "\n<<<END>>>"))
        mapped = "shipping__create_shipment"
    else:  # Claude Code: WaitForMcpServers until the server connects, then the tool itself
        first = [fn, {**fn, "name": "WaitForMcpServers"}]
        later = [fn, {"name": "mcp__shipping__create_shipment", "type": "function", "description": "Create a shipment",
                      "input_schema": schema}]
        steps = [("shell", "toolu_1", ORDER_TEXT), ("native_tool", "toolu_w", "All MCP servers are connected.")]
        mapped = "mcp__shipping__create_shipment"
    steps += [("call_tool", "toolu_2", json.dumps({"tracking": TRACKING, "status": "label_created"})),
              ("write_file", "toolu_3", "File created successfully at: shipment.json"), ("final", None, None)]
    gateway, requests = [], []
    for i, (action, cid, _) in enumerate(steps):
        shown = steps[i - 1] if i else None
        gateway.append({"index": i, "wire_format": "anthropic", "status": 200, "error": None, "inventory_complete": True,
                        "tools": first if i < 2 else later,
                        "tool_results": [{"id": shown[1], "is_error": False, "content": shown[2]}] if shown else []})
        req: dict[str, Any] = {"index": i, "kind": "main", "turn": 1, "action": action}
        if cid:
            req["call_id"] = cid
        if action == "call_tool":
            req.update(mapped_tool=mapped, arguments=copy.deepcopy(SHIPMENT))
        requests.append(req)
    probe = {"requests": requests, "final_text": f"Shipment created for order ORD-58213: tracking {TRACKING}."}
    args = copy.deepcopy(SHIPMENT) if received is None else received
    return VerifierContext(workspace=ws, baseline=base, truth=None, oracle=None, events=[], gateway=gateway,
                           probe=probe, ledgers={"shipping": _ledger(args)}, run_dir=root)


NO_COMPANY = _changed(lambda a: a["recipient"].pop("company"), SHIPMENT)
TAB_ESCAPED = _changed(lambda a: a.update(delivery_note=a["delivery_note"].replace("\t", "\\t")), SHIPMENT)
COMPANY_NOT_NULL = _changed(lambda s: s["properties"]["recipient"]["properties"]["company"].update(type="string"), SCHEMA)
FLATTENED = _changed(lambda s: s["properties"]["parcel"]["properties"].pop("contents"), SCHEMA)
#: (name, _ctx arguments, criteria expected to fail, criteria expected unscored)
CASES: list[tuple[str, dict[str, Any], set[str], set[str]]] = [
    ("faithful (declared after WaitForMcpServers)", {}, set(), set()),
    ("faithful (OpenClaw describe shows the schema)", {"dispatcher": True, "described": SCHEMA}, set(), set()),
    ("listing without a describe", {"dispatcher": True}, set(), {H2}),
    ("listing (input before name, after a header) without a describe",
     {"dispatcher": True, "listing": "Found 1 tool:\n" + json.dumps([{"input": "unknown", **ENTRY}])}, set(), {H2}),
    ("drop_tool_arg_field: company null dropped, accepted", {"received": NO_COMPANY}, {H1, A3}, set()),
    ("tab re-escaped on the way", {"received": TAB_ESCAPED}, {H1, A3}, set()),
    ("declared company not nullable", {"schema": COMPANY_NOT_NULL}, {H2}, set()),
    ("described schema loses the deep region", {"dispatcher": True, "described": FLATTENED}, {H2}, set()),
    ("wrong tracking number written", {"tracking": "TRK-OTHER"}, {A1}, set()),
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
