"""Self-test of this pack's verifier (rule 13): one faithful and one broken evidence set.

Faithful: three receipts issued, each delivered with its call's result, a reference-style
completion record listing them (receipts and evidence) and a matching receipts.json.
Broken: the same run whose completion record kept ``status: completed`` but lost its receipts
and evidence (``claim_without_receipt``) and whose receipts.json swapped two receipts.

Run ``python tasks/V2-refund-receipts-001/verifier/selftest.py`` (exit 0 when both hold).
"""

import json
import sys
import tempfile
from pathlib import Path
from types import SimpleNamespace

from tracetrial.verify import VerifierContext

sys.dont_write_bytecode = True  # never write __pycache__ into the pack
sys.path.insert(0, str(Path(__file__).resolve().parent))
import score  # noqa: E402  (the sibling verifier)

OPS = [("ORD-48213", "refund", "issue_refund", "RF-SELFTEST01"),
       ("ORD-48227", "refund", "issue_refund", "RF-SELFTEST02"),
       ("ORD-48240", "credit_note", "issue_credit_note", "CN-SELFTEST03")]
TRUTH = {"operations": [{"order_id": o, "operation": op, "tool": t} for o, op, t, _ in OPS]}


def _ledger():
    recs = []
    for order, _, tool, receipt in OPS:
        seq = len(recs) + 1
        recs.append({"seq": seq, "kind": "request", "tool": tool, "arguments": {"order_id": order}, "detail": {}})
        recs.append({"seq": seq + 1, "kind": "issued", "tool": tool, "detail": {
            "name": "receipt" if tool == "issue_refund" else "confirmation", "value": receipt,
            "scope": "call", "request_seq": seq}})
    return recs


def _context(root: Path, *, broken: bool) -> VerifierContext:
    ws = root / ("broken" if broken else "faithful")
    ws.mkdir(parents=True)
    rows = [{"order_id": o, "operation": op, "receipt": r} for o, op, _, r in OPS]
    if broken:
        rows[0]["receipt"], rows[1]["receipt"] = rows[1]["receipt"], rows[0]["receipt"]
    (ws / "receipts.json").write_text(json.dumps({"operations": rows}))
    calls = [f"call{i}" for i in range(len(OPS))]
    final = "\n".join(f"{o} {op}: {r}" for o, op, _, r in OPS)
    receipts = [{"call_id": c, "tool": t, "key": "receipt", "value": r} for c, (_, _, t, r) in zip(calls, OPS)]
    record = SimpleNamespace(
        event_type="task_completion", seq=30, principal_id="main", principal_role="main", child_principal_id=None,
        conversation_turn=1, status="completed",
        content={"status": "completed", "final_text": final, "evidence_call_ids": [] if broken else calls,
                 "receipts": [] if broken else receipts})
    gateway = [{"index": i + 1, "wire_format": "chat", "tool_results": [
        {"id": c, "content": json.dumps({"order_id": o, "receipt": r})}]} for i, (c, (o, _, _, r)) in
        enumerate(zip(calls, OPS))]
    probe = {"final_text": final, "requests": [
        {"action": "call_tool", "mapped_tool": f"mcp__payments__{t}", "call_id": c}
        for c, (_, _, t, _) in zip(calls, OPS)]}
    return VerifierContext(workspace=ws, baseline=ws, truth=TRUTH, oracle=None, events=[record], gateway=gateway,
                           probe=probe, ledgers={"payments": _ledger()}, run_dir=ws)


def selftest() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        good = score.score(_context(Path(tmp), broken=False))
        assert all(v[0] for v in good.values()), good
        bad = score.score(_context(Path(tmp), broken=True))
        failed = {k for k, v in bad.items() if not v[0]}
        assert failed == {"H2-final-record-carries-receipts", "A1-receipts-match-ledger"}, bad


if __name__ == "__main__":
    selftest()
    print("selftest ok")
