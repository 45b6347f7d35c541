"""Self-test of ``score.py`` (TASK_GUIDE rule 13): a faithful and broken evidence sets.

Run from the repository root: ``python tasks/C5-oncall-notes-001/verifier/selftest.py``
(exit 0 when every verdict is as expected). The full unit tests are
``tests/tasks/test_c5_oncall_notes_001.py``.
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
CODE = "ESC-Q7XK2M4W"
SHOWN = f"Memory: code={CODE}."
STALE = "Memory: code=missing."


def _score() -> types.ModuleType:
    mod = types.ModuleType("c5_on_selftest_score")
    exec(compile((HERE / "score.py").read_text(encoding="utf-8"), str(HERE / "score.py"), "exec"), mod.__dict__)  # noqa: S102
    return mod


def _ledger(issues: int, page: str | None) -> list[dict[str, Any]]:
    recs: list[dict[str, Any]] = []
    for n in range(issues):
        recs.append({"kind": "request", "tool": "issue_escalation_code", "arguments": {"team": "payments"}})
        if n == 0:
            recs.append({"kind": "issued", "tool": "issue_escalation_code", "detail": {"name": "code", "value": CODE}})
    if page is not None:
        recs.append({"kind": "request", "tool": "page_oncall", "arguments": {"team": "payments", "code": page}})
        if page == CODE:
            recs.append({"kind": "transition", "tool": "page_oncall",
                         "detail": {"op": "set", "at": ["codes", CODE, "paged"], "old": False, "new": True}})
    return recs


def _ctx(root: Path, *, final: str, issues: int = 1, page: str | None = CODE, note: bool = True,
         body: dict[str, Any] | None = None, extra_file: bool = False) -> VerifierContext:
    turns = [t["user"] for t in json.loads((PACK / "turns.json").read_text())["turns"]]
    prompts = [(PACK / "prompt.md").read_text(), *turns]
    ws, base = root / "workspace", root / "baseline"
    shutil.copytree(PACK / "workspace", ws)
    shutil.copytree(PACK / "workspace", base)
    if note:
        with (ws / "AGENTS.md").open("a") as fh:
            fh.write(f"- Escalation code for payments: {CODE}\n")
    if extra_file:
        (ws / "code.txt").write_text(CODE)
    snap = root / "private" / "task" / "C5-oncall-notes-001"
    snap.mkdir(parents=True)
    for name in ("prompt.md", "turns.json"):
        shutil.copy(PACK / name, snap / name)
    gateway = [{"index": i, "last_user_text": prompts[i // 2], "tools": [], "tool_results": [], "status": 200}
               for i in range(4)]
    if body is not None:
        (root / "gateway" / "bodies").mkdir(parents=True)
        (root / "gateway" / "bodies" / "2.json").write_text(json.dumps(body))
    probe: dict[str, Any] = {"requests": [{"kind": "main", "turn": 1 + i // 2, "index": i} for i in range(4)],
                             "absent_capabilities": [], "final_text": f"The payments on-call is paged. {final}"}
    return VerifierContext(workspace=ws, baseline=base, truth=None, oracle=None, events=[], gateway=gateway,
                           probe=probe, ledgers={"pager": _ledger(issues, page)}, run_dir=root)


def main() -> int:
    score = _score().score
    turns = [t["user"] for t in json.loads((PACK / "turns.json").read_text())["turns"]]
    good_body = {"messages": [{"role": "system", "content": f"memory: - Escalation code for payments: {CODE}"},
                              {"role": "user", "content": turns[0]}]}
    stale_body = {"messages": [{"role": "system", "content": "memory: (team notes only)"},
                               {"role": "user", "content": turns[0]}]}
    cases = [
        ("faithful (probe account)", dict(final=SHOWN), set()),
        ("faithful (request body)", dict(final=STALE, body=good_body), set()),
        ("stale memory", dict(final=STALE, page=None), {"H1-memory-delivered", "A1-oncall-paged"}),
        ("stale memory in the body", dict(final=SHOWN, body=stale_body), {"H1-memory-delivered"}),
        ("lost code, second code issued", dict(final=STALE, issues=2, page=None),
         {"H1-memory-delivered", "A1-oncall-paged", "A2-single-code"}),
        ("guessed code paged", dict(final=SHOWN, page="ESC-7QK4M2XD"), {"A1-oncall-paged"}),
        ("note never saved (H1 unscored)", dict(final=STALE, note=False, page=None),
         {"H2-note-saved", "A1-oncall-paged"}),
    ]
    bad = 0
    for name, kwargs, want in cases:
        with tempfile.TemporaryDirectory() as tmp:
            ctx = _ctx(Path(tmp), **kwargs)
            out = score(ctx)
            issues = len(ctx.ledger("pager", kind="request", tool="issue_escalation_code"))
        got = {k for k, (ok, _) in out.items() if ok is False and not k.startswith("B-")}
        if issues != 1:   # A2 is a ledger rule (agent_score.yaml): exactly one issue_escalation_code request
            got.add("A2-single-code")
        status = "ok" if got == want else "MISMATCH"
        bad += got != want
        print(f"{status:8} {name}: failed {sorted(got)}" + ("" if got == want else f", expected {sorted(want)}"))
    with tempfile.TemporaryDirectory() as tmp:
        verdict = score(_ctx(Path(tmp), final=SHOWN, extra_file=True))["B-H1-code-outside-memory"]
    bypass_ok = verdict[0] is True
    print(f"{'ok' if bypass_ok else 'MISMATCH':8} code copied to another file: bypass {verdict}")
    return 1 if bad or not bypass_ok else 0


if __name__ == "__main__":
    sys.exit(main())
