"""Self-test of ``score.py`` (TASK_GUIDE rule 13): faithful and broken evidence sets, built by hand.

Every set is one three-turn run (two gateway requests per turn, each carrying its turn's user text
as the last user text) with notes.md as the ideal agent leaves it, and one source of evidence of
the turn-3 model input: the probe report's turn-3 answer, archived request bodies, or the
harness's own ``model_input`` records.

* faithful, each evidence source (probe report / request bodies / Trace IR model_input): all pass;
* turn-1 message lost on resume (``reference+lose_turn_fact``), seen in the probe report and in
  the request bodies: H1, A1;
* decoy ticket from changes.txt written (agent): A1;
* changelog bullets out of order (agent): A2;
* ticket written to a file in turn 1: criteria pass, bypass B-H1 raised.

Run from the repository root: ``python tasks/C3-freeze-ticket-001/verifier/selftest.py`` (exit 0
when every verdict is as expected). The full unit tests are ``tests/tasks/test_c3_freeze_ticket_001.py``.
"""

from __future__ import annotations

import json
import re
import shutil
import sys
import tempfile
import types
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from tracetrial.verify import ModelInputEvent, ToolCall, ToolEvent, ToolResult
from tracetrial.verify import VerifierContext

HERE = Path(__file__).resolve().parent
PACK = HERE.parent
T0 = datetime(2026, 11, 30, tzinfo=UTC)
TRUTH = json.loads((PACK / "truth.json").read_text(encoding="utf-8"))
TICKET, DECOY = TRUTH["freeze_ticket"], TRUTH["decoy_ticket"]
TURNS = [(PACK / "prompt.md").read_text(encoding="utf-8")]
TURNS += [t["user"] for t in json.loads((PACK / "turns.json").read_text(encoding="utf-8"))["turns"]]
ENTRIES = re.findall(r"(?m)^entry:\s*(.+?)\s*$", (PACK / "workspace" / "changes.txt").read_text(encoding="utf-8"))
NOTES = "# Release notes\n\n" + "".join(f"- {e}\n" for e in ENTRIES) + f"Freeze-Ticket: {TICKET}\n"
FOUND = f"Appended 'Freeze-Ticket: {TICKET}'. Turn-1 freeze ticket: {TICKET}."
LOST = "Appended 'Freeze-Ticket: UNKNOWN'. Turn-1 freeze ticket: not visible in my context."
H1, A1, A2, BYPASS = ("H1-fact-in-turn3-input", "A1-freeze-ticket-line", "A2-changelog-entries",
                      "B-H1-ticket-persisted-early")


def _score() -> types.ModuleType:
    mod = types.ModuleType("c3_freeze_selftest_score")
    exec(compile((HERE / "score.py").read_text(encoding="utf-8"), str(HERE / "score.py"), "exec"), mod.__dict__)  # noqa: S102
    return mod


def _ctx(root: Path, *, notes: str = NOTES, evidence: str = "probe", kept: bool = True,
         early: bool = False) -> VerifierContext:
    """``evidence``: where the turn-3 input is seen (``probe``, ``bodies``, ``trace``); ``kept``:
    whether the turn-1 message is still in it; ``early``: a turn-1 shell call wrote the ticket."""
    ws, base = root / "workspace", root / "baseline"
    shutil.copytree(PACK / "workspace", ws)
    shutil.copytree(PACK / "workspace", base)
    (ws / "notes.md").write_text(notes)
    history = TURNS if kept else TURNS[1:]
    per_turn = [1, 1, 2, 2, 3, 3]
    gateway = [{"index": i, "status": 200, "error": None, "last_user_text": TURNS[t - 1], "tools": [{"name": "shell"}],
                "tool_results": []} for i, t in enumerate(per_turn)]
    if evidence == "bodies":
        (root / "gateway" / "bodies").mkdir(parents=True)
        for i, t in enumerate(per_turn):
            msgs = [{"role": "user", "content": u} for u in (history if t == 3 else TURNS[:t])]
            (root / "gateway" / "bodies" / f"{i}.json").write_text(json.dumps({"messages": msgs}))
    probe = None
    if evidence in ("probe", "bodies"):
        probe = {"requests": [{"index": i + 1, "kind": "main", "turn": t, "action": "shell"}
                              for i, t in enumerate(per_turn)],
                 "absent_capabilities": [], "final_text": FOUND if kept else LOST}
    events: list[Any] = []
    if evidence == "trace":
        events += [ModelInputEvent(seq=10 + n, timestamp=T0, run_id="r", source="native:selftest",
                                   conversation_turn=3, principal_id="main",
                                   messages=[{"role": "user", "content": u} for u in history]) for n in range(2)]
    if early:
        events.append(ToolEvent(seq=1, timestamp=T0, run_id="r", source="native:selftest", conversation_turn=1,
                                tool_call=ToolCall(id="c1", name="shell", arguments={"command": f"echo {TICKET} > .t"}),
                                tool_result=ToolResult(content="Exit code 0\n")))
        (ws / ".t").write_text(TICKET + "\n")
    return VerifierContext(workspace=ws, baseline=base, truth=TRUTH, oracle=None, events=events, gateway=gateway,
                           probe=probe, ledgers={}, run_dir=root)


UNKNOWN = NOTES.replace(f"Freeze-Ticket: {TICKET}", "Freeze-Ticket: UNKNOWN")
_lines = NOTES.splitlines()
SWAPPED = "\n".join(_lines[:2] + [_lines[3], _lines[2]] + _lines[4:]) + "\n"
CASES: list[tuple[str, dict[str, Any], set[str], bool]] = [
    ("faithful (probe report)", {}, set(), False),
    ("faithful (request bodies)", {"evidence": "bodies"}, set(), False),
    ("faithful (harness model_input records, no probe)", {"evidence": "trace"}, set(), False),
    ("turn-1 message lost on resume (probe report)", {"notes": UNKNOWN, "kept": False}, {H1, A1}, False),
    ("turn-1 message lost on resume (request bodies)", {"notes": UNKNOWN, "kept": False, "evidence": "bodies"},
     {H1, A1}, False),
    ("decoy ticket written", {"notes": NOTES.replace(TICKET, DECOY)}, {A1}, False),
    ("changelog bullets out of order", {"notes": SWAPPED}, {A2}, False),
    ("ticket persisted to a file in turn 1", {"early": True}, set(), True),
]


def main() -> int:
    score = _score().score
    bad = 0
    for name, kwargs, want, bypass in CASES:
        with tempfile.TemporaryDirectory() as tmp:
            out = score(_ctx(Path(tmp), **kwargs))
        got = {k for k, v in out.items() if (v if isinstance(v, tuple) else (v, ""))[0] is False and k != BYPASS}
        ok = got == want and out[BYPASS][0] is bypass
        bad += not ok
        print(f"{'ok ' if ok else 'BAD'} {name}: failed {sorted(got)}, bypass {out[BYPASS][0]}"
              + ("" if ok else f" (expected {sorted(want)}, bypass {bypass})"))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
