"""Self-test of ``score.py`` (TASK_GUIDE rule 13): one faithful and three broken evidence sets.

Run from the repository root: ``python tasks/V4-bundle-audit-002/verifier/selftest.py``
(exit 0 when every verdict is as expected). The full unit tests are
``tests/tasks/test_v4_bundle_audit_002.py``.
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
TASK_ID = "V4-bundle-audit-002"
T0 = datetime(2026, 12, 2, 8, 0, tzinfo=UTC)
PER_TURN = {1: 3, 2: 4, 3: 2}
INVENTORY = {"bundles": 5, "total_bytes": 24615}
VERIFY = {"matched": 4, "mismatched": ["app-1.4.0-windows.bundle"]}


def _score() -> types.ModuleType:
    mod = types.ModuleType("v4b_selftest_score")
    exec(compile((HERE / "score.py").read_text(encoding="utf-8"), str(HERE / "score.py"), "exec"), mod.__dict__)  # noqa: S102
    return mod


def _ctx(root: Path, *, reported: dict[int, int] | None, inventory: dict) -> VerifierContext:
    prompts = [(PACK / "prompt.md").read_text(encoding="utf-8")]
    prompts += [t["user"] for t in json.loads((PACK / "turns.json").read_text(encoding="utf-8"))["turns"]]
    ws, base = root / "workspace", root / "baseline"
    shutil.copytree(PACK / "workspace", ws)
    shutil.copytree(PACK / "workspace", base)
    (ws / "inventory.json").write_text(json.dumps(inventory))
    (ws / "verify.json").write_text(json.dumps(VERIFY))
    snap = root / "private" / "task" / TASK_ID
    snap.mkdir(parents=True)
    for name in ("prompt.md", "turns.json"):
        shutil.copy(PACK / name, snap / name)
    starts = {t: T0 + timedelta(seconds=30 * (t - 1)) for t in PER_TURN}
    (root / "result.json").write_text(json.dumps({"turns": [{"index": t, "started_at": s.isoformat()}
                                                           for t, s in starts.items()]}))
    gateway = []
    for t, n in PER_TURN.items():
        gateway += [{"index": len(gateway) + i, "status": 200, "error": None, "tool_results": [],
                     "started_at": (starts[t] + timedelta(seconds=1 + i)).isoformat(),
                     "last_user_text": prompts[t - 1]} for i in range(n)]
    # stand-ins for Trace IR task_completion events (a pack imports only the verifier and policy APIs)
    events = [SimpleNamespace(event_type="task_completion", source="native:reference/selftest", conversation_turn=t,
                              principal_id="main", principal_role="main", child_principal_id=None, raw_event=None,
                              status="completed", content={"model_calls": n}) for t, n in (reported or {}).items()]
    return VerifierContext(workspace=ws, baseline=base, truth=None, oracle=None, events=events, gateway=gateway,
                           probe=None, ledgers={}, run_dir=root)


def main() -> int:
    score = _score().score
    cases = [
        ("faithful", {"reported": PER_TURN, "inventory": INVENTORY}, set(), False),
        ("last request of each turn uncounted", {"reported": {1: 2, 2: 3, 3: 1}, "inventory": INVENTORY},
         {"H1-model-calls-per-turn"}, False),
        ("wrong inventory", {"reported": PER_TURN, "inventory": {"bundles": 6, "total_bytes": 1}}, {"A1-inventory"}, False),
        ("no count reported", {"reported": None, "inventory": INVENTORY}, {"H4-call-count-reported"}, True),
    ]
    bad = 0
    for name, kw, want, h1_none in cases:
        with tempfile.TemporaryDirectory() as tmp:
            out = score(_ctx(Path(tmp), **kw))
        got = {k for k, v in out.items() if v[0] is False}
        # An unscored criterion is (None, reason): a bare None is not a verdict the engine accepts.
        h1 = out.get("H1-model-calls-per-turn")
        ok = got == want and isinstance(h1, tuple) and ((h1[0] is None) == h1_none) and bool(h1[1])
        bad += not ok
        print(f"{'ok ' if ok else 'BAD'} {name}: failed {sorted(got)} (expected {sorted(want)})")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
