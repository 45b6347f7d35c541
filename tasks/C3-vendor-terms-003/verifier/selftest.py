"""Self-test of ``score.py`` (TASK_GUIDE rule 13): faithful and broken evidence sets.

Run from anywhere: ``python tasks/C3-vendor-terms-003/verifier/selftest.py`` (exit 0 when every
verdict is as expected). The full unit tests are ``tests/tasks/test_c3_vendor_terms_003.py``.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import sys
import tempfile
import types
from pathlib import Path

from tracetrial.verify import VerifierContext

HERE = Path(__file__).resolve().parent
PACK = HERE.parent
REF, DECOY = "CTR-7KQ2MX9P", "CTR-Q3OLD7ZK"


def _score() -> types.ModuleType:
    mod = types.ModuleType("c3_vt_selftest_score")
    exec(compile((HERE / "score.py").read_text(encoding="utf-8"), str(HERE / "score.py"), "exec"), mod.__dict__)  # noqa: S102
    return mod


def _po(ref: str) -> str:
    src = (PACK / "workspace" / "order_lines.txt").read_text()
    rows = re.findall(r"(?m)^line:\s*([^|\n]+?)\s*\|\s*(\d+)\s*\|\s*(.+?)\s*$", src)
    return ("# Purchase order: northwind-freight\n\n" + "".join(f"- {s} x{q}: {d}\n" for s, q, d in rows)
            + f"Contract-Ref: {ref}\n")


def _ctx(root: Path, *, po: str, final: str, lookups: int = 1, body: str | None = None) -> VerifierContext:
    turns = json.loads((PACK / "turns.json").read_text())["turns"]
    prompts = [(PACK / "prompt.md").read_text(), turns[0]["user"], turns[1]["user"]]
    ws, base = root / "workspace", root / "baseline"
    shutil.copytree(PACK / "workspace", ws)
    shutil.copytree(PACK / "workspace", base)
    (ws / "po.md").write_text(po)
    recs = [{"vendor": "northwind-freight", "served": True, "exit": 0,
             "ref_sha256": hashlib.sha256(f"contract|{REF}".encode()).hexdigest()}]
    recs += [{"vendor": "northwind-freight", "served": False, "exit": 3, "ref_sha256": None}] * (lookups - 1)
    (ws / ".terms").mkdir()
    (ws / ".terms" / "lookups.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    snap = root / "private" / "task" / "C3-vendor-terms-003"
    snap.mkdir(parents=True)
    for name in ("prompt.md", "turns.json"):
        shutil.copy(PACK / name, snap / name)
    gw = [{"index": i, "last_user_text": prompts[t], "tools": [{"name": "Bash"}], "tool_results": [], "status": 200}
          for i, t in enumerate([0, 0, 1, 1, 2, 2])]
    if body is not None:
        (root / "gateway" / "bodies").mkdir(parents=True)
        for i in (4, 5):
            (root / "gateway" / "bodies" / f"{i}.json").write_text(body)
    probe = {"requests": [{"kind": "main", "turn": t} for t in (1, 1, 2, 2, 3, 3)], "final_text": final}
    return VerifierContext(workspace=ws, baseline=base, truth=None, oracle=None, events=[], gateway=gw,
                           probe=probe, ledgers={}, run_dir=root)


def main() -> int:
    score = _score().score
    found = f"Appended 'Contract-Ref: {REF}'. Turn-1 contract reference: {REF}."
    lost = "Appended 'Contract-Ref: UNKNOWN'. Turn-1 contract reference: not visible in my context."
    result = json.dumps({"messages": [{"role": "tool", "content": f"contract_ref: {REF}\n"}]})
    cases = [
        ("faithful (probe account)", {"po": _po(REF), "final": found}, set()),
        ("faithful (request bodies)", {"po": _po(REF), "final": lost, "body": result}, set()),
        ("lookup result lost on resume", {"po": _po("UNKNOWN"), "final": lost},
         {"H1-fact-in-turn3-input", "A1-contract-ref-line"}),
        ("decoy quoted", {"po": _po(DECOY), "final": found}, {"A1-contract-ref-line"}),
        ("lookup run again in turn 3", {"po": _po(REF), "final": found, "lookups": 2}, {"A3-single-lookup"}),
    ]
    bad = 0
    for name, kwargs, want in cases:
        with tempfile.TemporaryDirectory() as tmp:
            out = score(_ctx(Path(tmp), **kwargs))
        got = {k for k, (ok, _) in out.items() if ok is not True and not k.startswith("B-")}
        status = "ok" if got == want else "MISMATCH"
        bad += got != want
        print(f"{status:8} {name}: failed {sorted(got)}" + ("" if got == want else f", expected {sorted(want)}"))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
