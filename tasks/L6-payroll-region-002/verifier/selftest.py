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


#: The probe's actions, in order, at the main agent's requests.
ACTIONS = ['shell', 'final', 'final', 'shell', 'shell', 'shell', 'write_file', 'final']


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


def _ctx(root: Path, *, final: str, report: dict[str, Any] | None = APAC, runs: tuple[str, ...] = ("apac",),
         summary: bool = True, late: bool = False) -> VerifierContext:
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
    summary_at: list[tuple[int | None, str]] = [(None, "compaction")] if summary else []
    mains = [(t, "main") for t in turn_of]
    kinds = mains[:5] + ([] if late else summary_at) + mains[5:] + (summary_at if late else [])
    requests = _requests(kinds)
    probe: dict[str, Any] = {"requests": requests, "absent_capabilities": [], "final_text": f"Done. {final}"}
    record_ = types.SimpleNamespace(event_type="context_compaction", native_event_type="compaction", trigger="auto",
                                    seq=19, conversation_turn=3)
    events = ([record_] if not late else _trace(requests, record_)) if summary else []
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
        ("faithful, but compacted only after the region-choosing step (H1 unscored)",
         {"final": "Goal: start=shown; revision=shown; region=apac.", "late": True}, set(), {"H1-revision-after-compaction"}),
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
