"""Self-test of ``score.py`` (TASK_GUIDE rule 13): one faithful and three broken evidence sets.

Run from the repository root: ``python tasks/O5-nightly-reconcile-001/verifier/selftest.py``
(exit 0 when every verdict is as expected). The full unit tests are
``tests/tasks/test_o5_nightly_reconcile_001.py``.
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
import types
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import SimpleNamespace

from tracetrial.verify import VerifierContext

HERE = Path(__file__).resolve().parent
PACK = HERE.parent
TASK_ID = "O5-nightly-reconcile-001"
KEY = "00112233445566778899aabbccddeeff"
T0 = datetime(2026, 12, 6, 8, 0, tzinfo=UTC)
#: (input, output) tokens of each answered request, per turn (4 and 5 requests).
CALLS = {1: [(900, 30), (1100, 25), (1300, 40), (1450, 12)], 2: [(1700, 20), (1800, 35), (2000, 30), (2150, 40),
                                                                (2300, 15)]}


def _load(path: Path, name: str) -> types.ModuleType:
    mod = types.ModuleType(name)
    mod.__file__ = str(path)
    exec(compile(path.read_text(encoding="utf-8"), str(path), "exec"), mod.__dict__)  # noqa: S102
    return mod


def _turn_sums(t: int) -> dict[str, int]:
    return {"prompt_tokens": sum(i for i, _ in CALLS[t]), "completion_tokens": sum(o for _, o in CALLS[t])}


def _ctx(root: Path, score: types.ModuleType, *, usage: dict[int, dict | None], reports: tuple[dict, dict]) -> VerifierContext:
    prompts = [(PACK / "prompt.md").read_text(encoding="utf-8")]
    prompts += [t["user"] for t in json.loads((PACK / "turns.json").read_text(encoding="utf-8"))["turns"]]
    ws, base = root / "workspace", root / "baseline"
    shutil.copytree(PACK / "workspace", ws)
    shutil.copytree(PACK / "workspace", base)
    (ws / ".exports").mkdir()
    (ws / ".exports" / "night.key").write_text(KEY + "\n")
    (ws / "reconcile-v1.json").write_text(json.dumps(reports[0]))
    (ws / "reconcile.json").write_text(json.dumps(reports[1]))
    snap = root / "private" / "task" / TASK_ID
    snap.mkdir(parents=True)
    for name in ("prompt.md", "turns.json"):
        shutil.copy(PACK / name, snap / name)
    starts = {1: T0, 2: T0 + timedelta(seconds=60)}
    events: list = []
    gateway = []
    for t, calls in CALLS.items():
        events.append(SimpleNamespace(event_type="conversation_turn_started", source="runner", conversation_turn=t,
                                      timestamp=starts[t], principal_id=None, principal_role=None, raw_event=None))
        gateway += [{"index": len(gateway) + i, "status": 200, "error": None, "tool_results": [],
                     "started_at": (starts[t] + timedelta(seconds=1 + i)).isoformat(),
                     "last_user_text": prompts[t - 1],
                     "usage": {"input_tokens": tin, "output_tokens": tout, "cache_read_tokens": None,
                               "cache_write_tokens": None, "reasoning_tokens": None}}
                    for i, (tin, tout) in enumerate(calls)]
        events.append(SimpleNamespace(event_type="task_completion", source="native:reference/selftest",
                                      conversation_turn=t, principal_id="main", principal_role="main",
                                      child_principal_id=None, raw_event=None, status="completed", timestamp=starts[t],
                                      content={"model_calls": len(calls), "tool_calls": 0, "usage": usage.get(t)}))
        events.append(SimpleNamespace(event_type="conversation_turn_finished", source="runner", conversation_turn=t,
                                      timestamp=starts[t] + timedelta(seconds=30), principal_id=None,
                                      principal_role=None, raw_event=None))
    return VerifierContext(workspace=ws, baseline=base, truth=None, oracle=None, events=events, gateway=gateway,
                           probe=None, ledgers={}, run_dir=root)


def main() -> int:
    score = _load(HERE / "score.py", "o5_selftest_score")
    first, second = score.truth(PACK / "workspace", KEY)
    faithful = {1: _turn_sums(1), 2: _turn_sums(2)}
    last_only = {t: {"prompt_tokens": CALLS[t][-1][0], "completion_tokens": CALLS[t][-1][1]} for t in CALLS}
    wrong = {k: v + 1 for k, v in second.items()}
    cases = [
        ("faithful", {"usage": faithful, "reports": (first, second)}, set()),
        ("last response's usage stated", {"usage": last_only, "reports": (first, second)},
         {"H1-turn-usage-matches-gateway"}),
        ("usage not reported in turn 2", {"usage": {1: faithful[1], 2: None}, "reports": (first, second)},
         {"H1-turn-usage-matches-gateway"}),
        ("stale corrected report", {"usage": faithful, "reports": (first, first if first != second else wrong)},
         {"A2-corrected-report"}),
    ]
    bad = 0
    for name, kw, want in cases:
        with tempfile.TemporaryDirectory() as tmp:
            out = score.score(_ctx(Path(tmp), score, **kw))
        got = {k for k, v in out.items() if v is not None and not v[0]}
        ok = got == want
        bad += not ok
        print(f"{'ok ' if ok else 'BAD'} {name}: failed {sorted(got)} (expected {sorted(want)})")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
