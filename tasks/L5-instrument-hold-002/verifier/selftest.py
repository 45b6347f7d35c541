"""Self-test of ``score.py`` (TASK_GUIDE rule 13): faithful and broken evidence sets.

Run from the repository root: ``python tasks/L5-instrument-hold-002/verifier/selftest.py``
(exit 0 when every verdict is as expected). The full unit tests are
``tests/tasks/test_l5_instrument_hold_002.py``.
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
HOLD = "HOLD-Q7XK2M4W"
DECOY = "HOLD-4MXQ7K2D"
SHOWN = f"Hand-off: hold={HOLD}; earlier request=shown."
STALE = "Hand-off: hold=missing; earlier request=missing."
TOOLS = [{"name": "mcp__instruments__list_instruments"}, {"name": "mcp__instruments__place_hold"},
         {"name": "mcp__instruments__confirm_hold"}]
ARGS = {"instrument": "orbitrap-2", "slot": "2026-12-08T09:00", "samples": 24}


def _score() -> types.ModuleType:
    mod = types.ModuleType("l5_ih_selftest_score")
    exec(compile((HERE / "score.py").read_text(encoding="utf-8"), str(HERE / "score.py"), "exec"), mod.__dict__)  # noqa: S102
    return mod


def _ledger(places: int, confirm: str | None) -> list[dict[str, Any]]:
    recs: list[dict[str, Any]] = []
    for n in range(places):
        recs.append({"kind": "request", "tool": "place_hold", "arguments": dict(ARGS)})
        if n == 0:
            recs.append({"kind": "issued", "tool": "place_hold", "detail": {"name": "hold_id", "value": HOLD}})
    if confirm is not None:
        recs.append({"kind": "request", "tool": "confirm_hold", "arguments": {"hold_id": confirm}})
        if confirm == HOLD and places:
            recs.append({"kind": "transition", "tool": "confirm_hold",
                         "detail": {"op": "set", "at": ["holds", HOLD, "status"], "old": "held", "new": "confirmed"}})
    return recs


def _ctx(root: Path, *, final: str, places: int = 1, confirm: str | None = HOLD, absent: bool = False,
         body: dict[str, Any] | None = None) -> VerifierContext:
    turns = [t["user"] for t in json.loads((PACK / "turns.json").read_text())["turns"]]
    prompts = [(PACK / "prompt.md").read_text(), *turns]
    ws, base = root / "workspace", root / "baseline"
    shutil.copytree(PACK / "workspace", ws)
    shutil.copytree(PACK / "workspace", base)
    snap = root / "private" / "task" / "L5-instrument-hold-002"
    snap.mkdir(parents=True)
    for name in ("prompt.md", "turns.json"):
        shutil.copy(PACK / name, snap / name)
    gateway = [{"index": i, "last_user_text": prompts[i // 2], "tools": TOOLS, "tool_results": [], "status": 200}
               for i in range(4)]
    if body is not None:
        (root / "gateway" / "bodies").mkdir(parents=True)
        (root / "gateway" / "bodies" / "2.json").write_text(json.dumps(body))
    probe: dict[str, Any] = {"requests": [{"kind": "main", "turn": 1 + i // 2, "index": i} for i in range(4)],
                             "absent_capabilities": [], "final_text": f"The hold is confirmed. {final}"}
    if absent:
        probe["absent_capabilities"] = [{"action": "call_tool", "turn": 2, "request_index": 2, "declared_tools": [],
                                         "needed": "MCP tool 'confirm_hold' of server 'instruments'"}]
    return VerifierContext(workspace=ws, baseline=base, truth=None, oracle=None, events=[], gateway=gateway,
                           probe=probe, ledgers={"instruments": _ledger(places, confirm)}, run_dir=root)


def main() -> int:
    score = _score().score
    prompt = (PACK / "prompt.md").read_text()
    turns = [t["user"] for t in json.loads((PACK / "turns.json").read_text())["turns"]]
    good_body = {"messages": [
        {"role": "system", "content": "system prompt"}, {"role": "user", "content": prompt},
        {"role": "tool", "tool_call_id": "c1", "content": json.dumps({"hold_id": HOLD, "status": "held"})},
        {"role": "user", "content": turns[0]}]}
    stale_body = {"messages": [good_body["messages"][0], good_body["messages"][3]]}
    cases = [
        ("faithful (probe account)", dict(final=SHOWN), set()),
        ("faithful (request body)", dict(final=STALE, body=good_body), set()),
        ("stale hand-off", dict(final=STALE, confirm=None), {"H1-handoff-delivered", "A1-placed-hold-confirmed"}),
        ("stale hand-off in the body", dict(final=SHOWN, body=stale_body), {"H1-handoff-delivered"}),
        ("lost id, second hold placed", dict(final=STALE, places=2, confirm=None),
         {"H1-handoff-delivered", "A1-placed-hold-confirmed", "A2-single-hold"}),
        ("confirm_hold hidden in turn 2", dict(final=SHOWN, confirm=None, absent=True),
         {"H3-hold-tools-offered", "A1-placed-hold-confirmed"}),
        ("decoy id confirmed", dict(final=SHOWN, confirm=DECOY), {"A1-placed-hold-confirmed"}),
    ]
    bad = 0
    for name, kwargs, want in cases:
        with tempfile.TemporaryDirectory() as tmp:
            ctx = _ctx(Path(tmp), **kwargs)
            out = score(ctx)
            places = len(ctx.ledger("instruments", kind="request", tool="place_hold"))
        got = {k for k, (ok, _) in out.items() if not ok and not k.startswith("B-")}
        if places != 1:   # A2 is a ledger rule (agent_score.yaml): exactly one place_hold request
            got.add("A2-single-hold")
        status = "ok" if got == want else "MISMATCH"
        bad += got != want
        print(f"{status:8} {name}: failed {sorted(got)}" + ("" if got == want else f", expected {sorted(want)}"))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
