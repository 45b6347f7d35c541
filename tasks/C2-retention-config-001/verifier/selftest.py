"""Self-test of ``score.py`` (TASK_GUIDE rule 13): faithful and broken evidence sets.

Run from the repository root: ``python tasks/C2-retention-config-001/verifier/selftest.py``
(exit 0 when every verdict is as expected). The full unit tests are
``tests/tasks/test_c2_retention_config_001.py``.
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
GOOD = "region: eu-central-1\nretention_days: 400\nshards:\n  - alog-0b9e44\n  - alog-5d1a08\n  - alog-7f3c21\n"
SHOWN = "Context: prompt=shown; region=eu-central-1; retention_days=400."
CUT = "Context: prompt=missing; region=missing; retention_days=missing."


def _score() -> types.ModuleType:
    mod = types.ModuleType("c2_rc_selftest_score")
    exec(compile((HERE / "score.py").read_text(encoding="utf-8"), str(HERE / "score.py"), "exec"), mod.__dict__)  # noqa: S102
    return mod


def _ctx(root: Path, *, final: str, summary: bool = True, record: bool = True, config: str | None = GOOD) -> VerifierContext:
    ws, base = root / "workspace", root / "baseline"
    shutil.copytree(PACK / "workspace", ws)
    shutil.copytree(PACK / "workspace", base)
    if config is not None:
        (ws / "deploy").mkdir()
        (ws / "deploy" / "retention.yaml").write_text(config)
    kinds = ["main", "main", "main", *(["compaction"] if summary else []), "main", "main"]
    probe: dict[str, Any] = {"requests": [{"index": i, "kind": k, "turn": 1} for i, k in enumerate(kinds)],
                             "absent_capabilities": [], "final_text": f"deploy/retention.yaml written. {final}"}
    events = [types.SimpleNamespace(event_type="context_compaction", native_event_type="compaction", trigger="auto")] if record else []
    return VerifierContext(workspace=ws, baseline=base, truth=TRUTH, oracle=None, events=events, gateway=[],
                           probe=probe, ledgers={}, run_dir=root)


def main() -> int:
    score = _score().score
    cases = [
        ("faithful", dict(final=SHOWN), set()),
        ("silent window cut", dict(final=CUT, summary=False, record=False, config="shards: [alog-0b9e44]\n"),
         {"H1-compaction-recorded", "H2-constraints-kept", "A1-config-respects-constraints"}),
        ("summary asked, nothing recorded", dict(final=SHOWN, record=False), {"H1-compaction-recorded"}),
        ("summary lost a setting", dict(final="Context: prompt=missing; region=eu-central-1; retention_days=missing.",
                                        config="region: eu-central-1\nshards: []\n"),
         {"H2-constraints-kept", "A1-config-respects-constraints"}),
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
