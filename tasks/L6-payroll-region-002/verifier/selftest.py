"""Self-test of ``score.py`` (TASK_GUIDE rule 13): faithful and broken evidence sets.

Run from the repository root: ``python tasks/L6-payroll-region-002/verifier/selftest.py``
(exit 0 when every verdict is as expected). The full unit tests are
``tests/tasks/test_l6_payroll_region_002.py``.
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
APAC = {"region": "apac", "employees": 167, "gross_cents": 70219150}
EMEA = {"region": "emea", "employees": 212, "gross_cents": 91844300}


def _score() -> types.ModuleType:
    mod = types.ModuleType("l6_pr_selftest_score")
    exec(compile((HERE / "score.py").read_text(encoding="utf-8"), str(HERE / "score.py"), "exec"), mod.__dict__)  # noqa: S102
    return mod


def _ctx(root: Path, *, final: str, report: dict[str, Any] | None = APAC, runs: tuple[str, ...] = ("apac",),
         summary: bool = True) -> VerifierContext:
    turns = [t["user"] for t in json.loads((PACK / "turns.json").read_text())["turns"]]
    prompts = [(PACK / "prompt.md").read_text(), *turns]
    ws, base = root / "workspace", root / "baseline"
    shutil.copytree(PACK / "workspace", ws)
    shutil.copytree(PACK / "workspace", base)
    if report is not None:
        (ws / "payroll_export.json").write_text(json.dumps(report))
    if runs:
        (ws / ".export").mkdir()
        (ws / ".export" / "runs.log").write_text("".join(f"{r}\n" for r in runs))
    snap = root / "private" / "task" / "L6-payroll-region-002"
    snap.mkdir(parents=True)
    for name in ("prompt.md", "turns.json"):
        shutil.copy(PACK / name, snap / name)
    turn_of = [1, 1, 2, 3, 3, 3, 3, 3]
    gateway = [{"index": i, "last_user_text": prompts[t - 1], "tools": [], "tool_results": [], "status": 200}
               for i, t in enumerate(turn_of)]
    kinds = ["main"] * 5 + (["compaction"] if summary else []) + ["main"] * 3
    probe: dict[str, Any] = {"requests": [{"index": i, "kind": k, "turn": min(3, turn_of[min(i, 7)])}
                                          for i, k in enumerate(kinds)],
                             "absent_capabilities": [], "final_text": f"Done. {final}"}
    events = [types.SimpleNamespace(event_type="context_compaction", native_event_type="compaction", trigger="auto")] if summary else []
    return VerifierContext(workspace=ws, baseline=base, truth=TRUTH, oracle=None, events=events, gateway=gateway,
                           probe=probe, ledgers={}, run_dir=root)


def main() -> int:
    score = _score().score
    cases = [
        ("faithful", dict(final="Goal: start=shown; revision=shown; region=apac."), set()),
        ("stale goal after compaction", dict(final="Goal: start=shown; revision=missing; region=emea.", report=EMEA,
                                             runs=("emea",)),
         {"H1-revision-after-compaction", "A1-apac-exported", "A2-no-stale-region-exported"}),
        ("correction lost on resume", dict(final="Goal: start=missing; revision=missing; region=missing.", report=None,
                                           runs=()),
         {"H1-revision-after-compaction", "H3-revision-carried-into-turn-3", "A1-apac-exported"}),
        ("no compaction needed (H1 unscored)", dict(final="Goal: start=shown; revision=shown; region=apac.",
                                                    summary=False), set()),
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
