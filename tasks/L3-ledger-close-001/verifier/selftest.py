"""Self-test of this pack's verifier (rule 13): one faithful and one broken evidence set.

Faithful: a reference-shaped run - three foreground helpers ``child-1`` (north), ``child-2``
(south, its job fails with exit 3) and ``child-3`` (west); each spawn result delivered to the
parent carries the helper's reply, the Trace IR records each reply under its child, and
reconciliation.json matches the truth.
Broken: the same run as ``reference+drop_child_result`` delivers it - the second and third
helper results reach the parent as "(no output)" (the children's own records are intact), so the
parent records south and west unknown: H1, A1 and A2 fail, H2 and A3 hold.

Run ``python tasks/L3-ledger-close-001/verifier/selftest.py`` (exit 0 when both hold).
"""

import json
import sys
import tempfile
from pathlib import Path
from types import SimpleNamespace

from tracetrial.verify import ToolEvent, VerifierContext

sys.dont_write_bytecode = True  # never write __pycache__ into the pack
sys.path.insert(0, str(Path(__file__).resolve().parent))
import score  # noqa: E402  (the sibling verifier)

PACK = Path(__file__).resolve().parents[1]
TRUTH = json.loads((PACK / "truth.json").read_text(encoding="utf-8"))
REG = TRUTH["regions"]
LINES = {
    "north": f"reconcile north: OK rows=163 total=55810656 seal={REG['north']['seal']}",
    "south": (f"reconcile south: FAILED at row 97 ref {REG['south']['row_ref']} (amount is not a whole number "
              "of cents); nothing sealed (exit status 3)"),
    "west": f"reconcile west: OK rows=171 total=64880117 seal={REG['west']['seal']}",
}
MAIN = {"principal_id": "main", "principal_role": "main", "parent_principal_id": None}
T0 = "2026-12-02T00:00:00Z"


def _record(event_type, seq, who, **fields):
    """A non-tool Trace IR record (only the fields the verifier reads)."""
    base = {"content": None, "content_kind": None, "child_principal_id": None}
    return SimpleNamespace(event_type=event_type, seq=seq, conversation_turn=1, **who, **{**base, **fields})


def _who(cid):
    return {"principal_id": cid, "principal_role": "child", "parent_principal_id": "main"}


def _run(broken):
    """(events, gateway, probe requests) of the run."""
    events, gateway, probe, seq = [], [], [], 0
    for n, region in enumerate(score.REGIONS, start=1):
        cid, spawn_id, shell_id = f"child-{n}", f"call_s{n}", f"call_c{n}"
        reply = LINES[region]
        shown = reply if not broken or n == 1 else "(no output)"
        spawn_text = f"Sub-agent {cid} finished (status: completed).\n{shown}"
        job = reply.split(" (exit status")[0]
        events += [
            ToolEvent.model_validate({"seq": seq + 1, "timestamp": T0, "run_id": "selftest", **MAIN, "tool_call": {
                "id": spawn_id, "name": "spawn_subagent",
                "arguments": {"prompt": f"run `python3 reconcile.py {region}` exactly once"}},
                "tool_result": {"content": spawn_text}}),
            _record("subagent_lifecycle", seq + 2, MAIN, action="spawn", child_principal_id=cid),
            ToolEvent.model_validate({"seq": seq + 3, "timestamp": T0, "run_id": "selftest", **_who(cid), "tool_call": {
                "id": shell_id, "name": "shell", "arguments": {"command": f"python3 reconcile.py {region}"}},
                "tool_result": {"content": f"Exit code {3 if region == 'south' else 0}\n{job}\n"}}),
            _record("assistant_message", seq + 4, _who(cid), content=reply, content_kind="text"),
            _record("task_completion", seq + 5, MAIN, status="completed", content="" if shown != reply else reply,
                    child_principal_id=cid),
        ]
        seq += 5
        base = len(gateway)
        gateway += [
            {"index": base, "status": 200, "tool_results": [], "last_user_text": "Close tonight's ledgers"},
            {"index": base + 1, "status": 200, "tool_results": [], "last_user_text": f"reconcile.py {region}"},
            {"index": base + 2, "status": 200, "last_user_text": f"reconcile.py {region}",
             "tool_results": [{"id": shell_id, "is_error": None, "content": f"Exit code 0\n{job}\n"}]},
        ]
        probe += [{"index": base + 1, "principal": "main", "action": "spawn_subagent", "call_id": spawn_id},
                  {"index": base + 2, "principal": cid, "action": "shell", "call_id": shell_id},
                  {"index": base + 3, "principal": cid, "action": "final"}]
        gateway.append({"index": base + 3, "status": 200, "last_user_text": "Close tonight's ledgers",
                        "tool_results": [{"id": spawn_id, "is_error": None, "content": spawn_text}]})
    for gw in gateway:
        if gw["last_user_text"].startswith("reconcile.py"):
            gw["last_user_text"] = f"You are the helper. Run `python3 reconcile.py {gw['last_user_text'][13:]}`"
    return events, gateway, probe


def _context(root, *, broken):
    ws = root / ("broken" if broken else "faithful")
    ws.mkdir(parents=True)
    (ws / "reconcile.log").write_text(f"north ok {REG['north']['seal']}\nsouth failed {REG['south']['row_ref']}\n"
                                      f"west ok {REG['west']['seal']}\n")
    summary = {r: ({"status": "ok", "seal": REG[r]["seal"]} if REG[r]["status"] == "ok"
                   else {"status": "failed", "row_ref": REG[r]["row_ref"]}) for r in score.REGIONS}
    if broken:
        summary.update(south={"status": "unknown"}, west={"status": "unknown"})
    (ws / "reconciliation.json").write_text(json.dumps(summary))
    events, gateway, probe = _run(broken)
    return VerifierContext(workspace=ws, baseline=ws, truth=TRUTH, oracle=None, events=events, gateway=gateway,
                           probe={"requests": probe}, ledgers={}, run_dir=ws)


def selftest():
    with tempfile.TemporaryDirectory() as tmp:
        good = score.score(_context(Path(tmp), broken=False))
        assert all(v[0] for v in good.values()), good
        bad = score.score(_context(Path(tmp), broken=True))
        failed = {k for k, v in bad.items() if not v[0]}
        assert failed == {"H1-child-results-reach-parent", "A1-sealed-regions-exact",
                          "A2-failed-region-reported"}, bad


if __name__ == "__main__":
    selftest()
    print("selftest ok")
