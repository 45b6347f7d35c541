"""Self-test of this pack's verifier (rule 13): one faithful and one broken evidence set.

Faithful: a three-page listing served page by page (ledger), each page delivered to the model
inside the relayed MCP result JSON and recorded in the Trace IR, each next_cursor sent back
verbatim, and reconciliation.json written from every page. Broken: the same run through a
harness that relays only the text content ("page 1 of 3"), as the drop_structured_content mutant
does: page 1's records and cursor reach neither the model nor the record, the chain stops at page
1 and no reconciliation is written.

Run ``python tasks/T4-carrier-invoices-003/verifier/selftest.py`` (exit 0 when both hold).
"""

import json
import sys
import tempfile
from pathlib import Path
from typing import Any

from tracetrial.verify import ToolEvent, VerifierContext  # type: ignore[attr-defined]

sys.dont_write_bytecode = True  # never write __pycache__ into the pack
sys.path.insert(0, str(Path(__file__).resolve().parent))
import score

HEAD: dict[str, Any] = {"carrier": "Selftest Carrier", "month": "2026-11", "currency": "EUR"}
LISTING: dict[str, Any] = {**HEAD, "pages": [
    {"cursor": None, "invoices": [
        {"invoice_id": "INV-1", "issued": "2026-11-02", "shipment": "S-1", "amount_cents": 1050, "status": "open"},
        {"invoice_id": "INV-2", "issued": "2026-11-03", "shipment": "S-2", "amount_cents": 2000, "status": "disputed",
         "dispute_reason": "duplicate charge"}]},
    {"cursor": "nlf1.second", "invoices": [
        {"invoice_id": "INV-3", "issued": "2026-11-09", "shipment": "S-3", "amount_cents": 333, "status": "paid"}]},
    {"cursor": "nlf1.third", "invoices": [
        {"invoice_id": "INV-4", "issued": "2026-11-20", "shipment": "S-4", "amount_cents": 7, "status": "disputed",
         "dispute_reason": "weight discrepancy"}]},
]}


def page(n: int) -> dict[str, Any]:
    pages = LISTING["pages"]
    return {**HEAD, "page": n, "pages": len(pages), "invoices": pages[n - 1]["invoices"],
            "next_cursor": pages[n]["cursor"] if n < len(pages) else None}


def _context(root: Path, *, broken: bool) -> VerifierContext:
    ws = root / ("broken" if broken else "faithful")
    ws.mkdir(parents=True)
    n_pages = 1 if broken else 3
    ledger: list[dict[str, Any]] = []
    gateway: list[dict[str, Any]] = []
    events: list[Any] = []
    requests: list[dict[str, Any]] = []
    seq = 0
    for n in range(1, n_pages + 1):
        cursor = LISTING["pages"][n - 1]["cursor"]
        args = {} if cursor is None else {"cursor": cursor}
        seq += 1
        req = seq
        ledger.append({"seq": req, "kind": "request", "tool": "list_invoices", "arguments": args, "detail": {}})
        if n == 1:
            seq += 1
            ledger.append({"seq": seq, "kind": "transition", "tool": "list_invoices",
                           "detail": {"op": "set", "at": ["listing"], "new": LISTING, "request_seq": req}})
        seq += 1
        ledger.append({"seq": seq, "kind": "transition", "tool": "list_invoices",
                       "detail": {"op": "append", "at": ["served"], "new": page(n), "request_seq": req}})
        relay: dict[str, Any] = {"isError": False, "content": [{"type": "text", "text": f"invoices for 2026-11: page {n} of 3."}]}
        if not broken:
            relay["structuredContent"] = page(n)
        text = json.dumps(relay)
        call = f"call_{n}"
        gateway.append({"index": n + 1, "wire_format": "chat", "status": 200,
                        "tool_results": [{"id": call, "content": text}]})
        events.append(ToolEvent.model_validate({
            "seq": 10 + n, "timestamp": "2026-12-02T00:00:00Z", "run_id": "selftest", "event_type": "tool",
            "tool_call": {"id": call, "name": "mcp__freightbills__list_invoices", "arguments": args},
            "tool_result": {"content": text}}))
        requests.append({"index": n, "action": "call_tool", "mapped_tool": "mcp__freightbills__list_invoices",
                         "call_id": call, "arguments": args})
    if not broken:
        (ws / "reconciliation.json").write_text(json.dumps(
            {"month": "2026-11", "invoice_count": 4, "total_cents": 3390, "disputed": ["INV-2", "INV-4"]}))
    return VerifierContext(workspace=ws, baseline=ws, truth=None, oracle=None, events=events, gateway=gateway,
                           probe={"requests": requests}, ledgers={"freightbills": ledger}, run_dir=ws)


def selftest() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        good = score.score(_context(Path(tmp), broken=False))
        assert all(v[0] is True for v in good.values()), good
        bad = score.score(_context(Path(tmp), broken=True))
        assert all(v[0] is False for v in bad.values()), bad
        assert "no page in it" in bad[score.H1][1], bad
        assert "never reached the model" in bad[score.H2][1], bad


if __name__ == "__main__":
    selftest()
    print("selftest ok")
