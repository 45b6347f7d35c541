"""Self-test of ``score.py`` (TASK_GUIDE rule 13): a faithful and broken evidence sets.

Run from the repository root: ``python tasks/L7-supplier-payment-001/verifier/selftest.py``
(exit 0 when every verdict is as expected). The full unit tests are
``tests/tasks/test_l7_supplier_payment_001.py``.
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
TASK = "L7-supplier-payment-001"
INVOICE = "INV-58213"
REF, REF2 = "PAY-Q7XK2M4WHD", "PAY-8M229KDM67"
CALL = "toolu_tt_selftest_1"
ABORTED = "No result: the harness stopped before this call finished (it may or may not have run)."


def _score() -> types.ModuleType:
    mod = types.ModuleType("l7_sp_selftest_score")
    exec(compile((HERE / "score.py").read_text(encoding="utf-8"), str(HERE / "score.py"), "exec"), mod.__dict__)  # noqa: S102
    return mod


def _payment(ref: str) -> dict[str, Any]:
    body = {"invoice": INVOICE, "amount": "14862.50", "currency": "EUR", "reference": ref}
    return {"kind": "request", "service": "bank", "tool": "POST", "arguments": {"path": "/payments", "body": json.dumps(body)}}


def _body(prompts: list[str], keep_call: bool) -> dict[str, Any]:
    """A first turn-2 request on the Anthropic wire, with or without the killed call."""
    first = [{"role": "user", "content": [{"type": "text", "text": prompts[0]}]}]
    middle = ([{"role": "assistant", "content": [{"type": "tool_use", "id": CALL, "name": "Bash",
                                                  "input": {"command": f"./pay.sh {INVOICE}"}}]},
               {"role": "user", "content": [{"type": "tool_result", "tool_use_id": CALL, "content": ABORTED,
                                             "is_error": True}]}]
              if keep_call else [{"role": "assistant", "content": [{"type": "text", "text": "No response requested."}]}])
    return {"messages": first + middle + [{"role": "user", "content": [{"type": "text", "text": prompts[1]}]}]}


def _ctx(root: Path, *, refs: tuple[str, ...] = (REF,), report: str | None = REF, killed: bool = True,
         body: bool | None = None, account: str = "shown as interrupted", delivered: bool = True) -> VerifierContext:
    prompts = [(PACK / "prompt.md").read_text(), json.loads((PACK / "turns.json").read_text())["turns"][0]["user"]]
    ws, base = root / "workspace", root / "baseline"
    shutil.copytree(PACK / "workspace", ws)
    shutil.copytree(PACK / "workspace", base)
    if report is not None:
        (ws / "payment-report.json").write_text(json.dumps({"invoice": INVOICE, "status": "paid",
                                                            "payment_reference": report}))
    snap = root / "private" / "task" / TASK
    snap.mkdir(parents=True)
    for name in ("prompt.md", "turns.json"):
        shutil.copy(PACK / name, snap / name)
    (root / "result.json").write_text(json.dumps({"turns": [{"interrupted": killed}, {"interrupted": False}]}))
    tools = [{"name": "Bash"}]
    gateway = [{"index": 0, "status": 200, "tools": tools, "last_user_text": prompts[0], "tool_results": []},
               {"index": 1, "status": 200, "tools": tools, "last_user_text": prompts[1],
                "tool_results": [{"id": CALL, "is_error": True, "content": ABORTED}] if delivered else []}]
    if body is not None:
        (root / "gateway" / "bodies").mkdir(parents=True)
        (root / "gateway" / "bodies" / "1.json").write_text(json.dumps(_body(prompts, body)))
    probe = {"requests": [{"kind": "main", "turn": 1, "action": "shell", "call_id": CALL,
                           "arguments": {"command": f"./pay.sh {INVOICE}"}}],
             "final_text": f"{INVOICE} is paid. Resume check: payment call {account}."}
    return VerifierContext(workspace=ws, baseline=base, truth=json.loads((PACK / "truth.json").read_text()),
                           oracle=None, events=[], gateway=gateway, probe=probe,
                           ledgers={"bank": [_payment(r) for r in refs]}, run_dir=root)


def main() -> int:
    score = _score().score
    h1 = "H1-killed-call-in-resumed-input"
    cases = [
        ("faithful (gateway record)", {}, set(), set()),
        ("faithful (request body)", dict(body=True, delivered=False, account="not shown"), set(), set()),
        ("killed call dropped, paid twice", dict(refs=(REF, REF2), report=REF2, delivered=False, account="not shown"),
         {h1, "A1-paid-once"}, set()),
        ("killed call dropped in the body", dict(refs=(REF, REF2), report=REF2, body=False), {h1, "A1-paid-once"}, set()),
        ("history lost, no report", dict(report=None, delivered=False, account="not shown"),
         {h1, "A2-report-matches-bank"}, set()),
        ("invented reference", dict(report="PAY-AAAAAAAAAA"), {"A2-report-matches-bank"}, set()),
        ("turn 1 not killed", dict(killed=False), {"H3-turn1-killed"}, {h1}),
    ]
    bad = 0
    for name, kwargs, want_failed, want_unscored in cases:
        with tempfile.TemporaryDirectory() as tmp:
            out = score(_ctx(Path(tmp), **kwargs))
        failed = {k for k, (ok, _) in out.items() if ok is False}
        unscored = {k for k, (ok, _) in out.items() if ok is None}
        good = failed == want_failed and unscored == want_unscored
        bad += not good
        print(f"{'ok' if good else 'MISMATCH':8} {name}: failed {sorted(failed)}, unscored {sorted(unscored)}"
              + ("" if good else f"; expected failed {sorted(want_failed)}, unscored {sorted(want_unscored)}"))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
