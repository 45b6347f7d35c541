"""Self-test of ``score.py`` (TASK_GUIDE rule 13): faithful and broken evidence sets.

Run from the repository root: ``python tasks/T5-customs-rules-002/verifier/selftest.py`` (exit 0
when every verdict is as expected). The full unit tests are ``tests/tasks/test_t5_customs_rules_002.py``.
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
GOOD = {"lines": TRUTH["lines"], "carrier_notice": TRUTH["carrier_notice"], "rules_version": TRUTH["rules_version"]}
SHOWN = f"Skill: rules=shown; version={TRUTH['rules_version']}."
CUT = "Skill: rules=missing; version=missing."


def _score() -> types.ModuleType:
    mod = types.ModuleType("t5_cr_selftest_score")
    exec(compile((HERE / "score.py").read_text(encoding="utf-8"), str(HERE / "score.py"), "exec"), mod.__dict__)  # noqa: S102
    return mod


def _ctx(root: Path, *, final: str, decl: dict[str, Any] | None = GOOD, probe: bool = True,
         load_failed: bool = False) -> VerifierContext:
    ws, base = root / "workspace", root / "baseline"
    shutil.copytree(PACK / "workspace", ws)
    shutil.copytree(PACK / "workspace", base)
    if decl is not None:
        (ws / "declaration.json").write_text(json.dumps(decl))
    gateway: list[dict[str, Any]] = []
    report = {"requests": [{"index": i, "kind": "main", "turn": 1} for i in range(3)], "absent_capabilities": [],
              "final_text": f"Filed. {final}"} if probe else None
    if load_failed and report is not None:  # the probe read the listed short path literally (Codex 0.171.0)
        report["requests"][1].update(action="read_file", mapped_tool="exec_command", call_id="c1",
                                     arguments={"cmd": "cat -- r1/customs-classifier/SKILL.md"})
        gateway.append({"index": 2, "wire_format": "responses", "status": 200, "tools": [], "tool_results": [
            {"id": "c1", "content": "Process exited with code 1\nOutput:\ncat: r1/customs-classifier/SKILL.md: No such file or directory\n"}]})
    return VerifierContext(workspace=ws, baseline=base, truth=TRUTH, oracle=None, events=[], gateway=gateway, probe=report,
                           ledgers={}, run_dir=root)


def cut_declaration() -> dict[str, Any]:
    lines = [{**line, "dg_class": None, "packing": None} for line in TRUTH["lines"]]
    return {"lines": lines, "carrier_notice": None, "rules_version": None}


def main() -> int:
    score = _score().score
    cases = [
        ("faithful", dict(final=SHOWN), set()),
        ("rules cut without notice", dict(final=CUT, decl=cut_declaration()),
         {"H1-skill-rules-relayed", "A1-declaration-correct"}),
        ("no skill channel", dict(final="This harness offers no way to load the skill. " + CUT, decl=None),
         {"H1-skill-rules-relayed", "A1-declaration-correct"}),
        ("wrong packing", dict(final=SHOWN, decl={**GOOD, "carrier_notice": None}), {"A1-declaration-correct"}),
        # the probe's own load failed (a short path read literally): H1 unscored, never failed
        ("probe load failed", {"final": CUT, "decl": None, "load_failed": True}, {"A1-declaration-correct"}),
    ]
    unscored = {"probe load failed": {"H1-skill-rules-relayed"}}
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
