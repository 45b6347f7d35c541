"""Self-test of ``score.py`` (TASK_GUIDE rule 13): faithful and broken evidence sets.

Run from the repository root: ``python tasks/L4-deferred-result-002/verifier/selftest.py``
(exit 0 when every verdict is as expected). The full unit tests are
``tests/tasks/test_l4_deferred_result_002.py``.
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
import types
from datetime import UTC, datetime, timedelta
from pathlib import Path

from tracetrial.verify import VerifierContext

HERE = Path(__file__).resolve().parent
PACK = HERE.parent
T0 = datetime(2026, 11, 30, 9, 0, 0, tzinfo=UTC)
VALUE = "SETL-0a1b2c3d4e"
SPAWN, BASH, W1, W2 = "toolu_tt_st_1", "toolu_tt_st_2", "toolu_tt_st_3", "toolu_tt_st_4"
PENDING = ("Sub-agent child-1 started in the background (status: pending). Its result will be delivered to you "
           "when it finishes; subagent_status shows progress.")
PREMATURE = "Sub-agent child-1 finished (status: completed).\n(no output)"
NOTICE = f"[sub-agent notification]\nSub-agent child-1 finished (status: completed).\nsettlement reference: {VALUE}"
SHOWN = f"result.json written. Settlement reference shown to me: {VALUE}."
NONE = "result.json written. Settlement reference shown to me: none."


def _score() -> types.ModuleType:
    mod = types.ModuleType("l4_dr_selftest_score")
    exec(compile((HERE / "score.py").read_text(encoding="utf-8"), str(HERE / "score.py"), "exec"), mod.__dict__)  # noqa: S102
    return mod


def _at(s: float) -> str:
    return (T0 + timedelta(seconds=s)).isoformat()


def _ctx(root: Path, *, spawn_text: str, finished: bool, status: dict, result: dict, final: str) -> VerifierContext:
    prompt = (PACK / "prompt.md").read_text()
    turn2 = json.loads((PACK / "turns.json").read_text())["turns"][0]["user"]
    child = "You are the settlement helper. In the current folder run `python3 settle_batch.py` exactly once"
    ws = root / "workspace"
    shutil.copytree(PACK / "workspace", ws)
    snap = root / "private" / "task" / "L4-deferred-result-002"
    snap.mkdir(parents=True)
    for name in ("prompt.md", "turns.json"):
        shutil.copy(PACK / name, snap / name)
    (ws / "status.json").write_text(json.dumps(status))
    (ws / "result.json").write_text(json.dumps(result))

    def req(i: int, t: float, user: str, results=()) -> dict:
        return {"index": i, "started_at": _at(t), "status": 200, "tools": [{"name": "shell"}], "last_user_text": user,
                "tool_results": [{"id": c, "is_error": False, "content": x} for c, x in results]}
    gw = [req(0, 0.0, prompt), req(1, 0.2, child), req(2, 0.3, prompt, [(SPAWN, spawn_text)]),
          req(3, 0.5, prompt, [(W1, "Wrote 19 bytes")])]
    if finished:
        (ws / "batch_result.json").write_text(json.dumps(
            {"value": VALUE, "started_at": T0.timestamp(), "finished_at": T0.timestamp() + 15}))
        gw += [req(4, 15.02, child, [(BASH, f"settlement batch started\nsettlement reference: {VALUE}")]),
               req(5, 15.1, NOTICE)]
    gw += [req(6, 17.0, turn2), req(7, 17.3, turn2, [(W2, "Wrote 29 bytes")])]
    probe = {"requests": [{"index": 1, "kind": "main", "principal": "main", "turn": 1, "action": "spawn_subagent",
                           "call_id": SPAWN},
                          {"index": 2, "kind": "subagent", "principal": "child-1", "turn": 1, "action": "shell",
                           "call_id": BASH},
                          {"index": 3, "kind": "main", "principal": "main", "turn": 1, "action": "write_file",
                           "call_id": W1},
                          {"index": 7, "kind": "main", "principal": "main", "turn": 2, "action": "write_file",
                           "call_id": W2}],
             "final_text": final}
    return VerifierContext(workspace=ws, baseline=root / "baseline", truth=None, oracle=None, events=[], gateway=gw,
                           probe=probe, ledgers={}, run_dir=root)


def main() -> int:
    score = _score().score
    cases = [
        ("faithful", {"spawn_text": PENDING, "finished": True, "status": {"job": "pending"}, "result": {"value": VALUE},
                          "final": SHOWN}, set()),
        ("premature done at spawn", {"spawn_text": PREMATURE, "finished": False, "status": {"job": "done", "value": None},
                                         "result": {"value": None}, "final": NONE},
         {"H1-no-premature-done-notice", "H2-completion-in-turn2-input", "A1-status-not-invented",
          "A2-result-holds-value"}),
        ("completion lost from the resumed turn", {"spawn_text": PENDING, "finished": True, "status": {"job": "pending"},
                                                       "result": {"value": None}, "final": NONE},
         {"H2-completion-in-turn2-input", "A2-result-holds-value"}),
    ]
    bad = 0
    for name, kwargs, want in cases:
        with tempfile.TemporaryDirectory() as tmp:
            out = score(_ctx(Path(tmp), **kwargs))
        got = {k for k, (ok, _) in out.items() if not ok}
        status = "ok" if got == want else "MISMATCH"
        bad += got != want
        print(f"{status:8} {name}: failed {sorted(got)}" + ("" if got == want else f", expected {sorted(want)}"))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
