"""Self-test of ``score.py`` (TASK_GUIDE rule 13): faithful and broken evidence sets.

Run from the repository root: ``python tasks/C2-scaling-limits-002/verifier/selftest.py``
(exit 0 when every verdict is as expected). The full unit tests are
``tests/tasks/test_c2_scaling_limits_002.py``.
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
GOOD = "max_replicas: 7\nzone: eu-west-3b\nshards:\n  - ing-0f5b6e\n  - ing-3e81d0\n  - ing-94c7a2\n"
SHOWN = "Limits: max_replicas=7; zone=eu-west-3b."
CUT = "Limits: max_replicas=missing; zone=missing."


def _score() -> types.ModuleType:
    mod = types.ModuleType("c2_sl_selftest_score")
    exec(compile((HERE / "score.py").read_text(encoding="utf-8"), str(HERE / "score.py"), "exec"), mod.__dict__)  # noqa: S102
    return mod


#: The probe's actions, in order, at the main agent's requests.
ACTIONS = ['shell', 'shell', 'shell', 'shell', 'write_file', 'final']


def _requests(kinds: list[tuple[int | None, str]]) -> list[dict[str, Any]]:
    """Probe-report requests (1-based ``index``) for ``(turn, kind)`` pairs; each main request takes the
    next of ``ACTIONS``, and a call id unless it is the final answer."""
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


def _ctx(root: Path, *, final: str, summary: bool = True, record: bool = True, config: str | None = GOOD,
         late: bool = False) -> VerifierContext:
    ws, base = root / "workspace", root / "baseline"
    shutil.copytree(PACK / "workspace", ws)
    shutil.copytree(PACK / "workspace", base)
    if config is not None:
        (ws / "deploy").mkdir()
        (ws / "deploy" / "scaling.yaml").write_text(config)
    summary_at = [] if not summary else [(None, "compaction")]
    if late:   # both summaries asked for after the final answer
        kinds = [(1, "main")] * 6 + summary_at * 2
    else:
        kinds = [(1, "main")] * 3 + summary_at + [(1, "main")] + summary_at + [(1, "main")] * 2
    requests = _requests(kinds)
    probe: dict[str, Any] = {"requests": requests, "absent_capabilities": [],
                             "final_text": f"deploy/scaling.yaml written. {final}"}
    record_ = types.SimpleNamespace(event_type="context_compaction", native_event_type="compaction", trigger="auto", seq=9)
    events = ([record_] if not late else _trace(requests, record_)) if record else []
    return VerifierContext(workspace=ws, baseline=base, truth=TRUTH, oracle=None, events=events, gateway=[],
                           probe=probe, ledgers={}, run_dir=root)


def main() -> int:
    score = _score().score
    cases = [
        ("faithful", dict(final=SHOWN), set()),
        ("silent window cut", dict(final=CUT, summary=False, record=False, config="shards: [ing-0f5b6e]\n"),
         {"H1-compaction-recorded", "H2-limits-kept", "A1-config-respects-limits"}),
        ("summary asked, nothing recorded", dict(final=SHOWN, record=False), {"H1-compaction-recorded"}),
        ("summary lost a limit", dict(final="Limits: max_replicas=7; zone=missing.", config="max_replicas: 7\nshards: []\n"),
         {"H2-limits-kept", "A1-config-respects-limits"}),
        ("no compaction needed (unscored H)", dict(final=SHOWN, summary=False, record=False), set()),
        ("faithful, but compacted only after the write step (H2 unscored)", {"final": SHOWN, "late": True}, set(),
         {"H2-limits-kept"}),
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
