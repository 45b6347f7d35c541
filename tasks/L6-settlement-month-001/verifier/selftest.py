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


def _ctx(root: Path, *, final: str, report: dict[str, Any] | None = APRIL, runs: tuple[str, ...] = ("april",),
         summary: bool = True) -> VerifierContext:
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
    kinds = ["main", "main", "main", "main", *(["compaction"] if summary else []), "main", "main"]
    probe: dict[str, Any] = {"requests": [{"index": i, "kind": k, "turn": 1 if i < 2 else 2} for i, k in enumerate(kinds)],
                             "absent_capabilities": [], "final_text": f"Done. {final}"}
    events = [types.SimpleNamespace(event_type="context_compaction", native_event_type="compaction", trigger="auto")] if summary else []
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
    ]
    bad = 0
    for name, kwargs, want in cases:
        with tempfile.TemporaryDirectory() as tmp:
            out = score(_ctx(Path(tmp), **kwargs))
        got = {k for k, (ok, _) in out.items() if ok is False}
        status = "ok" if got == want else "MISMATCH"
        bad += got != want
        print(f"{status:8} {name}: failed {sorted(got)}" + ("" if got == want else f", expected {sorted(want)}"))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
