"""Self-test of ``score.py`` (TASK_GUIDE rule 13): one faithful and one broken evidence set.

Faithful: turn 1 reads the quote and the lane (served before the resume); the first turn-2
request declares mcp__freight__book_freight, the booking reaches the desk, which issues the
reference, and booking.json holds it.
Broken: the same run with the freight tools left out of every turn-2 declaration (the
``hide_mcp_tool`` mutant): nothing booked, booking.json records null.

Run from the repository root: ``python tasks/T1-freight-booking-001/verifier/selftest.py``
(exit 0 when both verdict sets are as expected). The full unit tests are
``tests/tasks/test_t1_freight_booking_001.py``.
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
import types
from pathlib import Path
from typing import Any

from tracetrial.verify import VerifierContext

HERE = Path(__file__).resolve().parent
PACK = HERE.parent
REF = "BK-SELFTEST42"
BUILTIN = [{"name": "shell", "namespace": None}, {"name": "write_file", "namespace": None}]
FREIGHT = [{"name": f"mcp__freight__{t}", "namespace": None} for t in ("get_quote", "check_capacity", "book_freight")]
BROKEN = {"H1-booking-tool-offered-after-resume", "H2-booking-reached-desk", "A1-booking-reference-recorded"}


def _score() -> types.ModuleType:
    mod = types.ModuleType("t1_fb_selftest_score")
    exec(compile((HERE / "score.py").read_text(encoding="utf-8"), str(HERE / "score.py"), "exec"), mod.__dict__)  # noqa: S102
    return mod


def _req(index: int, user: str, tools: list[dict[str, Any]], results: list[dict[str, Any]], t: int) -> dict[str, Any]:
    return {"index": index, "wire_format": "chat", "status": 200, "error": None, "inventory_complete": True,
            "started_at": f"2026-12-01T10:00:{t:02d}+00:00", "last_user_text": user, "tools": tools,
            "tool_results": results}


def _ctx(root: Path, *, broken: bool) -> VerifierContext:
    truth = json.loads((PACK / "truth.json").read_text(encoding="utf-8"))
    turns = [(PACK / "prompt.md").read_text(encoding="utf-8"),
             json.loads((PACK / "turns.json").read_text(encoding="utf-8"))["turns"][0]["user"]]
    ws = root / "workspace"
    ws.mkdir(parents=True)
    snap = root / "private" / "task" / "T1-freight-booking-001"
    snap.mkdir(parents=True)
    for name in ("prompt.md", "turns.json"):
        shutil.copy(PACK / name, snap / name)
    ledger: list[dict[str, Any]] = [
        {"seq": 1, "time": "2026-12-01T10:00:01Z", "kind": "request", "tool": "get_quote", "detail": {"method": "tools/call"}},
        {"seq": 2, "time": "2026-12-01T10:00:02Z", "kind": "request", "tool": "check_capacity", "detail": {"method": "tools/call"}}]
    gateway = [_req(0, turns[0], BUILTIN + FREIGHT, [], 0),
               _req(1, turns[0], BUILTIN + FREIGHT, [{"id": "call_1", "content": "{\"lane\": \"RTM-HAM\"}"}], 1),
               _req(2, turns[0], BUILTIN + FREIGHT, [{"id": "call_2", "content": "{\"free_slots\": 3}"}], 2)]
    probe = [{"index": 1, "kind": "main", "turn": 1, "action": "call_tool", "mapped_tool": "mcp__freight__get_quote", "call_id": "call_1"},
             {"index": 2, "kind": "main", "turn": 1, "action": "call_tool", "mapped_tool": "mcp__freight__check_capacity", "call_id": "call_2"},
             {"index": 3, "kind": "main", "turn": 1, "action": "final"}]
    if broken:
        gateway += [_req(3, turns[1], BUILTIN, [], 10), _req(4, turns[1], BUILTIN, [{"id": "call_3", "content": "Wrote"}], 11)]
        probe += [{"index": 4, "kind": "main", "turn": 2, "action": "write_file", "mapped_tool": "write_file", "call_id": "call_3"}]
        reference = None
    else:
        ledger += [{"seq": 3, "time": "2026-12-01T10:00:10Z", "kind": "request", "tool": "book_freight",
                    "detail": {"method": "tools/call"}},
                   {"seq": 4, "time": "2026-12-01T10:00:10Z", "kind": "issued", "tool": "book_freight",
                    "detail": {"name": "booking_reference", "value": REF, "scope": "call", "request_seq": 3}}]
        gateway += [_req(3, turns[1], BUILTIN + FREIGHT, [], 10),
                    _req(4, turns[1], BUILTIN + FREIGHT, [{"id": "call_3", "content": json.dumps({"booking_reference": REF})}], 11)]
        probe += [{"index": 4, "kind": "main", "turn": 2, "action": "call_tool", "mapped_tool": "mcp__freight__book_freight",
                   "call_id": "call_3"}]
        reference = REF
    (ws / "booking.json").write_text(json.dumps({"quote_id": truth["quote_id"], "po_number": truth["po_number"],
                                                 "booking_reference": reference}))
    return VerifierContext(workspace=ws, baseline=ws, truth=truth, oracle=None, events=[], gateway=gateway,
                           probe={"requests": probe}, ledgers={"freight": ledger}, run_dir=root)


def main() -> int:
    score = _score().score
    bad = 0
    for name, broken, want in (("faithful", False, set()), ("tools hidden after the resume", True, BROKEN)):
        with tempfile.TemporaryDirectory() as tmp:
            out = score(_ctx(Path(tmp), broken=broken))
        got = {k for k, (ok, _) in out.items() if not ok}
        bad += got != want
        print(f"{'ok' if got == want else 'MISMATCH':8} {name}: failed {sorted(got)}"
              + ("" if got == want else f", expected {sorted(want)}"))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.dont_write_bytecode = True
    sys.exit(main())
