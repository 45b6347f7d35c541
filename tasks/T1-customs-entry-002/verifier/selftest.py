"""Self-test of this pack's verifier (rule 13): one faithful and one broken evidence set.

Faithful: three turns delivered; both turn-3 requests up to the lodgement declare
``mcp__customs__lodge_entry``; the customs service served the call and issued the entry number;
declaration.csv and entry.json are right.
Broken: the same run with the MCP tools left out of the resumed turns' declarations (the
``hide_mcp_tool`` mutant): no turn-3 request declares the customs tool, nothing reaches customs,
entry.json records null — H1, H2, A1 fail (A4, a ledger rule, is not scored here).

Run ``python tasks/T1-customs-entry-002/verifier/selftest.py`` (exit 0 when both hold).
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

from tracetrial.verify import VerifierContext

sys.dont_write_bytecode = True  # never write __pycache__ into the pack
HERE = Path(__file__).resolve().parent
PACK = HERE.parent
sys.path.insert(0, str(HERE))
import score

ENTRY = "CE-SELFTEST01"
LINES = [{"sku": "KB-2210", "qty": 10, "unit_price": "38.40"}, {"sku": "MS-0417", "qty": 4, "unit_price": "11.95"},
         {"sku": "CB-0090", "qty": 3, "unit_price": "2.15"}, {"sku": "MS-0512", "qty": 2, "unit_price": "9.80"}]
DECLARATION = "hs_code,value\n8471.60,451.40\n8544.42,6.45\nTOTAL,457.85\n"
BUILTIN = [{"name": n, "namespace": None} for n in ("shell", "write_file")]
MCP = [{"name": "mcp__freight__get_shipment", "namespace": None}, {"name": "mcp__customs__lodge_entry", "namespace": None}]


def _request(index: int, user: str, tools: list[dict[str, Any]], results: list[dict[str, Any]]) -> dict[str, Any]:
    return {"index": index, "status": 200, "error": None, "inventory_present": True, "inventory_complete": True,
            "tools": tools, "tool_results": results, "last_user_text": user}


def _context(root: Path, *, broken: bool) -> VerifierContext:
    ws, base = root / "workspace", root / "baseline"
    shutil.copytree(PACK / "workspace", ws)
    shutil.copytree(PACK / "workspace", base)
    snap = root / "private" / "task" / score.TASK_ID
    snap.mkdir(parents=True)
    for name in ("prompt.md", "turns.json"):
        shutil.copy(PACK / name, snap / name)
    turns = [(PACK / "prompt.md").read_text()] + [t["user"] for t in json.loads((PACK / "turns.json").read_text())["turns"]]
    resumed = BUILTIN if broken else BUILTIN + MCP
    gateway = [_request(0, turns[0], BUILTIN + MCP, []), _request(1, turns[1], resumed, []),
               _request(2, turns[2], resumed, []), _request(3, turns[2], resumed, [{"id": "c1", "content": DECLARATION}])]
    freight = [{"seq": 1, "kind": "transition", "tool": None,
                "detail": {"op": "init", "new": {"shipments": {score.SHIPMENT: {"lines": LINES}}}}}]
    customs: list[dict[str, Any]] = []
    probe = [{"index": 4, "action": "shell", "mapped_tool": "shell", "call_id": "c1"}]
    entry = None
    if not broken:
        probe.append({"index": 5, "action": "call_tool", "mapped_tool": "mcp__customs__lodge_entry", "call_id": "c2"})
        gateway.append(_request(4, turns[2], resumed, [{"id": "c2", "content": json.dumps({"entry_number": ENTRY})}]))
        customs = [{"seq": 1, "kind": "request", "tool": "lodge_entry",
                    "arguments": {"shipment_id": score.SHIPMENT, "declared_value": "457.85"}},
                   {"seq": 2, "kind": "issued", "tool": "lodge_entry", "detail": {"name": "entry_number", "value": ENTRY}}]
        entry = ENTRY
    (ws / "declaration.csv").write_text(DECLARATION)
    (ws / "entry.json").write_text(json.dumps({"shipment_id": score.SHIPMENT, "declared_value": "457.85",
                                               "entry_number": entry}))
    return VerifierContext(workspace=ws, baseline=base, truth=None, oracle=None, events=[], gateway=gateway,
                           probe={"requests": probe}, ledgers={"freight": freight, "customs": customs}, run_dir=root)


def selftest() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        good = score.score(_context(Path(tmp) / "faithful", broken=False))
        bad = score.score(_context(Path(tmp) / "broken", broken=True))
    assert all(v[0] for v in good.values()), good
    failed = {k for k, v in bad.items() if not v[0]}
    assert failed == {score.H1, score.H2, score.A1}, bad
    assert "without lodge_entry" in bad[score.H1][1], bad


if __name__ == "__main__":
    selftest()
    print("selftest ok")
