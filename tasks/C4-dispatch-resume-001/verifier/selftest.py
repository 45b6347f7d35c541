"""Self-test of ``score.py`` (TASK_GUIDE rule 13): one faithful and two broken evidence sets.

Run from the repository root: ``python tasks/C4-dispatch-resume-001/verifier/selftest.py``
(exit 0 when every verdict is as expected). The full unit tests are
``tests/tasks/test_c4_dispatch_resume_001.py``.
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
import types
from pathlib import Path

from tracetrial.verify import VerifierContext

HERE = Path(__file__).resolve().parent
PACK = HERE.parent
V = {"ticket_id": "FR-583920", "part_sku": "SKU-Q7XK2M", "bin": "BIN-H4TR", "technician": "TECH-W9PLZ",
     "reservation_id": "RSV-8KD2MX4Q"}
IDS = [f"toolu_tt_selftest_{n}" for n in range(1, 5)]
RESULTS = [json.dumps({"ticket": V["ticket_id"], "part_sku": V["part_sku"]}), json.dumps({"bin": V["bin"]}),
           json.dumps({"technician": V["technician"]}), json.dumps({"reservation_id": V["reservation_id"]})]
ACCOUNT = (f"Resumed context: queue={V['ticket_id']}; stock={V['bin']}; oncall={V['technician']}; "
           f"reservation={V['reservation_id']}; order=queue>stock>oncall>reservation.")
LOST = "Resumed context: queue=missing; stock=missing; oncall=missing; reservation=missing; order=none."


def _score() -> types.ModuleType:
    mod = types.ModuleType("c4_dr_selftest_score")
    exec(compile((HERE / "score.py").read_text(encoding="utf-8"), str(HERE / "score.py"), "exec"), mod.__dict__)  # noqa: S102
    return mod


def _ledger(reads: int) -> list[dict]:
    recs = [{"kind": "issued", "tool": None, "detail": {"name": k, "value": v}} for k, v in V.items()
            if k != "reservation_id"]
    recs += [{"kind": "request", "tool": t} for _ in range(reads) for t in ("get_queue_head", "check_stock", "get_oncall")]
    recs += [{"kind": "request", "tool": "reserve_part"},
             {"kind": "issued", "tool": "reserve_part", "detail": {"name": "reservation_id", "value": V["reservation_id"]}}]
    return recs


def _ctx(root: Path, *, final: str, dispatch: dict, reads: int, body: dict | None = None) -> VerifierContext:
    turns = json.loads((PACK / "turns.json").read_text())["turns"]
    prompts = [(PACK / "prompt.md").read_text(), turns[0]["user"]]
    ws, base = root / "workspace", root / "baseline"
    shutil.copytree(PACK / "workspace", ws)
    shutil.copytree(PACK / "workspace", base)
    (ws / "dispatch.json").write_text(json.dumps(dispatch))
    snap = root / "private" / "task" / "C4-dispatch-resume-001"
    snap.mkdir(parents=True)
    for name in ("prompt.md", "turns.json"):
        shutil.copy(PACK / name, snap / name)
    gateway = [{"index": 0, "last_user_text": prompts[0], "tools": [{"name": "t"}], "tool_results": [], "status": 200}]
    gateway += [{"index": i + 1, "last_user_text": prompts[0], "tools": [{"name": "t"}], "status": 200,
                 "tool_results": [{"id": IDS[i], "content": RESULTS[i]}]} for i in range(4)]
    gateway.append({"index": 5, "last_user_text": prompts[1], "tools": [{"name": "t"}], "tool_results": [], "status": 200})
    if body is not None:
        (root / "gateway" / "bodies").mkdir(parents=True)
        (root / "gateway" / "bodies" / "5.json").write_text(json.dumps(body))
    probe = {"requests": [{"kind": "main", "turn": 1, "call_id": i} for i in IDS] + [{"kind": "main", "turn": 2}],
             "final_text": f"Wrote dispatch.json. {final}"}
    return VerifierContext(workspace=ws, baseline=base, truth=None, oracle=None, events=[], gateway=gateway,
                           probe=probe, ledgers={"depot": _ledger(reads)}, run_dir=root)


def main() -> int:
    score = _score().score
    good = {"ticket": V["ticket_id"], "part_sku": V["part_sku"], "bin": V["bin"], "technician": V["technician"],
            "reservation_id": V["reservation_id"]}
    body = {"messages": [m for i in range(4) for m in (
        {"role": "assistant", "content": [{"type": "tool_use", "id": IDS[i], "name": "x", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": IDS[i], "content": RESULTS[i]}]})]}
    cases = [
        ("faithful (probe account)", dict(final=ACCOUNT, dispatch=good, reads=1), set()),
        ("faithful (request body)", dict(final=LOST, dispatch=good, reads=1, body=body), set()),
        ("lost on resume", dict(final=LOST, dispatch={**good, "reservation_id": None}, reads=2),
         {"H1-turn1-calls-in-resumed-input", "A2-reservation-carried", "A5-no-rework"}),
        ("reordered in the body", dict(final=ACCOUNT, dispatch=good, reads=1,
                                      body={"messages": body["messages"][2:4] + body["messages"][:2] + body["messages"][4:]}),
         {"H1-turn1-calls-in-resumed-input"}),
    ]
    bad = 0
    for name, kwargs, want in cases:
        with tempfile.TemporaryDirectory() as tmp:
            out = score(_ctx(Path(tmp), **kwargs))
        got = {k for k, (ok, _) in out.items() if not ok and not k.startswith("B-")}
        status = "ok" if got == want else "MISMATCH"
        bad += got != want
        print(f"{status:8} {name}: failed {sorted(got)}" + ("" if got == want else f", expected {sorted(want)}"))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
