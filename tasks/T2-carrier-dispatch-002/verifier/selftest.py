"""Self-test of this pack's verifier (rule 13): faithful and broken evidence sets.

Faithful: the two dispatch tools declared under distinct names (`dispatch.create` fitted with a
hash suffix, `dispatch_create` kept), each description naming what it does; the booking
declaration called, the booking tool served and its pickup id written to pickup.json. Broken
(collide_tool_names): `dispatch.create` fitted to the name `dispatch_create` holds, the draft tool
(listed later) keeping it — one declaration for the pair; the ideal agent books nothing and writes
pickup_id null. Broken (misrouted): the booking declaration called but the draft tool served.
Faithful, deferred (Claude Code 2.1.332+): the first request declares only ``ToolSearch``; the model
searches, later requests declare both tools, the booking one is called. Unsearched: only
``ToolSearch`` is ever declared and the model never calls it — H1 unscored (rule 12), A1 fails.

Run ``python tasks/T2-carrier-dispatch-002/verifier/selftest.py`` (exit 0 when all hold).
"""

import json
import sys
import tempfile
from pathlib import Path

from tracetrial.verify import VerifierContext

sys.dont_write_bytecode = True  # never write __pycache__ into the pack
sys.path.insert(0, str(Path(__file__).resolve().parent))
import score  # the sibling verifier

SCHEMA = {"type": "object", "properties": {"order_id": {"type": "string"}, "carrier": {"type": "string"},
                                           "parcels": {"type": "integer"}},
          "required": ["order_id", "carrier", "parcels"]}
DESC = {"dispatch.create": "[MCP tool 'dispatch.create' of server 'dispatch'] BOOKS A CARRIER PICKUP for an order.",
        "dispatch_create": "[MCP tool 'dispatch_create' of server 'dispatch'] SAVES A DISPATCH DRAFT for an order."}
PID, DID = "PU-SELFTEST01", "DR-SELFTEST01"


def _decl(tool, wire):
    return {"name": wire, "description": DESC[tool], "input_schema": SCHEMA}


def _context(root, case):
    ws = root / case
    ws.mkdir(parents=True)
    builtin = [{"name": "write_file", "description": "Write a file.", "input_schema": {"type": "object"}}]
    booking, draft = "mcp__dispatch__dispatch_create_0a1b2c3d", "mcp__dispatch__dispatch_create"
    search = [{"name": "ToolSearch", "description": "Fetches full schema definitions for deferred tools.",
               "input_schema": {"type": "object"}}]
    if case == "collide":
        tools = builtin + [_decl("dispatch_create", draft)]
    elif case == "unsearched":
        tools = builtin + search
    else:
        tools = builtin + [_decl("dispatch.create", booking), _decl("dispatch_create", draft)]
    gateway = [{"index": i, "wire_format": "chat", "status": 200, "tools": tools} for i in (1, 2, 3)]
    if case == "deferred":
        gateway.insert(0, {"index": 0, "wire_format": "anthropic", "status": 200, "tools": builtin + search})
    ledger = [{"seq": 1, "kind": "transition", "tool": None, "detail": {"op": "init", "new": {"pickups": []}}}]
    probe = {"requests": []}
    pickup = {"order": "SO-48213", "carrier": "NORDLINE", "pickup_id": None}
    if case == "deferred":
        probe["requests"].append({"index": 0, "action": "native_tool", "mapped_tool": "ToolSearch", "call_id": "c0",
                                  "principal": "main"})
    if case not in ("collide", "unsearched"):
        served = "dispatch.create" if case in ("faithful", "deferred") else "dispatch_create"
        field, value = ("pickup_id", PID) if served == "dispatch.create" else ("draft_id", DID)
        ledger += [{"seq": 2, "kind": "request", "tool": served, "arguments": {}, "detail": {}},
                   {"seq": 3, "kind": "issued", "tool": served, "detail": {"name": field, "value": value}}]
        probe["requests"].append({"index": 1, "action": "call_tool", "mapped_tool": booking, "call_id": "c1",
                                  "principal": "main"})
        pickup["pickup_id"] = value
    probe["requests"].append({"index": 2, "action": "write_file", "mapped_tool": "write_file", "call_id": "c2",
                              "principal": "main"})
    (ws / "pickup.json").write_text(json.dumps(pickup))
    return VerifierContext(workspace=ws, baseline=ws, truth=None, oracle=None, events=[], gateway=gateway,
                           probe=probe, ledgers={"dispatch": ledger}, run_dir=ws)


def failed(verdicts):
    return {k for k, v in verdicts.items() if not v[0]}


def selftest():
    with tempfile.TemporaryDirectory() as tmp:
        good = score.score(_context(Path(tmp), "faithful"))
        assert not failed(good), good
        collide = score.score(_context(Path(tmp), "collide"))
        assert failed(collide) == {score.H1, score.A1}, collide
        misrouted = score.score(_context(Path(tmp), "misrouted"))
        assert failed(misrouted) == {score.H2, score.A1, score.A2}, misrouted
        deferred = score.score(_context(Path(tmp), "deferred"))
        assert not failed(deferred), deferred
        unsearched = score.score(_context(Path(tmp), "unsearched"))
        assert unsearched[score.H1][0] is None and failed(unsearched) == {score.H1, score.A1}, unsearched


if __name__ == "__main__":
    selftest()
    print("selftest ok")
