"""Self-test of this pack's verifier (rule 13): faithful and broken evidence sets.

Faithful: the two reservation tools declared under distinct rewritten names (cut, hash suffix),
each description naming its lane; the express declaration called, the express tool served and its
reservation id written to reservation.json. Broken (collide_tool_names): the two names fitted to
one 64-character name, the standard tool (listed later) holding it — one declaration for the pair;
the ideal agent reserves nothing and writes reservation_id null. Broken (misrouted): the express
declaration called but the standard tool served.
Faithful, deferred (Claude Code 2.1.332+): the first request declares only ``ToolSearch``; the model
searches, later requests declare both tools, the express one is called. Unsearched: only
``ToolSearch`` is ever declared and the model never calls it — H1 unscored (rule 12), A1 fails.

Run ``python tasks/T2-lane-reservation-001/verifier/selftest.py`` (exit 0 when all hold).
"""

import json
import sys
import tempfile
from pathlib import Path

from tracetrial.verify import VerifierContext

sys.dont_write_bytecode = True  # never write __pycache__ into the pack
sys.path.insert(0, str(Path(__file__).resolve().parent))
import score  # the sibling verifier

NAME = "reserve_outbound_inventory_for_the_customer_shipment_on_priority_{}_lane"
SCHEMA = {"type": "object", "properties": {"order_id": {"type": "string"}, "sku": {"type": "string"},
                                           "quantity": {"type": "integer"}},
          "required": ["order_id", "sku", "quantity"]}
DESC = "[MCP tool '{name}' of server 'warehouse'] Reserve outbound stock on the PRIORITY {up} lane."
RID = "RSV-SELFTEST01"


def _decl(lane, wire):
    return {"name": wire, "description": DESC.format(name=NAME.format(lane), up=lane.upper()), "input_schema": SCHEMA}


def _context(root, case):
    ws = root / case
    ws.mkdir(parents=True)
    builtin = [{"name": "write_file", "description": "Write a file.", "input_schema": {"type": "object"}}]
    express, standard = "mcp__warehouse__reserve_outbound_inventory_for_the_cust_2b96180a", \
        "mcp__warehouse__reserve_outbound_inventory_for_the_cust_b61c5cd2"
    fitted = "mcp__warehouse__reserve_outbound_inventory_for_the_customer_ship"
    search = [{"name": "ToolSearch", "description": "Fetches full schema definitions for deferred tools.",
               "input_schema": {"type": "object"}}]
    if case == "collide":
        tools = builtin + [_decl("standard", fitted)]
    elif case == "unsearched":
        tools = builtin + search
    else:
        tools = builtin + [_decl("express", express), _decl("standard", standard)]
    gateway = [{"index": i, "wire_format": "chat", "status": 200, "tools": tools} for i in (1, 2, 3)]
    if case == "deferred":
        gateway.insert(0, {"index": 0, "wire_format": "anthropic", "status": 200, "tools": builtin + search})
    ledger = [{"seq": 1, "kind": "transition", "tool": None, "detail": {"op": "init", "new": {"reservations": []}}}]
    probe = {"requests": []}
    reservation = {"order_id": "SO-55127", "sku": "CHR-2290-GRN", "lane": "express", "reservation_id": None}
    if case == "deferred":
        probe["requests"].append({"index": 0, "action": "native_tool", "mapped_tool": "ToolSearch", "call_id": "c0",
                                  "principal": "main"})
    if case not in ("collide", "unsearched"):
        served = NAME.format("express" if case in ("faithful", "deferred") else "standard")
        ledger += [{"seq": 2, "kind": "request", "tool": served, "arguments": {}, "detail": {}},
                   {"seq": 3, "kind": "issued", "tool": served, "detail": {"name": "reservation_id", "value": RID}}]
        probe["requests"].append({"index": 1, "action": "call_tool", "mapped_tool": express, "call_id": "c1",
                                  "principal": "main"})
        reservation["reservation_id"] = RID
    probe["requests"].append({"index": 2, "action": "write_file", "mapped_tool": "write_file", "call_id": "c2",
                              "principal": "main"})
    (ws / "reservation.json").write_text(json.dumps(reservation))
    return VerifierContext(workspace=ws, baseline=ws, truth=None, oracle=None, events=[], gateway=gateway,
                           probe=probe, ledgers={"warehouse": ledger}, run_dir=ws)


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
