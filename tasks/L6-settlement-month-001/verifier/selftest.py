"""Self-test of ``score.py`` (TASK_GUIDE rule 13): faithful and broken evidence sets.

Run from the repository root: ``python tasks/L6-settlement-month-001/verifier/selftest.py``
(exit 0 when every verdict is as expected). The full unit tests are
``tests/tasks/test_l6_settlement_month_001.py``.
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
TRUTH = json.loads((PACK / "truth.json").read_text())
APRIL = {"month": "april", "total_cents": 2290615, "entries": 41}
MARCH = {"month": "march", "total_cents": 1873420, "entries": 37}
KEPT = "Goal: task=shown; revision=shown; month=april."
STALE = "Goal: task=shown; revision=missing; month=march."
CUT = "Goal: task=missing; revision=missing; month=missing."


def _score() -> types.ModuleType:
    mod = types.ModuleType("l6_sm_selftest_score")
    exec(compile((HERE / "score.py").read_text(encoding="utf-8"), str(HERE / "score.py"), "exec"), mod.__dict__)  # noqa: S102
    return mod


#: The probe's actions, in order, at the main agent's requests.
ACTIONS = ['shell', 'final', 'shell', 'shell', 'shell', 'write_file', 'final']


def _requests(kinds: list[tuple[int | None, str]]) -> list[dict[str, Any]]:
    """Probe-report requests (1-based ``index``) for ``(turn, kind)`` pairs; each main request takes the
    next of ``ACTIONS``, and a call id unless it is a final answer."""
    out: list[dict[str, Any]] = []
    actions = iter(ACTIONS)
    for i, (turn, kind) in enumerate(kinds, 1):
        req: dict[str, Any] = {"index": i, "kind": kind, "turn": turn}
        if kind == "main":
            req["action"] = next(actions)
            req["call_id"] = None if req["action"] == "final" else f"call_{i}"
        out.append(req)
    return out


def _trace(requests: list[dict[str, Any]], compaction: Any) -> list[Any]:
    """A trace in which the compaction record follows every tool call (a post-turn compaction)."""
    tools = [types.SimpleNamespace(event_type="tool", seq=n, conversation_turn=r["turn"],
                                   tool_call=types.SimpleNamespace(id=r["call_id"], native_tool_call_id=None))
             for n, r in enumerate((r for r in requests if r.get("call_id")), 1)]
    return [*tools, compaction]


def _ctx(root: Path, *, final: str, report: dict[str, Any] | None = APRIL, runs: tuple[str, ...] = ("april",),
         summary: bool = True, late: bool = False) -> VerifierContext:
    turns = [t["user"] for t in json.loads((PACK / "turns.json").read_text())["turns"]]
    prompts = [(PACK / "prompt.md").read_text(), *turns]
    ws, base = root / "workspace", root / "baseline"
    shutil.copytree(PACK / "workspace", ws)
    shutil.copytree(PACK / "workspace", base)
    if report is not None:
        (ws / "settlement.json").write_text(json.dumps(report))
    if runs:
        (ws / ".settle").mkdir()
        (ws / ".settle" / "runs.log").write_text("".join(f"{r}\n" for r in runs))
    snap = root / "private" / "task" / "L6-settlement-month-001"
    snap.mkdir(parents=True)
    for name in ("prompt.md", "turns.json"):
        shutil.copy(PACK / name, snap / name)
    gateway = [{"index": i, "last_user_text": prompts[0 if i < 2 else 1], "tools": [], "tool_results": [], "status": 200}
               for i in range(7)]
    summary_at: list[tuple[int | None, str]] = [(None, "compaction")] if summary else []
    mains = [(1, "main")] * 2 + [(2, "main")] * 5
    kinds = mains[:4] + ([] if late else summary_at) + mains[4:] + (summary_at if late else [])
    requests = _requests(kinds)
    probe: dict[str, Any] = {"requests": requests, "absent_capabilities": [], "final_text": f"Done. {final}"}
    record_ = types.SimpleNamespace(event_type="context_compaction", native_event_type="compaction", trigger="auto",
                                    seq=19, conversation_turn=2)
    events = ([record_] if not late else _trace(requests, record_)) if summary else []
    return VerifierContext(workspace=ws, baseline=base, truth=TRUTH, oracle=None, events=events, gateway=gateway,
                           probe=probe, ledgers={}, run_dir=root)


def main() -> int:
    score = _score().score
    cases = [
        ("faithful", dict(final=KEPT), set()),
        ("stale goal after compaction", dict(final=STALE, report=MARCH, runs=("march",)),
         {"H1-revision-after-compaction", "A1-april-settled", "A2-no-stale-month-settled"}),
        ("silent window cut", dict(final=CUT, report=None, runs=(), summary=False),
         {"H1-revision-after-compaction", "A1-april-settled"}),
        ("no compaction needed (H1 unscored)", dict(final=KEPT, summary=False), set()),
        ("both months settled", dict(final=KEPT, runs=("march", "april")), {"A2-no-stale-month-settled"}),
        ("faithful, but compacted only after the month-choosing step (H1 unscored)", {"final": KEPT, "late": True}, set(),
         {"H1-revision-after-compaction"}),
    ]
    bad = 0
    for name, kwargs, want, *none in cases:
        with tempfile.TemporaryDirectory() as tmp:
            out = score(_ctx(Path(tmp), **kwargs))
        got = {k for k, (ok, _) in out.items() if ok is False}
        off = {k for k, (ok, _) in out.items() if ok is None}
        good = got == want and (not none or none[0] <= off)
        status = "ok" if good else "MISMATCH"
        bad += not good
        print(f"{status:8} {name}: failed {sorted(got)}, unscored {sorted(off)}"
              + ("" if good else f", expected failed {sorted(want)}" + (f", unscored {sorted(none[0])}" if none else "")))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
