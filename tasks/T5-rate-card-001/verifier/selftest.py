"""Self-test of ``score.py`` (TASK_GUIDE rule 13): faithful and broken evidence sets.

Run from the repository root: ``python tasks/T5-rate-card-001/verifier/selftest.py`` (exit 0 when
every verdict is as expected). The full unit tests are ``tests/tasks/test_t5_rate_card_001.py``.
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
GOOD = {"zone": "Z097", "weight_kg": 38, "rate_cents_per_kg": TRUTH["rate_cents_per_kg"],
        "total_cents": TRUTH["total_cents"], "card_checksum": TRUTH["checksum"]}
WHOLE = f"Skill: rows=120; zone=shown; checksum={TRUTH['checksum']}."
CUT = "Skill: rows=53; zone=missing; checksum=missing."


def _score() -> types.ModuleType:
    mod = types.ModuleType("t5_rc_selftest_score")
    exec(compile((HERE / "score.py").read_text(encoding="utf-8"), str(HERE / "score.py"), "exec"), mod.__dict__)  # noqa: S102
    return mod


def _ctx(root: Path, *, final: str, quote: dict[str, Any] | None = GOOD, probe: bool = True,
         load_failed: bool = False) -> VerifierContext:
    ws, base = root / "workspace", root / "baseline"
    shutil.copytree(PACK / "workspace", ws)
    shutil.copytree(PACK / "workspace", base)
    if quote is not None:
        (ws / "quote.json").write_text(json.dumps(quote))
    gateway: list[dict[str, Any]] = []
    report = {"requests": [{"index": i, "kind": "main", "turn": 1} for i in range(3)], "absent_capabilities": [],
              "final_text": f"Quoted. {final}"} if probe else None
    if load_failed and report is not None:  # the probe read the listed short path literally (Codex 0.171.0)
        report["requests"][1].update(action="read_file", mapped_tool="exec_command", call_id="c1",
                                     arguments={"cmd": "cat -- r1/rate-card/SKILL.md"})
        gateway.append({"index": 2, "wire_format": "responses", "status": 200, "tools": [], "tool_results": [
            {"id": "c1", "content": "Process exited with code 1\nOutput:\ncat: r1/rate-card/SKILL.md: No such file or directory\n"}]})
    return VerifierContext(workspace=ws, baseline=base, truth=TRUTH, oracle=None, events=[], gateway=gateway, probe=report,
                           ledgers={}, run_dir=root)


def main() -> int:
    score = _score().score
    nulls = {**GOOD, "rate_cents_per_kg": None, "total_cents": None, "card_checksum": None}
    cases = [
        ("faithful", dict(final=WHOLE), set()),
        ("body cut without notice", dict(final=CUT, quote=nulls), {"H1-skill-body-relayed", "A1-quote-correct"}),
        ("no skill channel", dict(final="This harness offers no way to load the rate-card skill. "
                                        "Skill: rows=0; zone=missing; checksum=missing.", quote=None),
         {"H1-skill-body-relayed", "A1-quote-correct"}),
        ("wrong total", dict(final=WHOLE, quote={**GOOD, "total_cents": 1}), {"A1-quote-correct"}),
        # the probe's own load failed (a short path read literally): H1 unscored, never failed
        ("probe load failed", {"final": CUT, "quote": None, "load_failed": True}, {"A1-quote-correct"}),
    ]
    unscored = {"probe load failed": {"H1-skill-body-relayed"}}
    bad = 0
    for name, kwargs, want in cases:
        with tempfile.TemporaryDirectory() as tmp:
            out = score(_ctx(Path(tmp), **kwargs))
        bad += {k for k, (ok, _) in out.items() if ok is None} != unscored.get(name, set())
        got = {k for k, (ok, _) in out.items() if ok is False}
        status = "ok" if got == want else "MISMATCH"
        bad += got != want
        print(f"{status:8} {name}: failed {sorted(got)}" + ("" if got == want else f", expected {sorted(want)}"))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
