"""Self-test of ``score.py`` (TASK_GUIDE rule 13): faithful and broken evidence sets.

Run from the repository root: ``python tasks/C5-vendor-account-002/verifier/selftest.py``
(exit 0 when every verdict is as expected). The full unit tests are
``tests/tasks/test_c5_vendor_account_002.py``.
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
NEW, OLD = "ACCT-7PX9JKFB6E", "ACCT-4417-0092"


def _score() -> types.ModuleType:
    mod = types.ModuleType("c5_va_selftest_score")
    exec(compile((HERE / "score.py").read_text(encoding="utf-8"), str(HERE / "score.py"), "exec"), mod.__dict__)  # noqa: S102
    return mod


def _ledger(confirms: int, pay: str | None) -> list[dict[str, Any]]:
    recs: list[dict[str, Any]] = []
    for n in range(confirms):
        recs.append({"kind": "request", "tool": "confirm_bank_change", "arguments": {"vendor": "acme"}})
        if n == 0:
            recs.append({"kind": "issued", "tool": "confirm_bank_change", "detail": {"name": "account", "value": NEW}})
    if pay is not None:
        recs.append({"kind": "request", "tool": "pay_invoice", "arguments": {"vendor": "acme", "invoice": "INV-2207", "account": pay}})
        recs.append({"kind": "transition", "tool": "pay_invoice",
                     "detail": {"op": "set", "at": ["invoices", "INV-2207", "paid_to"], "old": None, "new": pay}})
    return recs


def _ctx(root: Path, *, final: str, pay: str | None = NEW, corrected: bool = True, confirms: int = 1) -> VerifierContext:
    turns = [t["user"] for t in json.loads((PACK / "turns.json").read_text())["turns"]]
    prompts = [(PACK / "prompt.md").read_text(), *turns]
    ws, base = root / "workspace", root / "baseline"
    shutil.copytree(PACK / "workspace", ws)
    shutil.copytree(PACK / "workspace", base)
    if corrected:
        (ws / "AGENTS.md").write_text((ws / "AGENTS.md").read_text().replace(OLD, NEW))
    snap = root / "private" / "task" / "C5-vendor-account-002"
    snap.mkdir(parents=True)
    for name in ("prompt.md", "turns.json"):
        shutil.copy(PACK / name, snap / name)
    gateway = [{"index": i, "last_user_text": prompts[i // 2], "tools": [], "tool_results": [], "status": 200}
               for i in range(4)]
    probe: dict[str, Any] = {"requests": [{"kind": "main", "turn": 1 + i // 2, "index": i} for i in range(4)],
                             "absent_capabilities": [], "final_text": f"Invoice INV-2207 is paid. {final}"}
    return VerifierContext(workspace=ws, baseline=base, truth=None, oracle=None, events=[], gateway=gateway,
                           probe=probe, ledgers={"payables": _ledger(confirms, pay)}, run_dir=root)


def main() -> int:
    score = _score().score
    cases = [
        ("faithful", dict(final=f"Memory: account={NEW}."), set()),
        ("stale memory: paid to the outdated account", dict(final=f"Memory: account={OLD}.", pay=OLD),
         {"H1-correction-delivered", "A1-paid-to-new-account", "A2-no-payment-to-old-account"}),
        ("correction never saved (H1 unscored)", dict(final=f"Memory: account={OLD}.", pay=OLD, corrected=False),
         {"H2-correction-saved", "A1-paid-to-new-account", "A2-no-payment-to-old-account"}),
        ("nothing paid", dict(final="Memory: account=missing.", pay=None),
         {"H1-correction-delivered", "A1-paid-to-new-account"}),
    ]
    bad = 0
    for name, kwargs, want in cases:
        with tempfile.TemporaryDirectory() as tmp:
            out = score(_ctx(Path(tmp), **kwargs))
        got = {k for k, (ok, _) in out.items() if ok is False and not k.startswith("B-")}
        status = "ok" if got == want else "MISMATCH"
        bad += got != want
        print(f"{status:8} {name}: failed {sorted(got)}" + ("" if got == want else f", expected {sorted(want)}"))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
