"""Self-test of this pack's verifier (rule 13): one faithful and one broken evidence set.

Faithful: the served statement (ledger init) delivered to the model inside the MCP result JSON,
recorded in the Trace IR, and copied into reconciliation.json. Broken: the same run through a
harness that relays only the text content (the human summary), as the drop_structured_content
mutant does: nothing reaches the model or the record, and no reconciliation is written.

Run ``python tasks/T4-payout-statement-001/verifier/selftest.py`` (exit 0 when both hold).
"""

import json
import sys
import tempfile
from pathlib import Path

from tracetrial.verify import ToolEvent, VerifierContext

sys.dont_write_bytecode = True  # never write __pycache__ into the pack
sys.path.insert(0, str(Path(__file__).resolve().parent))
import score  # noqa: E402  (the sibling verifier)

STATEMENT = {
    "batch_id": "STL-SELFTEST", "week": "2026-W48", "currency": "EUR", "settled_at": "2026-11-30T17:45:00Z",
    "bank_reference": 9007199254740993,
    "payouts": [
        {"payout_id": "PO-AAAAAA", "payee": "Zo\u00eb \u00c5ngstr\u00f6m", "amount": "1043.10", "status": "settled",
         "bank_trace": 4611686018427387905, "memo": None},
        {"payout_id": "PO-BBBBBB", "payee": "\u0141ukasz", "amount": "12.00", "status": "held",
         "bank_trace": 4611686018427387907, "memo": "x", "hold_reason": "NAME_MISMATCH"},
        {"payout_id": "PO-CCCCCC", "payee": "\u00d8rsted", "amount": "7.50", "status": "settled",
         "bank_trace": 4611686018427387909, "adjustments": [{"kind": "fee", "amount": "-0.20"}]},
    ],
}
SUMMARY = "Settlement STL-SELFTEST for week 2026-W48 is closed: 3 payouts in EUR."


def _context(root: Path, *, broken: bool) -> VerifierContext:
    ws = root / ("broken" if broken else "faithful")
    ws.mkdir(parents=True)
    relay = {"isError": False, "content": [{"type": "text", "text": SUMMARY}]}
    if not broken:
        relay["structuredContent"] = STATEMENT
        recon = {"batch_id": STATEMENT["batch_id"], "bank_reference": STATEMENT["bank_reference"],
                 "settled": [p for p in STATEMENT["payouts"] if p["status"] == "settled"], "held": ["PO-BBBBBB"]}
        (ws / "reconciliation.json").write_text(json.dumps(recon))
    text = json.dumps(relay, ensure_ascii=False)
    ledger = [{"seq": 1, "kind": "transition", "tool": None,
               "detail": {"op": "init", "new": {"statements": {"2026-W48": STATEMENT}}}},
              {"seq": 2, "kind": "request", "tool": "get_settlement", "arguments": {"week": "2026-W48"}, "detail": {}}]
    gateway = [{"index": 2, "wire_format": "chat", "status": 200, "tool_results": [{"id": "call_1", "content": text}]}]
    events = [ToolEvent.model_validate({
        "seq": 3, "timestamp": "2026-12-02T00:00:00Z", "run_id": "selftest", "event_type": "tool",
        "tool_call": {"id": "call_1", "name": "mcp__settlements__get_settlement", "arguments": {"week": "2026-W48"}},
        "tool_result": {"content": text}})]
    probe = {"requests": [{"index": 1, "action": "call_tool", "mapped_tool": "mcp__settlements__get_settlement",
                           "call_id": "call_1", "arguments": {"week": "2026-W48"}}]}
    return VerifierContext(workspace=ws, baseline=ws, truth=None, oracle=None, events=events, gateway=gateway,
                           probe=probe, ledgers={"settlements": ledger}, run_dir=ws)


def selftest() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        good = score.score(_context(Path(tmp), broken=False))
        assert all(v[0] for v in good.values()), good
        bad = score.score(_context(Path(tmp), broken=True))
        assert not any(v[0] for v in bad.values()), bad
        assert "no structured statement" in bad["H1-structured-result-delivered"][1], bad


if __name__ == "__main__":
    selftest()
    print("selftest ok")
