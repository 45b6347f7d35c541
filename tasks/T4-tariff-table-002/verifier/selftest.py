"""Self-test of this pack's verifier (rule 13): one faithful and one broken evidence set.

Faithful: the served table (ledger) delivered to the model inside the MCP result JSON in turn 1,
recorded in the Trace IR, still whole in the resumed turn 2 (the probe's account), and both
deliverables written from it. Broken: the same run through a harness that relays only the text
content (the summary), as the drop_structured_content mutant does: no table reaches the model or
the record, the resumed history shows the summary only, and nothing is written. Turn delivery
holds in both.

Run ``python tasks/T4-tariff-table-002/verifier/selftest.py`` (exit 0 when both hold).
"""

import json
import shutil
import sys
import tempfile
from pathlib import Path

from tracetrial.verify import ToolEvent, VerifierContext

sys.dont_write_bytecode = True  # never write __pycache__ into the pack
HERE = Path(__file__).resolve().parent
PACK = HERE.parent
sys.path.insert(0, str(HERE))
import score

TABLE = {
    "schedule": "EU-TARIC-2027-01", "revision": "REV-SELFT1", "currency": "EUR",
    "valid": {"from": "2027-01-01", "to": None}, "precision": {"rate_epsilon": 1e-07, "rounding": "half-even"},
    "line_count": 3,
    "lines": [
        {"line": "TL-001", "hs": "8471.30.00", "desc": "携帯型計算機", "preferential": True, "licence": "true",
         "quota": None, "bands": [[0, 750, 0.02], [750, None, 0.30000000000000004]], "notes": {}},
        {"line": "TL-002", "hs": "0901.21.00", "desc": "Kaffee, geröstet", "preferential": False, "licence": "true",
         "quota": {}, "bands": [[0, None, 1e-07]], "notes": {"TN.2027/14": "x", "Fußnote§3": "y"},
         "origin": {"rules": {"cumulation": {"kind": "diagonal", "zones": [["EU", "NO"], ["CH"]]},
                              "proof": {"type": "REX", "threshold": {"EUR": 6000}, "waiver": {}}}}},
        {"line": "TL-003", "hs": "6109.10.00", "desc": "T-shirts", "preferential": False, "licence": "pending",
         "quota": {"order": "09.1234", "open_kg": 500}, "bands": [[0, None, 0.12]], "notes": {}},
    ],
}
SUMMARY = "Tariff schedule EU-TARIC-2027-01: 3 tariff lines in EUR. The lines are in the structured result."
TURNS = [(PACK / "prompt.md").read_text(encoding="utf-8"),
         json.loads((PACK / "turns.json").read_text(encoding="utf-8"))["turns"][0]["user"]]


def _context(root: Path, *, broken: bool) -> VerifierContext:
    run = root / ("broken" if broken else "faithful")
    ws = run / "workspace"
    ws.mkdir(parents=True)
    snap = run / "private" / "task" / score.TASK_ID
    snap.mkdir(parents=True)
    for name in ("prompt.md", "turns.json"):
        shutil.copy(PACK / name, snap / name)
    relay = {"isError": False, "content": [{"type": "text", "text": SUMMARY}]}
    if not broken:
        relay["structuredContent"] = TABLE
        (ws / "quota_watch.json").write_text(json.dumps(score.expected_quota_watch(TABLE)))
        (ws / "duty_quote.json").write_text(json.dumps(score.expected_duty_quote(TABLE, 750)))
    text = json.dumps(relay, ensure_ascii=False)
    ledger = [{"seq": 1, "kind": "transition", "tool": None, "detail": {"op": "init", "new": {"tables": {}}}},
              {"seq": 2, "kind": "request", "tool": "get_tariff_table", "arguments": {"schedule": TABLE["schedule"]},
               "detail": {}},
              {"seq": 3, "kind": "transition", "tool": "get_tariff_table",
               "detail": {"op": "set", "path": ["tables", TABLE["schedule"]], "at": ["tables", TABLE["schedule"]],
                          "new": TABLE, "request_seq": 2}}]
    gateway = [{"index": 0, "wire_format": "chat", "status": 200, "tool_results": [], "last_user_text": TURNS[0]},
               {"index": 1, "wire_format": "chat", "status": 200, "last_user_text": TURNS[0],
                "tool_results": [{"id": "call_1", "content": text}]},
               {"index": 2, "wire_format": "chat", "status": 200, "tool_results": [], "last_user_text": TURNS[1]}]
    events = [ToolEvent.model_validate({
        "seq": 3, "timestamp": "2026-12-06T00:00:00Z", "run_id": "selftest", "event_type": "tool",
        "tool_call": {"id": "call_1", "name": "mcp__tariffs__get_tariff_table",
                      "arguments": {"schedule": TABLE["schedule"]}},
        "tool_result": {"content": text}})]
    if broken:
        final = "Resumed history: tables=0 digests=- cut=0 summary=shown; used=none."
    else:
        final = f"Resumed history: tables=1 digests=full:{score.digest(TABLE)} cut=0 summary=shown; used=history."
    probe = {"requests": [{"index": 1, "action": "call_tool", "mapped_tool": "mcp__tariffs__get_tariff_table",
                           "call_id": "call_1", "arguments": {"schedule": TABLE["schedule"]}}],
             "final_text": final}
    return VerifierContext(workspace=ws, baseline=ws, truth=None, oracle=None, events=events, gateway=gateway,
                           probe=probe, ledgers={"tariffs": ledger}, run_dir=run)


def selftest() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        good = score.score(_context(Path(tmp), broken=False))
        assert all(v[0] is True for v in good.values()), good
        bad = score.score(_context(Path(tmp), broken=True))
        assert {k for k, v in bad.items() if v[0] is False} == {
            score.H1, score.H2, score.H3, score.A1, score.A2}, bad
        assert bad[score.H4][0] is True, bad
        assert "no tariff table" in bad[score.H1][1], bad


if __name__ == "__main__":
    selftest()
    print("selftest ok")
