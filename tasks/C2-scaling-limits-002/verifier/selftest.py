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


def _ctx(root: Path, *, final: str, summary: bool = True, record: bool = True, config: str | None = GOOD) -> VerifierContext:
    ws, base = root / "workspace", root / "baseline"
    shutil.copytree(PACK / "workspace", ws)
    shutil.copytree(PACK / "workspace", base)
    if config is not None:
        (ws / "deploy").mkdir()
        (ws / "deploy" / "scaling.yaml").write_text(config)
    kinds = ["main", "main", "main", *(["compaction"] if summary else []), "main", *(["compaction"] if summary else []), "main", "main"]
    probe: dict[str, Any] = {"requests": [{"index": i, "kind": k, "turn": 1} for i, k in enumerate(kinds)],
                             "absent_capabilities": [], "final_text": f"deploy/scaling.yaml written. {final}"}
    events = [types.SimpleNamespace(event_type="context_compaction", native_event_type="compaction", trigger="auto")] if record else []
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
