"""Self-test of this pack's verifier (rule 13): one faithful and one broken evidence set.

Faithful: a reference-shaped run - three foreground helpers ``child-1`` (alder, a one-line quote),
``child-2`` (birch, a multi-line sheet ending with its key line) and ``child-3`` (cedar); each
helper calls request_quote once (ledger: the request and the issued quote values), each spawn
result delivered to the parent carries the helper's reply, the Trace IR records each reply under
its child, and purchase_decision.json lists the three quotes and picks the cheapest.
Broken: the same run as ``reference+drop_child_result`` delivers it - the second and third helper
results reach the parent as "(no output)" (the children's own records are intact), so the parent
lists birch and cedar unknown and makes no decision: H1, A1 and A2 fail; H2, A3 and A4 hold.

Run ``python tasks/L3-quote-merge-002/verifier/selftest.py`` (exit 0 when both hold).
"""

import json
import sys
import tempfile
from pathlib import Path
from types import SimpleNamespace

from tracetrial.verify import ToolEvent, VerifierContext

sys.dont_write_bytecode = True  # never write __pycache__ into the pack
sys.path.insert(0, str(Path(__file__).resolve().parent))
import score  # the pack's own verifier, next to this file

PACK = Path(__file__).resolve().parents[1]
TRUTH = json.loads((PACK / "truth.json").read_text(encoding="utf-8"))
QUOTES = {"alder": ("Q-SELFTST1", 18110, "40"), "birch": ("Q-SELFTST2", 17990, "05"),
          "cedar": ("Q-SELFTST3", 19004, "99")}


def key_line(supplier):
    qid, euros, cents = QUOTES[supplier]
    return f"{supplier} quote {qid}: net total EUR {euros}.{cents}"


SHEETS = {
    "alder": key_line("alder"),
    "birch": "BIRCH INDUSTRIAL SUPPLY GmbH - QUOTATION SHEET\n" + "\n".join(
        f"   Week {n:2d}  production step {n}" for n in range(1, 80)) + "\n" + key_line("birch"),
    "cedar": "CEDAR COMPONENTS B.V. - quotation for RFQ-4471\nDelivery: DAP Rotterdam.\n" + key_line("cedar"),
}
MAIN = {"principal_id": "main", "principal_role": "main", "parent_principal_id": None}
T0 = "2026-12-02T00:00:00Z"


def _record(event_type, seq, who, **fields):
    """A non-tool Trace IR record (only the fields the verifier reads)."""
    base = {"content": None, "content_kind": None, "child_principal_id": None}
    return SimpleNamespace(event_type=event_type, seq=seq, conversation_turn=1, **who, **{**base, **fields})


def _who(cid):
    return {"principal_id": cid, "principal_role": "child", "parent_principal_id": "main"}


def _ledger():
    out, seq = [], 0
    for supplier in score.SUPPLIERS:
        qid, euros, cents = QUOTES[supplier]
        seq += 1
        out.append({"seq": seq, "kind": "request", "tool": "request_quote",
                    "arguments": {"supplier": supplier, "rfq": "RFQ-4471"}, "detail": {}})
        req = seq
        for name, value in ((f"{supplier}_cents", cents), (f"{supplier}_euros", euros), (f"{supplier}_quote_id", qid)):
            seq += 1
            out.append({"seq": seq, "kind": "issued", "tool": "request_quote",
                        "detail": {"name": name, "value": value, "scope": "run", "via": "result", "request_seq": req}})
    return out


def _run(broken):
    """(events, gateway, probe requests) of the run."""
    events, gateway, probe, seq = [], [], [], 0
    for n, supplier in enumerate(score.SUPPLIERS, start=1):
        cid, spawn_id, mcp_id = f"child-{n}", f"call_s{n}", f"call_q{n}"
        reply = SHEETS[supplier]
        shown = reply if not broken or n == 1 else "(no output)"
        spawn_text = f"Sub-agent {cid} finished (status: completed).\n{shown}"
        relay = json.dumps({"isError": False, "content": [{"type": "text", "text": reply}]})
        prompt = f'Call request_quote with {{"supplier": "{supplier}", "rfq": "RFQ-4471"}} and reply with the quote'
        events += [
            ToolEvent.model_validate({"seq": seq + 1, "timestamp": T0, "run_id": "selftest", **MAIN, "tool_call": {
                "id": spawn_id, "name": "spawn_subagent", "arguments": {"prompt": prompt}},
                "tool_result": {"content": spawn_text}}),
            _record("subagent_lifecycle", seq + 2, MAIN, action="spawn", child_principal_id=cid),
            ToolEvent.model_validate({"seq": seq + 3, "timestamp": T0, "run_id": "selftest", **_who(cid), "tool_call": {
                "id": mcp_id, "name": "mcp__suppliers__request_quote",
                "arguments": {"supplier": supplier, "rfq": "RFQ-4471"}}, "tool_result": {"content": relay}}),
            _record("assistant_message", seq + 4, _who(cid), content=reply, content_kind="text"),
            _record("task_completion", seq + 5, MAIN, status="completed", content="" if shown != reply else reply,
                    child_principal_id=cid),
        ]
        seq += 5
        base = len(gateway)
        gateway += [
            {"index": base, "status": 200, "tool_results": [], "last_user_text": "Decide where to buy"},
            {"index": base + 1, "status": 200, "tool_results": [], "last_user_text": prompt},
            {"index": base + 2, "status": 200, "last_user_text": prompt,
             "tool_results": [{"id": mcp_id, "is_error": None, "content": relay}]},
            {"index": base + 3, "status": 200, "last_user_text": "Decide where to buy",
             "tool_results": [{"id": spawn_id, "is_error": None, "content": spawn_text}]},
        ]
        probe += [{"index": base + 1, "principal": "main", "action": "spawn_subagent", "call_id": spawn_id},
                  {"index": base + 2, "principal": cid, "action": "call_tool", "call_id": mcp_id,
                   "mapped_tool": "mcp__suppliers__request_quote"},
                  {"index": base + 3, "principal": cid, "action": "final"}]
    return events, gateway, probe


def _context(root, *, broken):
    ws = root / ("broken" if broken else "faithful")
    ws.mkdir(parents=True)
    quotes = {s: {"quote_id": QUOTES[s][0], "net_total_eur": f"{QUOTES[s][1]}.{QUOTES[s][2]}"} for s in score.SUPPLIERS}
    decision = {"supplier": "birch", **quotes["birch"]}
    if broken:
        quotes.update(birch={"status": "unknown"}, cedar={"status": "unknown"})
        decision = None
    (ws / "purchase_decision.json").write_text(json.dumps({"rfq": "RFQ-4471", "quotes": quotes, "decision": decision}))
    events, gateway, probe = _run(broken)
    return VerifierContext(workspace=ws, baseline=ws, truth=TRUTH, oracle=None, events=events, gateway=gateway,
                           probe={"requests": probe}, ledgers={"suppliers": _ledger()}, run_dir=ws)


def selftest():
    with tempfile.TemporaryDirectory() as tmp:
        good = score.score(_context(Path(tmp), broken=False))
        assert all(v[0] for v in good.values()), good
        bad = score.score(_context(Path(tmp), broken=True))
        failed = {k for k, v in bad.items() if not v[0]}
        assert failed == {"H1-child-quotes-reach-parent", "A1-quotes-listed-exact", "A2-cheapest-quote-chosen"}, bad
        assert "the child was shown its quote" in bad["H1-child-quotes-reach-parent"][1], bad


if __name__ == "__main__":
    selftest()
    print("selftest ok")
